// Test probe of kernels/tensorcore_primitive.cuh: a few instantiations (tile shapes, operand counts, load
// widths, 1xTF32 and 3xTF32) behind one entry point that takes the product's terms as offsets into A, B, C
// and coefficients, so that tests/fused/test_tensorcore.py can run them on the emulator.
#include "instances.cuh"  // the emulator's trace entry points
#include "tensorcore_primitive.cuh"

// (name, m_S, n_S, k_S, warps_m, warps_n, W_A, W_B, W_C, vector, parts)
#define SB_TC_PROBES(X)                       \
  X(tc0, 64, 64, 8, 2, 2, 1, 1, 1, true, 1)   \
  X(tc1, 64, 64, 8, 2, 2, 1, 1, 1, true, 2)   \
  X(tc2, 64, 64, 8, 2, 2, 2, 2, 2, false, 2)  \
  X(tc3, 128, 128, 8, 2, 4, 2, 2, 2, true, 2) \
  X(tc4, 128, 128, 16, 2, 4, 1, 1, 1, true, 1)

#define SB_TC_KERNEL(NAME, MS, NS, KS, WM, WN, WA, WB, WC, VEC, PARTS)                                  \
  extern "C" __global__ void NAME(int lda, int ldb, int ldc, int bk, float alpha, float beta,         \
                                  const SB_GRID_CONSTANT sb::Products<float, WA + WB + WC, 1> products) { \
    sb::tensorcore_primitive<MS, NS, KS, WM, WN, WA, WB, WC, false, 1, VEC, PARTS>(lda, ldb, ldc, bk, \
                                                                                   alpha, beta, products); \
  }
SB_TC_PROBES(SB_TC_KERNEL)

#if !defined(__CUDACC__)
// Run probe `which` for C (bm x bn) += alpha (sum_t u_t A_t)(sum_t v_t B_t) over bk; term t of A starts at
// A + offsets[2t] lda + offsets[2t + 1], and so on for B and C; coeff[t] as the launch builder passes them
// (normalised: the first term's coefficient is the operand's scale). -1: no such probe; -2: `terms` is not its
// W_A + W_B + W_C.
extern "C" int run_tc(int which, int terms, const float* A, const float* B, float* C, int lda, int ldb, int ldc,
                      int bm, int bn, int bk, const int* offsets, const float* coeff, float alpha, float beta) {
  int found = 0;
#define SB_TC_RUN(NAME, MS, NS, KS, WM, WN, WA, WB, WC, VEC, PARTS)                                  \
  if (which == found++) {                                                                           \
    if (terms != WA + WB + WC) return -2;                                                           \
    sb::Products<float, WA + WB + WC, 1> p{};                                                       \
    for (int t = 0; t < WA + WB + WC; ++t) {                                                        \
      const bool is_a = t < WA, is_b = !is_a && t < WA + WB;                                        \
      const float* base = is_a ? A : is_b ? B : C;                                                  \
      const int ld = is_a ? lda : is_b ? ldb : ldc;                                                 \
      p.address[0][t] = reinterpret_cast<unsigned long long>(base + offsets[2 * t] * ld + offsets[2 * t + 1]); \
      p.rows[0][t] = is_a ? bm : is_b ? bk : bm;                                                    \
      p.cols[0][t] = is_a ? bk : bn;                                                                \
      p.coeff[0][t] = coeff[t];                                                                     \
    }                                                                                               \
    emu::launch(&NAME, emu::dim3((bn + NS - 1) / NS, (bm + MS - 1) / MS, 1), emu::dim3(WM * WN * 32), \
                lda, ldb, ldc, bk, alpha, beta, p);                                                 \
    return 0;                                                                                       \
  }
  SB_TC_PROBES(SB_TC_RUN)
  return -1;
}
#endif
