// nvbench's blocking kernel, for its "cold" measurement (strassenbench.bench.timing): the timer's stream waits
// here until the host releases a flag in mapped host memory. The start event, the timed call and the stop event
// are all enqueued behind it before the device reaches them, so the host's enqueue time (Python, CuPy, cuBLAS's
// wrapper) never lands between the two events, whatever library the timed call uses. A timeout ends the wait
// (recorded in *timed_out) so that a host that never releases the flag cannot hang the GPU.
#pragma once

#include "platform.cuh"

#if !defined(__CUDACC__)
#include <chrono>
#endif

namespace sb {

// Nanoseconds of the GPU's global timer (%globaltimer); a steady clock in the emulator.
__device__ __forceinline__ unsigned long long global_timer_ns() {
#if defined(__CUDACC__)
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
#endif
}

// One thread spins on the volatile flag (each read goes to host memory over the bus, never a cached copy).
__device__ __forceinline__ void block_stream(const volatile int* flag, volatile int* timed_out,
                                             unsigned long long timeout_ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const unsigned long long start = global_timer_ns();
  while (*flag == 0) {
    if (global_timer_ns() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

}  // namespace sb
