#include "seam/core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/core/device_memory.h"
#include "seam/core/host_staging.h"
#include "seam/core/status.h"

namespace seam {

std::string ShapeToString(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Device::ToString() const { return is_cpu() ? "cpu" : absl::StrCat("cuda:", index); }

// ---- Storage -----------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(size_t bytes, Device device) {
  if (device.is_cpu()) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = rounded == 0 ? nullptr : std::aligned_alloc(64, rounded);
    if (rounded != 0 && p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
    }
    return std::shared_ptr<Storage>(new Storage(p, bytes, device, [](void* q) { std::free(q); }));
  }
  void* p = nullptr;
  SEAM_RETURN_IF_ERROR(DeviceMalloc(device, bytes, &p));
  return std::shared_ptr<Storage>(new Storage(p, bytes, device, [device](void* q) { DeviceFree(device, q); }));
}

std::shared_ptr<Storage> Storage::Wrap(void* data, size_t bytes, Device device, Deleter deleter) {
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, std::move(deleter)));
}

Storage::~Storage() {
  if (deleter_ && data_ != nullptr) deleter_(data_);
}

// ---- Tensor ------------------------------------------------------------------

namespace {
std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}
}  // namespace

Tensor Tensor::OnStorage(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape,
                         DType dtype) {
  for (int64_t d : shape) SEAM_CHECK_MSG(d >= 0, "negative dimension in ", ShapeToString(shape));
  SEAM_CHECK_MSG(byte_offset + NumElements(shape) * DTypeSize(dtype) <= storage->bytes(),
                 "view ", ShapeToString(shape), " ", DTypeName(dtype), " at offset ", byte_offset,
                 " exceeds storage of ", storage->bytes(), " bytes");
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = byte_offset;
  t.shape_ = shape;
  t.strides_ = ContiguousStrides(shape);
  t.dtype_ = dtype;
  return t;
}

absl::StatusOr<Tensor> Tensor::TryEmpty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", ShapeToString(shape)));
  }
  SEAM_ASSIGN_OR_RETURN(auto storage, Storage::Allocate(NumElements(shape) * DTypeSize(dtype), device));
  return OnStorage(std::move(storage), 0, shape, dtype);
}

Tensor Tensor::Empty(const Shape& shape, DType dtype, Device device) {
  auto t = TryEmpty(shape, dtype, device);
  SEAM_CHECK_MSG(t.ok(), t.status().ToString());
  return *std::move(t);
}

Tensor Tensor::Zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = Empty(shape, dtype, device);
  if (device.is_cpu()) {
    if (t.nbytes() > 0) std::memset(t.raw_data(), 0, t.nbytes());
  } else {
    SEAM_CHECK_OK(DeviceMemset(device, t.raw_data(), 0, t.nbytes()));
  }
  return t;
}

Tensor Tensor::FromFloats(const std::vector<float>& values, const Shape& shape, DType dtype) {
  SEAM_CHECK_MSG(static_cast<int64_t>(values.size()) == NumElements(shape), values.size(),
                 " values do not fill shape ", ShapeToString(shape));
  Tensor t = Empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) StoreFromFloat(t.raw_data(), dtype, i, values[i]);
  return t;
}

Tensor Tensor::FromInts(const std::vector<int32_t>& values, const Shape& shape) {
  SEAM_CHECK_MSG(static_cast<int64_t>(values.size()) == NumElements(shape), values.size(),
                 " values do not fill shape ", ShapeToString(shape));
  Tensor t = Empty(shape, DType::kI32);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

Tensor Tensor::Borrow(void* data, const Shape& shape, DType dtype, Device device) {
  return OnStorage(Storage::Wrap(data, NumElements(shape) * DTypeSize(dtype), device), 0, shape, dtype);
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  if (i < 0) i += r;
  SEAM_CHECK_MSG(i >= 0 && i < r, "dim ", i, " out of range for rank ", r);
  return shape_[i];
}

int64_t Tensor::row_numel() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape_.size(); ++i) n *= shape_[i];
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_;
}

Tensor Tensor::Rows(int64_t start, int64_t count) const { return Narrow(0, start, count); }

Tensor Tensor::Narrow(int dim, int64_t start, int64_t length) const {
  SEAM_CHECK(defined());
  if (dim < 0) dim += rank();
  SEAM_CHECK_MSG(dim >= 0 && dim < rank(), "narrow: dim ", dim, " out of range for ", DebugString());
  SEAM_CHECK_MSG(start >= 0 && length >= 0 && start + length <= shape_[dim], "narrow: [", start, ", ",
                 start + length, ") out of range for dim ", dim, " of ", DebugString());
  Tensor t = *this;
  t.offset_ += static_cast<size_t>(start * strides_[dim]) * DTypeSize(dtype_);
  t.shape_[dim] = length;
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshape(const Shape& shape) const {
  if (!is_contiguous()) return absl::FailedPreconditionError("reshape of a non-contiguous tensor " + DebugString());
  Shape out = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("reshape: more than one -1 in " + ShapeToString(shape));
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat("reshape: cannot infer ", ShapeToString(shape), " from ", DebugString()));
    }
    out[infer] = numel() / known;
  }
  if (NumElements(out) != numel()) {
    return absl::InvalidArgumentError(absl::StrCat("reshape: ", ShapeToString(shape), " has ", NumElements(out),
                                                   " elements but ", DebugString(), " has ", numel()));
  }
  Tensor t = *this;
  t.shape_ = out;
  t.strides_ = ContiguousStrides(out);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Empty(shape_, dtype_, device());
  SEAM_CHECK_OK(CopyInto(*this, t));
  return t;
}

absl::StatusOr<Tensor> Tensor::On(Device target) const {
  if (device() == target) return *this;
  return To(target);
}

absl::StatusOr<Tensor> Tensor::To(Device target) const {
  // Leaving a GPU: into host staging memory (page-locked when a GPU is visible).
  const bool leaving_gpu = target.is_cpu() && device().is_cuda();
  SEAM_ASSIGN_OR_RETURN(Tensor t, leaving_gpu ? EmptyHostStaging(shape_, dtype_, /*page_locked=*/true)
                                              : TryEmpty(shape_, dtype_, target));
  SEAM_RETURN_IF_ERROR(CopyInto(*this, t));
  return t;
}

namespace {
// Calls fn(flat_index, element_offset) for every element in row-major order.
template <typename Fn>
void ForEachElement(const Shape& shape, const std::vector<int64_t>& strides, Fn fn) {
  const int64_t n = NumElements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    fn(flat, off);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}
}  // namespace

std::vector<float> Tensor::ToFloats() const {
  SEAM_CHECK_MSG(device().is_cpu(), "ToFloats on ", DebugString());
  std::vector<float> out(numel());
  ForEachElement(shape_, strides_, [&](int64_t flat, int64_t off) { out[flat] = LoadAsFloat(raw_data(), dtype_, off); });
  return out;
}

float Tensor::FlatAt(int64_t index) const {
  SEAM_CHECK_MSG(device().is_cpu() && is_contiguous() && index >= 0 && index < numel(), "FlatAt(", index, ") on ",
                 DebugString());
  return LoadAsFloat(raw_data(), dtype_, index);
}

bool Tensor::SameView(const Tensor& other) const {
  return storage_ == other.storage_ && offset_ == other.offset_ && shape_ == other.shape_ &&
         strides_ == other.strides_ && dtype_ == other.dtype_;
}

std::string Tensor::DebugString() const {
  if (!defined()) return "undefined";
  return absl::StrCat(DTypeName(dtype_), ShapeToString(shape_), " ", device().ToString());
}

namespace {

// True when each row (index of dim 0) is one contiguous run of row_numel elements.
bool RowsContiguous(const Tensor& t) {
  if (t.rank() < 1) return false;
  int64_t s = 1;
  for (int i = t.rank() - 1; i >= 1; --i) {
    if (t.shape()[i] != 1 && t.strides()[i] != s) return false;
    s *= t.shape()[i];
  }
  return t.strides()[0] >= s;
}

}  // namespace

absl::Status CopyInto(const Tensor& src, const Tensor& dst) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(src, "copy source"));
  SEAM_RETURN_IF_ERROR(ExpectDefined(dst, "copy destination"));
  if (src.shape() != dst.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("copy: shape ", ShapeToString(src.shape()), " into ",
                                                   ShapeToString(dst.shape())));
  }
  if (src.numel() == 0) return absl::OkStatus();
  const bool both_cpu = src.device().is_cpu() && dst.device().is_cpu();
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    if (both_cpu) {
      std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
      return absl::OkStatus();
    }
    return DeviceCopy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes());
  }
  if (!both_cpu && src.dtype() == dst.dtype() && RowsContiguous(src) && RowsContiguous(dst)) {
    // Views whose rows are contiguous but spaced apart (a column block): one 2-D copy.
    const size_t es = src.element_size();
    return DeviceCopyRows(dst.raw_data(), dst.strides()[0] * es, dst.device(), src.raw_data(), src.strides()[0] * es,
                          src.device(), src.row_numel() * es, src.rows());
  }
  if (!both_cpu) {
    return absl::UnimplementedError(absl::StrCat("copy between ", src.DebugString(), " and ", dst.DebugString(),
                                                 " needs equal dtypes and contiguous tensors"));
  }
  if (src.dtype() == dst.dtype()) {
    const size_t es = src.element_size();
    std::vector<int64_t> src_offsets;
    src_offsets.reserve(src.numel());
    ForEachElement(src.shape(), src.strides(), [&](int64_t, int64_t off) { src_offsets.push_back(off); });
    ForEachElement(dst.shape(), dst.strides(), [&](int64_t flat, int64_t off) {
      std::memcpy(static_cast<char*>(dst.raw_data()) + off * es,
                  static_cast<const char*>(src.raw_data()) + src_offsets[flat] * es, es);
    });
    return absl::OkStatus();
  }
  const std::vector<float> values = src.ToFloats();
  ForEachElement(dst.shape(), dst.strides(),
                 [&](int64_t flat, int64_t off) { StoreFromFloat(dst.raw_data(), dst.dtype(), off, values[flat]); });
  return absl::OkStatus();
}

absl::Status ExpectDefined(const Tensor& t, const char* what) {
  if (t.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": tensor is undefined"));
}

absl::Status ExpectDType(const Tensor& t, DType dtype, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  if (t.dtype() == dtype) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected dtype ", DTypeName(dtype), ", got ", DTypeName(t.dtype())));
}

absl::Status ExpectShape(const Tensor& t, const Shape& shape, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  if (t.shape() == shape) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected shape ", ShapeToString(shape), ", got ", ShapeToString(t.shape())));
}

absl::Status ExpectRank(const Tensor& t, int rank, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  if (t.rank() == rank) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected rank ", rank, ", got shape ", ShapeToString(t.shape())));
}

absl::Status ExpectSameShape(const Tensor& a, const Tensor& b, const char* what_a, const char* what_b) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(a, what_a));
  SEAM_RETURN_IF_ERROR(ExpectDefined(b, what_b));
  if (a.shape() == b.shape()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what_a, " shape ", ShapeToString(a.shape()), " does not match ",
                                                 what_b, " shape ", ShapeToString(b.shape())));
}

absl::Status ExpectDevice(const Tensor& t, Device device, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  if (t.device() == device) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected device ", device.ToString(), ", got ", t.device().ToString()));
}

absl::Status ExpectContiguous(const Tensor& t, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  if (t.is_contiguous()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": expected a contiguous tensor, got a strided view ",
                                                 t.DebugString()));
}

}  // namespace seam
