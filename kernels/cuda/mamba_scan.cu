// SelectiveScan on CUDA: the choice between the chunked SSD kernel
// (mamba_chunk_scan.cu: prefill) and, here, the exact Mamba2 recurrence,
// sequential in time and parallel over (sequence, head, rows of the head's
// state): decode, and what the chunked kernel does not take. A block of
// kWarps warps takes kRowsPerWarp rows p of one head's [P, N] state each;
// lane l holds entries n = l, l + 32, ... of those rows in registers, so the
// state is read once from the cache, kept on chip over the sequence's tokens,
// and written back once. Per token a warp updates its rows, reduces the four
// rows' state · c over the lanes with six shuffles and lanes 0, 8, 16, 24
// write the four y values; the next
// token's inputs are loaded before the current one is computed. One token
// per sequence (decode) is the same kernel: a read and a write of the state.
//
// Traffic: the inputs (x, dt, B, C) and y once each from DRAM, the state
// twice per sequence; B and C are shared by the H / G heads of a group and
// the P / 16 blocks of a head, which read them from L2. Time is bound by the
// per-token chain (load, exp, shuffles) rather than that traffic at long
// prefills (seam-bench-gpu mamba states the ratio), which the chunked kernel
// is for.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "mamba_chunk_scan.h"
#include "mamba_sequences.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;  // ReduceFourRows sums exactly four
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;

struct ScanParams {
  const void* x;   // [T, H, P], T
  const void* dt;  // [T, H], T
  const void* b;   // [T, G, N], T
  const void* c;   // [T, G, N], T
  const void* dt_bias;  // [H], F
  const void* a;        // [H], F
  const void* d;        // [H], F
  float* state;         // [slots, H, P, N]
  void* out;            // [T, H, P], T
  const int32_t* query_start;
  const int32_t* slots;
  int64_t num_slots;
  int heads, head_dim, groups, n;
  float dt_min, dt_max;
};

// One token's inputs as a lane needs them.
template <int NPL>
struct TokenInputs {
  float dt;
  float b[NPL], c[NPL];
  float x[kRowsPerWarp];
};

template <typename T, int NPL>
__device__ __forceinline__ void LoadToken(const ScanParams& p, int64_t t, int h, int g, int row0, int lane,
                                          TokenInputs<NPL>& in) {
  in.dt = ToFloat(static_cast<const T*>(p.dt)[t * p.heads + h]);
  const T* b = static_cast<const T*>(p.b) + (t * p.groups + g) * p.n;
  const T* c = static_cast<const T*>(p.c) + (t * p.groups + g) * p.n;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int n = lane + 32 * i;
    in.b[i] = n < p.n ? ToFloat(b[n]) : 0.0f;
    in.c[i] = n < p.n ? ToFloat(c[n]) : 0.0f;
  }
  const T* x = static_cast<const T*>(p.x) + (t * p.heads + h) * p.head_dim;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) in.x[r] = row0 + r < p.head_dim ? ToFloat(x[row0 + r]) : 0.0f;
}

// Sums each of four per-lane values over the warp with six shuffles rather
// than four reductions of five: the first two exchanges halve the values a
// lane carries (lanes with bit 4 set keep rows 2-3, with bit 3 set the odd
// row), the last three sum within groups of eight lanes. Lane l returns the
// sum of row l / 8.
__device__ __forceinline__ float ReduceFourRows(const float (&v)[4], int lane) {
  const bool hi = lane & 16, mid = lane & 8;
  const float keep0 = hi ? v[2] : v[0], keep1 = hi ? v[3] : v[1];
  const float send0 = hi ? v[0] : v[2], send1 = hi ? v[1] : v[3];
  const float b0 = keep0 + __shfl_xor_sync(0xffffffffu, send0, 16);  // row (hi ? 2 : 0)
  const float b1 = keep1 + __shfl_xor_sync(0xffffffffu, send1, 16);  // row (hi ? 3 : 1)
  float sum = (mid ? b1 : b0) + __shfl_xor_sync(0xffffffffu, mid ? b0 : b1, 8);
#pragma unroll
  for (int offset = 4; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

// torch.nn.functional.softplus with its default threshold of 20.
__device__ __forceinline__ float Softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

template <typename T, typename F, int NPL>
__global__ void __launch_bounds__(kWarps * 32) ScanKernel(ScanParams p) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int h = blockIdx.y, s = blockIdx.z;
  const int g = h / (p.heads / p.groups);
  const int row0 = blockIdx.x * kRowsPerBlock + warp * kRowsPerWarp;
  const int64_t begin = p.query_start[s], end = p.query_start[s + 1];
  const int slot = UsableSlot(p.slots[s], p.num_slots);
  float* state = slot >= 0 ? p.state + ((static_cast<int64_t>(slot) * p.heads + h) * p.head_dim) * p.n : nullptr;

  float st[kRowsPerWarp][NPL];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int row = row0 + r, n = lane + 32 * i;
      st[r][i] = state != nullptr && row < p.head_dim && n < p.n ? state[static_cast<int64_t>(row) * p.n + n] : 0.0f;
    }
  }
  const float dt_bias = ToFloat(static_cast<const F*>(p.dt_bias)[h]);
  const float a = ToFloat(static_cast<const F*>(p.a)[h]);
  const float d = ToFloat(static_cast<const F*>(p.d)[h]);
  T* out = static_cast<T*>(p.out);

  TokenInputs<NPL> cur;
  if (begin < end) LoadToken<T, NPL>(p, begin, h, g, row0, lane, cur);
  for (int64_t t = begin; t < end; ++t) {
    TokenInputs<NPL> next = cur;
    if (t + 1 < end) LoadToken<T, NPL>(p, t + 1, h, g, row0, lane, next);
    const float step = fminf(fmaxf(Softplus(cur.dt + dt_bias), p.dt_min), p.dt_max);
    const float decay = expf(step * a);
    float acc[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float sx = step * cur.x[r];
      acc[r] = 0.0f;
#pragma unroll
      for (int i = 0; i < NPL; ++i) {
        st[r][i] = decay * st[r][i] + sx * cur.b[i];
        acc[r] += st[r][i] * cur.c[i];
      }
    }
    const int r = lane / 8;  // the row whose sum this lane holds after the reduction
    const float y = ReduceFourRows(acc, lane);
    const float xr = r == 0 ? cur.x[0] : r == 1 ? cur.x[1] : r == 2 ? cur.x[2] : cur.x[3];
    if (lane % 8 == 0 && row0 + r < p.head_dim) {
      out[(t * p.heads + h) * p.head_dim + row0 + r] = FromFloat<T>(y + d * xr);
    }
    cur = next;
  }
  if (state == nullptr) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int row = row0 + r, n = lane + 32 * i;
      if (row < p.head_dim && n < p.n) state[static_cast<int64_t>(row) * p.n + n] = st[r][i];
    }
  }
}

template <typename T, typename F, int NPL>
absl::Status Launch(const ScanParams& p, int64_t seqs, cudaStream_t stream) {
  const dim3 grid((p.head_dim + kRowsPerBlock - 1) / kRowsPerBlock, p.heads, static_cast<unsigned int>(seqs));
  ScanKernel<T, F, NPL><<<grid, kWarps * 32, 0, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

absl::Status SelectiveScan(const SelectiveScanParams& sp) {
  const DType dt = sp.x.dtype();
  for (const auto& [t, name] : {std::make_pair(&sp.dt, "dt"), std::make_pair(&sp.b, "b"),
                                std::make_pair(&sp.c, "c"), std::make_pair(&sp.out, "out")}) {
    if (t->dtype() != dt) {
      return absl::UnimplementedError(absl::StrCat("SelectiveScan: CUDA kernel takes ", name, " in x's dtype ",
                                                   DTypeName(dt), ", got ", DTypeName(t->dtype())));
    }
  }
  if (sp.a.dtype() != sp.dt_bias.dtype() || sp.d.dtype() != sp.dt_bias.dtype()) {
    return absl::UnimplementedError("SelectiveScan: CUDA kernel takes dt_bias, a and d in one dtype");
  }
  const int64_t seqs = sp.seqs.state_slots.dim(0), n = sp.b.dim(2);
  if (seqs == 0) {
    if (sp.x.dim(0) == 0) return absl::OkStatus();
    return absl::InvalidArgumentError("query_start: rows without any sequence");
  }
  if (seqs > 65535 || sp.x.dim(1) > 65535) {
    return absl::UnimplementedError(absl::StrCat("SelectiveScan: CUDA grid takes up to 65535 sequences and heads, got ",
                                                 seqs, " and ", sp.x.dim(1)));
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(sp.x, "SelectiveScan"));
  const bool chunked_takes = ChunkedScanTakes(dt, sp.x.dim(2), n) && sp.dt_bias.dtype() == DType::kF32 &&
                             VecAligned<uint4>(sp.x.raw_data(), 1) && VecAligned<uint4>(sp.b.raw_data(), 1) &&
                             VecAligned<uint4>(sp.c.raw_data(), 1) && VecAligned<uint4>(sp.out.raw_data(), 1);
  ScanAlgorithm algorithm = sp.algorithm;
  if (algorithm == ScanAlgorithm::kAuto) {  // prefill chunked; decode (a token a sequence) sequential
    algorithm = chunked_takes && sp.x.dim(0) > seqs ? ScanAlgorithm::kChunked : ScanAlgorithm::kSequential;
  }
  if (algorithm == ScanAlgorithm::kChunked) {
    if (!chunked_takes) {
      return absl::UnimplementedError(absl::StrCat(
          "SelectiveScan: the chunked CUDA kernel takes bf16 or f16 x with head_dim a multiple of 32, state 64 or "
          "128, f32 dt_bias / a / d and 16-byte aligned x, b, c and out; got ",
          DTypeName(dt), " head_dim ", sp.x.dim(2), ", state ", n, ", dt_bias ", DTypeName(sp.dt_bias.dtype())));
    }
    return ChunkedSelectiveScan(sp, sp.chunk == 0 ? kDefaultScanChunk : sp.chunk);
  }
  if (n > 256) {
    return absl::UnimplementedError(
        absl::StrCat("SelectiveScan: CUDA kernel keeps up to 256 state entries per row, got ", n));
  }
  const ScanParams p{sp.x.raw_data(), sp.dt.raw_data(), sp.b.raw_data(), sp.c.raw_data(), sp.dt_bias.raw_data(),
                     sp.a.raw_data(), sp.d.raw_data(), sp.ssm_state.data<float>(), sp.out.raw_data(),
                     sp.seqs.query_start.data<int32_t>(), sp.seqs.state_slots.data<int32_t>(), sp.ssm_state.dim(0),
                     static_cast<int>(sp.x.dim(1)), static_cast<int>(sp.x.dim(2)), static_cast<int>(sp.b.dim(1)),
                     static_cast<int>(n), sp.dt_min, sp.dt_max};
  const cudaStream_t stream = Stream();
  return DispatchFloat(dt, "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return DispatchSameOrF32<T>(sp.dt_bias.dtype(), "dt_bias", [&](auto ftag) -> absl::Status {
      using F = typename decltype(ftag)::type;
      if (n <= 32) return Launch<T, F, 1>(p, seqs, stream);
      if (n <= 64) return Launch<T, F, 2>(p, seqs, stream);
      if (n <= 128) return Launch<T, F, 4>(p, seqs, stream);
      return Launch<T, F, 8>(p, seqs, stream);
    });
  });
}

}  // namespace seam::kernels::cuda
