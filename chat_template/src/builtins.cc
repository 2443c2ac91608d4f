#include "builtins.h"

#include <algorithm>
#include <optional>
#include <cctype>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace seam::chat_template {
namespace {

const std::set<std::string> kFilters = {"trim", "tojson", "length", "count", "upper", "lower", "capitalize", "title",
                                        "default", "d", "join", "first", "last", "string", "int", "float", "list",
                                        "reverse", "abs", "items", "replace", "safe"};
const std::set<std::string> kTests = {"defined", "undefined", "none", "string", "number", "integer", "float", "boolean",
                                      "true", "false", "mapping", "iterable", "sequence", "odd", "even"};
const std::set<std::string> kMethods = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "replace",
                                        "upper", "lower", "title", "capitalize", "find", "join",
                                        "items", "keys", "values", "get"};

// Python's str.isspace() characters.
bool IsPySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.strip / lstrip / rstrip, optionally with a set of characters.
std::string Strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::vector<uint32_t> cps = CodePoints(s);
  std::vector<uint32_t> set;
  const bool custom = chars != nullptr && chars->kind == Value::Kind::kString;
  if (custom) set = CodePoints(chars->s);
  auto strip = [&](uint32_t c) { return custom ? std::find(set.begin(), set.end(), c) != set.end() : IsPySpace(c); };
  size_t b = 0, e = cps.size();
  while (left && b < e && strip(cps[b])) ++b;
  while (right && e > b && strip(cps[e - 1])) --e;
  std::vector<size_t> idx;
  for (size_t i = b; i < e; ++i) idx.push_back(i);
  return Utf8Of(cps, idx);
}

std::string MapAscii(std::string s, int (*f)(int)) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  }
  return s;
}

std::string Capitalize(const std::string& s) {
  std::string out = MapAscii(s, [](int c) { return std::tolower(c); });
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

std::string Title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80) { start = false; continue; }
    if (std::isalpha(u)) {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    } else {
      start = true;
    }
  }
  return out;
}

Value Split(const std::string& s, const Value* sep, const Value* maxsplit) {
  int64_t limit = maxsplit != nullptr && maxsplit->kind == Value::Kind::kInt ? maxsplit->i : -1;
  List parts;
  if (sep == nullptr || sep->kind == Value::Kind::kNone) {  // runs of white space, no empty parts
    const std::vector<uint32_t> cps = CodePoints(s);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && IsPySpace(cps[i])) ++i;
      if (i == cps.size()) break;
      std::vector<size_t> idx;
      if (limit == 0) {
        for (; i < cps.size(); ++i) idx.push_back(i);
        size_t e = idx.size();
        while (e > 0 && IsPySpace(cps[idx[e - 1]])) --e;
        idx.resize(e);
      } else {
        for (; i < cps.size() && !IsPySpace(cps[i]); ++i) idx.push_back(i);
        --limit;
      }
      parts.push_back(Value::String(Utf8Of(cps, idx)));
    }
    return Value::MakeList(std::move(parts));
  }
  size_t at = 0;
  for (;;) {
    const size_t found = limit == 0 ? std::string::npos : s.find(sep->s, at);
    if (found == std::string::npos || sep->s.empty()) break;
    parts.push_back(Value::String(s.substr(at, found - at)));
    at = found + sep->s.size();
    --limit;
  }
  parts.push_back(Value::String(s.substr(at)));
  return Value::MakeList(std::move(parts));
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t at = 0;
  for (;;) {
    const size_t found = count == 0 ? std::string::npos : s.find(from, at);
    if (found == std::string::npos) break;
    out += s.substr(at, found - at) + to;
    at = found + from.size();
    --count;
  }
  return out + s.substr(at);
}

absl::StatusOr<int64_t> Length(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::kString: return static_cast<int64_t>(CodePoints(v.s).size());
    case Value::Kind::kList: return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: return static_cast<int64_t>(v.dict->size());
    case Value::Kind::kUndefined: return 0;
    default: return RenderError(line, absl::StrCat("length of a ", KindName(v.kind)));
  }
}

Value Items(const Value& v) {
  List items;
  for (const auto& [k, item] : *v.dict) items.push_back(Value::MakeList({Value::String(k), item}));
  return Value::MakeList(std::move(items));
}

absl::StatusOr<std::string> Join(const Value& list, const std::string& sep, int line) {
  if (list.kind != Value::Kind::kList) return RenderError(line, absl::StrCat("join of a ", KindName(list.kind)));
  std::string out;
  for (size_t i = 0; i < list.list->size(); ++i) out += (i ? sep : "") + ToText((*list.list)[i]);
  return out;
}

}  // namespace

absl::Status RenderError(int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", what));
}

bool IsKnownFilter(const std::string& name) { return kFilters.count(name) > 0; }
bool IsKnownTest(const std::string& name) { return kTests.count(name) > 0; }
bool IsKnownMethod(const std::string& name) { return kMethods.count(name) > 0; }
bool IsKnownFunction(const std::string& name) {
  return name == "namespace" || name == "raise_exception" || name == "range";
}

const Value* Args::Get(size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : named) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

// ApplyFilter's families, each answering only the names it knows (nullopt: not one of them).
using FilterResult = std::optional<absl::StatusOr<Value>>;

// String filters: trim, upper, lower, capitalize, title, replace.
FilterResult StringFilter(const std::string& name, const Value& v, const Args& args, int line) {
  const bool known = name == "trim" || name == "upper" || name == "lower" || name == "capitalize" ||
                     name == "title" || name == "replace";
  if (!known) return std::nullopt;
  if (v.kind != Value::Kind::kString) {
    return RenderError(line, absl::StrCat("filter ", name, " of a ", KindName(v.kind)));
  }
  if (name == "trim") return Value::String(Strip(v.s, args.Get(0, "chars"), true, true));
  if (name == "upper") return Value::String(MapAscii(v.s, [](int c) { return std::toupper(c); }));
  if (name == "lower") return Value::String(MapAscii(v.s, [](int c) { return std::tolower(c); }));
  if (name == "title" || name == "capitalize") return Value::String(name == "title" ? Title(v.s) : Capitalize(v.s));
  const Value* from = args.Get(0, "old");
  const Value* to = args.Get(1, "new");
  const Value* count = args.Get(2, "count");
  if (from == nullptr || to == nullptr) return RenderError(line, "replace needs two arguments");
  return Value::String(Replace(v.s, ToText(*from), ToText(*to), count != nullptr ? count->i : -1));
}

// Number filters: int, float, abs.
FilterResult NumberFilter(const std::string& name, const Value& v, int line) {
  if (name == "int") {
    if (v.kind == Value::Kind::kString) {
      try { return Value::Int(std::stoll(v.s)); } catch (...) { return Value::Int(0); }
    }
    return Value::Int(v.is_number() ? static_cast<int64_t>(v.number()) : 0);
  }
  if (name == "float") {
    if (v.kind == Value::Kind::kString) {
      try { return Value::Float(std::stod(v.s)); } catch (...) { return Value::Float(0); }
    }
    return Value::Float(v.is_number() ? v.number() : 0);
  }
  if (name == "abs") {
    if (v.kind == Value::Kind::kInt) return Value::Int(v.i < 0 ? -v.i : v.i);
    if (v.is_number()) return Value::Float(std::fabs(v.number()));
    return RenderError(line, absl::StrCat("abs of a ", KindName(v.kind)));
  }
  return std::nullopt;
}

// first, last: a list's item or a string's character.
absl::StatusOr<Value> FirstOrLast(const std::string& name, const Value& v, int line) {
  if (v.kind == Value::Kind::kList) {
    if (v.list->empty()) return Value::Undefined();
    return name == "first" ? v.list->front() : v.list->back();
  }
  if (v.kind == Value::Kind::kString) {
    const auto cps = CodePoints(v.s);
    if (cps.empty()) return Value::Undefined();
    return Value::String(Utf8Of(cps, {name == "first" ? 0 : cps.size() - 1}));
  }
  return RenderError(line, absl::StrCat("filter ", name, " of a ", KindName(v.kind)));
}

// list, reverse: a list's items, a string's characters, a mapping's keys.
absl::StatusOr<Value> ListOrReverse(const std::string& name, const Value& v, int line) {
  List items;
  if (v.kind == Value::Kind::kList) {
    items = *v.list;
  } else if (v.kind == Value::Kind::kString) {
    const auto cps = CodePoints(v.s);
    for (size_t i = 0; i < cps.size(); ++i) items.push_back(Value::String(Utf8Of(cps, {i})));
  } else if (v.is_mapping()) {
    for (const auto& [k, item] : *v.dict) items.push_back(Value::String(k));
  } else {
    return RenderError(line, absl::StrCat("filter ", name, " of a ", KindName(v.kind)));
  }
  if (name == "reverse") {
    if (v.kind == Value::Kind::kString) {
      std::string out;
      for (auto it = items.rbegin(); it != items.rend(); ++it) out += it->s;
      return Value::String(out);
    }
    std::reverse(items.begin(), items.end());
  }
  return Value::MakeList(std::move(items));
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& v, const Args& args, int line) {
  if (name == "safe") return v;
  if (name == "string") return v.kind == Value::Kind::kString ? v : Value::String(ToText(v));
  if (name == "tojson") {
    const Value* indent = args.Get(0, "indent");
    return Value::String(ToJson(v, indent != nullptr && indent->kind == Value::Kind::kInt ? static_cast<int>(indent->i) : -1));
  }
  if (name == "length" || name == "count") {
    auto n = Length(v, line);
    if (!n.ok()) return n.status();
    return Value::Int(*n);
  }
  if (name == "default" || name == "d") {
    const Value* fallback = args.Get(0, "default_value");
    const Value* boolean = args.Get(1, "boolean");
    const bool use = v.is_undefined() || (boolean != nullptr && Truthy(*boolean) && !Truthy(v));
    return use ? (fallback != nullptr ? *fallback : Value::String("")) : v;
  }
  if (FilterResult r = StringFilter(name, v, args, line)) return *std::move(r);
  if (FilterResult r = NumberFilter(name, v, line)) return *std::move(r);
  if (name == "join") {
    const Value* sep = args.Get(0, "d");
    auto joined = Join(v, sep != nullptr ? ToText(*sep) : "", line);
    if (!joined.ok()) return joined.status();
    return Value::String(*joined);
  }
  if (name == "first" || name == "last") return FirstOrLast(name, v, line);
  if (name == "items") {
    if (!v.is_mapping()) return RenderError(line, absl::StrCat("items of a ", KindName(v.kind)));
    return Items(v);
  }
  if (name == "list" || name == "reverse") return ListOrReverse(name, v, line);
  return RenderError(line, absl::StrCat("unsupported construct 'filter ", name, "'"));
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& v, const Args& args, int line) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.kind == K::kNone;
  if (name == "string") return v.kind == K::kString;
  if (name == "number") return v.kind == K::kInt || v.kind == K::kFloat;
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "mapping") return v.is_mapping();
  if (name == "iterable") return v.kind == K::kList || v.kind == K::kString || v.is_mapping();
  if (name == "sequence") return v.kind == K::kList || v.kind == K::kString || v.is_mapping();
  if (name == "odd" || name == "even") {
    if (v.kind != K::kInt) return RenderError(line, absl::StrCat("test ", name, " of a ", KindName(v.kind)));
    return (v.i % 2 != 0) == (name == "odd");
  }
  return RenderError(line, absl::StrCat("unsupported construct 'test ", name, "'"));
}

absl::StatusOr<Value> CallMethod(const std::string& name, const Value& o, const Args& args, int line) {
  if (o.kind == Value::Kind::kString) {
    const Value* a0 = args.Get(0, "");
    const Value* a1 = args.Get(1, "");
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return Value::String(Strip(o.s, a0, name != "rstrip", name != "lstrip"));
    }
    if (name == "split") return Split(o.s, args.Get(0, "sep"), args.Get(1, "maxsplit"));
    if (name == "startswith" || name == "endswith") {
      if (a0 == nullptr || a0->kind != Value::Kind::kString) return RenderError(line, absl::StrCat(name, " needs a string"));
      const std::string& x = a0->s;
      const bool ok = x.size() <= o.s.size() &&
                      (name == "startswith" ? o.s.compare(0, x.size(), x) == 0
                                            : o.s.compare(o.s.size() - x.size(), x.size(), x) == 0);
      return Value::Bool(ok);
    }
    if (name == "replace") {
      if (a0 == nullptr || a1 == nullptr) return RenderError(line, "replace needs two arguments");
      const Value* count = args.Get(2, "count");
      return Value::String(Replace(o.s, ToText(*a0), ToText(*a1), count != nullptr ? count->i : -1));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      return ApplyFilter(name, o, Args{}, line);
    }
    if (name == "find") {
      if (a0 == nullptr || a0->kind != Value::Kind::kString) return RenderError(line, "find needs a string");
      const size_t at = o.s.find(a0->s);
      if (at == std::string::npos) return Value::Int(-1);
      return Value::Int(static_cast<int64_t>(CodePoints(o.s.substr(0, at)).size()));
    }
    if (name == "join") {
      if (a0 == nullptr) return RenderError(line, "join needs an argument");
      auto joined = Join(*a0, o.s, line);
      if (!joined.ok()) return joined.status();
      return Value::String(*joined);
    }
  }
  if (o.kind == Value::Kind::kDict) {
    if (name == "items") return Items(o);
    if (name == "keys" || name == "values") {
      List out;
      for (const auto& [k, item] : *o.dict) out.push_back(name == "keys" ? Value::String(k) : item);
      return Value::MakeList(std::move(out));
    }
    if (name == "get") {
      const Value* key = args.Get(0, "key");
      const Value* fallback = args.Get(1, "default");
      const Value* found = key != nullptr && key->kind == Value::Kind::kString ? o.Find(key->s) : nullptr;
      return found != nullptr ? *found : fallback != nullptr ? *fallback : Value::None();
    }
  }
  return RenderError(line, absl::StrCat("a ", KindName(o.kind), " has no method '", name, "'"));
}

}  // namespace seam::chat_template
