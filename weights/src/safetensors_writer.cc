// WriteSafetensors: the layout transformers reads (8-byte little-endian header
// length, JSON header padded with spaces to a multiple of 8, data in order).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/weights/safetensors.h"

namespace seam::weights {
namespace {

absl::StatusOr<const char*> SafetensorsDType(DType dtype, const std::string& name) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    default:
      return absl::UnimplementedError(
          absl::StrCat("safetensors: tensor '", name, "' has dtype ", DTypeName(dtype), ", which seam does not write"));
  }
}

absl::Status WriteError(const std::string& call, const std::string& path) {
  return absl::InternalError(absl::StrCat(call, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const TensorWritten& written) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<Tensor> data;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__" || !names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: bad or repeated tensor name '", name, "'"));
    }
    SEAM_RETURN_IF_ERROR(ExpectDefined(tensor, name.c_str()));
    SEAM_RETURN_IF_ERROR(ExpectDevice(tensor, Device::CPU(), name.c_str()));
    SEAM_ASSIGN_OR_RETURN(const char* dtype, SafetensorsDType(tensor.dtype(), name));
    const uint64_t bytes = tensor.nbytes();
    header[name] = {{"dtype", dtype}, {"shape", tensor.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(tensor.is_contiguous() ? tensor : tensor.Clone());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return WriteError("open", path);
  bool ok = std::fwrite(&header_len, 8, 1, f) == 1 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (size_t i = 0; i < data.size() && ok; ++i) {
    const Tensor& t = data[i];
    if (t.nbytes() > 0) ok = std::fwrite(t.raw_data(), 1, t.nbytes(), f) == t.nbytes();
    if (ok && written) written(tensors[i].first, static_cast<int64_t>(t.nbytes()));
  }
  if (!ok) {
    absl::Status s = WriteError("write", path);
    std::fclose(f);
    return s;
  }
  if (std::fclose(f) != 0) return WriteError("close", path);
  return absl::OkStatus();
}

}  // namespace seam::weights
