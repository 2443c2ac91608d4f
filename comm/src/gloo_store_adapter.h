// Presents a seam Store to Gloo's rendezvous (gloo::rendezvous::Store) for
// one connectFullMesh. Every wait is bounded by one overall rendezvous
// deadline; a failing Store call throws StoreFailure carrying the Status.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "seam/comm/store.h"

namespace seam::comm::internal {

class StoreFailure : public std::runtime_error {
 public:
  explicit StoreFailure(absl::Status status)
      : std::runtime_error(std::string(status.message())), status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<seam::comm::Store> store, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  // Get within min(timeout, time left until the rendezvous deadline).
  std::vector<char> GetBefore(const std::string& key, absl::Duration timeout);

  std::shared_ptr<seam::comm::Store> store_;
  absl::Duration timeout_;
  absl::Time deadline_;
};

}  // namespace seam::comm::internal
