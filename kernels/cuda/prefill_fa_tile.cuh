// One warp's step of the FlashAttention-2 style prefill kernel
// (prefill_attention_mma.cu; internal to kernels/cuda): 16 query rows of one
// head against a 64-key K/V tile in shared memory, with mma.sync m16n8k16
// and fp32 accumulators in registers. Lane (gr, tq) = (lane / 4, lane % 4)
// holds rows gr and gr + 8 of the warp: scores s[nt] for keys 8 nt + 2 tq +
// {0, 1}, outputs o[nt] for columns 8 nt + 2 tq + {0, 1}; the 4 lanes of a
// quad share a row. Tiles are row-major [key][kLd] of T (bf16 / f16), rows
// 16-byte aligned, kLd = kD + 8 so that ldmatrix rows fall in distinct banks.
#pragma once

#include <cmath>
#include <cstdint>

#include "attention_common.cuh"
#include "mma_fragments.cuh"

namespace seam::kernels::cuda::attn {

constexpr int kFaKeys = 64;  // keys per K/V tile
constexpr float kFaLog2e = 1.4426950408889634f;

// A warp's running softmax: the unnormalised outputs, and per row (lo: gr,
// hi: gr + 8) the max of the scaled scores in the log2 domain and the sum of
// the rounded probabilities (this lane's share until FaFinishSums).
template <int kD>
struct FaRows {
  float o[kD / 8][4];
  float m_lo, m_hi, l_lo, l_hi;
};

template <int kD>
__device__ __forceinline__ void FaInit(FaRows<kD>& r) {
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt) r.o[nt][0] = r.o[nt][1] = r.o[nt][2] = r.o[nt][3] = 0.0f;
  r.m_lo = r.m_hi = -INFINITY;
  r.l_lo = r.l_hi = 0.0f;
}

// The A fragments of Q (rows row_lo, row_hi of head h; zeros where !ok),
// straight from global memory.
template <typename T, int kD>
__device__ __forceinline__ void FaLoadQ(uint32_t (&qf)[kD / 16][4], const T* q, int hq, int h, int64_t row_lo,
                                        int64_t row_hi, bool ok_lo, bool ok_hi, int tq) {
  const T* q_lo = q + ((ok_lo ? row_lo : 0) * hq + h) * kD + 2 * tq;
  const T* q_hi = q + ((ok_hi ? row_hi : 0) * hq + h) * kD + 2 * tq;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    qf[kk][0] = ok_lo ? *reinterpret_cast<const uint32_t*>(q_lo + kk * 16) : 0u;
    qf[kk][1] = ok_hi ? *reinterpret_cast<const uint32_t*>(q_hi + kk * 16) : 0u;
    qf[kk][2] = ok_lo ? *reinterpret_cast<const uint32_t*>(q_lo + kk * 16 + 8) : 0u;
    qf[kk][3] = ok_hi ? *reinterpret_cast<const uint32_t*>(q_hi + kk * 16 + 8) : 0u;
  }
}

// S = Q K^T for the tile at key k0, scaled to the log2 domain; keys past the
// warp's last position are left for the mask (pairs of n tiles wholly past
// it are not computed). One ldmatrix.x4 of K gives the B fragments of two
// n tiles (16 keys) for one k step. Q's A fragments come from registers
// (qf), or with kQs from shared memory at each k step (q_s: the warp's 16
// rows, row stride kD + 8): 32 registers fewer at kD 128, one ldmatrix more
// per 8 mma. Each score sums its k steps in order either way.
template <typename T, int kD, bool kQs>
__device__ __forceinline__ void FaScores(float (&s)[kFaKeys / 8][4], const uint32_t (&qf)[kQs ? 1 : kD / 16][4],
                                         const T* q_s, const T* k_s, int k0, int warp_last, float scale_log2,
                                         int lane) {
  constexpr int kLd = kD + 8;
  const int row = (lane % 8) + (lane / 16) * 8, col = ((lane / 8) % 2) * 8;
#pragma unroll
  for (int nt = 0; nt < kFaKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t qa[4];
    if constexpr (kQs) {
      mma::LoadA(qa, q_s, kLd, 0, kk * 16, lane);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) qa[j] = qf[kk][j];
    }
#pragma unroll
    for (int np = 0; np < kFaKeys / 16; ++np) {
      if (k0 + np * 16 > warp_last) break;  // all in every row's future: masked later
      uint32_t kb[4];
      LdMatrixX4(kb, k_s + (np * 16 + row) * kLd + col + kk * 16);
      Mma16816<T>(s[2 * np], qa, kb[0], kb[1]);
      Mma16816<T>(s[2 * np + 1], qa, kb[2], kb[3]);
    }
  }
#pragma unroll
  for (int nt = 0; nt < kFaKeys / 8; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) s[nt][j] *= scale_log2;
  }
}

// Causal mask: keys past a row's position score -inf.
__device__ __forceinline__ void FaMask(float (&s)[kFaKeys / 8][4], int k0, int pos_lo, int pos_hi, int tq) {
#pragma unroll
  for (int nt = 0; nt < kFaKeys / 8; ++nt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int key = k0 + nt * 8 + 2 * tq + j;
      if (key > pos_lo) s[nt][j] = -INFINITY;
      if (key > pos_hi) s[nt][2 + j] = -INFINITY;
    }
  }
}

// Online softmax of one tile's scores: new row maxima (over the quad), O
// and l rescaled, and P rounded to T (the weights P V uses, so they sum to l
// exactly) laid out as the A operand of P V.
template <typename T, int kD>
__device__ __forceinline__ void FaSoftmax(FaRows<kD>& r, const float (&s)[kFaKeys / 8][4],
                                          uint32_t (&pf)[kFaKeys / 16][4]) {
  float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kFaKeys / 8; ++nt) {
    mx_lo = fmaxf(mx_lo, fmaxf(s[nt][0], s[nt][1]));
    mx_hi = fmaxf(mx_hi, fmaxf(s[nt][2], s[nt][3]));
  }
  mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 1));
  mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 2));
  mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 1));
  mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 2));
  const float mn_lo = fmaxf(r.m_lo, mx_lo), mn_hi = fmaxf(r.m_hi, mx_hi);
  const float mu_lo = mn_lo == -INFINITY ? 0.0f : mn_lo;  // only rows that saw nothing yet
  const float mu_hi = mn_hi == -INFINITY ? 0.0f : mn_hi;
  const float alpha_lo = exp2f(r.m_lo - mu_lo), alpha_hi = exp2f(r.m_hi - mu_hi);
  r.m_lo = mn_lo;
  r.m_hi = mn_hi;
  r.l_lo *= alpha_lo;
  r.l_hi *= alpha_hi;
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt) {
    r.o[nt][0] *= alpha_lo;
    r.o[nt][1] *= alpha_lo;
    r.o[nt][2] *= alpha_hi;
    r.o[nt][3] *= alpha_hi;
  }
#pragma unroll
  for (int nt = 0; nt < kFaKeys / 8; ++nt) {
    const T p0 = FromFloat<T>(exp2f(s[nt][0] - mu_lo));
    const T p1 = FromFloat<T>(exp2f(s[nt][1] - mu_lo));
    const T p2 = FromFloat<T>(exp2f(s[nt][2] - mu_hi));
    const T p3 = FromFloat<T>(exp2f(s[nt][3] - mu_hi));
    r.l_lo += ToFloat(p0) + ToFloat(p1);
    r.l_hi += ToFloat(p2) + ToFloat(p3);
    pf[nt / 2][(nt % 2) * 2] = PackPair(p0, p1);
    pf[nt / 2][(nt % 2) * 2 + 1] = PackPair(p2, p3);
  }
}

// O += P V; ldmatrix.trans turns V's rows into B fragments of 16 keys by 8
// columns, two column tiles per load. P is zero for keys past warp_last.
template <typename T, int kD>
__device__ __forceinline__ void FaAccumulate(FaRows<kD>& r, const uint32_t (&pf)[kFaKeys / 16][4], const T* v_s,
                                             int k0, int warp_last, int lane) {
  constexpr int kLd = kD + 8;
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int v_col = (lane >> 4) * 8;
#pragma unroll
  for (int j = 0; j < kFaKeys / 16; ++j) {
    if (k0 + j * 16 > warp_last) break;
#pragma unroll
    for (int np = 0; np < kD / 16; ++np) {
      uint32_t vb[4];
      LdMatrixX4Trans(vb, v_s + (j * 16 + v_row) * kLd + np * 16 + v_col);
      Mma16816<T>(r.o[2 * np], pf[j], vb[0], vb[1]);
      Mma16816<T>(r.o[2 * np + 1], pf[j], vb[2], vb[3]);
    }
  }
}

// Sums each row's l over its quad (every lane of the quad gets the row's).
template <int kD>
__device__ __forceinline__ void FaFinishSums(FaRows<kD>& r) {
  r.l_lo += __shfl_xor_sync(kFullMask, r.l_lo, 1);
  r.l_lo += __shfl_xor_sync(kFullMask, r.l_lo, 2);
  r.l_hi += __shfl_xor_sync(kFullMask, r.l_hi, 1);
  r.l_hi += __shfl_xor_sync(kFullMask, r.l_hi, 2);
}

// Writes the normalised rows (row_lo where ok_lo, row_hi where ok_hi) of
// head h to out [T, hq, kD].
template <typename T, int kD>
__device__ __forceinline__ void FaStoreRows(const FaRows<kD>& r, T* out, int hq, int h, int64_t row_lo,
                                            int64_t row_hi, bool ok_lo, bool ok_hi, int tq) {
  const float inv_lo = r.l_lo > 0.0f ? 1.0f / r.l_lo : 0.0f;
  const float inv_hi = r.l_hi > 0.0f ? 1.0f / r.l_hi : 0.0f;
  if (ok_lo) {
    T* dst = out + (row_lo * hq + h) * kD + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      *reinterpret_cast<uint32_t*>(dst + nt * 8) =
          PackPair(FromFloat<T>(r.o[nt][0] * inv_lo), FromFloat<T>(r.o[nt][1] * inv_lo));
    }
  }
  if (ok_hi) {
    T* dst = out + (row_hi * hq + h) * kD + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      *reinterpret_cast<uint32_t*>(dst + nt * 8) =
          PackPair(FromFloat<T>(r.o[nt][2] * inv_hi), FromFloat<T>(r.o[nt][3] * inv_hi));
    }
  }
}

}  // namespace seam::kernels::cuda::attn
