// Prefill attention on tensor cores through WMMA (bf16 / f16, head_dim 64,
// 128 or 256; prefill_attention.cu chooses it where the mma.sync kernel of
// prefill_attention_mma.cu does not apply).
#include <mma.h>

#include <cmath>

#include "attention_common.cuh"

namespace seam::kernels::cuda::attn {
namespace {

// Same tiling as PrefillKernel, but the two products run as 16x16x16 WMMA
// steps with fp32 accumulation. Each of the 4 warps owns 16 query rows: it
// computes its 16 x 64 scores, runs the online softmax on them (2 lanes per
// row), rounds the probabilities to T for the P V product and keeps its fp32
// output rows in shared memory, where they are rescaled between key tiles
// (the fragment layout is opaque, so the rescale cannot be done in registers).
constexpr int kTcRows = kTileRows;  // 4 warps x 16 rows
constexpr int kTcKeys = 64;
constexpr int kTcThreads = 128;

constexpr size_t AlignUp128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// Shared-memory layout (byte offsets) for head_dim kD. Strides are padded
// against bank conflicts and keep every fragment pointer 32-byte aligned.
template <int kD>
struct TcSmem {
  static constexpr int kLdH = kD + 8;       // q, k, v rows (T)
  static constexpr int kLdS = kTcKeys + 4;  // scores (fp32)
  static constexpr int kLdP = kTcKeys + 8;  // probabilities (T)
  static constexpr int kLdO = kD + 4;       // output accumulators (fp32)
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + AlignUp128(size_t{kTcRows} * kLdH * 2);
  static constexpr size_t kV = kK + AlignUp128(size_t{kTcKeys} * kLdH * 2);
  static constexpr size_t kS = kV + AlignUp128(size_t{kTcKeys} * kLdH * 2);
  static constexpr size_t kP = kS + AlignUp128(size_t{kTcRows} * kLdS * 4);
  static constexpr size_t kO = kP + AlignUp128(size_t{kTcRows} * kLdP * 2);
  static constexpr size_t kM = kO + AlignUp128(size_t{kTcRows} * kLdO * 4);
  static constexpr size_t kL = kM + AlignUp128(size_t{kTcRows} * 4);
  static constexpr size_t kInfo = kL + AlignUp128(size_t{kTcRows} * 4);
  static constexpr size_t kBytes = kInfo + 128;
};

// Grid (ceil(T / kTcRows) + B, Hq); needs 16-byte aligned q and caches.
template <typename T, int kD>
__global__ void __launch_bounds__(kTcThreads) PrefillTcKernel(AttnParams p) {
  namespace wmma = nvcuda::wmma;
  using L = TcSmem<kD>;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kNv = kD / kVec;
  constexpr int kSteps = kD / 16;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  T* q_s = reinterpret_cast<T*>(tc_smem + L::kQ);
  T* k_s = reinterpret_cast<T*>(tc_smem + L::kK);
  T* v_s = reinterpret_cast<T*>(tc_smem + L::kV);
  float* s_s = reinterpret_cast<float*>(tc_smem + L::kS);
  T* p_s = reinterpret_cast<T*>(tc_smem + L::kP);
  float* o_s = reinterpret_cast<float*>(tc_smem + L::kO);
  float* m_s = reinterpret_cast<float*>(tc_smem + L::kM);
  float* l_s = reinterpret_cast<float*>(tc_smem + L::kL);
  int* info = reinterpret_cast<int*>(tc_smem + L::kInfo);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (warp == 0) FindTile(p, static_cast<int>(blockIdx.x), &info[0], &info[1]);
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

  for (int e = tid; e < kTcRows * kNv; e += kTcThreads) {
    const int r = e / kNv, v = e % kNv;
    const int64_t row = static_cast<int64_t>(q_begin) + q0 + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < rows && row < p.q_rows) val = *reinterpret_cast<const uint4*>(q + (row * p.hq + h) * kD + v * kVec);
    *reinterpret_cast<uint4*>(q_s + r * L::kLdH + v * kVec) = val;
  }
  for (int e = tid; e < kTcRows * L::kLdO; e += kTcThreads) o_s[e] = 0.0f;
  if (tid < kTcRows) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  __syncthreads();

  // This warp's rows 16 w .. 16 w + 15; the last position any of them sees
  // (-1 when all are past the tile's end), and each lane's row for the softmax.
  const int w0 = 16 * warp;
  const int warp_last = w0 < rows ? first_pos + (w0 + 15 < rows ? w0 + 15 : rows - 1) : -1;
  const int my_row = w0 + lane / 2, half = lane % 2;
  const int my_pos = my_row < rows ? first_pos + my_row : last_pos;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> q_frag[kSteps];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) wmma::load_matrix_sync(q_frag[kk], q_s + w0 * L::kLdH + kk * 16, L::kLdH);

  for (int k0 = 0; k0 <= last_pos; k0 += kTcKeys) {
    for (int e = tid; e < kTcKeys * kNv; e += kTcThreads) {
      const int t = e / kNv, v = e % kNv;
      const int pos = k0 + t;
      const int64_t slot = pos <= last_pos ? SlotOf(table, pos, p) : -1;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (slot >= 0) {
        const int64_t at = (slot * p.hk + g) * kD + v * kVec;
        kv = *reinterpret_cast<const uint4*>(k_cache + at);
        vv = *reinterpret_cast<const uint4*>(v_cache + at);
      }
      *reinterpret_cast<uint4*>(k_s + t * L::kLdH + v * kVec) = kv;
      *reinterpret_cast<uint4*>(v_s + t * L::kLdH + v * kVec) = vv;
    }
    __syncthreads();

    if (k0 <= warp_last) {
      // Key sub-tiles of 16 with at least one key this warp may see.
      const int subs = (warp_last - k0) / 16 + 1 < kTcKeys / 16 ? (warp_last - k0) / 16 + 1 : kTcKeys / 16;
      float* s_w = s_s + w0 * L::kLdS;
      for (int nt = 0; nt < subs; ++nt) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_frag;
        wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
        for (int kk = 0; kk < kSteps; ++kk) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> k_frag;
          wmma::load_matrix_sync(k_frag, k_s + nt * 16 * L::kLdH + kk * 16, L::kLdH);
          wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
        }
        wmma::store_matrix_sync(s_w + nt * 16, s_frag, L::kLdS, wmma::mem_row_major);
      }
      __syncwarp();

      // Online softmax: lanes 2r and 2r + 1 share row r, taking alternate keys.
      {
        const float* srow = s_s + my_row * L::kLdS;
        T* prow = p_s + my_row * L::kLdP;
        float mx = -INFINITY;
        for (int c = half; c < subs * 16; c += 2) {
          if (k0 + c <= my_pos) mx = fmaxf(mx, srow[c] * p.scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
        const float m_old = m_s[my_row];
        const float m_new = fmaxf(m_old, mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // only for malformed rows
        float sum = 0.0f;
        for (int c = half; c < subs * 16; c += 2) {
          const T pr = FromFloat<T>(k0 + c <= my_pos ? expf(srow[c] * p.scale - m_use) : 0.0f);
          prow[c] = pr;
          sum += ToFloat(pr);  // the weights P V uses, so they sum to l exactly
        }
        sum += __shfl_xor_sync(kFullMask, sum, 1);
        const float alpha = expf(m_old - m_use);
        float* orow = o_s + my_row * L::kLdO;
        for (int c = half; c < kD; c += 2) orow[c] *= alpha;
        __syncwarp();  // both lanes of the row have read m_s
        if (half == 0) {
          l_s[my_row] = l_s[my_row] * alpha + sum;
          m_s[my_row] = m_new;
        }
      }
      __syncwarp();

      // O += P V over the same key sub-tiles.
#pragma unroll
      for (int nt = 0; nt < kSteps; ++nt) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_frag;
        float* o_tile = o_s + w0 * L::kLdO + nt * 16;
        wmma::load_matrix_sync(o_frag, o_tile, L::kLdO, wmma::mem_row_major);
        for (int kk = 0; kk < subs; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> p_frag;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> v_frag;
          wmma::load_matrix_sync(p_frag, p_s + w0 * L::kLdP + kk * 16, L::kLdP);
          wmma::load_matrix_sync(v_frag, v_s + kk * 16 * L::kLdH + nt * 16, L::kLdH);
          wmma::mma_sync(o_frag, p_frag, v_frag, o_frag);
        }
        wmma::store_matrix_sync(o_tile, o_frag, L::kLdO, wmma::mem_row_major);
      }
    }
    __syncthreads();  // k_s, v_s are refilled next
  }

  for (int e = tid; e < kTcRows * kD; e += kTcThreads) {
    const int r = e / kD, c = e % kD;
    const int64_t row = static_cast<int64_t>(q_begin) + q0 + r;
    if (r >= rows || row >= p.q_rows) continue;
    const float l = l_s[r];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    out[(row * p.hq + h) * kD + c] = FromFloat<T>(o_s[r * L::kLdO + c] * inv);
  }
}

}  // namespace

template <typename T, int kD>
absl::Status LaunchPrefillTc(const AttnParams& p, cudaStream_t stream) {
  auto kernel = PrefillTcKernel<T, kD>;
  constexpr size_t kBytes = TcSmem<kD>::kBytes;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
  const int64_t tiles = (p.q_rows + kTcRows - 1) / kTcRows + p.num_seqs;
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kTcThreads, kBytes, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template absl::Status LaunchPrefillTc<__nv_bfloat16, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillTc<__nv_bfloat16, 128>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillTc<__nv_bfloat16, 256>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillTc<__half, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillTc<__half, 128>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillTc<__half, 256>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
