// The host staging caches (see the header): size classes from 4 KiB up, a
// free list per class; one cache of plain blocks, one of page-locked blocks
// (plain too when no GPU is visible).
#include "seam/core/host_staging.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/core/device_memory.h"
#include "seam/core/device_runtime.h"

namespace seam {
namespace {

constexpr size_t kMinClass = size_t{4} << 10;

size_t ClassOf(size_t bytes) {
  size_t c = kMinClass;
  while (c < bytes) c <<= 1;
  return c;
}

class StagingCache {
 public:
  // Never destroyed: storages may outlive static teardown.
  static StagingCache& Plain() {
    static StagingCache* cache = new StagingCache(false);
    return *cache;
  }
  static StagingCache& PageLocked() {
    static StagingCache* cache = new StagingCache(CudaAvailable());
    return *cache;
  }

  bool pinned() const { return pinned_; }

  absl::StatusOr<void*> Take(size_t size_class) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = idle_.find(size_class);
      if (it != idle_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        idle_bytes_ -= size_class;
        return p;
      }
    }
    return Allocate(size_class);
  }

  void Give(void* p, size_t size_class) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_bytes_ + size_class <= kMaxCachedStagingBytes) {
        idle_[size_class].push_back(p);
        idle_bytes_ += size_class;
        return;
      }
    }
    Release(p);
  }

 private:
  explicit StagingCache(bool pinned) : pinned_(pinned) {}

  absl::StatusOr<void*> Allocate(size_t size_class) const {
    if (pinned_) {
      if (void* p = CurrentDeviceRuntime().HostAllocPinned(size_class)) return p;  // else pageable memory below
    }
    void* p = std::aligned_alloc(64, size_class);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host staging allocation of ", size_class, " bytes failed"));
    }
    return p;
  }

  void Release(void* p) const {
    if (pinned_ && CurrentDeviceRuntime().HostFreePinned(p)) return;
    std::free(p);
  }

  const bool pinned_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> idle_;
  size_t idle_bytes_ = 0;
};

}  // namespace

bool HostStagingCanPageLock() { return StagingCache::PageLocked().pinned(); }

absl::StatusOr<std::shared_ptr<Storage>> AllocateHostStaging(size_t bytes, bool page_locked) {
  if (bytes > kMaxStagingBlockBytes) return Storage::Allocate(bytes, Device::CPU());
  const size_t size_class = ClassOf(bytes);
  StagingCache* cache = page_locked ? &StagingCache::PageLocked() : &StagingCache::Plain();
  absl::StatusOr<void*> p = cache->Take(size_class);
  if (!p.ok()) return p.status();
  return Storage::Wrap(*p, bytes, Device::CPU(), [cache, size_class](void* q) { cache->Give(q, size_class); });
}

absl::StatusOr<Tensor> EmptyHostStaging(const Shape& shape, DType dtype, bool page_locked) {
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", ShapeToString(shape)));
  }
  absl::StatusOr<std::shared_ptr<Storage>> storage =
      AllocateHostStaging(NumElements(shape) * DTypeSize(dtype), page_locked);
  if (!storage.ok()) return storage.status();
  return Tensor::OnStorage(*std::move(storage), 0, shape, dtype);
}

}  // namespace seam
