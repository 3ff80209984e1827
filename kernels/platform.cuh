// Portability layer: the kernel sources compile with nvcc for the GPU and with g++ for the CPU emulator.
#pragma once

#if defined(__CUDACC_RTC__)
// NVRTC (the CUDA 12 toolchain of strassenbench.fused.toolchain) has no C++ standard library: CCCL's libcu++
// provides what the kernels use.
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda/std/utility>
namespace sb { namespace stdx = ::cuda::std; }
#else
#include <cstdint>
#include <type_traits>
#include <utility>
namespace sb { namespace stdx = ::std; }
#endif

#if defined(__CUDACC__)
#define SB_HOST_DEVICE __host__ __device__
#define SB_SMEM_TRACE(ptr, bytes, store)
#define SB_LOAD(ptr, what) (*(ptr))
#define SB_STORE(ptr, value, what) (*(ptr) = (value))
#else
#include <cstdio>
#include <cstdlib>
#include "emu/cuda_emu.hpp"  // threadIdx, __syncthreads, __shared__, atomics, shared-memory traces on the CPU
#define SB_HOST_DEVICE
#define SB_SMEM_TRACE(ptr, bytes, store) ::emu::trace_smem(ptr, bytes, store)
// One load or store through a pointer, `what` ("global load", ...) naming it: alignment-checked in the
// emulator (emu::load, emu::store), a plain *ptr on the GPU, whose machine code is unchanged.
#define SB_LOAD(ptr, what) ::emu::load(ptr, what)
#define SB_STORE(ptr, value, what) ::emu::store(ptr, value, what)
#endif

namespace sb {

// A register array of N values of T, aligned so that one load or store of it is one 32/64/128-bit access
// (LDG.128 / LDS.128 / STS.128 when sizeof(Vec) = 16).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

SB_HOST_DEVICE constexpr int cmin(int a, int b) { return a < b ? a : b; }
SB_HOST_DEVICE constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// The widest vector of T that divides n elements, at most 128 bits.
template <class T>
SB_HOST_DEVICE constexpr int vec_width(int n) {
  int w = 16 / static_cast<int>(sizeof(T));
  while (w > 1 && n % w != 0) w /= 2;
  return w;
}

// x, made opaque to the compiler: values derived from it are recomputed where they are used instead of being
// hoisted out of the main loop and kept in registers (which, at the 128-register cap, means spilled). The
// empty asm emits no instruction.
__device__ __forceinline__ int opaque(int x) {
#if defined(__CUDACC__)
  asm volatile("" : "+r"(x));
#endif
  return x;
}

// A broken launch contract stops the kernel: a trap on the GPU (the launch fails with an illegal-instruction
// error; no printf, whose argument buffer would cost the kernel a stack frame), a message and abort in the
// emulator.
__device__ __forceinline__ void fail([[maybe_unused]] const char* what) {
#if defined(__CUDACC__)
  __trap();
#else
  std::fprintf(stderr, "strassenbench kernel: %s\n", what);
  std::abort();
#endif
}

// __syncwarp(): the warp's lanes meet (and their shared-memory accesses before it are ordered before those
// after it); the emulator's lanes meet at their warp's barrier.
__device__ __forceinline__ void syncwarp() {
#if defined(__CUDACC__)
  __syncwarp();
#else
  ::emu::warp->barrier.arrive_and_wait();
#endif
}

// __all_sync over the whole warp: whether `x` holds in every lane. A warp-uniform result (VOTEU on sm_90): a
// branch on it is one the compiler knows the warp takes together, so code after it stays on the uniform
// datapath (a warp-synchronous branch on a per-lane condition costs wgmma loops their uniform registers).
__device__ __forceinline__ bool warp_all(bool x) {
#if defined(__CUDACC__)
  return __all_sync(0xffffffffu, x);
#else
  const auto lanes = ::emu::warp_gather(x);
  bool all = true;
  for (unsigned l = 0; l < ::emu::warp_lanes(); ++l) all = all && lanes[l];
  return all;
#endif
}

// Every shared-memory access of the kernels goes through these two, so that the emulator can record the
// addresses of each warp-level access and count wavefronts (strassenbench.fused.smem) and check their
// alignment; on the GPU they are plain LDS / STS of sizeof(V) bytes.
template <class V>
__device__ __forceinline__ V lds(const V* p) {
  SB_SMEM_TRACE(p, sizeof(V), false);
  return SB_LOAD(p, "shared load");
}

template <class V>
__device__ __forceinline__ void sts(V* p, const V& value) {
  SB_SMEM_TRACE(p, sizeof(V), true);
  SB_STORE(p, value, "shared store");
}

// A predicated global load of one 32/64/128-bit vector: zeros when `guard` is false (then p is not read).
// Inline PTX as CUTLASS's arch::global_load: one `@p ld.global` (LDG), never a branch, and the compiler
// cannot turn it into a generic load.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> ldg(const T* p, bool guard) {
  Vec<T, N> x{};
#if defined(__CUDACC__)
  static_assert(sizeof(x) % 4 == 0, "32-bit words");
  unsigned* w = reinterpret_cast<unsigned*>(&x);
  if constexpr (sizeof(x) == 16) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, %5, 0; @p ld.global.v4.u32 {%0, %1, %2, %3}, [%4]; }"
        : "+r"(w[0]), "+r"(w[1]), "+r"(w[2]), "+r"(w[3]) : "l"(p), "r"(int(guard)));
  } else if constexpr (sizeof(x) == 8) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %3, 0; @p ld.global.v2.u32 {%0, %1}, [%2]; }"
                 : "+r"(w[0]), "+r"(w[1]) : "l"(p), "r"(int(guard)));
  } else {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p ld.global.u32 %0, [%1]; }"
                 : "+r"(w[0]) : "l"(p), "r"(int(guard)));
  }
#else
  if (guard) x = ::emu::load(reinterpret_cast<const Vec<T, N>*>(p), "global load");
#endif
  return x;
}

// An unpredicated global load of one 32/64/128-bit vector at byte offset `offset` from `base`: the loads of
// interior tiles, whose every element is inside its term (mainloop.cuh). `base` is block-uniform (a kernel
// parameter, in a uniform register) and `offset` the thread's: LDG takes only a 64-bit register address plus
// an immediate, so each term's address is an add and an add with carry (a second load at a constant distance
// reuses it at an immediate offset).
template <class T, int N>
__device__ __forceinline__ Vec<T, N> ldg_at(const T* base, long long offset) {
  const Vec<T, N>* p = reinterpret_cast<const Vec<T, N>*>(reinterpret_cast<const char*>(base) + offset);
#if defined(__CUDACC__)
  Vec<T, N> x;
  unsigned* w = reinterpret_cast<unsigned*>(&x);
  if constexpr (sizeof(x) == 16) {
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p));
  } else if constexpr (sizeof(x) == 8) {
    asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
  } else {
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
  }
  return x;
#else
  return ::emu::load(p, "global load");
#endif
}

// p[0, V) += v by global reductions: the atomic write-back of the float32 vector kernels (epilogue.cuh). On
// sm_90 a pair or quad is one `red.global.add.v2.f32` / `.v4.f32` (PTX ISA 8.1, "red": vector reductions of
// f32 in the global space; each element a relaxed, gpu-scope reduction of its own, as atomicAdd's, with the
// same flush of subnormals to zero); elsewhere V scalar atomicAdd. p is aligned to V elements (an aligned
// vector access; the emulator checks it, as it checks loads).
template <class T, int V>
__device__ __forceinline__ void red_add(T* p, const Vec<T, V>& v) {
#if defined(__CUDACC__)
  constexpr bool kQuad = stdx::is_same_v<T, float> && V == 4, kPair = stdx::is_same_v<T, float> && V == 2;
// vector reductions: PTX ISA 8.1 (CUDA 12.1) and sm_90
#if __CUDA_ARCH__ >= 900 && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 1))
  constexpr bool kVector = kQuad || kPair;
#else
  constexpr bool kVector = false;
#endif
  if constexpr (kVector && kQuad) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "f"(v.v[0]), "f"(v.v[1]), "f"(v.v[2]), "f"(v.v[3]) : "memory");
  } else if constexpr (kVector && kPair) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" :: "l"(p), "f"(v.v[0]), "f"(v.v[1]) : "memory");
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) atomicAdd(p + i, v.v[i]);
  }
#else
  ::emu::red_add(reinterpret_cast<Vec<T, V>*>(p), v, "global reduction");
#endif
}

// An asynchronous copy of BYTES (4, 8 or 16) from global `src` to shared `dst` (PTX ISA, "cp.async", sm_80):
// zeros when `guard` is false (src-size 0: src is not read), as CUTLASS's cp_async_zfill. 16-byte copies bypass
// L1 (.cg); smaller ones may only go through it (.ca). The copy lands when a cp_async_wait lets its group
// complete, and other threads see it after the barrier that follows; the emulator performs it only then.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool guard) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  SB_SMEM_TRACE(dst, BYTES, true);
#if defined(__CUDACC__)
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = guard ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(to), "l"(src), "r"(src_bytes) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;"
                 :: "r"(to), "l"(src), "n"(BYTES), "r"(src_bytes) : "memory");
  }
#else
  ::emu::cp_async(dst, src, BYTES, guard ? BYTES : 0);
#endif
}

// cp.async.commit_group: the copies issued since the last commit form one group.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;" ::: "memory");
#else
  ::emu::cp_async_commit();
#endif
}

// cp.async.wait_group N: wait until at most the N newest groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
#else
  ::emu::cp_async_wait(N);
#endif
}

// ---- Hopper's asynchronous transactions (sm_90): mbarrier objects in shared
// memory and bulk copies that complete transaction bytes on them (PTX ISA, "mbarrier", "cp.async.bulk"). A
// phase of a barrier completes when its `count` arrivals are in and the bytes its arrivals expect (expect_tx)
// have landed; waiters name the phase by its parity. The emulator lands a bulk copy only when its phase
// completes (kernels/emu/cuda_emu.hpp).

// SB_SM90(code): the code where the target has it (sm_90 and later), a trap on older targets, which no kernel
// that uses these is built for.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define SB_SM90(...) fail("needs sm_90");
#else
#define SB_SM90(...) __VA_ARGS__
#endif

#if defined(__CUDACC__)
// The shared-memory address of `p` (a 32-bit shared window offset, as the PTX shared state space takes it): the
// GPU's operand; the emulator's calls take host pointers.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#endif

// `name`, a kernel's shared memory of type S (alignas(1024) for the 128-byte swizzle's atoms) beyond the 48 KiB a
// static __shared__ declaration holds: the block's dynamic shared memory on the GPU (the launch asks for sizeof(S)
// bytes, which the kernel's attribute allows), a static object of the kernel on the emulator.
#if defined(__CUDACC__)
#define SB_DYNAMIC_SHARED(S, name)                                         \
  extern __shared__ __align__(1024) unsigned char sb_dynamic_shared_[]; \
  S& name = *reinterpret_cast<S*>(sb_dynamic_shared_)
#else
#define SB_DYNAMIC_SHARED(S, name) static S name
#endif

// mbarrier.init: a barrier whose phases each take `count` arrivals. One thread initialises it, then
// mbarrier_init_fence and a block barrier make it visible to the others (and to the async proxy).
__device__ __forceinline__ void mbarrier_init(stdx::uint64_t* bar, unsigned count) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count)
                             : "memory"););
#else
  ::emu::mbarrier_init(bar, count);
#endif
}

__device__ __forceinline__ void mbarrier_init_fence() {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"););
#endif
}

// mbarrier.arrive: one arrival on the current phase.
__device__ __forceinline__ void mbarrier_arrive(stdx::uint64_t* bar) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory"););
#else
  ::emu::mbarrier_arrive(bar, 0);
#endif
}

// mbarrier.arrive.expect_tx: the current phase also waits for `bytes` more transaction bytes, then one arrival.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(stdx::uint64_t* bar, unsigned bytes) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                       ::"r"(shared_address(bar)), "r"(bytes) : "memory"););
#else
  ::emu::mbarrier_arrive(bar, bytes);
#endif
}

// Wait until the phase of parity `parity` of `bar` completes (mbarrier.try_wait.parity in a loop).
__device__ __forceinline__ void mbarrier_wait(stdx::uint64_t* bar, unsigned parity) {
#if defined(__CUDACC__)
  SB_SM90(unsigned done = 0; do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
  } while (!done););
#else
  ::emu::mbarrier_wait(bar, parity);
#endif
}

// cp.async.bulk global -> shared: `bytes` (a multiple of 16; both addresses 16-byte aligned) copied by the
// async proxy, completing `bytes` transaction bytes on `bar` when they land.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, stdx::uint64_t* bar) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      ::"r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar)) : "memory"););
#else
  ::emu::bulk_copy(dst, src, bytes, bar);
#endif
}

// A TMA tensor map: CUtensorMap's 128 bytes, 64-byte aligned, a __grid_constant__ kernel parameter. The driver
// encodes it for a GPU (cuTensorMapEncodeTiled); the emulator reads its own encoding from the same bytes
// (emu_tensor_map_encode).
struct alignas(64) TensorMap {
  unsigned char bytes[128];
};

// cp.async.bulk.tensor, 2-D tile mode: the box of `map` whose first element is at (c0, c1) (c0 along the
// contiguous dimension) into shared `dst` (128-byte aligned; 1024 with the 128-byte swizzle), in the map's
// swizzle, zeros outside the tensor; its bytes complete on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int c0, int c1, stdx::uint64_t* bar) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(shared_address(dst)), "l"(map), "r"(c0), "r"(c1), "r"(shared_address(bar)) : "memory"););
#else
  ::emu::tensor_copy_2d(dst, map, c0, c1, bar);
#endif
}

// fence.proxy.async.shared::cta: the thread's shared-memory stores so far become visible to the async proxy
// (a TMA store's or wgmma's reads). A thread that writes a tile a bulk store reads fences, then a block barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("fence.proxy.async.shared::cta;" ::: "memory"););
#else
  ::emu::fence_proxy_async();
#endif
}

// The byte offset in a 1024-byte aligned tile of 128-byte rows where the 128-byte swizzle puts byte `offset`
// of the unswizzled tile: its 16-byte chunk (bits 4-6) XORed with its row within the pattern (bits 7-9), the
// layout tma_load_2d leaves and tma_store_2d reads under CU_TENSOR_MAP_SWIZZLE_128B.
__device__ __forceinline__ constexpr unsigned swizzle_128b(unsigned offset) {
  return offset ^ (((offset >> 7) & 7u) << 4);
}

// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group: the box of `map` at (c0, c1) from shared `src`
// (laid out as tma_load_2d leaves it), elements outside the tensor dropped. ADD: cp.reduce.async.bulk.tensor
// .add, each element added to global memory. In the thread's bulk group; bulk_commit closes it, bulk_wait_read
// waits until the tile may be written again. These three take `issue`, a predicate of the instruction itself
// (one lane of a warp issues, the others skip it): no branch, so the compiler still sees the warp converged.
template <bool ADD = false>
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, int c0, int c1, const void* src,
                                             bool issue = true) {
#if defined(__CUDACC__)
  if constexpr (ADD) {
    SB_SM90(asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                         "@p cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n}"
                         ::"l"(map), "r"(c0), "r"(c1), "r"(shared_address(src)), "r"(static_cast<int>(issue))
                         : "memory"););
  } else {
    SB_SM90(asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                         "@p cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n}"
                         ::"l"(map), "r"(c0), "r"(c1), "r"(shared_address(src)), "r"(static_cast<int>(issue))
                         : "memory"););
  }
#else
  if (issue) ::emu::tensor_store_2d(map, c0, c1, src, ADD);
#endif
}

// cp.async.bulk.commit_group: the thread's bulk stores since the last commit form one bulk group.
__device__ __forceinline__ void bulk_commit(bool issue = true) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p cp.async.bulk.commit_group;\n}"
                       ::"r"(static_cast<int>(issue)) : "memory"););
#else
  if (issue) ::emu::bulk_commit();
#endif
}

// cp.async.bulk.wait_group.read N: every bulk group but the newest N has read its shared source.
template <int N>
__device__ __forceinline__ void bulk_wait_read(bool issue = true) {
#if defined(__CUDACC__)
  SB_SM90(asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p cp.async.bulk.wait_group.read %0;\n}"
                       ::"n"(N), "r"(static_cast<int>(issue)) : "memory"););
#else
  if (issue) ::emu::bulk_wait(N);
#endif
}

// ---- wgmma (sm_90a; PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): a warpgroup of 4
// warps multiplies K-major tf32 tiles that shared-memory matrix descriptors describe, asynchronously.

// SB_SM90A(code): the code on sm_90a (-arch=sm_90a: __CUDA_ARCH_FEAT_SM90_ALL), a trap on other targets.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SB_SM90A(...) fail("needs sm_90a");
#else
#define SB_SM90A(...) __VA_ARGS__
#endif

// A matrix descriptor of the K-major tf32 tile at `tile`: bits 0-13 its shared address >> 4, 16-29 `lbo` >> 4 (the
// bytes between core matrices along k; unused by the 128-byte swizzle), 32-45 `sbo` >> 4 (the bytes between
// groups of 8 rows: 1024 in the 128-byte swizzle's atoms), 62-63 the swizzle (0 none, 1 the 128-byte one).
// The emulator's hold the address relative to `origin`, the kernel's shared tiles (1024-byte aligned).
__device__ __forceinline__ stdx::uint64_t wgmma_desc([[maybe_unused]] const void* origin, const void* tile,
                                                     unsigned lbo, unsigned sbo, unsigned swizzle) {
#if defined(__CUDACC__)
  const stdx::uint64_t address = shared_address(tile);
#else
  const stdx::uint64_t address = static_cast<stdx::uint64_t>(static_cast<const char*>(tile) -
                                                            static_cast<const char*>(origin));
#endif
  return ((address >> 4) & 0x3FFF) | (stdx::uint64_t{(lbo >> 4) & 0x3FFF} << 16) |
         (stdx::uint64_t{(sbo >> 4) & 0x3FFF} << 32) | (stdx::uint64_t{swizzle & 3} << 62);
}

// The accumulator's registers pinned for the compiler (CUTLASS's warpgroup_fence_operand): no read or write of
// d moves across this point, so none lands between a wgmma_fence or wgmma_wait and the wgmma it guards. Call
// it before wgmma_fence and after wgmma_wait.
template <int K>
__device__ __forceinline__ void wgmma_fence_operand([[maybe_unused]] float (&d)[K]) {
#if defined(__CUDACC__)
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+f"(d[i])::"memory");
#endif
}

// wgmma.fence.sync.aligned: before a warpgroup's first wgmma, and between the thread's own accesses of its
// accumulator and the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDACC__)
  SB_SM90A(asm volatile("wgmma.fence.sync.aligned;" ::: "memory"););
#else
  ::emu::wgmma_fence();
#endif
}

// wgmma.commit_group.sync.aligned: the thread's wgmma since the last commit form one wgmma group.
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDACC__)
  SB_SM90A(asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"););
#else
  ::emu::wgmma_commit();
#endif
}

// wgmma.wait_group.sync.aligned N: every wgmma group but the newest N is complete (their accumulators written,
// their tiles read).
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDACC__)
  SB_SM90A(asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"););
#else
  ::emu::wgmma_wait(N);
#endif
}

// wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 (N = 8, 64 or 128): D (64 x N) = A (64 x 8) B^T + (accumulate ? D : 0), A and
// B K-major in shared memory (desc_a, desc_b from wgmma_desc). The thread's N / 2 accumulators are, in warp
// w of the warpgroup with g = lane / 4 and t = lane % 4: d[4 i + e] = D[16 w + g + 8 (e / 2)][8 i + 2 t + e % 2].
// The tensor cores read only the upper 19 bits of each input (tf32). `origin` is the emulator's (wgmma_desc).
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], stdx::uint64_t desc_a, stdx::uint64_t desc_b,
                                           bool accumulate, [[maybe_unused]] const void* origin) {
  static_assert(N == 8 || N == 64 || N == 128, "m64n8k8, m64n64k8 and m64n128k8 (others: add their operand lists)");
#if defined(__CUDACC__)
  if constexpr (N == 8) {
    SB_SM90A(asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));)
  }
  if constexpr (N == 64) {
    SB_SM90A(asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));)
  }
  if constexpr (N == 128) {
    SB_SM90A(asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));)
  }
#else
  ::emu::wgmma_issue(d, N, desc_a, desc_b, accumulate, origin);
#endif
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 N: the warpgroup's threads each take (inc) or give back (dec)
// registers to hold N (24 to 256, a multiple of 8), as a warp-specialized kernel's producer gives its registers
// to the consumers. Checked when compiled, on both targets; the emulator has no registers to move.
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if defined(__CUDACC__)
  SB_SM90A(asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)););
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if defined(__CUDACC__)
  SB_SM90A(asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)););
#endif
}

}  // namespace sb
