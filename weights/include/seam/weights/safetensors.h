// Safetensors files: a memory-mapped reader (tensors are zero-copy host views
// that keep the mapping alive) and a writer producing the exact layout
// Hugging Face writes (8-byte little-endian header length, JSON header with
// "__metadata__": {"format": "pt"}, data in header order).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"

namespace seam::weights {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

// Where the tensors of a safetensors file lie.
struct SafetensorsLayout {
  uint64_t data_offset = 0;         // 8 + header length: where the data section starts
  std::vector<TensorInfo> tensors;  // by ascending begin
};

// Parses the header of a whole safetensors file held in `bytes` and checks
// every entry against the data section that follows it; `path` names the file
// in messages. The same errors as SafetensorsFile::Open, but for NOT_FOUND.
absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(std::string_view bytes, const std::string& path);

class SafetensorsFile {
 public:
  // DATA_LOSS for a truncated file or a header whose offsets run past the end;
  // INVALID_ARGUMENT for a malformed header; UNIMPLEMENTED naming an
  // unsupported dtype (e.g. "F64"); NOT_FOUND for a missing file.
  static absl::StatusOr<std::shared_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* Find(const std::string& name) const;
  // Host view of a tensor (no copy); the view keeps the file mapped.
  absl::StatusOr<Tensor> View(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  size_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
  std::shared_ptr<Storage> storage_;     // wraps the mapping; unmaps when the last view drops
};

// Writes `tensors` (host, contiguous; f32/bf16/f16/i32/i64) in the given order.
// `written`, when set, is called after each tensor's bytes are written, with
// its name and byte count (to show progress).
using TensorWritten = std::function<void(const std::string& name, int64_t bytes)>;
absl::Status WriteSafetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const TensorWritten& written = nullptr);

}  // namespace seam::weights
