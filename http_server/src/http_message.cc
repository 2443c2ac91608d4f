// Header lookup of a Request.
#include "seam/http_server/http_message.h"

#include "absl/strings/match.h"

namespace seam::http_server {

std::string Request::get_header_value(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

bool Request::has_header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return true;
  }
  return false;
}

}  // namespace seam::http_server
