// Store: the key/value rendezvous through which a group's ranks find each
// other (Gloo addresses, NCCL unique ids). The caller provides it; FileStore
// is the first implementation, a coordinator-backed one comes with the
// pipeline. Keys are written once; Get waits until the key exists or the
// deadline passes (DEADLINE_EXCEEDED naming the key).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace seam::comm {

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Set(const std::string& key, const std::vector<char>& value) = 0;
  virtual absl::StatusOr<std::vector<char>> Get(const std::string& key, absl::Duration timeout) = 0;
};

// Keys are files in `directory` (created if missing). Use a fresh directory or
// prefix per run: old keys are never deleted.
absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(const std::string& directory);

// Every key of `inner` prefixed by "<prefix>/".
std::shared_ptr<Store> MakePrefixStore(std::string prefix, std::shared_ptr<Store> inner);

}  // namespace seam::comm
