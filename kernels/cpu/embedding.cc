// Embedding lookup on the CPU for one vocab-parallel shard: ids inside
// [vocab_start, vocab_start + V) copy their table row, other ids give zero
// rows (another shard owns them; the shards' outputs are summed).
#include <cstring>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {

absl::Status Embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, const Tensor& out) {
  const int64_t t_rows = ids.dim(0), vocab = table.dim(0), hidden = table.dim(1);
  const int32_t* id = ids.data<int32_t>();
  const bool same_dtype = table.dtype() == out.dtype();
  std::vector<float> row(hidden);
  for (int64_t t = 0; t < t_rows; ++t) {
    const int64_t local = static_cast<int64_t>(id[t]) - vocab_start;
    char* dst = static_cast<char*>(out.raw_data()) + t * hidden * out.element_size();
    if (local < 0 || local >= vocab) {
      std::memset(dst, 0, hidden * out.element_size());
    } else if (same_dtype) {
      std::memcpy(dst, static_cast<const char*>(table.raw_data()) + local * hidden * table.element_size(),
                  hidden * table.element_size());
    } else {
      LoadFloats(table.raw_data(), table.dtype(), local * hidden, hidden, row.data());
      StoreFloats(row.data(), hidden, out.raw_data(), out.dtype(), t * hidden);
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
