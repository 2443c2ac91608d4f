// Checkpoint: config.json plus one safetensors file or the shards named by
// model.safetensors.index.json; whole tensors and TP row/column pieces.
#include "seam/weights/checkpoint.h"

#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::weights {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The distinct shard files named by an index, and the tensor -> file map.
absl::Status ReadIndex(const std::string& path, std::set<std::string>* files,
                       std::map<std::string, std::string>* weight_map) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  auto wm = j.is_object() ? j.find("weight_map") : j.end();
  if (j.is_discarded() || !j.is_object() || wm == j.end() || !wm->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no \"weight_map\" object"));
  }
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map entry '", name, "' is not a file name"));
    }
    files->insert(file.get<std::string>());
    (*weight_map)[name] = file.get<std::string>();
  }
  return absl::OkStatus();
}

Tensor Converted(const Tensor& view, DType dtype) {
  if (view.dtype() == dtype && view.is_contiguous()) return view;
  Tensor out = Tensor::Empty(view.shape(), dtype);
  SEAM_CHECK_OK(CopyInto(view, out));
  return out;
}

absl::Status CheckSplit(const std::string& name, const Shape& shape, int dim, int part, int parts) {
  if (static_cast<int>(shape.size()) <= dim) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' ", ShapeToString(shape),
                                                   " has no dim ", dim, " to split"));
  }
  if (parts < 1 || part < 0 || part >= parts) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': part ", part, " of ", parts,
                                                   " is out of range"));
  }
  if (shape[dim] % parts != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' ", ShapeToString(shape), ": dim ", dim,
                                                   " (", shape[dim], ") does not divide into ", parts, " parts"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& model_dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = model_dir;
  SEAM_ASSIGN_OR_RETURN(ckpt->config_, LoadModelConfig(model_dir));

  const std::string index_path = model_dir + "/model.safetensors.index.json";
  const std::string single_path = model_dir + "/model.safetensors";
  std::set<std::string> names;
  std::map<std::string, std::string> weight_map;
  if (FileExists(index_path)) {
    SEAM_RETURN_IF_ERROR(ReadIndex(index_path, &names, &weight_map));
  } else if (FileExists(single_path)) {
    names.insert("model.safetensors");
  } else {
    return absl::NotFoundError(absl::StrCat("no weights in ", model_dir, ": neither ", single_path, " nor ",
                                            index_path, " exists"));
  }
  for (const std::string& name : names) {
    SEAM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(model_dir + "/" + name));
    for (const TensorInfo& t : file->tensors()) {
      auto [it, inserted] = ckpt->where_.emplace(t.name, ckpt->files_.size());
      if (!inserted) {
        return absl::DataLossError(absl::StrCat("tensor '", t.name, "' appears in both ",
                                                ckpt->files_[it->second]->path(), " and ", file->path()));
      }
    }
    ckpt->files_.push_back(std::move(file));
  }
  for (const auto& [tensor, file] : weight_map) {
    auto it = ckpt->where_.find(tensor);
    if (it == ckpt->where_.end() || ckpt->files_[it->second]->path() != model_dir + "/" + file) {
      return absl::DataLossError(absl::StrCat(index_path, " places tensor '", tensor, "' in ", file,
                                              ", which does not hold it"));
    }
  }
  return ckpt;
}

bool Checkpoint::Has(const std::string& name) const { return where_.count(name) != 0; }

std::string Checkpoint::ShardOf(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return "";
  const std::string& path = files_[it->second]->path();
  return path.substr(path.rfind('/') + 1);
}

absl::StatusOr<Tensor> Checkpoint::Find(const std::string& name, const Shape& expected_shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found in checkpoint ", dir_));
  }
  SEAM_ASSIGN_OR_RETURN(Tensor view, files_[it->second]->View(name));
  if (view.shape() != expected_shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' in ", dir_, ": expected shape ",
                                                   ShapeToString(expected_shape), " from the config, got ",
                                                   ShapeToString(view.shape())));
  }
  return view;
}

absl::StatusOr<Tensor> Checkpoint::Load(const std::string& name, const Shape& expected_shape, DType dtype) const {
  SEAM_ASSIGN_OR_RETURN(Tensor view, Find(name, expected_shape));
  return Converted(view, dtype);
}

absl::StatusOr<Tensor> Checkpoint::LoadRows(const std::string& name, const Shape& expected_shape, int part,
                                            int parts, DType dtype) const {
  SEAM_RETURN_IF_ERROR(CheckSplit(name, expected_shape, 0, part, parts));
  SEAM_ASSIGN_OR_RETURN(Tensor view, Find(name, expected_shape));
  const int64_t n = expected_shape[0] / parts;
  return Converted(view.Rows(part * n, n), dtype);
}

absl::StatusOr<Tensor> Checkpoint::LoadCols(const std::string& name, const Shape& expected_shape, int part,
                                            int parts, DType dtype) const {
  SEAM_RETURN_IF_ERROR(CheckSplit(name, expected_shape, 1, part, parts));
  SEAM_ASSIGN_OR_RETURN(Tensor view, Find(name, expected_shape));
  const int64_t n = expected_shape[1] / parts;
  return Converted(view.Narrow(1, part * n, n), dtype);
}

}  // namespace seam::weights
