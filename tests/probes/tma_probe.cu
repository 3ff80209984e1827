// Test probe of the TMA tensor copies (kernels/platform.cuh: TensorMap, tma_load_2d; kernels/emu/cuda_emu.hpp),
// for tests/fused/test_bulk_copy.py; nvcc builds it for sm_90a there too.
#include "instances.cuh"  // the emulator's fault and trace entry points, emu_tensor_map_encode

// One block of 128 threads. Thread 0 initialises a barrier, expects `expect` bytes and copies the box of `map`
// at (c0, c1) into a 1024-byte aligned shared tile (moved by `offset` floats) that holds -1; every thread waits
// for the phase and copies the tile's first n floats to out, as they lie in shared memory.
extern "C" __global__ void tma_probe(const SB_GRID_CONSTANT sb::TensorMap map, float* out, int c0, int c1, int n,
                                     int expect, int offset) {
  alignas(1024) __shared__ float tile[4096 + 256];
  alignas(8) __shared__ sb::stdx::uint64_t bar;
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < 4096 + 256; i += 128) tile[i] = -1.f;
  sb::fence_proxy_async();  // the tile's -1 before the async proxy's writes to the same bytes
  if (t == 0) {
    sb::mbarrier_init(&bar, 1);
    sb::mbarrier_init_fence();
  }
  __syncthreads();
  if (t == 0) {
    sb::mbarrier_arrive_expect_tx(&bar, static_cast<unsigned>(expect));
    sb::tma_load_2d(tile + offset, &map, c0, c1, &bar);
  }
  sb::mbarrier_wait(&bar, 0);
  for (int i = t; i < n; i += 128) out[i] = tile[offset + i];
}

#if !defined(__CUDACC__)
extern "C" void run_tma(const void* map, float* out, int c0, int c1, int n, int expect, int offset) {
  sb::TensorMap m;
  std::memcpy(&m, map, sizeof m);
  emu::launch("tma_probe", &tma_probe, emu::dim3(1), emu::dim3(128), m, out, c0, c1, n, expect, offset);
}
#endif
