// The interpreter: evaluates the parsed tree against the render variables.
#include "seam/chat_template/chat_template.h"

#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ast.h"
#include "builtins.h"
#include "lexer.h"
#include "parser.h"
#include "seam/core/status.h"

namespace seam::chat_template {
namespace {

using K = Value::Kind;

class Renderer {
 public:
  explicit Renderer(std::unordered_map<std::string, Value> globals) { frames_.push_back(std::move(globals)); }

  absl::Status Run(const Node& node, std::string* out) {
    SEAM_RETURN_IF_ERROR(Step());
    if (out->size() > ChatTemplate::kMaxRenderBytes) return TooLarge(node.line, "the output");
    switch (node.kind) {
      case Node::Kind::kBody:
        for (const auto& child : node.children) SEAM_RETURN_IF_ERROR(Run(*child, out));
        return absl::OkStatus();
      case Node::Kind::kText:
        *out += node.text;
        return absl::OkStatus();
      case Node::Kind::kOutput: {
        SEAM_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
        *out += ToText(v);
        return absl::OkStatus();
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : node.branches) {
          bool take = cond == nullptr;
          if (!take) {
            SEAM_ASSIGN_OR_RETURN(Value c, Eval(*cond));
            take = Truthy(c);
          }
          if (take) return Run(*body, out);
        }
        return absl::OkStatus();
      case Node::Kind::kFor: return For(node, out);
      case Node::Kind::kSet: return Set(node);
    }
    return absl::OkStatus();
  }

 private:
  // One unit of work (a node run or an expression evaluated); INVALID_ARGUMENT
  // once the render has done too many.
  absl::Status Step() {
    if (++steps_ <= ChatTemplate::kMaxRenderSteps) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: the render passed ", ChatTemplate::kMaxRenderSteps, " evaluation steps"));
  }
  static absl::Status TooLarge(int line, const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", what, " passed ",
                                                     ChatTemplate::kMaxRenderBytes >> 20, " MiB or ",
                                                     ChatTemplate::kMaxRenderItems, " items"));
  }

  // Every expression goes through here: counted, and its value bounded.
  absl::StatusOr<Value> Eval(const Expr& e) {
    SEAM_RETURN_IF_ERROR(Step());
    SEAM_ASSIGN_OR_RETURN(Value v, EvalUnbounded(e));
    if ((v.kind == K::kString && v.s.size() > ChatTemplate::kMaxRenderBytes) ||
        (v.kind == K::kList && v.list->size() > ChatTemplate::kMaxRenderItems) ||
        (v.is_mapping() && v.dict->size() > ChatTemplate::kMaxRenderItems)) {
      return TooLarge(e.line, "a value");
    }
    return v;
  }

  Value Lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value::Undefined(name);
  }

  absl::Status Set(const Node& node) {
    SEAM_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
    if (node.targets.size() == 1) {
      frames_.back()[node.targets[0]] = std::move(v);
      return absl::OkStatus();
    }
    Value ns = Lookup(node.targets[0]);
    if (ns.kind != K::kNamespace) {
      return RenderError(node.line, absl::StrCat("cannot set an attribute of '", node.targets[0], "', a ", KindName(ns.kind)));
    }
    for (auto& [k, item] : *ns.dict) {
      if (k == node.targets[1]) {
        item = std::move(v);
        return absl::OkStatus();
      }
    }
    ns.dict->emplace_back(node.targets[1], std::move(v));
    return absl::OkStatus();
  }

  absl::Status For(const Node& node, std::string* out) {
    SEAM_ASSIGN_OR_RETURN(Value iterable, Eval(*node.expr));
    List items;
    switch (iterable.kind) {
      case K::kUndefined: break;
      case K::kList: items = *iterable.list; break;
      case K::kDict:
      case K::kNamespace:
        for (const auto& [k, v] : *iterable.dict) items.push_back(Value::String(k));
        break;
      case K::kString: {
        const auto cps = CodePoints(iterable.s);
        for (size_t i = 0; i < cps.size(); ++i) items.push_back(Value::String(Utf8Of(cps, {i})));
        break;
      }
      default: return RenderError(node.line, absl::StrCat("cannot iterate over a ", KindName(iterable.kind)));
    }
    if (node.filter) {
      List kept;
      for (const Value& item : items) {
        frames_.emplace_back();
        SEAM_RETURN_IF_ERROR(Bind(node, item));
        auto keep = Eval(*node.filter);
        frames_.pop_back();
        if (!keep.ok()) return keep.status();
        if (Truthy(*keep)) kept.push_back(item);
      }
      items.swap(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      frames_.emplace_back();
      SEAM_RETURN_IF_ERROR(Bind(node, items[i]));
      frames_.back()["loop"] = Value::MakeDict({{"index0", Value::Int(i)}, {"index", Value::Int(i + 1)},
                                                {"revindex0", Value::Int(n - i - 1)}, {"revindex", Value::Int(n - i)},
                                                {"first", Value::Bool(i == 0)}, {"last", Value::Bool(i == n - 1)},
                                                {"length", Value::Int(n)},
                                                {"previtem", i > 0 ? items[i - 1] : Value::Undefined("previtem")},
                                                {"nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("nextitem")}});
      absl::Status s = Run(*node.body, out);
      frames_.pop_back();
      SEAM_RETURN_IF_ERROR(s);
    }
    if (n == 0 && node.else_body) return Run(*node.else_body, out);
    return absl::OkStatus();
  }

  absl::Status Bind(const Node& node, const Value& item) {
    if (node.targets.size() == 1) {
      frames_.back()[node.targets[0]] = item;
      return absl::OkStatus();
    }
    if (item.kind != K::kList || item.list->size() != node.targets.size()) {
      return RenderError(node.line, absl::StrCat("cannot unpack a ", KindName(item.kind), " into ", node.targets.size(), " names"));
    }
    for (size_t k = 0; k < node.targets.size(); ++k) frames_.back()[node.targets[k]] = (*item.list)[k];
    return absl::OkStatus();
  }

  absl::StatusOr<Args> EvalArgs(const Expr& e, size_t first) {
    Args args;
    for (size_t k = first; k < e.args.size(); ++k) {
      SEAM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k]));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [name, expr] : e.kwargs) {
      SEAM_ASSIGN_OR_RETURN(Value v, Eval(*expr));
      args.named.emplace_back(name, std::move(v));
    }
    return args;
  }

  static absl::Status UndefinedError(const Expr& e, const Value& v, const char* use) {
    return RenderError(e.line, absl::StrCat("'", v.s.empty() ? "value" : v.s, "' is undefined (", use, ")"));
  }

  absl::StatusOr<Value> Call(const Expr& e) {
    SEAM_ASSIGN_OR_RETURN(Args args, EvalArgs(e, 1));
    if (e.args[0] == nullptr) {  // a global function
      if (e.name == "raise_exception") {
        return absl::InvalidArgumentError(args.positional.empty() ? "raise_exception" : ToText(args.positional[0]));
      }
      if (e.name == "namespace") {
        Dict d;
        for (auto& [k, v] : args.named) d.emplace_back(k, v);
        return Value::Namespace(std::move(d));
      }
      // range(stop) / range(start, stop[, step])
      std::vector<int64_t> a;
      for (const Value& v : args.positional) {
        if (v.kind != K::kInt) return RenderError(e.line, "range takes integers");
        a.push_back(v.i);
      }
      if (a.empty() || a.size() > 3 || (a.size() == 3 && a[2] == 0)) return RenderError(e.line, "bad range arguments");
      const int64_t start = a.size() == 1 ? 0 : a[0], stop = a.size() == 1 ? a[0] : a[1], step = a.size() == 3 ? a[2] : 1;
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        out.push_back(Value::Int(i));
        if (out.size() > 1000000) return RenderError(e.line, "range too long");
      }
      return Value::MakeList(std::move(out));
    }
    SEAM_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
    if (object.is_undefined()) return UndefinedError(e, object, absl::StrCat("method ", e.name).c_str());
    return CallMethod(e.name, object, args, e.line);
  }

  absl::StatusOr<Value> Arithmetic(const Expr& e, const Value& a, const Value& b) {
    const std::string& op = e.name;
    if (op == "+" && a.kind == K::kString && b.kind == K::kString) return Value::String(a.s + b.s);
    if (op == "+" && a.kind == K::kList && b.kind == K::kList) {
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::MakeList(std::move(out));
    }
    if (op == "*" && a.kind == K::kString && b.kind == K::kInt) {
      // Sized before it is built: '' * 10**9 is '' at once, 'ab' * 10**9 is refused.
      if (a.s.empty() || b.i <= 0) return Value::String("");
      if (static_cast<uint64_t>(b.i) > ChatTemplate::kMaxRenderBytes / a.s.size()) return TooLarge(e.line, "a repeated string");
      std::string out;
      out.reserve(a.s.size() * static_cast<size_t>(b.i));
      for (int64_t k = 0; k < b.i; ++k) out += a.s;
      return Value::String(std::move(out));
    }
    if (!a.is_number() || !b.is_number()) {
      return RenderError(e.line, absl::StrCat("unsupported operand types for ", op, ": ", KindName(a.kind), " and ",
                                              KindName(b.kind)));
    }
    const bool ints = a.kind != K::kFloat && b.kind != K::kFloat;
    const double x = a.number(), y = b.number();
    if ((op == "/" || op == "//" || op == "%") && y == 0) return RenderError(e.line, "division by zero");
    if (op == "/") return Value::Float(x / y);
    if (ints) {
      // In 64 bits, each result checked: Python would grow the integer, a
      // template refuses (a wrapped or out-of-range result is undefined in C++).
      const int64_t p = a.kind == K::kInt ? a.i : a.b, q = b.kind == K::kInt ? b.i : b.b;
      const absl::Status overflow = RenderError(e.line, absl::StrCat("integer overflow in ", p, " ", op, " ", q));
      int64_t r = 0;
      if (op == "+") return __builtin_add_overflow(p, q, &r) ? overflow : absl::StatusOr<Value>(Value::Int(r));
      if (op == "-") return __builtin_sub_overflow(p, q, &r) ? overflow : absl::StatusOr<Value>(Value::Int(r));
      if (op == "*") return __builtin_mul_overflow(p, q, &r) ? overflow : absl::StatusOr<Value>(Value::Int(r));
      if (op == "//" || op == "%") {
        if (q == -1) {  // p / -1 overflows for the least int64; p % -1 is 0
          if (op == "%") return Value::Int(0);
          return __builtin_sub_overflow(int64_t{0}, p, &r) ? overflow : absl::StatusOr<Value>(Value::Int(r));
        }
        const int64_t quotient = p / q, rest = p % q;
        const bool adjust = rest != 0 && ((rest < 0) != (q < 0));  // Python floors toward -infinity
        return Value::Int(op == "//" ? quotient - adjust : rest + (adjust ? q : 0));
      }
      if (op == "**" && q >= 0) {
        int64_t result = 1, base = p;
        for (int64_t n = q; n > 0; n >>= 1) {
          if ((n & 1) && __builtin_mul_overflow(result, base, &result)) return overflow;
          if (n > 1 && __builtin_mul_overflow(base, base, &base)) return overflow;
        }
        return Value::Int(result);
      }
    }
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "//") return Value::Float(std::floor(x / y));
    if (op == "%") return Value::Float(x - y * std::floor(x / y));
    return Value::Float(std::pow(x, y));
  }

  absl::StatusOr<Value> Binary(const Expr& e) {
    SEAM_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
    SEAM_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
    const std::string& op = e.name;
    if (op == "~") return Value::String(ToText(a) + ToText(b));
    if (op == "==") return Value::Bool(Equal(a, b));
    if (op == "!=") return Value::Bool(!Equal(a, b));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int cmp;
      if (a.is_number() && b.is_number()) {
        cmp = a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
      } else if (a.kind == K::kString && b.kind == K::kString) {
        cmp = a.s.compare(b.s);
      } else {
        return RenderError(e.line, absl::StrCat("cannot compare a ", KindName(a.kind), " with a ", KindName(b.kind)));
      }
      return Value::Bool(op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0);
    }
    if (op == "in") {
      if (b.kind == K::kString) {
        if (a.kind != K::kString) return RenderError(e.line, absl::StrCat("'in <string>' needs a string, not a ", KindName(a.kind)));
        return Value::Bool(b.s.find(a.s) != std::string::npos);
      }
      if (b.kind == K::kList) {
        for (const Value& item : *b.list) {
          if (Equal(a, item)) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      if (b.is_mapping()) return Value::Bool(a.kind == K::kString && b.Find(a.s) != nullptr);
      if (b.is_undefined()) return UndefinedError(e, b, "right of 'in'");
      return RenderError(e.line, absl::StrCat("'in' a ", KindName(b.kind)));
    }
    if (a.is_undefined()) return UndefinedError(e, a, absl::StrCat("operand of ", op).c_str());
    if (b.is_undefined()) return UndefinedError(e, b, absl::StrCat("operand of ", op).c_str());
    return Arithmetic(e, a, b);
  }

  absl::StatusOr<Value> Subscript(const Expr& e, const Value& object, const Value& index) {
    if (object.kind == K::kList || object.kind == K::kString) {
      if (index.kind != K::kInt) return RenderError(e.line, absl::StrCat("index of a ", KindName(index.kind)));
      const std::vector<uint32_t> cps = object.kind == K::kString ? CodePoints(object.s) : std::vector<uint32_t>();
      const int64_t n = object.kind == K::kList ? static_cast<int64_t>(object.list->size()) : static_cast<int64_t>(cps.size());
      const int64_t i = index.i < 0 ? index.i + n : index.i;
      if (i < 0 || i >= n) return Value::Undefined("item");
      if (object.kind == K::kList) return (*object.list)[i];
      return Value::String(Utf8Of(cps, {static_cast<size_t>(i)}));
    }
    if (object.is_mapping()) {
      const Value* found = index.kind == K::kString ? object.Find(index.s) : nullptr;
      return found != nullptr ? *found : Value::Undefined(index.kind == K::kString ? index.s : "item");
    }
    if (object.is_undefined()) return UndefinedError(e, object, "subscript");
    return Value::Undefined("item");
  }

  absl::StatusOr<Value> EvalList(const Expr& e) {
    List items;
    for (const auto& item : e.args) {
      SEAM_ASSIGN_OR_RETURN(Value v, Eval(*item));
      items.push_back(std::move(v));
    }
    return Value::MakeList(std::move(items));
  }

  absl::StatusOr<Value> EvalDict(const Expr& e) {
    Dict d;
    for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
      SEAM_ASSIGN_OR_RETURN(Value key, Eval(*e.args[k]));
      SEAM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1]));
      if (key.kind != K::kString) return RenderError(e.line, "dict keys must be strings");
      d.emplace_back(key.s, std::move(v));
    }
    return Value::MakeDict(std::move(d));
  }

  absl::StatusOr<Value> EvalSlice(const Expr& e) {
    SEAM_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
    Value bounds[3];
    for (int k = 0; k < 3; ++k) {
      if (e.args[k + 1]) {
        SEAM_ASSIGN_OR_RETURN(bounds[k], Eval(*e.args[k + 1]));
      }
    }
    const int64_t step = bounds[2].kind == K::kInt ? bounds[2].i : 1;
    if (step == 0) return RenderError(e.line, "slice step cannot be zero");
    if (object.kind == K::kList) {
      List out;
      for (size_t i : SliceIndices(object.list->size(), bounds[0], bounds[1], step)) out.push_back((*object.list)[i]);
      return Value::MakeList(std::move(out));
    }
    if (object.kind == K::kString) {
      const auto cps = CodePoints(object.s);
      return Value::String(Utf8Of(cps, SliceIndices(cps.size(), bounds[0], bounds[1], step)));
    }
    return RenderError(e.line, absl::StrCat("cannot slice a ", KindName(object.kind)));
  }

  absl::StatusOr<Value> EvalUnary(const Expr& e) {
    SEAM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
    if (!v.is_number()) return RenderError(e.line, absl::StrCat("unary ", e.name, " of a ", KindName(v.kind)));
    if (e.name == "+") return v;
    if (v.kind == K::kFloat) return Value::Float(-v.f);
    const int64_t n = v.kind == K::kInt ? v.i : v.b;  // not through double: 2^63 - 1 would round out of range
    int64_t negated = 0;
    if (__builtin_sub_overflow(int64_t{0}, n, &negated)) {
      return RenderError(e.line, absl::StrCat("integer overflow in -(", n, ")"));
    }
    return Value::Int(negated);
  }

  absl::StatusOr<Value> EvalUnbounded(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: return Lookup(e.name);
      case Expr::Kind::kList: return EvalList(e);
      case Expr::Kind::kDict: return EvalDict(e);
      case Expr::Kind::kAttr: {
        SEAM_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
        if (object.is_undefined()) return UndefinedError(e, object, absl::StrCat("attribute ", e.name).c_str());
        return Subscript(e, object, Value::String(e.name));
      }
      case Expr::Kind::kItem: {
        SEAM_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
        SEAM_ASSIGN_OR_RETURN(Value index, Eval(*e.args[1]));
        return Subscript(e, object, index);
      }
      case Expr::Kind::kSlice: return EvalSlice(e);
      case Expr::Kind::kCall: return Call(e);
      case Expr::Kind::kFilter: {
        SEAM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        SEAM_ASSIGN_OR_RETURN(Args args, EvalArgs(e, 1));
        return ApplyFilter(e.name, v, args, e.line);
      }
      case Expr::Kind::kTest: {
        SEAM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        SEAM_ASSIGN_OR_RETURN(Args args, EvalArgs(e, 1));
        SEAM_ASSIGN_OR_RETURN(bool result, ApplyTest(e.name, v, args, e.line));
        return Value::Bool(result != e.negated);
      }
      case Expr::Kind::kUnary: return EvalUnary(e);
      case Expr::Kind::kBinary: return Binary(e);
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        SEAM_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        if (Truthy(a) == (e.kind == Expr::Kind::kOr)) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kNot: {
        SEAM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        return Value::Bool(!Truthy(v));
      }
      case Expr::Kind::kCond: {
        SEAM_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1]));
        if (Truthy(c)) return Eval(*e.args[0]);
        return e.args[2] ? Eval(*e.args[2]) : absl::StatusOr<Value>(Value::Undefined());
      }
    }
    return Value::Undefined();
  }

  std::vector<std::unordered_map<std::string, Value>> frames_;
  int64_t steps_ = 0;
};

}  // namespace

ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(std::string_view source) {
  SEAM_ASSIGN_OR_RETURN(std::vector<Chunk> chunks, Lex(source));
  auto t = std::unique_ptr<ChatTemplate>(new ChatTemplate());
  SEAM_ASSIGN_OR_RETURN(t->root_, ParseChunks(std::move(chunks)));
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) return absl::InvalidArgumentError("chat template variables must be a JSON object");
  std::unordered_map<std::string, Value> globals;
  for (auto it = variables.begin(); it != variables.end(); ++it) globals[it.key()] = FromJson(it.value());
  Renderer renderer(std::move(globals));
  std::string out;
  SEAM_RETURN_IF_ERROR(renderer.Run(*root_, &out));
  if (out.size() > kMaxRenderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: the output passed ", kMaxRenderBytes >> 20, " MiB"));
  }
  return out;
}

}  // namespace seam::chat_template
