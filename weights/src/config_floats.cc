// How config.json writers spell floats JSON has no number for: Python's json
// writes the bare tokens Infinity, -Infinity and NaN; transformers 5 writes
// {"__float__": "Infinity"}. Both become one spelling (the strings
// "Infinity", "-Infinity", "NaN") before any field is read, so that every
// architecture's reader sees one form.
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/config_fields.h"

namespace seam::weights::internal {
namespace {

// The canonical string of a non-finite spelling, or "" for anything else.
std::string NonFiniteName(const std::string& s) {
  if (s == "Infinity" || s == "inf" || s == "+inf" || s == "+Infinity") return "Infinity";
  if (s == "-Infinity" || s == "-inf") return "-Infinity";
  if (s == "NaN" || s == "nan") return "NaN";
  return "";
}

}  // namespace

std::string QuoteNonFiniteNumbers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out.push_back(ch);
      if (ch == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') in_string = true;
    bool replaced = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
      const size_t n = std::char_traits<char>::length(token);
      if (text.compare(i, n, token) == 0) {
        absl::StrAppend(&out, "\"", token, "\"");
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(ch);
  }
  return out;
}

void UnwrapFloatObjects(Json& j) {
  if (j.is_object()) {
    if (j.size() == 1 && j.contains("__float__")) {
      const Json& v = j["__float__"];
      if (v.is_number()) {
        Json number = v;
        j = std::move(number);
        return;
      }
      if (v.is_string()) {
        const std::string name = NonFiniteName(v.get<std::string>());
        if (!name.empty()) {
          j = name;
          return;
        }
      }
      return;  // left as it is: the field's reader names it
    }
    for (auto& [key, value] : j.items()) UnwrapFloatObjects(value);
  } else if (j.is_array()) {
    for (Json& value : j) UnwrapFloatObjects(value);
  }
}

absl::StatusOr<double> FloatValue(const std::string& key, const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string name = v.get<std::string>();
    if (name == "Infinity") return std::numeric_limits<double>::infinity();
    if (name == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (name == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return FieldError(key, absl::StrCat("must hold numbers, got ", v.dump()));
}

absl::Status ReadFloat(const Json& j, const std::string& key, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  absl::StatusOr<double> value = FloatValue(key, *it);
  // Bounded before narrowing: 1e300 must not become an infinite rope_theta,
  // and no field read here may be infinite or NaN.
  if (!value.ok() || !(std::fabs(*value) <= std::numeric_limits<float>::max())) {
    return FieldError(key, absl::StrCat("must be a number within float range, got ", it->dump()));
  }
  *out = static_cast<float>(*value);
  return absl::OkStatus();
}

}  // namespace seam::weights::internal
