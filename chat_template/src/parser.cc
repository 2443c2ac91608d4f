#include "parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "builtins.h"
#include "seam/core/status.h"

namespace seam::chat_template {
namespace {

using ExprPtr = std::unique_ptr<Expr>;

absl::Status Error(int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", what));
}
absl::Status Unsupported(int line, const std::string& construct) {
  return Error(line, absl::StrCat("unsupported construct '", construct, "'"));
}

ExprPtr Make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Recursive descent over one tag's tokens, with Jinja2's precedence.
class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : t_(tokens) {}

  // Nesting (brackets, `not`, unary signs) is bounded: every level costs a
  // dozen stack frames here and in rendering, so "((((..." must be refused
  // before it overflows the stack. Real templates nest a few levels.
  static constexpr int kMaxNesting = 100;
  struct Nesting {
    explicit Nesting(ExprParser* p) : parser(p) {
      if (++parser->nesting_ > kMaxNesting) {
        status = Error(parser->Peek().line, absl::StrCat("expression nested deeper than ", kMaxNesting, " levels"));
      }
    }
    ~Nesting() { --parser->nesting_; }
    ExprParser* parser;
    absl::Status status;
  };

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t ahead = 0) const { return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op; }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  const Token& Next() { return t_[std::min(i_++, t_.size() - 1)]; }
  absl::Status Expect(const char* op) {
    if (!IsOp(op)) return Error(Peek().line, absl::StrCat("expected '", op, "', found '", Peek().text, "'"));
    ++i_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().kind != Token::Kind::kName) return Error(Peek().line, absl::StrCat("expected a name, found '", Peek().text, "'"));
    return Next().text;
  }

  absl::StatusOr<ExprPtr> Expression(bool with_condition = true) {
    const Nesting nesting(this);
    SEAM_RETURN_IF_ERROR(nesting.status);
    SEAM_ASSIGN_OR_RETURN(auto expr, Or());
    if (with_condition && IsName("if")) {
      auto cond = Make(Expr::Kind::kCond, Next().line);
      SEAM_ASSIGN_OR_RETURN(auto test, Or());
      ExprPtr otherwise;
      if (IsName("else")) {
        Next();
        SEAM_ASSIGN_OR_RETURN(auto e, Expression());
        otherwise = std::move(e);
      }
      SEAM_RETURN_IF_ERROR(Adopt(*cond, std::move(expr)));
      SEAM_RETURN_IF_ERROR(Adopt(*cond, std::move(test)));
      SEAM_RETURN_IF_ERROR(Adopt(*cond, std::move(otherwise)));
      return cond;
    }
    return expr;
  }

 private:
  // Every child attached through here keeps the tree's depth bounded:
  // rendering recurses once per level, so a chain without brackets
  // (1 > 1 > 1 ..., a.b.c ..., x|f|f ...) must be refused as nesting is.
  static constexpr int kMaxDepth = kMaxNesting;
  absl::Status Deepen(Expr& parent, int child_depth) {
    parent.depth = std::max(parent.depth, child_depth + 1);
    if (parent.depth <= kMaxDepth) return absl::OkStatus();
    return Error(parent.line, absl::StrCat("expression nested deeper than ", kMaxDepth, " levels"));
  }
  absl::Status Adopt(Expr& parent, ExprPtr child) {
    const int child_depth = child != nullptr ? child->depth : 0;
    parent.args.push_back(std::move(child));
    return Deepen(parent, child_depth);
  }
  absl::StatusOr<ExprPtr> Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right) {
    auto e = Make(kind, left->line);
    e->name = std::move(op);
    SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(left)));
    SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(right)));
    return e;
  }
  absl::StatusOr<ExprPtr> Or() {
    SEAM_ASSIGN_OR_RETURN(auto left, And());
    while (IsName("or")) {
      Next();
      SEAM_ASSIGN_OR_RETURN(auto right, And());
      SEAM_ASSIGN_OR_RETURN(auto e, Binary(Expr::Kind::kOr, "or", std::move(left), std::move(right)));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> And() {
    SEAM_ASSIGN_OR_RETURN(auto left, Not());
    while (IsName("and")) {
      Next();
      SEAM_ASSIGN_OR_RETURN(auto right, Not());
      SEAM_ASSIGN_OR_RETURN(auto e, Binary(Expr::Kind::kAnd, "and", std::move(left), std::move(right)));
      left = std::move(e);
    }
    return left;
  }
  absl::StatusOr<ExprPtr> Not() {
    if (IsName("not")) {
      const Nesting nesting(this);
      SEAM_RETURN_IF_ERROR(nesting.status);
      auto e = Make(Expr::Kind::kNot, Next().line);
      SEAM_ASSIGN_OR_RETURN(auto operand, Not());
      SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(operand)));
      return e;
    }
    return Compare();
  }
  absl::StatusOr<ExprPtr> Compare() {
    SEAM_ASSIGN_OR_RETURN(auto left, Math1());
    static const std::set<std::string> kOps = {"==", "!=", "<", ">", "<=", ">="};
    for (;;) {
      std::string op;
      bool negate = false;
      if (Peek().kind == Token::Kind::kOp && kOps.count(Peek().text)) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        i_ += 2;
        op = "in";
        negate = true;
      } else {
        return left;
      }
      SEAM_ASSIGN_OR_RETURN(auto right, Math1());
      SEAM_ASSIGN_OR_RETURN(auto e, Binary(Expr::Kind::kBinary, op, std::move(left), std::move(right)));
      if (negate) {
        auto n = Make(Expr::Kind::kNot, e->line);
        SEAM_RETURN_IF_ERROR(Adopt(*n, std::move(e)));
        e = std::move(n);
      }
      left = std::move(e);
    }
  }
  template <typename Inner>
  absl::StatusOr<ExprPtr> LeftAssoc(std::initializer_list<const char*> ops, Inner inner) {
    SEAM_ASSIGN_OR_RETURN(auto left, (this->*inner)());
    for (;;) {
      const char* found = nullptr;
      for (const char* op : ops) {
        if (IsOp(op)) found = op;
      }
      if (found == nullptr) return left;
      Next();
      SEAM_ASSIGN_OR_RETURN(auto right, (this->*inner)());
      SEAM_ASSIGN_OR_RETURN(auto e, Binary(Expr::Kind::kBinary, found, std::move(left), std::move(right)));
      left = std::move(e);
    }
  }
  absl::StatusOr<ExprPtr> Math1() { return LeftAssoc({"+", "-"}, &ExprParser::Concat); }
  absl::StatusOr<ExprPtr> Concat() { return LeftAssoc({"~"}, &ExprParser::Math2); }
  absl::StatusOr<ExprPtr> Math2() { return LeftAssoc({"*", "/", "//", "%"}, &ExprParser::Pow); }
  absl::StatusOr<ExprPtr> Pow() { return LeftAssoc({"**"}, &ExprParser::UnaryWithFilters); }
  absl::StatusOr<ExprPtr> UnaryWithFilters() { return Unary(true); }

  absl::StatusOr<ExprPtr> Unary(bool with_filters) {
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const Nesting nesting(this);
      SEAM_RETURN_IF_ERROR(nesting.status);
      auto e = Make(Expr::Kind::kUnary, Peek().line);
      e->name = Next().text;
      SEAM_ASSIGN_OR_RETURN(auto operand, Unary(false));
      SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(operand)));
      node = std::move(e);
    } else {
      SEAM_ASSIGN_OR_RETURN(auto primary, Primary());
      SEAM_ASSIGN_OR_RETURN(auto post, Postfix(std::move(primary)));
      node = std::move(post);
    }
    return with_filters ? Filters(std::move(node)) : absl::StatusOr<ExprPtr>(std::move(node));
  }

  absl::StatusOr<ExprPtr> Filters(ExprPtr node) {
    for (;;) {
      if (IsOp("|")) {
        const int line = Next().line;
        SEAM_ASSIGN_OR_RETURN(auto name, ExpectName());
        if (!IsKnownFilter(name)) return Unsupported(line, absl::StrCat("filter ", name));
        auto f = Make(Expr::Kind::kFilter, line);
        f->name = name;
        SEAM_RETURN_IF_ERROR(Adopt(*f, std::move(node)));
        if (IsOp("(")) SEAM_RETURN_IF_ERROR(Arguments(f.get()));
        node = std::move(f);
      } else if (IsName("is")) {
        const int line = Next().line;
        auto test = Make(Expr::Kind::kTest, line);
        if (IsName("not")) {
          Next();
          test->negated = true;
        }
        SEAM_ASSIGN_OR_RETURN(auto name, ExpectName());
        if (!IsKnownTest(name)) return Unsupported(line, absl::StrCat("test ", name));
        test->name = name;
        SEAM_RETURN_IF_ERROR(Adopt(*test, std::move(node)));
        if (IsOp("(")) SEAM_RETURN_IF_ERROR(Arguments(test.get()));
        node = std::move(test);
      } else {
        return node;
      }
    }
  }

  absl::Status Arguments(Expr* call) {
    SEAM_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        Next();
        auto value = Expression();
        if (!value.ok()) return value.status();
        SEAM_RETURN_IF_ERROR(Deepen(*call, (*value)->depth));
        call->kwargs.emplace_back(std::move(key), std::move(*value));
      } else {
        auto value = Expression();
        if (!value.ok()) return value.status();
        SEAM_RETURN_IF_ERROR(Adopt(*call, std::move(*value)));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return Expect(")");
  }

  absl::StatusOr<ExprPtr> Postfix(ExprPtr node) {
    for (;;) {
      if (IsOp(".")) {
        const int line = Next().line;
        SEAM_ASSIGN_OR_RETURN(auto name, ExpectName());
        auto e = Make(Expr::Kind::kAttr, line);
        e->name = name;
        SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(node)));
        node = std::move(e);
      } else if (IsOp("[")) {
        const int line = Next().line;
        ExprPtr parts[3];
        int colons = 0;
        for (;;) {
          if (IsOp(":")) {
            Next();
            if (++colons > 2) return Error(line, "bad slice");
            continue;
          }
          if (IsOp("]")) break;
          SEAM_ASSIGN_OR_RETURN(auto part, Expression());
          parts[colons] = std::move(part);
        }
        Next();
        auto e = Make(colons == 0 ? Expr::Kind::kItem : Expr::Kind::kSlice, line);
        SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(node)));
        if (colons == 0 && !parts[0]) return Error(line, "empty subscript");
        for (int k = 0; k < (colons == 0 ? 1 : 3); ++k) SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(parts[k])));
        node = std::move(e);
      } else if (IsOp("(")) {
        const int line = Peek().line;
        auto call = Make(Expr::Kind::kCall, line);
        if (node->kind == Expr::Kind::kAttr) {
          if (!IsKnownMethod(node->name)) return Unsupported(line, absl::StrCat("method ", node->name));
          call->name = node->name;
          SEAM_RETURN_IF_ERROR(Adopt(*call, std::move(node->args[0])));
        } else if (node->kind == Expr::Kind::kName) {
          if (!IsKnownFunction(node->name)) return Unsupported(line, absl::StrCat("function ", node->name));
          call->name = node->name;
          SEAM_RETURN_IF_ERROR(Adopt(*call, nullptr));
        } else {
          return Unsupported(line, "call of an expression");
        }
        SEAM_RETURN_IF_ERROR(Arguments(call.get()));
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> Primary() {
    const Token& t = Next();
    switch (t.kind) {
      case Token::Kind::kString: {
        std::string s = t.text;
        while (Peek().kind == Token::Kind::kString) s += Next().text;  // adjacent literals join
        auto e = Make(Expr::Kind::kLiteral, t.line);
        e->literal = Value::String(std::move(s));
        return e;
      }
      case Token::Kind::kInt:
      case Token::Kind::kFloat: {
        auto e = Make(Expr::Kind::kLiteral, t.line);
        std::string digits;
        for (char c : t.text) {
          if (c != '_') digits.push_back(c);
        }
        if (t.kind == Token::Kind::kFloat) {
          e->literal = Value::Float(std::strtod(digits.c_str(), nullptr));  // inf past range; never throws
          return e;
        }
        int64_t value = 0;
        const char* end = digits.data() + digits.size();
        const auto [stop, err] = std::from_chars(digits.data(), end, value);
        if (err != std::errc() || stop != end) {
          return Error(t.line, absl::StrCat("integer literal ", t.text, " does not fit in 64 bits"));
        }
        e->literal = Value::Int(value);
        return e;
      }
      case Token::Kind::kName: {
        auto e = Make(Expr::Kind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") e->literal = Value::Bool(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::Bool(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::None();
        else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case Token::Kind::kOp:
        if (t.text == "(") {
          SEAM_ASSIGN_OR_RETURN(auto inner, Expression());
          if (IsOp(",")) return Unsupported(t.line, "tuple");
          SEAM_RETURN_IF_ERROR(Expect(")"));
          return inner;
        }
        if (t.text == "[" || t.text == "{") {
          const bool dict = t.text == "{";
          auto e = Make(dict ? Expr::Kind::kDict : Expr::Kind::kList, t.line);
          const char* close = dict ? "}" : "]";
          while (!IsOp(close)) {
            SEAM_ASSIGN_OR_RETURN(auto item, Expression());
            SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(item)));
            if (dict) {
              SEAM_RETURN_IF_ERROR(Expect(":"));
              SEAM_ASSIGN_OR_RETURN(auto value, Expression());
              SEAM_RETURN_IF_ERROR(Adopt(*e, std::move(value)));
            }
            if (!IsOp(",")) break;
            Next();
          }
          SEAM_RETURN_IF_ERROR(Expect(close));
          return e;
        }
        [[fallthrough]];
      default:
        return Error(t.line, t.kind == Token::Kind::kEnd ? "unexpected end of expression"
                                                         : absl::StrCat("unexpected '", t.text, "'"));
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int nesting_ = 0;  // levels open now, bounded by kMaxNesting
};


// Statement-level parsing over the chunk list.
class BodyParser {
 public:
  explicit BodyParser(std::vector<Chunk> chunks) : chunks_(std::move(chunks)) {}

  // Parses chunks into `body` until a statement whose keyword is in `ends` (returned, not
  // consumed past its keyword) or the end of input (returns "").
  absl::StatusOr<std::string> Body(Node* body, const std::set<std::string>& ends) {
    while (next_ < chunks_.size()) {
      Chunk& chunk = chunks_[next_];
      if (chunk.kind == Chunk::Kind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->line = chunk.line;
        n->text = std::move(chunk.text);
        body->children.push_back(std::move(n));
        ++next_;
        continue;
      }
      ExprParser p(chunk.tokens);
      if (chunk.kind == Chunk::Kind::kOutput) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = chunk.line;
        SEAM_ASSIGN_OR_RETURN(n->expr, p.Expression());
        if (!p.AtEnd()) return Error(chunk.line, absl::StrCat("unexpected '", p.Peek().text, "' in {{ }}"));
        body->children.push_back(std::move(n));
        ++next_;
        continue;
      }
      SEAM_ASSIGN_OR_RETURN(std::string keyword, p.ExpectName());
      if (ends.count(keyword)) return keyword;
      ++next_;
      std::unique_ptr<Node> n;
      if (keyword == "if") {
        SEAM_ASSIGN_OR_RETURN(n, If(p, chunk.line));
      } else if (keyword == "for") {
        SEAM_ASSIGN_OR_RETURN(n, For(p, chunk.line));
      } else if (keyword == "set") {
        SEAM_ASSIGN_OR_RETURN(n, Set(p, chunk.line));
      } else if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
        return Error(chunk.line, absl::StrCat("unexpected '", keyword, "'"));
      } else {
        return Unsupported(chunk.line, keyword);
      }
      body->children.push_back(std::move(n));
    }
    return std::string();
  }

 private:
  absl::Status EndOfTag(ExprParser& p, int line) {
    if (!p.AtEnd()) return Error(line, absl::StrCat("unexpected '", p.Peek().text, "'"));
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Block(Node* body, const std::set<std::string>& ends, const char* opened, int line) {
    SEAM_ASSIGN_OR_RETURN(std::string end, Body(body, ends));
    if (end.empty()) return Error(line, absl::StrCat("'", opened, "' is never closed"));
    return end;
  }

  absl::StatusOr<std::unique_ptr<Node>> If(ExprParser& first, int line) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kIf;
    n->line = line;
    SEAM_ASSIGN_OR_RETURN(ExprPtr cond, first.Expression());
    SEAM_RETURN_IF_ERROR(EndOfTag(first, line));
    for (;;) {
      auto body = std::make_unique<Node>();
      SEAM_ASSIGN_OR_RETURN(std::string end, Block(body.get(), {"elif", "else", "endif"}, "if", line));
      n->branches.emplace_back(std::move(cond), std::move(body));
      const Chunk& tag = chunks_[next_++];
      ExprParser p(tag.tokens);
      p.Next();
      if (end == "endif") {
        SEAM_RETURN_IF_ERROR(EndOfTag(p, tag.line));
        return n;
      }
      if (end == "else") {
        SEAM_RETURN_IF_ERROR(EndOfTag(p, tag.line));
        auto else_body = std::make_unique<Node>();
        SEAM_ASSIGN_OR_RETURN(std::string close, Block(else_body.get(), {"endif"}, "if", line));
        (void)close;
        ExprParser q(chunks_[next_].tokens);
        q.Next();
        SEAM_RETURN_IF_ERROR(EndOfTag(q, chunks_[next_].line));
        ++next_;
        n->branches.emplace_back(nullptr, std::move(else_body));
        return n;
      }
      SEAM_ASSIGN_OR_RETURN(cond, p.Expression());  // elif
      SEAM_RETURN_IF_ERROR(EndOfTag(p, tag.line));
    }
  }

  absl::StatusOr<std::unique_ptr<Node>> For(ExprParser& p, int line) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kFor;
    n->line = line;
    for (;;) {
      SEAM_ASSIGN_OR_RETURN(std::string target, p.ExpectName());
      n->targets.push_back(target);
      if (!p.IsOp(",")) break;
      p.Next();
    }
    if (!p.IsName("in")) return Error(line, "expected 'in' in for");
    p.Next();
    SEAM_ASSIGN_OR_RETURN(n->expr, p.Expression(/*with_condition=*/false));
    if (p.IsName("if")) {
      p.Next();
      SEAM_ASSIGN_OR_RETURN(n->filter, p.Expression(false));
    }
    if (p.IsName("recursive")) return Unsupported(line, "recursive for");
    SEAM_RETURN_IF_ERROR(EndOfTag(p, line));
    n->body = std::make_unique<Node>();
    SEAM_ASSIGN_OR_RETURN(std::string end, Block(n->body.get(), {"else", "endfor"}, "for", line));
    ++next_;
    if (end == "else") {
      n->else_body = std::make_unique<Node>();
      SEAM_ASSIGN_OR_RETURN(std::string close, Block(n->else_body.get(), {"endfor"}, "for", line));
      (void)close;
      ++next_;
    }
    return n;
  }

  absl::StatusOr<std::unique_ptr<Node>> Set(ExprParser& p, int line) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kSet;
    n->line = line;
    SEAM_ASSIGN_OR_RETURN(std::string target, p.ExpectName());
    n->targets.push_back(target);
    if (p.IsOp(".")) {
      p.Next();
      SEAM_ASSIGN_OR_RETURN(std::string attr, p.ExpectName());
      n->targets.push_back(attr);
    }
    if (p.IsOp(",")) return Unsupported(line, "set of several names");
    if (p.AtEnd()) return Unsupported(line, "set block");
    SEAM_RETURN_IF_ERROR(p.Expect("="));
    SEAM_ASSIGN_OR_RETURN(n->expr, p.Expression());
    SEAM_RETURN_IF_ERROR(EndOfTag(p, line));
    return n;
  }

  std::vector<Chunk> chunks_;
  size_t next_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Node>> ParseChunks(std::vector<Chunk> chunks) {
  auto root = std::make_unique<Node>();
  BodyParser parser(std::move(chunks));
  SEAM_ASSIGN_OR_RETURN(std::string end, parser.Body(root.get(), {}));
  (void)end;
  return root;
}

}  // namespace seam::chat_template
