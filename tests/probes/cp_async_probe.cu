// Test probe of the emulator's asynchronous copies (kernels/platform.cuh: cp_async, cp_async_commit,
// cp_async_wait; kernels/emu/cuda_emu.hpp): what a shared tile holds before and after each wait, for
// tests/fused/test_multistage.py.
#include "instances.cuh"  // the emulator's fault and trace entry points

// One warp. Lane l copies src[4 l .. 4 l + 3] (16 bytes; zeros where l >= valid) into a shared tile that holds
// -1 everywhere, in group l % 2 (groups committed in order 0, 1). Then it waits for all but the newest
// `newest` groups (0, 1 or 2: nothing waits), passes a barrier and writes the whole tile to out. With
// `commit` 0 the second group is never committed; with `misalign` 1 lane 0's destination is 4 bytes off.
extern "C" __global__ void async_copy(const float* src, float* out, int valid, int newest, int commit,
                                      int misalign) {
  alignas(16) __shared__ float tile[4 * 32 + 4];
  const int l = static_cast<int>(threadIdx.x);
  for (int i = 0; i < 4; ++i) tile[4 * l + i] = -1.f;
  if (l == 0)
    for (int i = 0; i < 4; ++i) tile[4 * 32 + i] = -1.f;
  __syncthreads();
  for (int group = 0; group < 2; ++group) {
    if (l % 2 == group) sb::cp_async<16>(&tile[4 * l + (l == 0 ? misalign : 0)], src + 4 * l, l < valid);
    if (group == 0 || commit) sb::cp_async_commit();
  }
  if (newest == 0) sb::cp_async_wait<0>();
  if (newest == 1) sb::cp_async_wait<1>();
  __syncthreads();
  for (int i = 0; i < 4; ++i) out[4 * l + i] = tile[4 * l + i];
  sb::cp_async_wait<0>();  // nothing committed is left pending; an uncommitted copy is (the fault test)
}

#if !defined(__CUDACC__)
extern "C" void run_async_copy(const float* src, float* out, int valid, int newest, int commit, int misalign) {
  emu::launch("async_copy", &async_copy, emu::dim3(1), emu::dim3(32), src, out, valid, newest, commit, misalign);
}
#endif
