// Test probe of wgmma (kernels/platform.cuh: wgmma_desc, wgmma_fence, wgmma_tf32, wgmma_commit, wgmma_wait;
// kernels/emu/cuda_emu.hpp), for tests/fused/test_wgmma.py; nvcc builds it for sm_90a there too.
#include "instances.cuh"  // the emulator's fault and trace entry points

// A (64 x 32) and B (N x 32, N = 8 or 64) K-major in shared memory, in the 128-byte swizzle's layout: 128-byte
// rows, 1024-byte atoms of 8 rows.
struct alignas(1024) WgmmaTiles {
  float a[64 * 32];
  float b[64 * 32];
};

// One warpgroup (128 threads) writes a and b (row-major 64 x 32 and N x 32) into the tiles, fences them for the
// async proxy and passes a barrier; then four m64nNk8 wgmma (k = 0, 8, 16, 24; the first not accumulating) in
// one wgmma group, a wait, and each thread's fragment to out (64 x N, row-major); the accumulator pinned
// (wgmma_fence_operand) before the fence and after the wait. `plant` puts one mistake in: 1 the descriptors
// without the swizzle, 2 a stride byte offset of 512, 3 no fence.proxy.async, 4 the accumulators read before
// the wait, 5 no wgmma.fence, 6 the A tile rewritten before the wait, 7 the accumulator written in flight; 8
// is no mistake but the layout without swizzle, and 9 that layout with a leading byte offset of 256; 10 warp 2
// skips a wgmma, 11 warp 1's A descriptors differ from the others'.
// Plants 4, 5, 7, 10 and 11 break the accumulator's fencing or the warpgroup's uniformity, which the compiler
// repairs with extra warpgroup arrives or serialized wgmma: they are kernels of their own (BAD), so that the
// others compile clean.
template <int N, int BAD = 0>
__device__ void wgmma_probe(const float* a, const float* b, float* out, int plant) {
  __shared__ WgmmaTiles tiles;
  const int t = static_cast<int>(threadIdx.x);
  // Plants 8 and 9 take the layout without swizzle: 8 x 16-byte core matrices, 128 bytes apart along k (LBO)
  // and 1024 between groups of 8 rows (SBO); a k-step is two core matrices on. Plant 9's LBO is 256.
  const bool plain = plant == 8 || plant == 9;
  auto put = [&](float* tile, int i, float v) {  // element (r, k) = (i / 32, i % 32) of a K-major tile
    const unsigned r = static_cast<unsigned>(i) / 32, k = static_cast<unsigned>(i) % 32;
    const unsigned offset =
        plain ? r / 8 * 1024 + k / 4 * 128 + r % 8 * 16 + k % 4 * 4 : sb::swizzle_128b(4 * (32 * r + k));
    sb::sts(reinterpret_cast<float*>(reinterpret_cast<char*>(tile) + offset), v);
  };
  for (int i = t; i < 64 * 32; i += 128) put(tiles.a, i, a[i]);
  for (int i = t; i < N * 32; i += 128) put(tiles.b, i, b[i]);
  if (plant != 3) sb::fence_proxy_async();
  __syncthreads();
  float d[N / 2];
  for (float& x : d) x = 0.f;
  const unsigned swizzle = plant == 1 || plain ? 0 : 1, sbo = plant == 2 ? 512 : 1024, lbo = plant == 9 ? 256 : 128;
  sb::wgmma_fence_operand(d);
  if constexpr (BAD != 5) sb::wgmma_fence();
  for (int k = 0; k < 32; k += 8) {
    const int step = plain ? 2 * 128 / 4 * (k / 8) : k;  // floats from the tile's start to the k-step's
    const int own = BAD == 11 && t / 32 == 1 ? 4 : 0;  // plant 11: warp 1 reads A half a k-step on
    const auto desc_a = sb::wgmma_desc(&tiles, tiles.a + step + own, lbo, sbo, swizzle);
    const auto desc_b = sb::wgmma_desc(&tiles, tiles.b + step, lbo, sbo, swizzle);
    if (BAD == 10 && t / 32 == 2 && k == 24) continue;  // plant 10: warp 2 skips the last k-step
    sb::wgmma_tf32<N>(d, desc_a, desc_b, k > 0, &tiles);
  }
  sb::wgmma_commit();
  float seen[N / 2];
  if constexpr (BAD == 4)
    for (int i = 0; i < N / 2; ++i) seen[i] = d[i];  // read before the wait
  if (plant == 6) {
    __syncthreads();
    for (int i = t; i < 64 * 32; i += 128) put(tiles.a, i, 0.f);
    sb::fence_proxy_async();
    __syncthreads();
  }
  if constexpr (BAD == 7) d[0] = 1.f;
  sb::wgmma_wait<0>();
  sb::wgmma_fence_operand(d);
  const int w = t / 32, g = t % 32 / 4, q = t % 4;
  for (int i = 0; i < N / 8; ++i)
    for (int e = 0; e < 4; ++e)
      out[(16 * w + g + 8 * (e / 2)) * N + 8 * i + 2 * q + e % 2] = BAD == 4 ? seen[4 * i + e] : d[4 * i + e];
}

extern "C" __global__ void wgmma_probe_n8(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<8>(a, b, out, plant);
}
extern "C" __global__ void wgmma_probe_n64(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<64>(a, b, out, plant);
}
extern "C" __global__ void wgmma_probe_early(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<8, 4>(a, b, out, plant);
}
extern "C" __global__ void wgmma_probe_unfenced(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<8, 5>(a, b, out, plant);
}
extern "C" __global__ void wgmma_probe_skip(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<8, 10>(a, b, out, plant);
}
extern "C" __global__ void wgmma_probe_mixed(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<8, 11>(a, b, out, plant);
}
extern "C" __global__ void wgmma_probe_touch(const float* a, const float* b, float* out, int plant) {
  wgmma_probe<8, 7>(a, b, out, plant);
}

// Two warpgroups: the first gives registers back (to 40), the second takes them (to 232), as a producer and
// a consumer warpgroup of a warp-specialized kernel; each thread then writes its index.
extern "C" __global__ void __launch_bounds__(256, 1) setmaxnreg_probe(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < 128)
    sb::setmaxnreg_dec<40>();
  else
    sb::setmaxnreg_inc<232>();
  out[t] = t;
}

#if !defined(__CUDACC__)
extern "C" void run_wgmma(const float* a, const float* b, float* out, int n, int plant) {
  if (plant == 4)
    emu::launch("wgmma_probe_early", &wgmma_probe_early, emu::dim3(1), emu::dim3(128), a, b, out, plant);
  else if (plant == 5)
    emu::launch("wgmma_probe_unfenced", &wgmma_probe_unfenced, emu::dim3(1), emu::dim3(128), a, b, out, plant);
  else if (plant == 10)
    emu::launch("wgmma_probe_skip", &wgmma_probe_skip, emu::dim3(1), emu::dim3(128), a, b, out, plant);
  else if (plant == 11)
    emu::launch("wgmma_probe_mixed", &wgmma_probe_mixed, emu::dim3(1), emu::dim3(128), a, b, out, plant);
  else if (plant == 7)
    emu::launch("wgmma_probe_touch", &wgmma_probe_touch, emu::dim3(1), emu::dim3(128), a, b, out, plant);
  else if (n == 8)
    emu::launch("wgmma_probe_n8", &wgmma_probe_n8, emu::dim3(1), emu::dim3(128), a, b, out, plant);
  else
    emu::launch("wgmma_probe_n64", &wgmma_probe_n64, emu::dim3(1), emu::dim3(128), a, b, out, plant);
}
#endif
