// The FP64 tensor cores' building blocks: one warp's mma.sync.aligned.m8n8k4 with f64 inputs and accumulator
// (sm_80 and later), and the m16n8k4, m16n8k8 and m16n8k16 shapes sm_90 adds (one DMMA.16x8x16 does the work of
// eight DMMA.8x8x4), each in the PTX ISA's fragment layout. On the CPU emulator an mma is a warp collective
// (emu::warp_gather) with a defined arithmetic (below). SB_DMMA_M16N8 says whether the kernels use the sm_90
// shapes: on the GPU where __CUDA_ARCH__ is 900 or more, on the emulator where SB_EMU_SM90 is defined (a library
// built with -DSB_EMU_SM90 runs the sm_90 code path).
#pragma once

#include "platform.cuh"

#if !defined(__CUDACC__)
#include <cmath>  // the emulator's mma: std::fma
#endif

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || (!defined(__CUDACC__) && defined(SB_EMU_SM90))
#define SB_DMMA_M16N8 1
#else
#define SB_DMMA_M16N8 0
#endif

namespace sb {

// D = A B + C for one warp: A 8 x 4, B 4 x 8, C and D 8 x 8, all f64 (PTX ISA, "mma.sync.aligned.m8n8k4" with
// .f64, "Matrix Fragments for mma.m8n8k4 with .f64 floating point type"). Lane l holds, with g = l / 4 and
// t = l % 4:  a = A[g][t];  b = B[t][g];  c, d = C[g][2t], C[g][2t + 1].
__device__ __forceinline__ void mma_m8n8k4_f64(double (&d)[2], double a, double b, const double (&c)[2]) {
#if defined(__CUDACC__)
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%4, %5};"
               : "=d"(d[0]), "=d"(d[1])
               : "d"(a), "d"(b), "d"(c[0]), "d"(c[1]));
#else
  // The emulator's arithmetic: d = fma(a_3, b_3, fma(a_2, b_2, fma(a_1, b_1, fma(a_0, b_0, c)))), each step
  // rounded to nearest. The PTX ISA ("Warp-level Matrix Multiply-Accumulate Instructions", mma, precision of
  // .f64 operations) says: "Precision of the element-wise multiplication and addition operation is identical to
  // that of .f64 precision fused multiply-add", with .rn (round to nearest even) the default rounding. It states
  // no order for the k = 4 products' sum with C (for the f16, bf16 and tf32 types it calls the order unspecified;
  // for f64 it says nothing). So the tests compare exactly only where no order can change the result (small
  // integers), and otherwise within the error bound and against the SIMT kernels' error.
  struct Operands {
    double a, b;
  };
  const auto all = emu::warp_gather(Operands{a, b});
  double A[8][4], B[4][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    A[g][t] = all[l].a;
    B[t][g] = all[l].b;
  }
  const int g = static_cast<int>(emu::lane) / 4, t = static_cast<int>(emu::lane) % 4;
  for (int e = 0; e < 2; ++e) {
    double sum = c[e];
    for (int k = 0; k < 4; ++k) sum = std::fma(A[g][k], B[k][2 * t + e], sum);
    d[e] = sum;
  }
#endif
}

// D = A B + C for one warp on sm_90: A 16 x K, B K x 8, C and D 16 x 8, all f64, K = 4, 8 or 16 (PTX ISA,
// "Matrix Fragments for mma.m16n8k4 / m16n8k8 / m16n8k16 with .f64 floating point type"). Lane l holds, with
// g = l / 4 and t = l % 4:  a[i] = A[g + 8 (i % 2)][t + 4 (i / 2)] for i < K / 2;  b[i] = B[t + 4 i][g] for
// i < K / 4;  c[i], d[i] = C[g + 8 (i / 2)][2t + i % 2]. So the m8n8k4 fragments of the two 8-row halves and
// the K / 4 k-steps of 4, interleaved: a[2s] and a[2s + 1] are the upper and lower halves' of k-step s, b[s] is
// k-step s's.
template <int K>
__device__ __forceinline__ void mma_m16n8k_f64(double (&d)[4], const double (&a)[K / 2], const double (&b)[K / 4],
                                               const double (&c)[4]) {
  static_assert(K == 4 || K == 8 || K == 16, "the f64 m16n8 shapes have k = 4, 8 or 16");
#if defined(__CUDACC__)
  if constexpr (K == 4) {
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%7, %8, %9, %10};"
                 : "=d"(d[0]), "=d"(d[1]), "=d"(d[2]), "=d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]), "d"(c[0]), "d"(c[1]), "d"(c[2]), "d"(c[3]));
  } else if constexpr (K == 8) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};"
                 : "=d"(d[0]), "=d"(d[1]), "=d"(d[2]), "=d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]), "d"(c[0]), "d"(c[1]),
                   "d"(c[2]), "d"(c[3]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%16, %17, %18, %19};"
                 : "=d"(d[0]), "=d"(d[1]), "=d"(d[2]), "=d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]), "d"(c[0]), "d"(c[1]), "d"(c[2]), "d"(c[3]));
  }
#else
  // The same arithmetic as mma_m8n8k4_f64's: a chain of round-to-nearest fused multiply-adds into C in k order,
  // so one m16n8kK gives what K / 4 m8n8k4 of each half in k order give (the PTX ISA states no order either).
  struct Operands {
    double a[K / 2], b[K / 4];
  };
  Operands mine;
  for (int i = 0; i < K / 2; ++i) mine.a[i] = a[i];
  for (int i = 0; i < K / 4; ++i) mine.b[i] = b[i];
  const auto all = emu::warp_gather(mine);
  double A[16][K], B[K][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < K / 2; ++i) A[g + 8 * (i % 2)][t + 4 * (i / 2)] = all[l].a[i];
    for (int i = 0; i < K / 4; ++i) B[t + 4 * i][g] = all[l].b[i];
  }
  const int g = static_cast<int>(emu::lane) / 4, t = static_cast<int>(emu::lane) % 4;
  for (int e = 0; e < 4; ++e) {
    double sum = c[e];
    for (int k = 0; k < K; ++k) sum = std::fma(A[g + 8 * (e / 2)][k], B[k][2 * t + e % 2], sum);
    d[e] = sum;
  }
#endif
}

}  // namespace sb
