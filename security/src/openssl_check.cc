// Draining OpenSSL's error queue into a Status.
#include "openssl_check.h"

#include <openssl/err.h>

#include "absl/strings/str_cat.h"

namespace seam::security {

absl::Status OpenSslError(const char* call, const char* file, int line) {
  std::string reasons;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", text);
  }
  if (reasons.empty()) reasons = "no reason given";
  return absl::InternalError(absl::StrCat(call, " failed at ", file, ":", line, ": ", reasons));
}

}  // namespace seam::security
