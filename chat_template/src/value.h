// The values a template computes with: Python's (Jinja's) None, bool, int, float, str,
// list, dict, plus Undefined and namespace objects. Lists and dicts are shared and
// immutable once built; a namespace is the one mutable value (set ns.x = ...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace seam::chat_template {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, unique keys

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                // kString (UTF-8); kUndefined: the name, for messages
  std::shared_ptr<List> list;   // kList
  std::shared_ptr<Dict> dict;   // kDict, kNamespace

  static Value Undefined(std::string name = "") { Value v; v.s = std::move(name); return v; }
  static Value None() { Value v; v.kind = Kind::kNone; return v; }
  static Value Bool(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
  static Value Int(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
  static Value Float(double x) { Value v; v.kind = Kind::kFloat; v.f = x; return v; }
  static Value String(std::string x) { Value v; v.kind = Kind::kString; v.s = std::move(x); return v; }
  static Value MakeList(List x) { Value v; v.kind = Kind::kList; v.list = std::make_shared<List>(std::move(x)); return v; }
  static Value MakeDict(Dict x) { Value v; v.kind = Kind::kDict; v.dict = std::make_shared<Dict>(std::move(x)); return v; }
  static Value Namespace(Dict x) { Value v = MakeDict(std::move(x)); v.kind = Kind::kNamespace; return v; }

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool is_mapping() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
  double number() const { return kind == Kind::kFloat ? f : kind == Kind::kBool ? (b ? 1 : 0) : static_cast<double>(i); }

  // The entry `key` of a dict or namespace (nullptr if absent).
  const Value* Find(const std::string& key) const;
};

Value FromJson(const nlohmann::ordered_json& json);
bool Truthy(const Value& v);
bool Equal(const Value& a, const Value& b);
// What {{ v }} prints (Python's str(): True, None, 1.5, ['a']).
std::string ToText(const Value& v);
// Python's json.dumps(v, ensure_ascii=False) with its default separators, or indented.
std::string ToJson(const Value& v, int indent = -1, int depth = 0);
const char* KindName(Value::Kind kind);

// Code points of UTF-8 text and back (for len() and slicing, which count characters).
std::vector<uint32_t> CodePoints(const std::string& utf8);
std::string Utf8Of(const std::vector<uint32_t>& cps, const std::vector<size_t>& indices);
void AppendUtf8(uint32_t cp, std::string* out);
// The indices Python's seq[start:stop:step] takes from a sequence of length n.
std::vector<size_t> SliceIndices(size_t n, const Value& start, const Value& stop, int64_t step);

}  // namespace seam::chat_template
