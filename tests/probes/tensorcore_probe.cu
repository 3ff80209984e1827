// Test probe of kernels/tensorcore.cuh: one kernel per building block, each reading and writing plain
// row-major arrays, so that tests/fused/test_tensorcore.py can check them against strassenbench.tensorcore on the
// emulator (g++) and read their machine code (nvcc).
#include "tensorcore.cuh"

extern "C" __global__ void tf32_round(const float* x, float* big, float* small, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    big[i] = sb::to_tf32(x[i]);
    const sb::Tf32Pair pair = sb::split_3xtf32(x[i]);
    small[i] = pair.small;
  }
}

// The multistage pipeline's rounding of its fragments (round_tf32, split_3xtf32_fast), element by element.
extern "C" __global__ void tf32_fast(const float* x, float* big, float* small, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const sb::Tf32Pair pair = sb::split_3xtf32_fast(x[i]);
    big[i] = sb::round_tf32(x[i]);
    small[i] = pair.small;
  }
}

// One warp: D (16 x 8) = A (16 x 8) B (8 x 8) + C, each lane loading its fragments by the PTX layout.
extern "C" __global__ void mma_tile(const float* A, const float* B, const float* C, float* D) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;  // every warp computes the same tile
  const float a[4] = {A[g * 8 + t], A[(g + 8) * 8 + t], A[g * 8 + t + 4], A[(g + 8) * 8 + t + 4]};
  const float b[2] = {B[t * 8 + g], B[(t + 4) * 8 + g]};
  const float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
  float d[4];
  sb::mma_m16n8k8_tf32(d, a, b, c);
  D[g * 8 + 2 * t] = d[0];
  D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2];
  D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

#if !defined(__CUDACC__)
extern "C" void run_tf32_round(const float* x, float* big, float* small, int n) {
  emu::launch(&tf32_round, emu::dim3(1), emu::dim3(64), x, big, small, n);
}
extern "C" void run_tf32_fast(const float* x, float* big, float* small, int n) {
  emu::launch(&tf32_fast, emu::dim3(1), emu::dim3(64), x, big, small, n);
}
extern "C" void run_mma_tile(const float* A, const float* B, const float* C, float* D, unsigned threads) {
  emu::launch(&mma_tile, emu::dim3(1), emu::dim3(threads), A, B, C, D);
}
#endif
