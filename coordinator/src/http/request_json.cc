// The bounded JSON parse of request bodies (request_json.h): a SAX handler
// that builds an ordered_json with a stack of open containers.
#include "http/request_json.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace seam::coordinator::http {
namespace {

using Json = nlohmann::ordered_json;

class BoundedBuilder final : public nlohmann::json_sax<Json> {
 public:
  explicit BoundedBuilder(const JsonBounds& bounds) : bounds_(bounds) {}

  bool null() override { return Add(Json(nullptr)); }
  bool boolean(bool v) override { return Add(Json(v)); }
  bool number_integer(number_integer_t v) override { return Add(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Add(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Add(Json(v)); }
  bool string(string_t& v) override { return Add(Json(std::move(v))); }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    if (refusal_.empty()) refusal_ = "the request body is not valid JSON";
    return false;
  }

  Json Take() { return std::move(root_); }
  const std::string& refusal() const { return refusal_; }

 private:
  bool Fail(std::string why) {
    refusal_ = std::move(why);
    return false;
  }
  bool Count() {
    if (++values_ <= bounds_.max_values) return true;
    return Fail(absl::StrCat("the request body holds more than ", bounds_.max_values, " JSON values"));
  }
  // Places `v` in the innermost open container (or as the root); its address.
  Json* Place(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool Add(Json v) {
    if (!Count()) return false;
    Place(std::move(v));
    return true;
  }
  bool Open(Json container) {
    if (!Count()) return false;
    if (static_cast<int>(open_.size()) >= bounds_.max_depth) {
      return Fail(absl::StrCat("the request body nests deeper than ", bounds_.max_depth, " levels"));
    }
    open_.push_back(Place(std::move(container)));
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  const JsonBounds bounds_;
  Json root_;
  std::vector<Json*> open_;  // the containers being filled, outermost first
  std::string key_;
  size_t values_ = 0;
  std::string refusal_;
};

}  // namespace

JsonBounds RequestJsonBounds(const RequestLimits& limits) {
  JsonBounds b;
  const int64_t prompts = std::max<int64_t>(limits.max_prompts, 1);
  const int64_t tokens = std::max<int64_t>(limits.max_prompt_tokens, 1);
  b.max_values = static_cast<size_t>(prompts * tokens + 4096);
  return b;
}

absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(const std::string& text, const JsonBounds& bounds) {
  BoundedBuilder builder(bounds);
  if (!Json::sax_parse(text, &builder, nlohmann::detail::input_format_t::json, /*strict=*/true)) {
    return absl::InvalidArgumentError(builder.refusal().empty() ? "the request body is not valid JSON"
                                                                : builder.refusal());
  }
  return builder.Take();
}

}  // namespace seam::coordinator::http
