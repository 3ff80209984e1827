// CPU emulation of the CUDA execution model, enough for the kernels in kernels/ (issue [kernels], item 3).
//
// One OS thread per CUDA thread of a block; the threads persist for the whole launch and run the blocks one
// after another, meeting at a barrier after each block so that __shared__ storage (a function-local static)
// is never reused while a slow thread still reads it. __syncthreads is the same std::barrier; atomicAdd is
// std::atomic_ref<T>::fetch_add. Blocks never run concurrently, so a launch that races between blocks on the
// GPU (plain write-back of two products into one C block) is NOT caught here; the launch builder forbids it.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <thread>
#include <vector>

namespace emu {

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
inline thread_local std::barrier<>* block_barrier = nullptr;

template <class T>
inline T atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}

// Run kernel(args...) over grid x block threads as described above.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) {
  const unsigned threads = block.x * block.y * block.z;
  std::barrier<> barrier(static_cast<std::ptrdiff_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      blockDim = block;
      gridDim = grid;
      block_barrier = &barrier;
      for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
          for (unsigned x = 0; x < grid.x; ++x) {
            blockIdx = dim3(x, y, z);
            kernel(args...);
            barrier.arrive_and_wait();
          }
    });
  }
  for (auto& thread : pool) thread.join();
}

}  // namespace emu

using emu::blockDim;
using emu::blockIdx;
using emu::gridDim;
using emu::threadIdx;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict
#define __syncthreads() ::emu::block_barrier->arrive_and_wait()
#define atomicAdd ::emu::atomic_add
