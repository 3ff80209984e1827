// The FP64 tensor cores' building block (sm_80 and later): one warp's mma.sync.aligned.m8n8k4 with f64 inputs
// and accumulator, in the PTX ISA's fragment layout. On the CPU emulator the mma is a warp collective
// (emu::warp_gather) with a defined arithmetic (below).
#pragma once

#include "platform.cuh"

#if !defined(__CUDACC__)
#include <cmath>  // the emulator's mma: std::fma
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

}  // namespace sb
