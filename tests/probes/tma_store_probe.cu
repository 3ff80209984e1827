// Test probe of the TMA tensor stores and reductions (kernels/platform.cuh: fence_proxy_async, swizzle_128b,
// tma_store_2d, bulk_commit, bulk_wait_read; kernels/emu/cuda_emu.hpp), for tests/fused/test_bulk_copy.py;
// nvcc builds it for sm_90a there too.
#include "instances.cuh"  // the emulator's fault and trace entry points, emu_tensor_map_encode

// One block of 128 threads writes a box0 x box1 tile of floats, v(x, y) = 1000 y + x + 1, through sb::sts into
// a 1024-byte aligned shared tile (at the 128-byte swizzle's places when `swizzle` is 1), fences unless `fence`
// is 0 and passes a barrier; thread 0 stores the tile to the map's box at (c0, c1) (with `add`, adds it there)
// and commits, and unless `wait` is 0 waits until the tile has been read. With `overwrite` every thread writes
// -7 over the tile after the store is issued and before that wait.
extern "C" __global__ void tma_store_probe(const SB_GRID_CONSTANT sb::TensorMap map, int box0, int box1, int swizzle,
                                           int c0, int c1, int add, int fence, int wait, int overwrite) {
  alignas(1024) __shared__ float tile[4096];
  const int t = static_cast<int>(threadIdx.x);
  auto at = [&](int i) {
    const unsigned offset = 4u * static_cast<unsigned>(i);
    return reinterpret_cast<float*>(reinterpret_cast<char*>(tile) + (swizzle ? sb::swizzle_128b(offset) : offset));
  };
  for (int i = t; i < box0 * box1; i += 128) sb::sts(at(i), 1000.f * static_cast<float>(i / box0) + i % box0 + 1);
  if (fence) sb::fence_proxy_async();
  __syncthreads();
  if (t == 0) {
    if (add)
      sb::tma_store_2d<true>(&map, c0, c1, tile);
    else
      sb::tma_store_2d<false>(&map, c0, c1, tile);
    sb::bulk_commit();
  }
  if (overwrite) {
    __syncthreads();  // after thread 0 has issued the store
    for (int i = t; i < box0 * box1; i += 128) sb::sts(at(i), -7.f);
    __syncthreads();
  }
  if (t == 0 && wait) sb::bulk_wait_read<0>();
}

#if !defined(__CUDACC__)
extern "C" void run_tma_store(const void* map, int box0, int box1, int swizzle, int c0, int c1, int add, int fence,
                              int wait, int overwrite) {
  sb::TensorMap m;
  std::memcpy(&m, map, sizeof m);
  emu::launch("tma_store_probe", &tma_store_probe, emu::dim3(1), emu::dim3(128), m, box0, box1, swizzle, c0, c1, add,
              fence, wait, overwrite);
}
#endif
