// The prefill kernel of the fused expert pair (moe_expert_gemm.h): one
// launch of mma.sync tiles over every expert's pairs.
//
// Grid (tile slots, output features / 64): tile slot t < tile_starts[A]
// (A = active[0]) belongs to the active expert s with tile_starts[s] ≤ t <
// tile_starts[s + 1] (a binary search) and covers its pairs at group
// positions [offsets[e] + 64 (t - tile_starts[s]), +64); slots past the
// total return at once (the grid is sized from shapes: ceil(P / 64) +
// min(E, P) bounds the tiles). A block of 4 warps computes 64 pairs × 64
// output features over K in steps of 32, three stages of cp.async in
// flight: the pairs' rows (gate-up: x rows order[i] / G gathered by the
// copy itself; down: the activations in group order) and the weight rows
// (gate-up: the 64 gate rows and the 64 up rows of the same features, so
// each thread ends with g and u of the same outputs). Each warp owns 32
// pairs × 32 features as 2 × 4 m16n8k16 tiles (× 2 for gate and up). The
// epilogue rounds g and u to T, applies silu(g) · u in fp32 (gate-up, into
// the activations in group order) or stores the down projection at pair
// order[i]'s row. Rows past an expert's pairs are zero-filled and not
// stored; K must be a multiple of 8 (whole 16-byte chunks), its tail
// zero-filled.
#include "cuda_common.cuh"
#include "mma_sync.cuh"
#include "moe_expert_gemm.h"
#include "seam/kernels/moe_experts.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBm = static_cast<int>(kExpertTileRows);  // pairs per tile
constexpr int kBn = 64;                                 // output features per block
constexpr int kBk = 32;
constexpr int kLd = kBk + 8;  // shared row stride in elements: conflict-free ldmatrix
constexpr int kStages = 3;
static_assert(kBm == 64, "the warp layout covers 64 rows as 2 x 32");

template <bool kGateUp>
struct Smem {
  static constexpr int kBRows = kGateUp ? 2 * kBn : kBn;
  static constexpr int kAElems = kBm * kLd, kBElems = kBRows * kLd;
  static constexpr int kStageElems = kAElems + kBElems;
};

// The active slot whose tiles hold tile t (tile_starts[0..used] ascending).
__device__ __forceinline__ int SlotOfTile(const int32_t* tile_starts, int used, int t) {
  int lo = 0, hi = used - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_starts[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Where this thread's 16-byte chunks of a stage come from, fixed over K.
template <bool kGateUp>
struct ChunkSources {
  static constexpr int kA = kBm * (kBk / 8) / kThreads;                       // 2
  static constexpr int kB = Smem<kGateUp>::kBRows * (kBk / 8) / kThreads;     // 4 or 2
  const char* a[kA];
  bool a_valid[kA];
  const char* b[kB];
  bool b_valid[kB];
};

template <typename T, bool kGateUp>
__device__ __forceinline__ ChunkSources<kGateUp> Sources(const ExpertGemmArgs& p, int e, int row0, int rows,
                                                         int64_t n0) {
  ChunkSources<kGateUp> s;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row_bytes = p.k * static_cast<int64_t>(sizeof(T));
#pragma unroll
  for (int i = 0; i < s.kA; ++i) {
    const int chunk = tid + i * kThreads, r = chunk / (kBk / 8);
    s.a_valid[i] = r < rows;
    int64_t src = 0;  // a valid row even for padding (nothing is read from it)
    if (s.a_valid[i]) src = kGateUp ? p.order[row0 + r] / p.per_row : row0 + r;
    s.a[i] = static_cast<const char*>(p.x) + src * row_bytes + (chunk % (kBk / 8)) * 16;
  }
  const char* we = static_cast<const char*>(p.w) + static_cast<int64_t>(e) * p.weight_rows * row_bytes;
#pragma unroll
  for (int i = 0; i < s.kB; ++i) {
    const int chunk = tid + i * kThreads, r = chunk / (kBk / 8);
    const int64_t feature = n0 + (r % kBn);
    s.b_valid[i] = feature < p.out_cols;
    const int64_t wrow = s.b_valid[i] ? (r < kBn ? feature : p.out_cols + feature) : 0;  // gate, then up rows
    s.b[i] = we + wrow * row_bytes + (chunk % (kBk / 8)) * 16;
  }
  return s;
}

template <typename T, bool kGateUp>
__device__ __forceinline__ void LoadStage(const ChunkSources<kGateUp>& s, int64_t k0, int64_t k, T* stage) {
  const int tid = static_cast<int>(threadIdx.x);
  T* as = stage;
  T* bs = stage + Smem<kGateUp>::kAElems;
#pragma unroll
  for (int i = 0; i < s.kA; ++i) {
    const int chunk = tid + i * kThreads, r = chunk / (kBk / 8), c = chunk % (kBk / 8);
    const bool valid = s.a_valid[i] && k0 + 8 * c < k;
    mma::CpAsync16(as + r * kLd + 8 * c, valid ? s.a[i] + k0 * int64_t{sizeof(T)} : s.a[i], valid);
  }
#pragma unroll
  for (int i = 0; i < s.kB; ++i) {
    const int chunk = tid + i * kThreads, r = chunk / (kBk / 8), c = chunk % (kBk / 8);
    const bool valid = s.b_valid[i] && k0 + 8 * c < k;
    mma::CpAsync16(bs + r * kLd + 8 * c, valid ? s.b[i] + k0 * int64_t{sizeof(T)} : s.b[i], valid);
  }
}

// acc[h][mt][nt] += this warp's 32 rows × 32 features (h: gate then up) over one stage.
template <typename T, bool kGateUp>
__device__ __forceinline__ void ComputeStage(const T* stage, int wm, int wn, int lane,
                                             float (&acc)[kGateUp ? 2 : 1][2][4][4]) {
  const T* as = stage;
  const T* bs = stage + Smem<kGateUp>::kAElems;
#pragma unroll
  for (int ks = 0; ks < kBk / 16; ++ks) {
    uint32_t a[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) mma::LoadA(a[mt], as, kLd, wm * 32 + mt * 16, ks * 16, lane);
#pragma unroll
    for (int h = 0; h < (kGateUp ? 2 : 1); ++h) {
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t b[4];
        mma::LoadBPairNk(b, bs, kLd, h * kBn + wn * 32 + np * 16, ks * 16, lane);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma::Mma16816<T>(acc[h][mt][2 * np], a[mt], b[0], b[1]);
          mma::Mma16816<T>(acc[h][mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
}

template <typename T, bool kGateUp>
__device__ __forceinline__ void Store(const ExpertGemmArgs& p, int row0, int rows, int64_t n0, int wm, int wn,
                                      int lane, const float (&acc)[kGateUp ? 2 : 1][2][4][4]) {
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * 32 + mt * 16 + lane / 4 + 8 * half;
      if (r >= rows) continue;
      const int64_t out_row = kGateUp ? row0 + r : p.order[row0 + r];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t col = n0 + wn * 32 + nt * 8 + 2 * (lane % 4) + j;
          if (col >= p.out_cols) continue;
          float v = acc[0][mt][nt][2 * half + j];
          if constexpr (kGateUp) {  // ExpertMatmul's rounding of g and u, then SiluAndMul's arithmetic
            const float g = ToFloat(FromFloat<T>(v));
            const float u = ToFloat(FromFloat<T>(acc[kGateUp ? 1 : 0][mt][nt][2 * half + j]));
            v = g / (1.f + expf(-g)) * u;
          }
          out[out_row * p.out_cols + col] = FromFloat<T>(v);
        }
      }
    }
  }
}

template <typename T, bool kGateUp>
__global__ void __launch_bounds__(kThreads) ExpertMmaKernel(ExpertGemmArgs p) {
  using S = Smem<kGateUp>;
  __shared__ __align__(16) unsigned char raw[kStages * S::kStageElems * sizeof(T)];
  T* smem = reinterpret_cast<T*>(raw);
  const int used = p.active[0];
  const int t = static_cast<int>(blockIdx.x);
  if (used == 0 || t >= p.tile_starts[used]) return;  // block-uniform
  const int s = SlotOfTile(p.tile_starts, used, t);
  const int e = p.active[1 + s];
  const int row0 = p.offsets[e] + (t - p.tile_starts[s]) * kBm;
  const int rows = min(kBm, p.offsets[e + 1] - row0);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBn;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int wm = warp / 2, wn = warp % 2;

  const ChunkSources<kGateUp> src = Sources<T, kGateUp>(p, e, row0, rows, n0);
  float acc[kGateUp ? 2 : 1][2][4][4];
#pragma unroll
  for (int h = 0; h < (kGateUp ? 2 : 1); ++h) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[h][mt][nt][i] = 0.0f;
      }
    }
  }
  const int64_t steps = (p.k + kBk - 1) / kBk;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < steps) LoadStage<T, kGateUp>(src, st * kBk, p.k, smem + st * S::kStageElems);
    mma::CpAsyncCommit();  // empty groups keep the count uniform
  }
  for (int64_t kt = 0; kt < steps; ++kt) {
    mma::CpAsyncWait<kStages - 2>();  // step kt's group has landed
    __syncthreads();                  // ... for every thread; and step kt - 1's buffer is free
    const int64_t next = kt + kStages - 1;
    if (next < steps) LoadStage<T, kGateUp>(src, next * kBk, p.k, smem + (next % kStages) * S::kStageElems);
    mma::CpAsyncCommit();
    ComputeStage<T, kGateUp>(smem + (kt % kStages) * S::kStageElems, wm, wn, lane, acc);
  }
  mma::CpAsyncWait<0>();
  Store<T, kGateUp>(p, row0, rows, n0, wm, wn, lane, acc);
}

template <typename T>
absl::Status Launch(const ExpertGemmArgs& a, cudaStream_t stream) {
  const int64_t slots = (a.pairs + kBm - 1) / kBm + std::min(a.experts, a.pairs);
  const int64_t col_tiles = (a.out_cols + kBn - 1) / kBn;
  if (slots > 0x7fffffff || col_tiles > 65535) {
    return absl::UnimplementedError(absl::StrCat("expert GEMM: grid of ", slots, " x ", col_tiles, " blocks"));
  }
  const dim3 grid(static_cast<unsigned int>(slots), static_cast<unsigned int>(col_tiles));
  if (a.gate_up) {
    ExpertMmaKernel<T, true><<<grid, kThreads, 0, stream>>>(a);
  } else {
    ExpertMmaKernel<T, false><<<grid, kThreads, 0, stream>>>(a);
  }
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchExpertMma(DType dtype, const ExpertGemmArgs& a, cudaStream_t stream) {
  switch (dtype) {
    case DType::kBF16:
      return Launch<__nv_bfloat16>(a, stream);
    case DType::kF16:
      return Launch<__half>(a, stream);
    default:
      return absl::UnimplementedError(
          absl::StrCat("the tensor-core expert kernel takes bf16 or f16, got ", DTypeName(dtype)));
  }
}

}  // namespace seam::kernels::cuda
