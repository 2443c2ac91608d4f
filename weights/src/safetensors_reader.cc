// SafetensorsFile: maps a .safetensors file, validates its JSON header against
// the file size, and hands out zero-copy host views that keep the mapping alive.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/weights/safetensors.h"

namespace seam::weights {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the limit the safetensors library enforces

absl::Status ErrnoError(int err, const std::string& call, const std::string& path) {
  const std::string msg = absl::StrCat(call, " ", path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<DType> ParseSafetensorsDType(const std::string& s, const std::string& tensor,
                                            const std::string& path) {
  if (s == "F32") return DType::kF32;
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  return absl::UnimplementedError(absl::StrCat(path, ": tensor '", tensor, "' has dtype ", s,
                                               ", which seam does not read (F32, BF16, F16, I32, I64)"));
}

// Parses one header entry; offsets are checked against `data_bytes`, the size
// of the data section actually present in the file.
absl::StatusOr<TensorInfo> ParseEntry(const std::string& name, const nlohmann::json& e, uint64_t data_bytes,
                                      const std::string& path) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header entry '", name, "' ", what));
  };
  if (!e.is_object()) return bad("is not an object");
  auto dtype = e.find("dtype");
  auto shape = e.find("shape");
  auto offsets = e.find("data_offsets");
  if (dtype == e.end() || !dtype->is_string()) return bad("has no dtype string");
  if (shape == e.end() || !shape->is_array()) return bad("has no shape list");
  if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return bad("has no data_offsets [begin, end]");
  }
  TensorInfo info;
  info.name = name;
  SEAM_ASSIGN_OR_RETURN(info.dtype, ParseSafetensorsDType(dtype->get<std::string>(), name, path));
  // Dimensions and their byte count bounded: a hostile shape must neither turn
  // negative as an int64 nor wrap its product to the span of its offsets.
  uint64_t nonzero_bytes = DTypeSize(info.dtype);  // element size times every nonzero dimension
  bool empty = false;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) return bad(absl::StrCat("has a bad shape ", shape->dump()));
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && nonzero_bytes > static_cast<uint64_t>(INT64_MAX) / dim) {
      return bad(absl::StrCat("has a shape ", shape->dump(), " of more bytes than fit in 63 bits"));
    }
    if (dim == 0) empty = true;
    nonzero_bytes *= dim == 0 ? 1 : dim;
    info.shape.push_back(static_cast<int64_t>(dim));
  }
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  if (info.begin > info.end) return bad(absl::StrCat("has data_offsets ", offsets->dump(), " that run backwards"));
  if (info.end > data_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": file truncated: tensor '", name, "' ends at data byte ",
                                            info.end, " but the data section holds ", data_bytes, " bytes"));
  }
  const uint64_t want = empty ? 0 : nonzero_bytes;
  if (info.end - info.begin != want) {
    return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "' ", ShapeToString(info.shape), " ",
                                            dtype->get<std::string>(), " needs ", want, " bytes but its data_offsets ",
                                            offsets->dump(), " span ", info.end - info.begin));
  }
  return info;
}

}  // namespace

absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(std::string_view bytes, const std::string& path) {
  const size_t size = bytes.size();
  if (size < 8) {
    return absl::DataLossError(absl::StrCat(path, ": file truncated: ", size,
                                            " bytes, shorter than the 8-byte header length"));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);  // little-endian on every host seam runs on
  if (header_len > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header length ", header_len, " exceeds ",
                                                   kMaxHeaderBytes, " bytes; not a safetensors file"));
  }
  if (8 + header_len > size) {
    return absl::DataLossError(absl::StrCat(path, ": file truncated: header of ", header_len,
                                            " bytes runs past the end of the ", size, "-byte file"));
  }
  SafetensorsLayout layout;
  layout.data_offset = 8 + header_len;
  const char* text = bytes.data() + 8;
  nlohmann::json header = nlohmann::json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header is not a JSON object"));
  }
  const uint64_t data_bytes = size - layout.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    SEAM_ASSIGN_OR_RETURN(TensorInfo info, ParseEntry(name, entry, data_bytes, path));
    layout.tensors.push_back(std::move(info));
  }
  std::sort(layout.tensors.begin(), layout.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
  return layout;
}

absl::StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, "fstat", path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, ": file truncated: ", size,
                                            " bytes, shorter than the 8-byte header length"));
  }
  // Private writable mapping: a caller writing into a view gets its own page,
  // never a fault and never a change to the file.
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int mmap_err = errno;
  if (::close(fd) != 0 && map != MAP_FAILED) {
    const int err = errno;
    ::munmap(map, size);
    return ErrnoError(err, "close", path);
  }
  if (map == MAP_FAILED) return ErrnoError(mmap_err, "mmap", path);

  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = size;
  file->storage_ = Storage::Wrap(map, size, Device::CPU(), [size](void* p) { ::munmap(p, size); });

  SEAM_ASSIGN_OR_RETURN(SafetensorsLayout layout,
                        ParseSafetensorsLayout(std::string_view(static_cast<const char*>(map), size), path));
  file->data_offset_ = layout.data_offset;
  file->tensors_ = std::move(layout.tensors);
  for (size_t i = 0; i < file->tensors_.size(); ++i) file->index_[file->tensors_[i].name] = i;
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;  // views may outlive the file; storage_ unmaps last

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<Tensor> SafetensorsFile::View(const std::string& name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return absl::NotFoundError(absl::StrCat(path_, ": no tensor '", name, "'"));
  const size_t offset = data_offset_ + info->begin;
  Tensor view = Tensor::OnStorage(storage_, offset, info->shape, info->dtype);
  // A layout that leaves a tensor misaligned for its element type (legal in the
  // format) is served as an aligned copy instead of a view.
  if (offset % DTypeSize(info->dtype) != 0) return view.Clone();
  return view;
}

}  // namespace seam::weights
