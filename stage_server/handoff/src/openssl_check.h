// Wraps OpenSSL calls so a failure becomes an absl::Status naming the call,
// the file and the line, with OpenSSL's first queued error; the error queue
// is cleared so a later call does not report this one's error.
// Internal to seam_handoff.
#pragma once

#include <openssl/err.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace seam::handoff {

// An OpenSSL failure is never the caller's input: INTERNAL.
inline absl::Status OpenSslError(absl::string_view call, const char* file, int line) {
  const unsigned long code = ERR_get_error();
  char text[256] = "no OpenSSL error queued";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  absl::string_view base = file;
  const size_t slash = base.rfind('/');
  if (slash != absl::string_view::npos) base.remove_prefix(slash + 1);
  return absl::InternalError(absl::StrCat(call, " failed at ", base, ":", line, ": ", text));
}

}  // namespace seam::handoff

// For OpenSSL calls that return a pointer, null on failure.
#define SEAM_OPENSSL_RETURN_IF_NULL(call)                                     \
  do {                                                                        \
    if ((call) == nullptr) {                                                  \
      return ::seam::handoff::OpenSslError(#call, __FILE__, __LINE__);        \
    }                                                                         \
  } while (0)
