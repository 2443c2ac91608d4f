// The normalizer of tokenizer.json: none, NFC (utf8proc), or a Sequence of those. Others
// are refused by name at load.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seam::tokenizer {

class Normalizer {
 public:
  static absl::StatusOr<std::unique_ptr<Normalizer>> FromJson(const nlohmann::json& config);
  // `text` must be valid UTF-8.
  std::string Apply(std::string_view text) const;
  bool identity() const { return !nfc_; }

 private:
  bool nfc_ = false;
};

// NFC of valid UTF-8 text.
std::string Nfc(std::string_view text);

}  // namespace seam::tokenizer
