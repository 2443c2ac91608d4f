#include "seam/core/logging.h"

#include <cstdlib>

namespace seam {

void InitLogging(const std::string& level, const std::string& prefix) {
  const char* env = std::getenv("SEAM_LOG_LEVEL");
  const std::string chosen = env != nullptr ? env : level;
  spdlog::set_level(spdlog::level::from_str(chosen));
  spdlog::set_pattern(prefix.empty() ? "[%H:%M:%S.%e] [%^%l%$] %v"
                                     : "[%H:%M:%S.%e] [" + prefix + "] [%^%l%$] %v");
}

}  // namespace seam
