#include "normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::tokenizer {

std::string Nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // NFC leaves ASCII alone
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  SEAM_CHECK_MSG(n >= 0, "utf8proc_map: ", utf8proc_errmsg(n));  // the text was repaired before
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

absl::StatusOr<std::unique_ptr<Normalizer>> Normalizer::FromJson(const nlohmann::json& config) {
  auto normalizer = std::make_unique<Normalizer>();
  if (config.is_null()) return normalizer;
  const std::string type = config.value("type", std::string());
  if (type == "NFC") {
    normalizer->nfc_ = true;
  } else if (type == "Sequence") {
    for (const auto& step : config.value("normalizers", nlohmann::json::array())) {
      auto inner = FromJson(step);
      if (!inner.ok()) return inner.status();
      normalizer->nfc_ = normalizer->nfc_ || (*inner)->nfc_;  // NFC is idempotent
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: normalizer '", type, "' is not supported"));
  }
  return normalizer;
}

std::string Normalizer::Apply(std::string_view text) const { return nfc_ ? Nfc(text) : std::string(text); }

}  // namespace seam::tokenizer
