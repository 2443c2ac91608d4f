#include "value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace seam::chat_template {

const Value* Value::Find(const std::string& key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      for (const auto& item : json) list.push_back(FromJson(item));
      return Value::MakeList(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (auto it = json.begin(); it != json.end(); ++it) dict.emplace_back(it.key(), FromJson(it.value()));
      return Value::MakeDict(std::move(dict));
    }
    default: return Value::Undefined();
  }
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.b;
    case Value::Kind::kInt: return v.i != 0;
    case Value::Kind::kFloat: return v.f != 0;
    case Value::Kind::kString: return !v.s.empty();
    case Value::Kind::kList: return !v.list->empty();
    case Value::Kind::kDict: return !v.dict->empty();
    case Value::Kind::kNamespace: return true;
  }
  return false;
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.s == b.s;
    case Value::Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!Equal((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    case Value::Kind::kNamespace: return a.dict == b.dict;
    default: return false;
  }
}

namespace {

std::string FloatText(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), f);  // shortest round-trip, as Python's repr
  std::string s(buffer, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string Repr(const Value& v) {
  if (v.kind != Value::Kind::kString) return ToText(v);
  std::string out = "'";
  for (char c : v.s) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    if (c == '\n') { out += "\\n"; continue; }
    out.push_back(c);
  }
  return out + "'";
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          *out += buffer;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

std::string ToText(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return FloatText(v.f);
    case Value::Kind::kString: return v.s;
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < v.list->size(); ++i) out += (i ? ", " : "") + Repr((*v.list)[i]);
      return out + "]";
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : *v.dict) {
        out += (first ? "" : ", ") + Repr(Value::String(k)) + ": " + Repr(item);
        first = false;
      }
      return out + "}";
    }
  }
  return "";
}

std::string ToJson(const Value& v, int indent, int depth) {
  std::string out;
  const std::string pad = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * (depth + 1), ' ') : "";
  const std::string close_pad = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * depth, ' ') : "";
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return "null";
    case Value::Kind::kBool: return v.b ? "true" : "false";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return FloatText(v.f);
    case Value::Kind::kString: JsonString(v.s, &out); return out;
    case Value::Kind::kList:
      if (v.list->empty()) return "[]";
      out = "[";
      for (size_t i = 0; i < v.list->size(); ++i) out += (i ? item_sep : "") + pad + ToJson((*v.list)[i], indent, depth + 1);
      return out + close_pad + "]";
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      if (v.dict->empty()) return "{}";
      out = "{";
      bool first = true;
      for (const auto& [k, item] : *v.dict) {
        out += (first ? "" : item_sep) + pad;
        JsonString(k, &out);
        out += ": " + ToJson(item, indent, depth + 1);
        first = false;
      }
      return out + close_pad + "}";
    }
  }
  return "null";
}

const char* KindName(Value::Kind kind) {
  static const char* kNames[] = {"undefined", "none", "boolean", "integer", "float", "string", "list", "dict", "namespace"};
  return kNames[static_cast<int>(kind)];
}

std::vector<uint32_t> CodePoints(const std::string& utf8) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < utf8.size();) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n && i + k < utf8.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    cps.push_back(cp);
    i += n;
  }
  return cps;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Of(const std::vector<uint32_t>& cps, const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i : indices) AppendUtf8(cps[i], &out);
  return out;
}

std::vector<size_t> SliceIndices(size_t n, const Value& start, const Value& stop, int64_t step) {
  const int64_t len = static_cast<int64_t>(n);
  auto bound = [&](const Value& v, int64_t fallback) {
    if (v.kind != Value::Kind::kInt) return fallback;
    int64_t x = v.i < 0 ? v.i + len : v.i;
    if (step > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  std::vector<size_t> out;
  if (step > 0) {
    for (int64_t i = bound(start, 0), e = bound(stop, len); i < e; i += step) out.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = bound(start, len - 1), e = bound(stop, -1); i > e; i += step) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

}  // namespace seam::chat_template
