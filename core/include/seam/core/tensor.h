// Tensor: a typed, shaped view over reference-counted storage on one device.
// Copies of a Tensor share storage (like a shared_ptr); Clone() copies bytes.
// Views (Rows, Narrow, Reshape) keep the storage alive. Not thread-safe for
// concurrent writes to the same bytes; distinct tensors may be used freely.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"

namespace seam {

using Shape = std::vector<int64_t>;
std::string ShapeToString(const Shape& shape);
int64_t NumElements(const Shape& shape);

// Owned or borrowed bytes on one device.
class Storage {
 public:
  using Deleter = std::function<void(void*)>;
  // Allocates `bytes` on `device` (64-byte aligned on host; stream-ordered from the pool on CUDA, see device_memory.h).
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(size_t bytes, Device device);
  // Wraps memory owned elsewhere; `deleter` (may be empty) runs when the last user drops it.
  static std::shared_ptr<Storage> Wrap(void* data, size_t bytes, Device device, Deleter deleter = {});
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)) {}
  void* data_;
  size_t bytes_;
  Device device_;
  Deleter deleter_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() is false

  // New uninitialised tensor (contiguous). Aborts if host allocation fails;
  // use TryEmpty for device memory that may run out.
  static Tensor Empty(const Shape& shape, DType dtype, Device device = Device::CPU());
  static absl::StatusOr<Tensor> TryEmpty(const Shape& shape, DType dtype, Device device = Device::CPU());
  // New zero-filled tensor.
  static Tensor Zeros(const Shape& shape, DType dtype, Device device = Device::CPU());
  // Host tensor from float values rounded to `dtype` (values.size() must equal numel).
  static Tensor FromFloats(const std::vector<float>& values, const Shape& shape, DType dtype = DType::kF32);
  // Host i32 tensor (token ids, positions, indices).
  static Tensor FromInts(const std::vector<int32_t>& values, const Shape& shape);
  // Non-owning contiguous view of memory the caller keeps alive.
  static Tensor Borrow(void* data, const Shape& shape, DType dtype, Device device = Device::CPU());
  // Tensor over existing storage at a byte offset, contiguous.
  static Tensor OnStorage(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::CPU(); }
  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }  // in elements
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  size_t element_size() const { return DTypeSize(dtype_); }
  bool is_contiguous() const;
  // Rows = size of dim 0; row_numel = elements per row (product of the other dims).
  int64_t rows() const { return shape_.empty() ? 1 : shape_[0]; }
  int64_t row_numel() const;

  void* raw_data() const;
  template <typename T>
  T* data() const { return static_cast<T*>(raw_data()); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t byte_offset() const { return offset_; }

  // View of rows [start, start + count) along dim 0 (contiguous if this is).
  Tensor Rows(int64_t start, int64_t count) const;
  // View of [start, start + length) along `dim`.
  Tensor Narrow(int dim, int64_t start, int64_t length) const;
  // Same bytes, new shape; contiguous tensors only; -1 infers one dimension.
  absl::StatusOr<Tensor> Reshape(const Shape& shape) const;
  // Contiguous deep copy on the same device.
  Tensor Clone() const;
  // Contiguous deep copy on `device` (host<->CUDA through the CUDA runtime).
  absl::StatusOr<Tensor> To(Device device) const;
  // This tensor when it already lives on `device` (shared, not copied), To(device) otherwise.
  absl::StatusOr<Tensor> On(Device device) const;
  // Host tensors only: every element as float (any floating or integer dtype), row-major.
  std::vector<float> ToFloats() const;
  // Host tensors only: element at a flat row-major index, as float.
  float FlatAt(int64_t index) const;
  // True when both views point at the same bytes with the same shape and dtype.
  bool SameView(const Tensor& other) const;

  std::string DebugString() const;  // "bf16[7, 96] cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  std::vector<int64_t> strides_;
  DType dtype_ = DType::kF32;
};

// Copies `src` into `dst` (same shape; dtype may differ for host tensors, values converted).
absl::Status CopyInto(const Tensor& src, const Tensor& dst);

// Validation helpers returning INVALID_ARGUMENT with messages like
// "residual: expected dtype bf16, got f32" or "x: expected shape [7, 96], got [7, 95]".
absl::Status ExpectDType(const Tensor& t, DType dtype, const char* what);
absl::Status ExpectShape(const Tensor& t, const Shape& shape, const char* what);
absl::Status ExpectRank(const Tensor& t, int rank, const char* what);
absl::Status ExpectSameShape(const Tensor& a, const Tensor& b, const char* what_a, const char* what_b);
absl::Status ExpectDevice(const Tensor& t, Device device, const char* what);
absl::Status ExpectContiguous(const Tensor& t, const char* what);
absl::Status ExpectDefined(const Tensor& t, const char* what);

}  // namespace seam
