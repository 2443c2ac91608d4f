// Prefill attention on tensor cores, FlashAttention-2 style: mma.sync
// m16n8k16 with the accumulators, softmax and probabilities in registers and
// K/V double-buffered by cp.async (bf16 / f16, head_dim 64 or 128;
// prefill_attention.cu chooses it).
#include <cmath>

#include "attention_common.cuh"
#include "mma_fragments.cuh"

namespace seam::kernels::cuda::attn {
namespace {

// Same tiles as PrefillKernel (64 query rows, so FindTile applies), 4 warps
// of 16 rows each. Both products run as mma.sync m16n8k16 with fp32
// accumulators that stay in registers: the scores come out in the layout of
// the P operand of P V, so the online softmax (rows split over the 4 lanes of
// a quad), the rescale of O and the rounding of P to T all happen in
// registers. K/V tiles of 64 keys are gathered through the block table with
// cp.async into two shared-memory buffers, the next tile loading while the
// current one is used. Tiles are taken heaviest first (the last query tiles
// of a sequence see the most keys); key tiles past the query tile's last
// position are never loaded, and only tiles that reach past a warp's first
// row are masked.
constexpr int kFaRows = kTileRows;  // 4 warps x 16 rows
constexpr int kFaKeys = 64;
constexpr int kFaThreads = 128;

template <int kD>
struct FaSmem {
  static constexpr int kLd = kD + 8;  // row stride in elements: conflict-free fragment reads
  static constexpr size_t kTileElems = size_t{kFaKeys} * kLd;
  static constexpr size_t kBytes = 4 * kTileElems * 2;  // two buffers of K and V, 2-byte elements
};

// Grid (ceil(T / kFaRows) + B, Hq); needs 16-byte aligned q and caches.
template <typename T, int kD>
__global__ void __launch_bounds__(kFaThreads, 3) PrefillFaKernel(AttnParams p) {
  using L = FaSmem<kD>;
  constexpr int kLd = L::kLd;
  constexpr int kChunks = kD / 8;       // 16-byte pieces of a row
  constexpr int kKSteps = kD / 16;      // k steps of Q K^T
  constexpr int kOTiles = kD / 8;       // n tiles of O
  constexpr int kSTiles = kFaKeys / 8;  // n tiles of S
  constexpr int kPSteps = kFaKeys / 16;  // k steps of P V
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char fa_smem[];
  T* kv_s = reinterpret_cast<T*>(fa_smem);  // [buffer][K, V][kFaKeys][kLd]
  __shared__ int info[2];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (warp == 0) FindTile(p, static_cast<int>(gridDim.x - 1 - blockIdx.x), &info[0], &info[1]);
  __syncthreads();
  const int b = info[0];
  if (b < 0) return;
  const int q0 = info[1];

  const int h = blockIdx.y, g = h / p.group;
  const SeqView seq = SeqOf(p, b);
  const QueryTile tile = QueryTileOf(seq, q0);
  const int q_begin = seq.q_begin, rows = tile.rows;
  const int first_pos = tile.first_pos, last_pos = tile.last_pos;  // positions of the tile's first and last rows
  const int32_t* table = seq.table;
  const T* q = static_cast<const T*>(p.q);
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  T* out = static_cast<T*>(p.out);

  // This lane's rows w0 + gr and w0 + gr + 8 (rows past the tile's end act
  // as its last row: finite scores, never written).
  const int gr = lane / 4, tq = lane % 4;
  const int w0 = 16 * warp;
  const int r_lo = w0 + gr, r_hi = r_lo + 8;
  const int pos_lo = r_lo < rows ? first_pos + r_lo : last_pos;
  const int pos_hi = r_hi < rows ? first_pos + r_hi : last_pos;
  const int warp_first = first_pos + w0;
  const int warp_last = w0 < rows ? first_pos + (w0 + 15 < rows ? w0 + 15 : rows - 1) : -1;
  const int64_t row_lo = static_cast<int64_t>(q_begin) + q0 + r_lo;
  const int64_t row_hi = row_lo + 8;
  const bool ok_lo = r_lo < rows && row_lo < p.q_rows;
  const bool ok_hi = r_hi < rows && row_hi < p.q_rows;

  // Q fragments, straight from global memory.
  uint32_t qf[kKSteps][4];
  {
    const T* q_lo = q + ((ok_lo ? row_lo : 0) * p.hq + h) * kD + 2 * tq;
    const T* q_hi = q + ((ok_hi ? row_hi : 0) * p.hq + h) * kD + 2 * tq;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      qf[kk][0] = ok_lo ? *reinterpret_cast<const uint32_t*>(q_lo + kk * 16) : 0u;
      qf[kk][1] = ok_hi ? *reinterpret_cast<const uint32_t*>(q_hi + kk * 16) : 0u;
      qf[kk][2] = ok_lo ? *reinterpret_cast<const uint32_t*>(q_lo + kk * 16 + 8) : 0u;
      qf[kk][3] = ok_hi ? *reinterpret_cast<const uint32_t*>(q_hi + kk * 16 + 8) : 0u;
    }
  }

  // Gathers keys k0 .. k0 + 63 into buffer buf; positions past the tile's
  // last one and blocks outside the cache become zero rows.
  auto load_tile = [&](int k0, int buf) {
    T* k_s = kv_s + static_cast<size_t>(buf) * 2 * L::kTileElems;
    T* v_s = k_s + L::kTileElems;
    for (int e = tid; e < kFaKeys * kChunks; e += kFaThreads) {
      const int t = e / kChunks, c = e % kChunks;
      const int pos = k0 + t;
      const int64_t slot = pos <= last_pos ? SlotOf(table, pos, p) : -1;
      const int64_t at = slot >= 0 ? (slot * p.hk + g) * kD + c * 8 : 0;
      CpAsync16(k_s + t * kLd + c * 8, k_cache + at, slot >= 0);
      CpAsync16(v_s + t * kLd + c * 8, v_cache + at, slot >= 0);
    }
  };

  float o[kOTiles][4];
#pragma unroll
  for (int nt = 0; nt < kOTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;  // m in the log2 domain
  const float scale_log2 = p.scale * kLog2e;

  const int tiles = last_pos >= 0 ? last_pos / kFaKeys + 1 : 0;
  if (tiles > 0) load_tile(0, 0);
  CpAsyncCommit();
  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles) load_tile((i + 1) * kFaKeys, (i + 1) & 1);
    CpAsyncCommit();
    CpAsyncWait<1>();  // tile i has landed (for this thread) ...
    __syncthreads();   // ... and for every thread
    const int k0 = i * kFaKeys;
    if (k0 <= warp_last) {
      const T* k_s = kv_s + static_cast<size_t>(i & 1) * 2 * L::kTileElems;
      const T* v_s = k_s + L::kTileElems;

      // S = Q K^T: lane (gr, tq) holds rows gr, gr + 8, keys 8 nt + 2 tq + {0, 1}.
      float s[kSTiles][4];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        if (k0 + nt * 8 > warp_last) continue;  // all in every row's future: masked below
        const T* krow = k_s + (nt * 8 + gr) * kLd + 2 * tq;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kk * 16);
          const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 8);
          Mma16816<T>(s[nt], qf[kk], b0, b1);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) s[nt][j] *= scale_log2;
      }
      if (k0 + kFaKeys - 1 > warp_first) {  // the tile reaches past some row's position
#pragma unroll
        for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int key = k0 + nt * 8 + 2 * tq + j;
            if (key > pos_lo) s[nt][j] = -INFINITY;
            if (key > pos_hi) s[nt][2 + j] = -INFINITY;
          }
        }
      }

      // Online softmax; the 4 lanes of a quad share a row.
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[nt][0], s[nt][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[nt][2], s[nt][3]));
      }
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 1));
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 2));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 1));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 2));
      const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
      const float mu_lo = mn_lo == -INFINITY ? 0.0f : mn_lo;  // only rows that saw nothing yet
      const float mu_hi = mn_hi == -INFINITY ? 0.0f : mn_hi;
      const float alpha_lo = exp2f(m_lo - mu_lo), alpha_hi = exp2f(m_hi - mu_hi);
      m_lo = mn_lo;
      m_hi = mn_hi;
      l_lo *= alpha_lo;
      l_hi *= alpha_hi;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        o[nt][0] *= alpha_lo;
        o[nt][1] *= alpha_lo;
        o[nt][2] *= alpha_hi;
        o[nt][3] *= alpha_hi;
      }
      // P rounded to T (the weights P V uses, so they sum to l exactly), laid
      // out as the A operand of P V.
      uint32_t pf[kPSteps][4];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        const T p0 = FromFloat<T>(exp2f(s[nt][0] - mu_lo));
        const T p1 = FromFloat<T>(exp2f(s[nt][1] - mu_lo));
        const T p2 = FromFloat<T>(exp2f(s[nt][2] - mu_hi));
        const T p3 = FromFloat<T>(exp2f(s[nt][3] - mu_hi));
        l_lo += ToFloat(p0) + ToFloat(p1);
        l_hi += ToFloat(p2) + ToFloat(p3);
        pf[nt / 2][(nt % 2) * 2] = PackPair(p0, p1);
        pf[nt / 2][(nt % 2) * 2 + 1] = PackPair(p2, p3);
      }

      // O += P V; ldmatrix.trans turns V's rows into B fragments of 16 keys
      // by 8 columns, two column tiles per load.
      const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8;
      const int v_col = (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < kPSteps; ++j) {
        if (k0 + j * 16 > warp_last) break;  // P is zero from here on
#pragma unroll
        for (int np = 0; np < kOTiles / 2; ++np) {
          uint32_t vb[4];
          LdMatrixX4Trans(vb, v_s + (j * 16 + v_row) * kLd + np * 16 + v_col);
          Mma16816<T>(o[2 * np], pf[j], vb[0], vb[1]);
          Mma16816<T>(o[2 * np + 1], pf[j], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // buffer i & 1 is refilled for tile i + 2
  }

  l_lo += __shfl_xor_sync(kFullMask, l_lo, 1);
  l_lo += __shfl_xor_sync(kFullMask, l_lo, 2);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 1);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 2);
  const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f;
  const float inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
  if (ok_lo) {
    T* dst = out + (row_lo * p.hq + h) * kD + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      *reinterpret_cast<uint32_t*>(dst + nt * 8) =
          PackPair(FromFloat<T>(o[nt][0] * inv_lo), FromFloat<T>(o[nt][1] * inv_lo));
    }
  }
  if (ok_hi) {
    T* dst = out + (row_hi * p.hq + h) * kD + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      *reinterpret_cast<uint32_t*>(dst + nt * 8) =
          PackPair(FromFloat<T>(o[nt][2] * inv_hi), FromFloat<T>(o[nt][3] * inv_hi));
    }
  }
}

}  // namespace

template <typename T, int kD>
absl::Status LaunchPrefillFa(const AttnParams& p, cudaStream_t stream) {
  auto kernel = PrefillFaKernel<T, kD>;
  constexpr size_t kBytes = FaSmem<kD>::kBytes;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
  const int64_t tiles = (p.q_rows + kFaRows - 1) / kFaRows + p.num_seqs;
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kFaThreads, kBytes, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template absl::Status LaunchPrefillFa<__nv_bfloat16, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__nv_bfloat16, 128>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__half, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__half, 128>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
