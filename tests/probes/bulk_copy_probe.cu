// Test probe of the mbarrier objects and bulk copies (kernels/platform.cuh: mbarrier_*, bulk_copy;
// kernels/emu/cuda_emu.hpp), for tests/fused/test_bulk_copy.py; nvcc builds it for sm_90 there too.
#include "instances.cuh"  // the emulator's fault and trace entry points

// One block of 64 threads and a shared tile of n floats (n a multiple of 4, at most 256) that holds -1. Two
// phases of one barrier, one arrival each (thread 0's): in phase p thread 0 expects `expect` bytes and copies
// src[p n .. p n + n - 1] into the tile, one bulk copy per `piece` floats; every thread waits for the phase
// (parity p) when `wait` is 1 (0: no wait; 2: a wait on the other parity, in phase 0 only), copies the tile to
// out[p n ..] and passes a block barrier before the next phase reuses the tile. `init` 0 skips the barrier's
// initialisation (2: does it twice); `offset` moves the tile's start by that many floats (4: aligned, 1: a
// misaligned bulk copy).
extern "C" __global__ void bulk_copy_probe(const float* src, float* out, int n, int piece, int expect, int wait,
                                           int init, int offset) {
  alignas(128) __shared__ float tile[256 + 4];
  alignas(8) __shared__ sb::stdx::uint64_t bar;
  const int t = static_cast<int>(threadIdx.x);
  float* dst = tile + offset;
  for (int i = t; i < n; i += 64) dst[i] = -1.f;
  sb::fence_proxy_async();  // the tile's -1 before the async proxy's writes to the same bytes
  if (t == 0 && init) {
    if (init == 2) sb::mbarrier_init(&bar, 1);  // initialised twice
    sb::mbarrier_init(&bar, 1);
    sb::mbarrier_init_fence();
  }
  __syncthreads();
  for (int phase = 0; phase < 2; ++phase) {
    if (t == 0) {
      sb::mbarrier_arrive_expect_tx(&bar, static_cast<unsigned>(expect));
      for (int i = 0; i < n; i += piece)
        sb::bulk_copy(dst + i, src + phase * n + i, static_cast<unsigned>(4 * (n - i < piece ? n - i : piece)), &bar);
    }
    if (wait == 1) sb::mbarrier_wait(&bar, static_cast<unsigned>(phase));
    if (wait == 2 && phase == 0) sb::mbarrier_wait(&bar, 1);  // the wrong parity: the phase before phase 0
    for (int i = t; i < n; i += 64) out[phase * n + i] = dst[i];
    __syncthreads();
  }
}

#if !defined(__CUDACC__)
extern "C" void run_bulk_copy(const float* src, float* out, int n, int piece, int expect, int wait, int init,
                              int offset, double wait_limit_s) {
  emu::mbarrier_wait_limit_s = wait_limit_s;
  emu::launch("bulk_copy_probe", &bulk_copy_probe, emu::dim3(1), emu::dim3(64), src, out, n, piece, expect, wait,
              init, offset);
  emu::mbarrier_wait_limit_s = 20.0;
}
#endif
