// The filters, tests and methods seam's Jinja subset knows, with Python's (Jinja2's)
// semantics. Names outside these lists are refused when the template is parsed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "value.h"

namespace seam::chat_template {

bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);
bool IsKnownMethod(const std::string& name);
bool IsKnownFunction(const std::string& name);  // namespace, raise_exception, range

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The argument at `index` or named `name`, or nullptr.
  const Value* Get(size_t index, const char* name) const;
};

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& value, const Args& args, int line);
absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& value, const Args& args, int line);
absl::StatusOr<Value> CallMethod(const std::string& name, const Value& object, const Args& args, int line);

absl::Status RenderError(int line, const std::string& what);

}  // namespace seam::chat_template
