// SelectiveScan's chunked SSD form on tensor cores (ScanAlgorithm::kChunked):
// Mamba2's state-space dual, one block per (32 rows of a head, head,
// sequence) walking the sequence's chunks of L tokens in order with the
// block's [32, N] slice of the state in registers (fp32), read once at the
// start and written once at the end.
//
// Per chunk, with dt' the clamped softplus step, dA = dt' · a and A its
// inclusive running sum over the chunk (A[L - 1]: the whole chunk's decay):
//   M[t][s] = (C_t · B_s) · exp(A[t] - A[s]) · dt'_s   for s ≤ t, else 0
//   y_t     = Σ_s M[t][s] x_s + exp(A[t]) · C_t · hᵀ + D · x_t
//   h      ← exp(A[L - 1]) · h + Σ_s (exp(A[L - 1] - A[s]) · dt'_s · x_s) ⊗ B_s
// (h: the state entering the chunk), which unrolls the recurrence exactly.
// The three products C·Bᵀ, M·x (+ C·hᵀ) and (x·w)ᵀ·B run as mma.sync
// m16n8k16 with fp32 accumulators; M, h and x·w are rounded to T to enter
// them (as Mamba2's kernels do; the state itself stays fp32). Rows past the
// sequence's end are zero-filled with dt' = 0, so they add nothing and decay
// nothing. x, B and C of the next chunk are copied (cp.async) and its dt
// loaded while the current one computes.
//
// Block: 4 warps. Each product is tiled over the warps by rows first
// (WarpTiles). Shared memory, T elements with rows padded by 8 (16 bytes)
// so fragment loads hit distinct banks: two buffers of x [L][32], B and C
// [L][N]; M [L][L]; x·w [L][32]; h [32][N]; then A, dt', w and exp(A) in
// fp32. L = 64, N = 128: 101 KiB, two blocks an SM.
#include "cuda_common.cuh"
#include "mamba_chunk_scan.h"
#include "mamba_sequences.cuh"
#include "mma_sync.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kPb = 32;  // rows of a head's state (P) per block

template <int kL, int kN>
struct Layout {
  static constexpr int kLdP = kPb + 8, kLdN = kN + 8, kLdL = kL + 8;
  static constexpr int kX = 0;                   // [kL][kLdP]
  static constexpr int kB = kX + kL * kLdP;       // [kL][kLdN]
  static constexpr int kC = kB + kL * kLdN;       // [kL][kLdN]
  static constexpr int kBuffer = kC + kL * kLdN;  // one chunk's x, B, C
  static constexpr int kM = 2 * kBuffer;          // [kL][kLdL]
  static constexpr int kXw = kM + kL * kLdL;      // [kL][kLdP]
  static constexpr int kH = kXw + kL * kLdP;      // [kPb][kLdN]
  static constexpr int kElems = kH + kPb * kLdN;
  static constexpr size_t Bytes(size_t elem) { return kElems * elem + 4 * kL * sizeof(float); }
  static_assert((kL * kLdP * 2) % 16 == 0 && (kL * kLdN * 2) % 16 == 0 && (kL * kLdL * 2) % 16 == 0 &&
                    (kPb * kLdN * 2) % 16 == 0,
                "every region starts 16-byte aligned");
};

// A product of kRows × kCols over the block's warps: rows split first.
template <int kRows, int kCols>
struct WarpTiles {
  static constexpr int kWm = kRows / 16 >= kWarps ? kWarps : kRows / 16;
  static constexpr int kWn = kWarps / kWm;
  static constexpr int kMt = kRows / 16 / kWm;
  static constexpr int kNt = kCols / 8 / kWn;
  static_assert(kMt >= 1 && kNt >= 2 && kNt % 2 == 0 && kWm * kMt * 16 == kRows && kWn * kNt * 8 == kCols,
                "the warps tile the product in m16 x (2 n8) pieces");
  __device__ static int Row0(int warp) { return (warp / kWn) * kMt * 16; }
  __device__ static int Col0(int warp) { return (warp % kWn) * kNt * 8; }
  // The (row, column) of accumulator i of tile (mt, nt).
  __device__ static int Row(int warp, int lane, int mt, int i) { return Row0(warp) + 16 * mt + lane / 4 + 8 * (i / 2); }
  __device__ static int Col(int warp, int lane, int nt, int i) { return Col0(warp) + 8 * nt + 2 * (lane % 4) + i % 2; }
};

// acc += A · B over kKSteps k16 steps for the warp's tiles at (m0, n0). A is
// [m][k] in shared memory, or [k][m] (kATrans); B is [n][k], or [k][n] (kBKn).
template <typename T, int kMt, int kNt, int kKSteps, bool kATrans, bool kBKn>
__device__ __forceinline__ void WarpMma(float (&acc)[kMt][kNt][4], const T* a, int lda, int m0, const T* b, int ldb,
                                        int n0, int lane) {
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    uint32_t af[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      if constexpr (kATrans) {
        mma::LoadATrans(af[mt], a, lda, m0 + 16 * mt, 16 * ks, lane);
      } else {
        mma::LoadA(af[mt], a, lda, m0 + 16 * mt, 16 * ks, lane);
      }
    }
#pragma unroll
    for (int np = 0; np < kNt / 2; ++np) {
      uint32_t bf[4];
      if constexpr (kBKn) {
        mma::LoadBPairKn(bf, b, ldb, n0 + 16 * np, 16 * ks, lane);
      } else {
        mma::LoadBPairNk(bf, b, ldb, n0 + 16 * np, 16 * ks, lane);
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        mma::Mma16816<T>(acc[mt][2 * np], af[mt], bf[0], bf[1]);
        mma::Mma16816<T>(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
      }
    }
  }
}

template <int kMt, int kNt>
__device__ __forceinline__ void Zero(float (&acc)[kMt][kNt][4]) {
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }
}

struct ChunkScanParams {
  const void* x;   // [T, H, P]
  const void* dt;  // [T, H]
  const void* b;   // [T, G, N]
  const void* c;   // [T, G, N]
  const float* dt_bias;
  const float* a;
  const float* d;
  float* state;  // [slots, H, P, N]
  void* out;     // [T, H, P]
  const int32_t* query_start;
  const int32_t* slots;
  int64_t num_slots;
  int heads, head_dim, groups;
  float dt_min, dt_max;
};

// torch.nn.functional.softplus with its default threshold of 20 (as the sequential kernel).
__device__ __forceinline__ float Softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

// x [L][32], B and C [L][N] of the chunk at row r0 into one buffer; rows at
// or past `end` zero-filled (their copies read the sequence's first row).
template <typename T, int kL, int kN>
__device__ __forceinline__ void LoadChunk(const ChunkScanParams& p, int64_t begin, int64_t end, int64_t r0, int h,
                                          int g, int p0, T* buffer) {
  using Lay = Layout<kL, kN>;
  constexpr int kXPer = kPb / 8, kNPer = kN / 8;
  const int tid = static_cast<int>(threadIdx.x);
  const T* x = static_cast<const T*>(p.x);
  const T* b = static_cast<const T*>(p.b);
  const T* c = static_cast<const T*>(p.c);
  for (int i = tid; i < kL * kXPer; i += kThreads) {
    const int r = i / kXPer, v = i % kXPer;
    const bool valid = r0 + r < end;
    const int64_t row = valid ? r0 + r : begin;
    mma::CpAsync16(buffer + Lay::kX + r * Lay::kLdP + 8 * v,
                   x + (row * p.heads + h) * p.head_dim + p0 + 8 * v, valid);
  }
  for (int i = tid; i < kL * kNPer; i += kThreads) {
    const int r = i / kNPer, v = i % kNPer;
    const bool valid = r0 + r < end;
    const int64_t at = ((valid ? r0 + r : begin) * p.groups + g) * kN + 8 * v;
    mma::CpAsync16(buffer + Lay::kB + r * Lay::kLdN + 8 * v, b + at, valid);
    mma::CpAsync16(buffer + Lay::kC + r * Lay::kLdN + 8 * v, c + at, valid);
  }
}

// Warp 0: A ← the inclusive running sum of dA (in s_acum), w[s] = exp(A[L-1]
// - A[s]) · dt'_s and exp(A[t]).
template <int kL>
__device__ __forceinline__ void ChunkCumsum(float* s_acum, const float* s_dtp, float* s_w, float* s_ea, int lane) {
  constexpr int kPer = kL / 32;
  float v[kPer];
  float run = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    run += s_acum[lane * kPer + j];
    v[j] = run;
  }
  float incl = run;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  const float before = incl - run;
  const float last = __shfl_sync(0xffffffffu, incl, 31);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = lane * kPer + j;
    const float acum = before + v[j];
    s_acum[i] = acum;
    s_w[i] = expf(last - acum) * s_dtp[i];
    s_ea[i] = expf(acum);
  }
}

// M = (C Bᵀ masked and decayed) into shared memory as T.
template <typename T, int kL, int kN>
__device__ __forceinline__ void MaskedScores(const T* cs, const T* bs, const float* s_acum, const float* s_dtp, T* ms,
                                             int warp, int lane) {
  using Lay = Layout<kL, kN>;
  using S = WarpTiles<kL, kL>;
  float acc[S::kMt][S::kNt][4];
  Zero(acc);
  WarpMma<T, S::kMt, S::kNt, kN / 16, false, false>(acc, cs, Lay::kLdN, S::Row0(warp), bs, Lay::kLdN, S::Col0(warp),
                                                     lane);
#pragma unroll
  for (int mt = 0; mt < S::kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < S::kNt; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int t = S::Row(warp, lane, mt, 2 * half), s = S::Col(warp, lane, nt, 0);
        float m[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          m[j] = s + j <= t ? acc[mt][nt][2 * half + j] * expf(s_acum[t] - s_acum[s + j]) * s_dtp[s + j] : 0.0f;
        }
        *reinterpret_cast<uint32_t*>(ms + t * Lay::kLdL + s) = mma::PackPair<T>(m[0], m[1]);
      }
    }
  }
}

// x · w (each row s scaled by w[s]) into shared memory as T.
template <typename T, int kL, int kN>
__device__ __forceinline__ void DecayedX(const T* xs, const float* s_w, T* xw) {
  using Lay = Layout<kL, kN>;
  for (int i = static_cast<int>(threadIdx.x); i < kL * kPb; i += kThreads) {
    const int s = i / kPb, col = i % kPb;
    xw[s * Lay::kLdP + col] = FromFloat<T>(ToFloat(xs[s * Lay::kLdP + col]) * s_w[s]);
  }
}

// y = M x + exp(A) · C hᵀ + D x for the chunk's rows before `end`.
template <typename T, int kL, int kN>
__device__ __forceinline__ void ChunkOutputs(const ChunkScanParams& p, const T* ms, const T* xs, const T* cs,
                                             const T* hs, const float* s_ea, float d, int64_t r0, int64_t end, int h,
                                             int p0, int warp, int lane) {
  using Lay = Layout<kL, kN>;
  using Y = WarpTiles<kL, kPb>;
  float y[Y::kMt][Y::kNt][4], ys[Y::kMt][Y::kNt][4];
  Zero(y);
  Zero(ys);
  WarpMma<T, Y::kMt, Y::kNt, kL / 16, false, true>(y, ms, Lay::kLdL, Y::Row0(warp), xs, Lay::kLdP, Y::Col0(warp),
                                                    lane);
  WarpMma<T, Y::kMt, Y::kNt, kN / 16, false, false>(ys, cs, Lay::kLdN, Y::Row0(warp), hs, Lay::kLdN, Y::Col0(warp),
                                                     lane);
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int mt = 0; mt < Y::kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Y::kNt; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int t = Y::Row(warp, lane, mt, 2 * half), col = Y::Col(warp, lane, nt, 0);
        if (r0 + t >= end) continue;
        float v[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          v[j] = y[mt][nt][2 * half + j] + s_ea[t] * ys[mt][nt][2 * half + j] +
                 d * ToFloat(xs[t * Lay::kLdP + col + j]);
        }
        T* dst = out + ((r0 + t) * p.heads + h) * p.head_dim + p0 + col;
        *reinterpret_cast<uint32_t*>(dst) = mma::PackPair<T>(v[0], v[1]);
      }
    }
  }
}

// The block's state slice [32][N] (registers, H's tiles) rounded to T into shared memory.
template <typename T, int kN, int kMt, int kNt>
__device__ __forceinline__ void StoreState(const float (&hacc)[kMt][kNt][4], T* hs, int warp, int lane) {
  using H = WarpTiles<kPb, kN>;
  constexpr int kLd = kN + 8;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = H::Row(warp, lane, mt, 2 * half), col = H::Col(warp, lane, nt, 0);
        *reinterpret_cast<uint32_t*>(hs + row * kLd + col) =
            mma::PackPair<T>(hacc[mt][nt][2 * half], hacc[mt][nt][2 * half + 1]);
      }
    }
  }
}

template <typename T, int kL, int kN>
__global__ void __launch_bounds__(kThreads) ChunkScanKernel(ChunkScanParams p) {
  using Lay = Layout<kL, kN>;
  using H = WarpTiles<kPb, kN>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sm = reinterpret_cast<T*>(smem_raw);
  float* s_acum = reinterpret_cast<float*>(smem_raw + Lay::kElems * sizeof(T));
  float* s_dtp = s_acum + kL;
  float* s_w = s_dtp + kL;
  float* s_ea = s_w + kL;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int p0 = static_cast<int>(blockIdx.x) * kPb, h = static_cast<int>(blockIdx.y);
  const int seq = static_cast<int>(blockIdx.z);
  const int g = h / (p.heads / p.groups);
  const int64_t begin = p.query_start[seq], end = p.query_start[seq + 1];
  if (begin >= end) return;  // no tokens: the state stays as it is (block-uniform)
  const int slot = UsableSlot(p.slots[seq], p.num_slots);
  float* state = slot >= 0 ? p.state + ((static_cast<int64_t>(slot) * p.heads + h) * p.head_dim + p0) * kN : nullptr;
  const float dt_bias = p.dt_bias[h], a = p.a[h], d = p.d[h];
  const T* dt = static_cast<const T*>(p.dt);
  T* hs = sm + Lay::kH;

  float hacc[H::kMt][H::kNt][4];
#pragma unroll
  for (int mt = 0; mt < H::kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < H::kNt; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = H::Row(warp, lane, mt, 2 * half), col = H::Col(warp, lane, nt, 0);
        const float2 v = state != nullptr ? *reinterpret_cast<const float2*>(state + row * kN + col) : float2{0, 0};
        hacc[mt][nt][2 * half] = v.x;
        hacc[mt][nt][2 * half + 1] = v.y;
      }
    }
  }
  StoreState<T, kN>(hacc, hs, warp, lane);

  const int64_t chunks = (end - begin + kL - 1) / kL;
  LoadChunk<T, kL, kN>(p, begin, end, begin, h, g, p0, sm);
  mma::CpAsyncCommit();
  float dt_next = tid < kL && begin + tid < end ? ToFloat(dt[(begin + tid) * p.heads + h]) : 0.0f;
  for (int64_t ci = 0; ci < chunks; ++ci) {
    const int64_t r0 = begin + ci * kL;
    const float dt_cur = dt_next;
    if (ci + 1 < chunks) {
      LoadChunk<T, kL, kN>(p, begin, end, r0 + kL, h, g, p0, sm + ((ci + 1) & 1) * Lay::kBuffer);
      if (tid < kL && r0 + kL + tid < end) dt_next = ToFloat(dt[(r0 + kL + tid) * p.heads + h]);
    }
    mma::CpAsyncCommit();  // an empty group past the last chunk keeps the count
    if (tid < kL) {
      const float step =
          r0 + tid < end ? fminf(fmaxf(Softplus(dt_cur + dt_bias), p.dt_min), p.dt_max) : 0.0f;  // padding: no step
      s_dtp[tid] = step;
      s_acum[tid] = step * a;
    }
    __syncthreads();
    if (warp == 0) ChunkCumsum<kL>(s_acum, s_dtp, s_w, s_ea, lane);
    mma::CpAsyncWait<1>();  // this chunk's copies have landed
    __syncthreads();        // ... for every thread, and A, w, exp(A) are written
    const T* buffer = sm + (ci & 1) * Lay::kBuffer;
    const T* xs = buffer + Lay::kX;
    const T* bs = buffer + Lay::kB;
    const T* cs = buffer + Lay::kC;
    MaskedScores<T, kL, kN>(cs, bs, s_acum, s_dtp, sm + Lay::kM, warp, lane);
    DecayedX<T, kL, kN>(xs, s_w, sm + Lay::kXw);
    __syncthreads();  // M and x·w written
    ChunkOutputs<T, kL, kN>(p, sm + Lay::kM, xs, cs, hs, s_ea, d, r0, end, h, p0, warp, lane);
    const float decay = expf(s_acum[kL - 1]);
#pragma unroll
    for (int mt = 0; mt < H::kMt; ++mt) {
#pragma unroll
      for (int nt = 0; nt < H::kNt; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) hacc[mt][nt][i] *= decay;
      }
    }
    WarpMma<T, H::kMt, H::kNt, kL / 16, true, true>(hacc, sm + Lay::kXw, Lay::kLdP, H::Row0(warp), bs, Lay::kLdN,
                                                    H::Col0(warp), lane);
    __syncthreads();  // every read of h (T), M, x·w and this buffer is done
    StoreState<T, kN>(hacc, hs, warp, lane);
  }
  mma::CpAsyncWait<0>();
  if (state == nullptr) return;
#pragma unroll
  for (int mt = 0; mt < H::kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < H::kNt; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = H::Row(warp, lane, mt, 2 * half), col = H::Col(warp, lane, nt, 0);
        *reinterpret_cast<float2*>(state + row * kN + col) = float2{hacc[mt][nt][2 * half], hacc[mt][nt][2 * half + 1]};
      }
    }
  }
}

template <typename T, int kL, int kN>
absl::Status Launch(const ChunkScanParams& p, int64_t seqs, cudaStream_t stream) {
  const size_t bytes = Layout<kL, kN>::Bytes(sizeof(T));
  SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(ChunkScanKernel<T, kL, kN>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned int>(p.head_dim / kPb), static_cast<unsigned int>(p.heads),
                  static_cast<unsigned int>(seqs));
  ChunkScanKernel<T, kL, kN><<<grid, kThreads, bytes, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <typename T>
absl::Status LaunchFor(const ChunkScanParams& p, int64_t seqs, int64_t n, int64_t chunk, cudaStream_t stream) {
  if (chunk == 32) return n == 64 ? Launch<T, 32, 64>(p, seqs, stream) : Launch<T, 32, 128>(p, seqs, stream);
  return n == 64 ? Launch<T, 64, 64>(p, seqs, stream) : Launch<T, 64, 128>(p, seqs, stream);
}

}  // namespace

absl::Status ChunkedSelectiveScan(const SelectiveScanParams& sp, int64_t chunk) {
  const int64_t seqs = sp.seqs.state_slots.dim(0), n = sp.b.dim(2);
  const ChunkScanParams p{sp.x.raw_data(), sp.dt.raw_data(), sp.b.raw_data(), sp.c.raw_data(), sp.dt_bias.data<float>(),
                          sp.a.data<float>(), sp.d.data<float>(), sp.ssm_state.data<float>(), sp.out.raw_data(),
                          sp.seqs.query_start.data<int32_t>(), sp.seqs.state_slots.data<int32_t>(),
                          sp.ssm_state.dim(0), static_cast<int>(sp.x.dim(1)), static_cast<int>(sp.x.dim(2)),
                          static_cast<int>(sp.b.dim(1)), sp.dt_min, sp.dt_max};
  const cudaStream_t stream = Stream();
  if (sp.x.dtype() == DType::kBF16) return LaunchFor<__nv_bfloat16>(p, seqs, n, chunk, stream);
  return LaunchFor<__half>(p, seqs, n, chunk, stream);
}

}  // namespace seam::kernels::cuda
