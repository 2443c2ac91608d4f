// The parsed form of a template: statements (Node) holding expressions (Expr).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "value.h"

namespace seam::chat_template {

struct Expr {
  enum class Kind { kLiteral, kName, kList, kDict, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary,
                    kAnd, kOr, kNot, kCond };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value literal;     // kLiteral
  std::string name;  // kName; kAttr: the attribute; kCall: method or function; kFilter/kTest; kUnary/kBinary: the operator
  // kAttr: [object]; kItem: [object, index]; kSlice: [object, start, stop, step] (null when
  // absent); kCall: [object or null for a global function, args...]; kFilter/kTest:
  // [value, args...]; kUnary/kNot: [operand]; kBinary/kAnd/kOr: [left, right];
  // kCond: [then, condition, else or null]; kList: items; kDict: key, value, key, value...
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;  // kCall, kFilter
  bool negated = false;  // kTest: `is not`
  int depth = 1;         // levels of the tree below and including this node (bounded by the parser)
};

struct Node {
  enum class Kind { kBody, kText, kOutput, kIf, kFor, kSet };
  Kind kind = Kind::kBody;
  int line = 0;
  std::string text;                            // kText
  std::unique_ptr<Expr> expr;                  // kOutput; kSet: the value; kFor: the iterable
  std::vector<std::unique_ptr<Node>> children;  // kBody
  // kIf: (condition, body) in order; the condition is null for `else`.
  std::vector<std::pair<std::unique_ptr<Expr>, std::unique_ptr<Node>>> branches;
  std::vector<std::string> targets;  // kFor: loop variables; kSet: [name] or [namespace, attribute]
  std::unique_ptr<Expr> filter;      // kFor: `for x in xs if cond`
  std::unique_ptr<Node> body, else_body;  // kFor
};

}  // namespace seam::chat_template
