// Builds the statement tree from lexed chunks; refuses constructs outside seam's subset.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ast.h"
#include "lexer.h"

namespace seam::chat_template {

absl::StatusOr<std::unique_ptr<Node>> ParseChunks(std::vector<Chunk> chunks);

}  // namespace seam::chat_template
