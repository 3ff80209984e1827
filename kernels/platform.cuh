// Portability layer: the kernel sources compile with nvcc for the GPU and with g++ for the CPU emulator.
#pragma once

#if defined(__CUDACC__)
#include <cstdint>
#define SB_HOST_DEVICE __host__ __device__
#else
#include "emu/cuda_emu.hpp"  // threadIdx, __syncthreads, __shared__, atomicAdd on the CPU
#define SB_HOST_DEVICE
#endif

namespace sb {

// A register array of N values of T, aligned so that one load or store of it is one 32/64/128-bit access
// (LDG.128 / LDS.128 / STS.128 when sizeof(Vec) = 16).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

SB_HOST_DEVICE constexpr int cmin(int a, int b) { return a < b ? a : b; }

// The widest vector of T that divides n elements, at most 128 bits.
template <class T>
SB_HOST_DEVICE constexpr int vec_width(int n) {
  int w = 16 / static_cast<int>(sizeof(T));
  while (w > 1 && n % w != 0) w /= 2;
  return w;
}

}  // namespace sb
