// Where a tensor's bytes live: host memory or one CUDA device.
#pragma once

#include <string>

namespace seam {

struct Device {
  enum class Kind : unsigned char { kCPU, kCUDA };
  Kind kind = Kind::kCPU;
  int index = 0;  // CUDA ordinal; 0 for CPU

  static Device CPU() { return Device{}; }
  static Device CUDA(int index) { return Device{Kind::kCUDA, index}; }
  bool is_cpu() const { return kind == Kind::kCPU; }
  bool is_cuda() const { return kind == Kind::kCUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  // "cpu" or "cuda:N".
  std::string ToString() const;
};

}  // namespace seam
