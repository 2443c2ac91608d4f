// seam Store → gloo::rendezvous::Store (see gloo_store_adapter.h).
#include "gloo_store_adapter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace seam::comm::internal {

GlooStoreAdapter::GlooStoreAdapter(std::shared_ptr<seam::comm::Store> store, absl::Duration timeout)
    : store_(std::move(store)), timeout_(timeout), deadline_(absl::Now() + timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s = store_->Set(key, data);
  if (!s.ok()) throw StoreFailure(std::move(s));
}

std::vector<char> GlooStoreAdapter::GetBefore(const std::string& key, absl::Duration timeout) {
  const absl::Duration left = std::max(absl::ZeroDuration(), deadline_ - absl::Now());
  if (left < timeout) {
    // The whole rendezvous is bounded: report the key that was still missing at its deadline.
    absl::StatusOr<std::vector<char>> v = store_->Get(key, left);
    if (v.ok()) return *std::move(v);
    if (absl::IsDeadlineExceeded(v.status())) {
      throw StoreFailure(absl::DeadlineExceededError(absl::StrCat(
          "store key '", key, "' did not appear within ", absl::FormatDuration(timeout_), " (rendezvous deadline)")));
    }
    throw StoreFailure(v.status());
  }
  absl::StatusOr<std::vector<char>> v = store_->Get(key, timeout);
  if (!v.ok()) throw StoreFailure(v.status());
  return *std::move(v);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) { return GetBefore(key, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, absl::ToChronoMilliseconds(timeout_)); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  for (const std::string& key : keys) GetBefore(key, absl::FromChrono(timeout));
}

}  // namespace seam::comm::internal
