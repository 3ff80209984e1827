// Tensor-core building blocks for FP32 matrix multiplication on TF32 tensor cores (sm_80 and later): the
// TF32 rounding and 3xTF32 split of an FP32 value, and one warp's mma.sync.aligned.m16n8k8 with TF32 inputs
// and FP32 accumulation, in the PTX ISA's fragment layouts. On the CPU emulator the mma is a warp collective
// (emu::warp_gather) with a defined arithmetic (mma_m16n8k8_tf32 below); strassenbench.tensorcore holds the
// same definitions in NumPy.
#pragma once

#include "platform.cuh"

namespace sb {

// cvt.rna.tf32.f32 (PTX ISA, "cvt"): x rounded to TF32 (the 8-bit exponent and 10 explicit mantissa bits of
// FP32), to nearest with ties away from zero; the 13 low bits of the result are zero. Rounding past the
// largest finite value gives infinity; infinities and NaN pass through.
__device__ __forceinline__ float to_tf32(float x) {
#if defined(__CUDACC__)
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x1000u) & 0xFFFFE000u;  // sign-magnitude: away from 0
  std::memcpy(&x, &bits, sizeof bits);
  return x;
#endif
}

// x rounded to TF32 as cvt.rna.tf32.f32 rounds every finite value (to nearest, ties away from zero: half a TF32
// ulp added to the magnitude, then the 13 low bits cut; past the largest finite value, infinity), in two
// integer instructions: sm_90's cvt.rna.tf32.f32 is four (it tests for NaN first). Infinities stay; a NaN keeps
// its sign and exponent, so it is a NaN unless its payload lies only in the 13 low bits (then an infinity). The
// multistage pipeline rounds and splits every fragment it loads with it (tensorcore_primitive.cuh).
__device__ __forceinline__ float round_tf32(float x) {
#if defined(__CUDACC__)
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x1000u) & 0xFFFFE000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
#endif
}

// The 3xTF32 split (CUTLASS's "fast accurate" SGEMM, its example 27): x = big + small + (what TF32 drops of
// x - big), with big = tf32(x) and small = tf32(x - big). A product a b is then taken as
// a_big b_big + a_big b_small + a_small b_big, which keeps about FP32's accuracy.
struct Tf32Pair {
  float big, small;
};
__device__ __forceinline__ Tf32Pair split_3xtf32(float x) {
  const float big = to_tf32(x);
  return {big, to_tf32(x - big)};
}

// The same split by round_tf32: equal to split_3xtf32 for every finite x.
__device__ __forceinline__ Tf32Pair split_3xtf32_fast(float x) {
  const float big = round_tf32(x);
  return {big, round_tf32(x - big)};
}

// D = A B + C for one warp: A 16 x 8, B 8 x 8, C and D 16 x 8 (PTX ISA, "mma.sync.aligned.m16n8k8" with
// .tf32 inputs, "Matrix Fragments for mma.m16n8k8"). Lane l holds, with g = l / 4 and t = l % 4:
//   a = A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4];   b = B[t][g], B[t + 4][g];
//   c, d = C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1].
// A and B must already be TF32 values (to_tf32): the tensor core reads only their upper 19 bits.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const float (&a)[4], const float (&b)[2],
                                                 const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  // The emulator's arithmetic (emu::tf32_dot8, which wgmma shares): inputs cut to their TF32 bits, C and the
  // eight products summed in k order in double, the sum rounded toward zero to FP32.
  struct Operands {
    float a[4], b[2], c[4];
  };
  const auto all = emu::warp_gather(Operands{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}, {c[0], c[1], c[2], c[3]}});
  float A[16][8], Bt[8][8];  // Bt[n][k] = B[k][n]
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    A[g][t] = all[l].a[0];
    A[g + 8][t] = all[l].a[1];
    A[g][t + 4] = all[l].a[2];
    A[g + 8][t + 4] = all[l].a[3];
    Bt[g][t] = all[l].b[0];
    Bt[g][t + 4] = all[l].b[1];
  }
  const int g = static_cast<int>(emu::lane) / 4, t = static_cast<int>(emu::lane) % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) d[e] = emu::tf32_dot8(c[e], A[rows[e]], Bt[cols[e]]);
#endif
}

// Four 8 x 4 matrices of 32-bit elements from shared memory, for one warp (PTX ISA, "ldmatrix", .m8n8.x4 .b16:
// an 8 x 8 matrix of 16-bit elements is an 8 x 4 matrix of 32-bit ones). Lane l gives the address of one
// 16-byte row, row l % 8 of matrix l / 8; register i of lane l receives element (l / 4, l % 4) of matrix i.
// For mma.m16n8k8's A fragment (a[i] = A[g + 8 (i % 2)][t + 4 (i / 2)]), matrix i is rows 8 (i % 2) to
// 8 (i % 2) + 7 and columns 4 (i / 2) to 4 (i / 2) + 3 of the 16 x 8 tile: one instruction instead of four LDS.
__device__ __forceinline__ void ldmatrix_x4(float (&r)[4], const float* row) {
#if defined(__CUDACC__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  unsigned x[4];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
               : "r"(address));
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = __uint_as_float(x[i]);
#else
  // The lane's row is one 16-byte shared-memory access (traced as such: ldmatrix reads 8 rows per phase), then
  // the rows are dealt out to the lanes. PTX ISA, "ldmatrix": each row address must be 16-byte aligned.
  emu::check_aligned(row, 16, "ldmatrix row");
  const auto rows = emu::warp_gather(lds(reinterpret_cast<const Vec<float, 4>*>(row)));
  const int l = static_cast<int>(emu::lane);
  for (int i = 0; i < 4; ++i) r[i] = rows[8 * i + l / 4].v[l % 4];
#endif
}

}  // namespace sb
