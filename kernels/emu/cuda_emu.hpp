// CPU emulation of the CUDA execution model, enough for the kernels in kernels/.
//
// One OS thread per CUDA thread of a block; the threads persist for the whole launch and run the blocks one
// after another, meeting at a barrier after each block so that __shared__ storage (a function-local static)
// is never reused while a slow thread still reads it. __syncthreads is the same std::barrier; atomicAdd is
// std::atomic_ref<T>::fetch_add. Blocks never run concurrently, so a launch that races between blocks on the
// GPU (plain write-back of two products into one C block) is NOT caught here; the launch builder forbids it.
//
// Warp collectives (mma.sync): the lanes of a warp meet at a warp barrier of their own and exchange their
// operands through the warp's slots (warp_gather); a block's last warp may be partial.
//
// Shared-memory traces: while tracing is on (emu_trace_enable), every sb::lds / sb::sts records (block,
// thread, the thread's access number within the block, address, bytes, load or store). All lanes of a warp
// run the same sequence of shared-memory accesses, so the n-th access of the 32 lanes of a warp is one
// warp-level instruction; strassenbench.fused.smem counts its wavefronts.
//
// Asynchronous copies (cp.async, sb::cp_async): a thread's copies are queued in its commit groups and done
// only when a cp.async.wait_group lets them complete (cp_async_wait): the latest the PTX ISA allows, so a read
// of the shared tile before its wait and barrier sees the stage's old data, and a kernel that forgets one is
// wrong here. A copy still pending when the thread leaves its block is a fault (check_async_done).
//
// mbarrier objects and bulk copies (sb::mbarrier_*, sb::bulk_copy; PTX ISA, "mbarrier" and "cp.async.bulk",
// sm_90): the emulator keeps each barrier's state beside the block, keyed by its shared address: the expected
// arrival count, the current phase's pending arrivals and transaction bytes, its parity, and the bulk copies
// that complete transactions on it. A copy is queued and lands only when its barrier's phase completes (every
// arrival in, and the copies then performed bring the transaction count to zero): the latest the PTX ISA
// allows, so a read of the tile before the wait on that phase sees the old data. Faults: a barrier used before
// it is initialised, more arrivals or bytes than the phase expects, a copy that is not 16-byte aligned or whole
// 16-byte units, a wait that never completes, copies still pending when the block ends, and a copy landing on
// bytes a thread accessed and released by an arrival without a fence.proxy.async (check_released).
//
// Alignment: every access of sb::ldg / ldg_at / lds / sts and of the epilogue's vectors (emu::load, emu::store)
// and every ldmatrix row address is checked (check_aligned); the first misaligned one, which faults on the
// GPU, is kept for emu_fault_take. Bounds: those global accesses (and red_add's, cp.async's sources) lie inside
// the launch's operands and workspaces where the engine gave them (inside_global), or are a fault too.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace emu {

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
inline thread_local std::barrier<>* block_barrier = nullptr;

// One warp of the running block: its barrier and a slot of kSlotBytes per lane for warp_gather.
struct Warp {
  static constexpr unsigned kSlotBytes = 96;  // the largest: an f64 m16n8k16 lane's 8 + 4 doubles
  explicit Warp(unsigned lanes_) : lanes(lanes_), barrier(static_cast<std::ptrdiff_t>(lanes_)) {}
  unsigned lanes;  // 32, fewer in a block's last warp
  std::barrier<> barrier;
  alignas(16) unsigned char slots[32][kSlotBytes];
};
inline thread_local Warp* warp = nullptr;
inline thread_local unsigned lane = 0;

// Every lane of the warp gives `mine` and gets every lane's (index: lane). All lanes must call it, as they
// must execute a .sync.aligned instruction together on the GPU.
template <class T>
inline std::array<T, 32> warp_gather(const T& mine) {
  static_assert(sizeof(T) <= Warp::kSlotBytes, "a lane's operands must fit its slot");
  std::memcpy(warp->slots[lane], &mine, sizeof(T));
  warp->barrier.arrive_and_wait();
  std::array<T, 32> all{};
  for (unsigned l = 0; l < 32; ++l) std::memcpy(&all[l], warp->slots[l], sizeof(T));
  warp->barrier.arrive_and_wait();  // the slots are free again
  return all;
}

inline unsigned warp_lanes() { return warp->lanes; }

template <class T>
inline T atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}

// One shared-memory access of one thread (24 bytes; strassenbench.fused.smem reads this layout).
struct SmemRecord {
  std::uint64_t address;
  std::uint32_t block;   // linear block index x + gx (y + gy z)
  std::uint32_t thread;  // linear thread index in the block
  std::uint32_t seq;     // the thread's n-th shared-memory access in this block
  std::uint16_t bytes;
  std::uint16_t store;
};
static_assert(sizeof(SmemRecord) == 24, "record layout is read by strassenbench.fused.smem");

inline std::atomic<bool> trace_on{false};
inline std::mutex trace_mutex;
inline std::vector<SmemRecord> trace_log;
inline thread_local std::vector<SmemRecord> trace_local;
inline thread_local std::uint32_t trace_seq = 0;

// The bytes [lo, hi) that span a thread's generic shared-memory stores (sb::sts) since its last
// fence.proxy.async (sb::fence_proxy_async): what the async proxy (a TMA store's read of a tile) must not read
// before the fence. One span a thread, which may over-approximate: a thread whose stores straddle the tile
// without touching it is taken to have written it. Relaxed atomics: other threads read a thread's spans
// (any_unfenced) while it updates them, and each bound alone is what they compare.
struct Unfenced {
  static constexpr auto kRelaxed = std::memory_order_relaxed;
  std::atomic<std::uintptr_t> lo{~std::uintptr_t{0}}, hi{0};
  Unfenced() = default;
  Unfenced(const Unfenced& o) noexcept : lo(o.lo.load(kRelaxed)), hi(o.hi.load(kRelaxed)) {}
  Unfenced& operator=(const Unfenced& o) noexcept {
    lo.store(o.lo.load(kRelaxed), kRelaxed);
    hi.store(o.hi.load(kRelaxed), kRelaxed);
    return *this;
  }
  void add(std::uintptr_t at, std::uintptr_t bytes) noexcept {  // by the owning thread only
    if (at < lo.load(kRelaxed)) lo.store(at, kRelaxed);
    if (at + bytes > hi.load(kRelaxed)) hi.store(at + bytes, kRelaxed);
  }
  bool meets(std::uintptr_t from, std::uintptr_t to) const noexcept {
    return lo.load(kRelaxed) < to && from < hi.load(kRelaxed);
  }
  bool empty() const noexcept { return lo.load(kRelaxed) >= hi.load(kRelaxed); }
};
inline thread_local Unfenced unfenced;
inline std::vector<Unfenced*> block_unfenced;  // every thread's, by linear thread index (set at launch)
// The same span of its generic shared-memory loads (sb::lds) since its last fence.proxy.async: what the async
// proxy must not write (a bulk copy landing) once the thread has released the bytes by an mbarrier arrival.
inline thread_local Unfenced unfenced_loads;

inline void trace_smem(const void* p, unsigned bytes, bool store) {
  (store ? unfenced : unfenced_loads).add(reinterpret_cast<std::uintptr_t>(p), bytes);
  if (!trace_on.load(std::memory_order_relaxed)) return;
  const std::uint32_t block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const std::uint32_t thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  trace_local.push_back({reinterpret_cast<std::uint64_t>(p), block, thread, trace_seq++,
                         static_cast<std::uint16_t>(bytes), static_cast<std::uint16_t>(store)});
}

// The running launch's kernel (one launch at a time) and the first misaligned access since the last
// emu_fault_take.
inline const char* kernel_name = "";
inline std::mutex fault_mutex;
inline std::string fault;

// PTX ISA, "Addresses as Operands": the address of an ld/st is aligned to the size of the access (a GPU
// faults with cudaErrorMisalignedAddress otherwise), and ldmatrix's row addresses to 16 bytes. The fault is
// recorded and the thread goes on: stopping it would leave the rest of its block waiting at a barrier.
inline void check_aligned(const void* p, unsigned bytes, const char* what) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address % bytes == 0) return;
  std::lock_guard<std::mutex> lock(fault_mutex);
  if (!fault.empty()) return;
  char message[512];
  std::snprintf(message, sizeof message, "misaligned %u-byte %s at 0x%llx in %s (block (%u,%u,%u), thread %u)",
                bytes, what, static_cast<unsigned long long>(address), kernel_name, blockIdx.x, blockIdx.y,
                blockIdx.z, threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  fault = message;
}

// The global memory a launch may touch: [first, last) byte ranges (its operands, views included, and
// workspaces) that the engine gives before the launch (emu_bounds_set); none given, nothing is checked (a
// kernel run through the emulator's entry points by the CPU device). Set between launches, read during one.
inline std::vector<std::pair<std::uintptr_t, std::uintptr_t>> global_bounds;

// Whether [p, p + bytes) lies inside one range of global_bounds. An access outside them (on a GPU a read of
// another allocation's data or an illegal-address fault) is recorded as the launch's fault and not made: the
// caller reads zeros and writes nothing, so that the emulator's own process never touches memory it does not
// own. `what` names the access: "global load", "global store", "global reduction", "global source of a
// cp.async" are checked, shared-memory accesses ("shared load", ...) are not. Not thread-safe against
// emu_bounds_set: the engine sets the bounds between launches (strassenbench.fused.emu.run holds a lock).
inline bool inside_global(const void* p, unsigned bytes, const char* what) {
  if (global_bounds.empty() || std::strncmp(what, "global ", 7) != 0) return true;
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& [lo, hi] : global_bounds)
    if (first >= lo && first + bytes <= hi) return true;
  std::lock_guard<std::mutex> lock(fault_mutex);
  if (!fault.empty()) return false;
  char message[512];
  std::snprintf(message, sizeof message, "out-of-bounds %u-byte %s at 0x%llx in %s (block (%u,%u,%u), thread %u)",
                bytes, what, static_cast<unsigned long long>(first), kernel_name, blockIdx.x, blockIdx.y,
                blockIdx.z, threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  fault = message;
  return false;
}

// One checked access of a V at p, by memcpy through a void pointer (whose alignment the compiler cannot take
// from V): a misaligned one then reads and writes what it would if it were allowed, where *p would be
// undefined (g++ moves a 16-byte aligned Vec with movaps, which faults on x86).
template <class V>
inline V load(const V* p, const char* what) {
  check_aligned(p, sizeof(V), what);
  V value{};
  if (!inside_global(p, sizeof(V), what)) return value;
  const void* from = p;
  std::memcpy(&value, from, sizeof(V));
  return value;
}

template <class V>
inline void store(V* p, const V& value, const char* what) {
  check_aligned(p, sizeof(V), what);
  if (!inside_global(p, sizeof(V), what)) return;
  void* to = p;
  std::memcpy(to, &value, sizeof(V));
}

// A vector reduction (sb::red_add): aligned as a V-wide access, each element then a relaxed atomic add of its
// own (PTX ISA, "red": a vector red is a reduction per element, not one atomic access).
template <class V>
inline void red_add(V* p, const V& value, const char* what) {
  check_aligned(p, sizeof(V), what);
  if (!inside_global(p, sizeof(V), what)) return;
  using T = std::remove_cvref_t<decltype(value.v[0])>;
  T* first = reinterpret_cast<T*>(static_cast<void*>(p));
  for (const T& x : value.v) atomic_add(first++, x);
}

// The thread's cp.async copies: the open group (not yet committed) and the committed ones, oldest first.
struct AsyncCopy {
  void* dst;
  const void* src;
  unsigned bytes, src_bytes;
};
// A thread's asynchronous operations in commit groups (cp.async's, and the bulk stores' bulk groups): the open
// group and the committed ones, oldest first; wait(n, done) does every operation of all but the newest n.
template <class Op>
struct Groups {
  std::vector<Op> open;
  std::deque<std::vector<Op>> committed;
  void commit() {
    committed.push_back(std::move(open));
    open.clear();
  }
  template <class Done>
  void wait(unsigned newest, const Done& done) {
    for (; committed.size() > newest; committed.pop_front())
      for (const Op& op : committed.front()) done(op);
  }
  // Whether any operation is still pending; then none is.
  bool drop() {
    bool pending = !open.empty();
    for (const auto& group : committed) pending = pending || !group.empty();
    open.clear();
    committed.clear();
    return pending;
  }
};
inline thread_local Groups<AsyncCopy> async_copies;

// cp.async [dst], [src], bytes, src_bytes (PTX ISA, "cp.async"): dst and src aligned to `bytes` (src only
// read when src_bytes > 0); the copy is queued, and the bytes past src_bytes are zeros.
inline void cp_async(void* dst, const void* src, unsigned bytes, unsigned src_bytes) {
  check_aligned(dst, bytes, "cp.async shared destination");
  if (src_bytes > 0) check_aligned(src, bytes, "cp.async global source");
  if (src_bytes > 0 && !inside_global(src, src_bytes, "global source of a cp.async")) src_bytes = 0;
  async_copies.open.push_back({dst, src, bytes, src_bytes});
}

// cp.async.commit_group: the copies issued since the last commit become one group (possibly empty).
inline void cp_async_commit() { async_copies.commit(); }

// cp.async.wait_group n: every committed group but the newest n completes now.
inline void cp_async_wait(unsigned newest) {
  async_copies.wait(newest, [](const AsyncCopy& c) {
    unsigned char bytes[16] = {};
    if (c.src_bytes > 0) std::memcpy(bytes, c.src, c.src_bytes);
    std::memcpy(c.dst, bytes, c.bytes);
  });
}

// Records the first fault of a launch (what emu_fault_take returns), naming the kernel, block and thread.
inline void record_fault(const char* what) {
  std::lock_guard<std::mutex> lock(fault_mutex);
  if (!fault.empty()) return;
  char message[512];
  std::snprintf(message, sizeof message, "%s in %s (block (%u,%u,%u), thread %u)", what, kernel_name, blockIdx.x,
                blockIdx.y, blockIdx.z, threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  fault = message;
}

// A 2-D tiled tensor map, the emulator's encoding in CUtensorMap's 128 bytes (emu_tensor_map_encode): the
// tensor's base, its extents (dim 0 contiguous), the bytes between its rows, the box a copy brings, the element
// size and the swizzle (0, or 128: the 128-byte pattern).
struct TensorMap {
  static constexpr std::uint64_t kMagic = 0x53427465'6e736f72ull;  // "SBtensor": encoded, not garbage
  std::uint64_t magic;
  const unsigned char* base;
  std::uint64_t row_stride;
  std::uint32_t dims[2], box[2];
  std::uint32_t elem_bytes, swizzle;
};
static_assert(sizeof(TensorMap) <= 128, "a tensor map is 128 bytes");

// The encoder's checks (cuTensorMapEncodeTiled's, for what this emulator encodes): 0, or what is wrong.
inline const char* tensor_map_problem(const void* base, unsigned elem_bytes, unsigned dim0, unsigned dim1,
                                      unsigned long long row_stride, unsigned box0, unsigned box1,
                                      unsigned swizzle) {
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) return "element size";
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) return "base address not 16-byte aligned";
  if (dim0 == 0 || dim1 == 0) return "empty extent";
  if (row_stride % 16 != 0 || row_stride >= (1ull << 40) || row_stride < 1ull * dim0 * elem_bytes)
    return "row stride (a multiple of 16 bytes, at least a row, under 2^40)";
  if (box0 == 0 || box1 == 0 || box0 > 256 || box1 > 256) return "box extent outside 1 to 256";
  if (box0 * elem_bytes % 16 != 0) return "box row not a multiple of 16 bytes";
  if (swizzle != 0 && swizzle != 128) return "swizzle (0 or 128 bytes)";
  if (swizzle == 128 && box0 * elem_bytes != 128) return "a 128-byte swizzle takes 128-byte box rows here";
  return nullptr;
}

// The shared-memory byte of the box's element (x, y) in a copy to `dst`: rows box0 elements apart; with the
// 128-byte swizzle (CUDA's CU_TENSOR_MAP_SWIZZLE_128B, CuTe's Swizzle<3, 4, 3> on bytes) the 16-byte chunk index
// (address bits 4-6) XORed with the row within the 1024-byte pattern (bits 7-9), from the address itself.
inline unsigned char* tensor_box_byte(const TensorMap& map, unsigned char* dst, unsigned x, unsigned y) {
  std::uintptr_t at = reinterpret_cast<std::uintptr_t>(dst) + (1ull * y * map.box[0] + x) * map.elem_bytes;
  if (map.swizzle == 128) at ^= ((at >> 7) & 7u) << 4;
  return reinterpret_cast<unsigned char*>(at);
}

// A queued bulk copy: `bytes` from src, or (map set) the box of the tensor map at coordinates (c0, c1).
struct BulkCopy {
  void* dst;
  const void* src;
  unsigned bytes;
  bool tensor = false;
  TensorMap map{};
  int c0 = 0, c1 = 0;
};

// Every element (x, y) of the box of map at (c0, c1), in a tile at `tile` as tma_load_2d lays it out:
// f(its shared byte, its global byte or nullptr outside the tensor).
template <class Tile, class F>
inline void for_box(const TensorMap& m, int c0, int c1, Tile* tile, const F& f) {
  for (unsigned y = 0; y < m.box[1]; ++y)
    for (unsigned x = 0; x < m.box[0]; ++x) {
      const long long gx = 1ll * c0 + x, gy = 1ll * c1 + y;
      const bool inside = gx >= 0 && gy >= 0 && gx < m.dims[0] && gy < m.dims[1];
      f(tensor_box_byte(m, const_cast<unsigned char*>(tile), x, y),
        inside ? const_cast<unsigned char*>(m.base) + gy * m.row_stride + gx * m.elem_bytes : nullptr);
    }
}

inline void check_released(const void* dst, std::size_t bytes);

// Lands a queued copy. A tensor copy writes the whole box: elements outside the tensor's extents are zeros.
inline void land(const BulkCopy& c) {
  check_released(c.dst, c.bytes);
  if (!c.tensor) {
    std::memcpy(c.dst, c.src, c.bytes);
    return;
  }
  auto* tile = static_cast<unsigned char*>(c.dst);
  for_box(c.map, c.c0, c.c1, tile, [&](unsigned char* to, const unsigned char* global) {
    if (global != nullptr)
      std::memcpy(to, global, c.map.elem_bytes);
    else
      std::memset(to, 0, c.map.elem_bytes);
  });
}
struct Mbarrier {
  unsigned expected = 0, pending = 0;  // arrivals a phase expects, and those still to come in this one
  long long tx = 0;                    // transaction bytes expected and not yet completed in this phase
  unsigned parity = 0;                 // the current (incomplete) phase's parity
  std::vector<BulkCopy> copies;        // queued, landing when the phase completes
};
inline std::mutex mbarrier_mutex;
inline std::map<const void*, Mbarrier> mbarriers;  // the running block's (blocks run one at a time)
inline std::atomic<bool> mbarrier_used{false};
inline std::condition_variable mbarrier_changed;  // notified when a phase's last arrival is in or a copy is queued
// Generic shared-memory accesses a thread released by an mbarrier arrival without a fence.proxy.async before it
// (its unfenced spans then): a bulk copy that lands there is the async proxy writing after generic accesses it
// is not ordered after (the PTX ISA's memory model asks a proxy fence), a fault. Under mbarrier_mutex.
inline std::vector<Unfenced> released_unfenced;

// A copy landing on [dst, dst + bytes): a fault where a released unfenced span meets it (those spans are then
// dropped: one fault a mistake). Under mbarrier_mutex.
inline void check_released(const void* dst, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(dst), hi = lo + bytes;
  const auto meets = [&](const Unfenced& u) { return u.meets(lo, hi); };
  const std::size_t before = released_unfenced.size();
  released_unfenced.erase(std::remove_if(released_unfenced.begin(), released_unfenced.end(), meets),
                          released_unfenced.end());
  if (released_unfenced.size() == before) return;
  record_fault("a bulk copy lands on shared memory a thread accessed and released (mbarrier arrive) without a "
               "fence.proxy.async");
}

// mbarrier.init: `count` arrivals a phase (1 to 2^20 - 1), phase 0.
inline void mbarrier_init(void* bar, unsigned count) {
  check_aligned(bar, 8, "mbarrier");
  if (count == 0 || count >= (1u << 20)) record_fault("mbarrier.init with an arrival count outside 1 to 2^20 - 1");
  std::lock_guard<std::mutex> lock(mbarrier_mutex);
  mbarrier_used = true;
  const auto [it, fresh] = mbarriers.try_emplace(bar);
  if (!fresh) record_fault("mbarrier.init on a barrier this block already initialised (undefined without mbarrier.inval)");
  it->second = Mbarrier{};
  it->second.expected = it->second.pending = count;
}

// Under mbarrier_mutex (record_fault takes fault_mutex, which is never held while taking this one).
inline Mbarrier* find_mbarrier(const void* bar, const char* what) {
  const auto it = mbarriers.find(bar);
  if (it != mbarriers.end()) return &it->second;
  record_fault(what);
  return nullptr;
}

// mbarrier.arrive[.expect_tx]: the phase expects `tx` more transaction bytes, then one arrival.
inline void mbarrier_arrive(void* bar, unsigned tx) {
  std::lock_guard<std::mutex> lock(mbarrier_mutex);
  Mbarrier* b = find_mbarrier(bar, "mbarrier.arrive on a barrier that was not initialised");
  if (b == nullptr) return;
  b->tx += tx;
  if (b->tx >= (1ll << 20)) record_fault("an mbarrier phase expecting 2^20 or more transaction bytes");
  for (const Unfenced* span : {&unfenced, &unfenced_loads})
    if (!span->empty()) released_unfenced.push_back(*span);
  if (b->pending == 0) {
    record_fault("mbarrier.arrive on a phase whose arrivals are all in");
    return;
  }
  if (--b->pending == 0) mbarrier_changed.notify_all();
}

// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: `bytes` (a multiple of 16) from global
// `src` to shared `dst`, both 16-byte aligned, completing `bytes` transaction bytes on `bar` when it lands.
inline void bulk_copy(void* dst, const void* src, unsigned bytes, void* bar) {
  check_aligned(dst, 16, "cp.async.bulk shared destination");
  check_aligned(src, 16, "cp.async.bulk global source");
  if (bytes == 0 || bytes % 16 != 0) record_fault("cp.async.bulk of a size that is not a positive multiple of 16");
  std::lock_guard<std::mutex> lock(mbarrier_mutex);
  Mbarrier* b = find_mbarrier(bar, "cp.async.bulk completing on a barrier that was not initialised");
  if (b != nullptr) b->copies.push_back({dst, src, bytes});
  mbarrier_changed.notify_all();
}

// A tensor copy's map, read from its 128 bytes, and its shared tile checked (`what` names the tile): false
// (a fault) when the map was never encoded.
inline bool tensor_map_of(const void* map, const void* tile, const char* what, TensorMap& m) {
  std::memcpy(&m, map, sizeof m);
  if (m.magic != TensorMap::kMagic) {
    record_fault("cp.async.bulk.tensor with a tensor map that was not encoded");
    return false;
  }
  check_aligned(tile, m.swizzle == 128 ? 1024 : 128, what);
  return true;
}

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes: the box of `map` whose
// first element is at (c0, c1) into shared `dst`, completing the box's bytes on `bar` when it lands. The PTX ISA
// asks 128-byte alignment; with the 128-byte swizzle this emulator asks 1024 (its convention: the pattern then
// starts with the tile, as CUTLASS lays its tiles out). Both are checked on the host's address of the tile, which
// may be better aligned than its declaration promises the GPU's: a kernel declares its tiles alignas(1024).
inline void tensor_copy_2d(void* dst, const void* map, int c0, int c1, void* bar) {
  TensorMap m;
  if (!tensor_map_of(map, dst, "cp.async.bulk.tensor shared destination", m)) return;
  std::lock_guard<std::mutex> lock(mbarrier_mutex);
  Mbarrier* b = find_mbarrier(bar, "cp.async.bulk.tensor completing on a barrier that was not initialised");
  if (b != nullptr) b->copies.push_back({dst, nullptr, m.box[0] * m.box[1] * m.elem_bytes, true, m, c0, c1});
  mbarrier_changed.notify_all();
}

// fence.proxy.async.shared::cta: the thread's generic shared stores so far are visible to the async proxy.
inline void fence_proxy_async() {
  unfenced = Unfenced{};
  unfenced_loads = Unfenced{};
}

// The async proxy reads shared [p, p + bytes): a thread (of the block, the reader too) whose generic stores
// there were not fenced is a fault. The block's threads have passed a barrier since their stores, as any
// producer of the tile must before the copy is issued.
// Whether some thread's unfenced stores meet the bytes [lo, hi).
inline bool any_unfenced(std::uintptr_t lo, std::uintptr_t hi) {
  for (const Unfenced* u : block_unfenced)
    if (u != nullptr && u->meets(lo, hi)) return true;
  return false;
}

inline void async_proxy_read(const void* p, std::size_t bytes, const char* what) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (!any_unfenced(lo, lo + bytes)) return;
  char message[256];
  std::snprintf(message, sizeof message, "%s reads shared memory stored without a fence.proxy.async", what);
  record_fault(message);
}

// The thread's bulk stores and reductions (cp.async.bulk.tensor global <- shared, cp.reduce.async.bulk.tensor):
// the open bulk group and the committed ones, oldest first. Each reads its tile when its group is waited for
// (sb::bulk_wait / bulk_wait_read): the latest the PTX ISA allows, so a kernel that writes the tile again before
// the wait stores what it wrote then.
struct BulkStore {
  TensorMap map;
  const unsigned char* src;
  int c0, c1;
  bool add;
};
inline thread_local Groups<BulkStore> bulk_stores;

// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group (add: cp.reduce.async.bulk.tensor ... .add): the box
// of `map` at (c0, c1) from shared `src` (laid out as tma_load_2d leaves it), elements outside the tensor
// dropped; a reduction adds each element to global memory (f32 or f64, by the map's element size).
inline void tensor_store_2d(const void* map, int c0, int c1, const void* src, bool add) {
  TensorMap m;
  if (!tensor_map_of(map, src, "cp.async.bulk.tensor shared source", m)) return;
  if (add && m.elem_bytes != 4 && m.elem_bytes != 8) record_fault("a tensor reduction of an element size not f32/f64");
  async_proxy_read(src, 1ull * m.box[0] * m.box[1] * m.elem_bytes,
                   add ? "cp.reduce.async.bulk.tensor" : "cp.async.bulk.tensor");
  bulk_stores.open.push_back({m, static_cast<const unsigned char*>(src), c0, c1, add});
}

inline void bulk_commit() { bulk_stores.commit(); }

inline void bulk_wait(unsigned newest) {
  bulk_stores.wait(newest, [](const BulkStore& c) {
    for_box(c.map, c.c0, c.c1, c.src, [&](const unsigned char* tile, unsigned char* global) {
      if (global == nullptr) return;  // outside the tensor: dropped
      if (!c.add) {
        std::memcpy(global, tile, c.map.elem_bytes);
      } else if (c.map.elem_bytes == 4) {
        float v;
        std::memcpy(&v, tile, 4);
        atomic_add(reinterpret_cast<float*>(global), v);
      } else if (c.map.elem_bytes == 8) {
        double v;
        std::memcpy(&v, tile, 8);
        atomic_add(reinterpret_cast<double*>(global), v);
      }
    });
  });
}

// The TF32 tensor cores' arithmetic, shared by mma.sync (sb::mma_m16n8k8_tf32) and wgmma: each input cut to
// its TF32 bits (the upper 19), c and the eight products (exact: 11 x 11 significand bits) summed in k order in
// double, the sum rounded toward zero to FP32. The PTX ISA leaves the sum's order and rounding unspecified;
// truncation is what an H200 measurably does (data/nvidia-h200/3xtf32_bias.txt), and strassenbench.tensorcore
// is the same in NumPy.
inline float tf32_cut(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits &= 0xFFFFE000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}
inline float tf32_dot8(float c, const float* a, const float* b) {
  double sum = c;
  for (int k = 0; k < 8; ++k) sum += static_cast<double>(tf32_cut(a[k])) * static_cast<double>(tf32_cut(b[k]));
  float rounded = static_cast<float>(sum);
  if (std::fabs(static_cast<double>(rounded)) > std::fabs(sum)) rounded = std::nextafter(rounded, 0.0f);
  return rounded;
}

// wgmma (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate", sm_90a): a warpgroup's
// D (64 x N, f32) = A (64 x 8) B^T (N x 8, both tf32 from shared memory, K-major, by matrix descriptors)
// + D if scale_d. Each thread's operations are queued in wgmma groups (wgmma.commit_group) and done at the
// wgmma.wait_group that completes theirs: the latest the ISA allows, so a kernel that reads its accumulator
// or rewrites the tiles before the wait is wrong here. Each thread computes its own fragment: warp w of the
// warpgroup holds rows 16 w + g and 16 w + g + 8, and for each 8 columns i the columns 8 i + 2 t and
// 8 i + 2 t + 1 (g = lane / 4, t = lane % 4), d[4 i .. 4 i + 3] as mma.m16n8's accumulator.
struct Wgmma {
  float* d;
  int n;
  std::uint64_t desc_a, desc_b;
  bool scale_d;
  const unsigned char* origin;
  std::vector<float> operands;     // A's 64 x 8 and B's N x 8 as they were at the issue
  std::vector<float> accumulator;  // d at the issue, for the first operation in flight on d (else empty)
};
inline thread_local Groups<Wgmma> wgmma_ops;
inline thread_local bool wgmma_fenced = false;

// wgmma.mma_async is .sync.aligned: the 128 threads of a warpgroup (4 consecutive warps of the block's linear
// thread order) issue the same operations with the same descriptors, shape and scale-d. The first thread to
// make its k-th issue records it, the others must match it; at the end of the block every thread of a
// warpgroup must have issued as many.
struct WgmmaIssue {
  std::uint64_t desc_a, desc_b;
  int n;
  bool scale_d;
  const void* origin;
  bool operator==(const WgmmaIssue&) const = default;
};
inline std::mutex wgmma_mutex;
inline std::map<std::pair<unsigned, unsigned>, WgmmaIssue> wgmma_issues;  // (warpgroup, k): the running block's
inline std::map<unsigned, std::vector<unsigned>> wgmma_counts;           // warpgroup: each thread's issues
inline std::atomic<bool> wgmma_used{false};
inline thread_local unsigned wgmma_seq = 0;

inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }

// At the end of the thread's block: how many it issued, for check_wgmma_done (a thread that issued none is
// counted only if another issued before it got here; check_wgmma_done counts the others).
inline void count_wgmma_issues() {
  if (wgmma_seq == 0 && !wgmma_used) return;
  std::lock_guard<std::mutex> lock(wgmma_mutex);
  wgmma_counts[linear_thread() / 128].push_back(wgmma_seq);
  wgmma_seq = 0;
}

// After a block (one thread, the others held at the launch's barrier): in a warpgroup that issued any wgmma,
// all 128 threads issued as many.
inline void check_wgmma_done() {
  std::lock_guard<std::mutex> lock(wgmma_mutex);
  for (auto& [group, counts] : wgmma_counts) {
    const unsigned most = *std::max_element(counts.begin(), counts.end());
    if (most > 0 && std::count(counts.begin(), counts.end(), most) != 128)
      record_fault("the threads of a warpgroup issued different numbers of wgmma");
  }
  wgmma_counts.clear();
  wgmma_issues.clear();
}

// The shared byte of element (r, k) (row r of the 64 or N rows, k of the 8) of a K-major tf32 operand:
// descriptor bits 0-13 the start address >> 4, 16-29 the leading byte offset >> 4 (between core matrices along
// k), 32-45 the stride byte offset >> 4 (between groups of 8 rows), 49-51 the base offset, 62-63 the swizzle
// (0 none: 8 x 16-byte core matrices; 1: 128 bytes, rows 128 bytes apart in 1024-byte atoms; 2 and 3, the 64-
// and 32-byte swizzles, are not emulated). The emulator's descriptors hold addresses relative to the kernel's
// shared tiles (sb::wgmma_desc's `origin`, which must be 1024-byte aligned so that the swizzle, computed from
// the address, is the GPU's), as the GPU's hold them relative to the block's shared window.
inline const unsigned char* wgmma_element(std::uint64_t desc, const unsigned char* origin, int r, int k) {
  const std::uint64_t start = (desc & 0x3FFF) << 4, lbo = ((desc >> 16) & 0x3FFF) << 4,
                      sbo = ((desc >> 32) & 0x3FFF) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  std::uint64_t at = start + static_cast<std::uint64_t>(r / 8) * sbo;
  if (mode == 1) {
    at += static_cast<std::uint64_t>(r % 8) * 128 + 4ull * k;
    at ^= ((at >> 7) & 7u) << 4;
  } else {
    at += static_cast<std::uint64_t>(k / 4) * lbo + static_cast<std::uint64_t>(r % 8) * 16 + 4ull * (k % 4);
  }
  return origin + at;
}

// The operands one wgmma reads: A's 64 rows, then B's n, 8 floats each.
inline std::vector<float> wgmma_operands(std::uint64_t desc_a, std::uint64_t desc_b, int n,
                                         const unsigned char* origin) {
  std::vector<float> x(static_cast<std::size_t>(64 + n) * 8);
  for (int r = 0; r < 64 + n; ++r)
    for (int k = 0; k < 8; ++k)
      std::memcpy(&x[8 * r + k], wgmma_element(r < 64 ? desc_a : desc_b, origin, r < 64 ? r : r - 64, k), 4);
  return x;
}

inline void wgmma_issue(float* d, int n, std::uint64_t desc_a, std::uint64_t desc_b, bool scale_d,
                        const void* origin) {
  if (!wgmma_fenced) record_fault("wgmma.mma_async without a wgmma.fence before it");
  check_aligned(origin, 1024, "wgmma descriptors' shared origin");
  const unsigned group = linear_thread() / 128;
  if ((group + 1) * 128 > blockDim.x * blockDim.y * blockDim.z)
    record_fault("wgmma.mma_async by a warpgroup the block does not fill (128 threads)");
  {
    std::lock_guard<std::mutex> lock(wgmma_mutex);
    wgmma_used = true;
    const WgmmaIssue mine{desc_a, desc_b, n, scale_d, origin};
    const auto [it, first] = wgmma_issues.try_emplace({group, wgmma_seq++}, mine);
    if (!first && !(it->second == mine))
      record_fault("the threads of a warpgroup issued a wgmma with different descriptors, shape or scale-d");
  }
  for (std::uint64_t desc : {desc_a, desc_b}) {
    const unsigned mode = static_cast<unsigned>(desc >> 62);
    if (mode == 2 || mode == 3) record_fault("a wgmma descriptor with the 64- or 32-byte swizzle (not emulated)");
    if (((desc >> 49) & 7) != 0) record_fault("a wgmma descriptor with a base offset (not emulated)");
  }
  const auto* base = static_cast<const unsigned char*>(origin);
  // The async proxy reads the operands: their stores must have been fenced (fence.proxy.async). Each 16-byte
  // piece is checked only when some thread's unfenced span meets the operand's span at all.
  for (auto [desc, rows] : {std::pair{desc_a, 64}, std::pair{desc_b, n}}) {
    std::uintptr_t lo = ~std::uintptr_t{0}, hi = 0;
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < 8; k += 4) {
        const auto at = reinterpret_cast<std::uintptr_t>(wgmma_element(desc, base, r, k));
        lo = at < lo ? at : lo;
        hi = at + 16 > hi ? at + 16 : hi;
      }
    if (!any_unfenced(lo, hi)) continue;
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < 8; k += 4) async_proxy_read(wgmma_element(desc, base, r, k), 16, "wgmma.mma_async");
  }
  Wgmma op{d, n, desc_a, desc_b, scale_d, base, wgmma_operands(desc_a, desc_b, n, base), {}};
  bool chained = false;  // another operation on d is in flight: its result is this one's input
  for (const Wgmma& other : wgmma_ops.open) chained = chained || other.d == d;
  for (const auto& group : wgmma_ops.committed)
    for (const Wgmma& other : group) chained = chained || other.d == d;
  if (!chained) op.accumulator.assign(d, d + n / 2);
  wgmma_ops.open.push_back(std::move(op));
}

// wgmma.fence: the thread's accumulator registers are ready for the wgmma operations that follow.
inline void wgmma_fence() { wgmma_fenced = true; }

inline void wgmma_commit() { wgmma_ops.commit(); }

inline void wgmma_wait(unsigned newest) {
  const int w = static_cast<int>(linear_thread() % 128 / 32), g = static_cast<int>(lane / 4),
            t = static_cast<int>(lane % 4);
  wgmma_ops.wait(newest, [&](const Wgmma& op) {
    // The GPU may read the operands and the accumulator any time from the issue to the wait: both must be
    // what they were at the issue (a tile that landed or was rewritten after it, an accumulator touched in
    // flight, is undefined there).
    // Compared bit by bit: a NaN operand, or an accumulator a wgmma without scale-d leaves unset, is unchanged.
    const std::vector<float> now = wgmma_operands(op.desc_a, op.desc_b, op.n, op.origin);
    if (std::memcmp(now.data(), op.operands.data(), now.size() * sizeof(float)) != 0)
      record_fault("a wgmma's shared operands changed between its issue and its wait");
    if (!op.accumulator.empty() &&
        std::memcmp(op.accumulator.data(), op.d, op.accumulator.size() * sizeof(float)) != 0)
      record_fault("a wgmma's accumulator was written between its issue and its wait");
    const float* operands = op.operands.data();
    for (int i = 0; i < op.n / 8; ++i)
      for (int e = 0; e < 4; ++e) {
        const float* a = operands + 8 * (16 * w + g + 8 * (e / 2));
        const float* b = operands + 8 * (64 + 8 * i + 2 * t + e % 2);
        op.d[4 * i + e] = tf32_dot8(op.scale_d ? op.d[4 * i + e] : 0.0f, a, b);
      }
  });
  wgmma_fenced = false;
}

// mbarrier.try_wait.parity: whether the phase of parity `parity` is complete. The current phase completes here
// once its arrivals are in: its copies land, and their bytes must settle its transaction count exactly. Under
// mbarrier_mutex.
inline bool mbarrier_try_wait_locked(void* bar, unsigned parity) {
  Mbarrier* b = find_mbarrier(bar, "mbarrier.try_wait on a barrier that was not initialised");
  if (b == nullptr) return true;
  if ((parity & 1u) != b->parity) return true;  // the phase before the current one: complete
  if (b->pending == 0) {
    for (const BulkCopy& c : b->copies) {
      land(c);
      b->tx -= c.bytes;
    }
    b->copies.clear();
    if (b->tx < 0) {
      record_fault("bulk copies completed more bytes than their mbarrier phase expected");
      b->tx = 0;
    }
    if (b->tx == 0) {
      b->parity ^= 1u;
      b->pending = b->expected;
    }
  }
  return b->parity != (parity & 1u);
}

inline bool mbarrier_try_wait(void* bar, unsigned parity) {
  std::lock_guard<std::mutex> lock(mbarrier_mutex);
  return mbarrier_try_wait_locked(bar, parity);
}

// A wait (try_wait in a loop) that gives up after mbarrier_wait_limit_s: a phase that never completes is a
// fault, and the thread goes on (stopping it would leave its block waiting at a barrier). The thread sleeps
// until a phase may have completed (mbarrier_changed) rather than spinning: a warp-specialized block has
// hundreds of threads waiting on a few cores.
inline double mbarrier_wait_limit_s = 20.0;
inline void mbarrier_wait(void* bar, unsigned parity) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mbarrier_mutex);
  while (!mbarrier_try_wait_locked(bar, parity)) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > mbarrier_wait_limit_s) {
      lock.unlock();
      record_fault("an mbarrier wait whose phase never completes");
      return;
    }
    mbarrier_changed.wait_for(lock, std::chrono::milliseconds(50));
  }
}

// After a block (one thread, the others held at the launch's barrier): bulk copies still queued are a fault,
// and the barriers are dropped.
inline void check_mbarriers_done() {
  bool pending = false;
  {
    std::lock_guard<std::mutex> lock(mbarrier_mutex);
    for (const auto& [bar, b] : mbarriers) pending = pending || !b.copies.empty();
    mbarriers.clear();
    released_unfenced.clear();
  }
  if (pending) record_fault("bulk copies pending at the end of a block");
}

// At the end of a block: a copy still pending would land in the next block's shared memory here (and in
// freed shared memory on a GPU). Recorded as a fault, and dropped.
inline void check_async_done() {
  const bool pending = async_copies.drop();
  wgmma_fenced = false;
  if (wgmma_ops.drop()) record_fault("wgmma operations not waited for at the end of a block");
  if (bulk_stores.drop()) record_fault("bulk tensor stores still reading shared memory at the end of a block");
  if (!pending) return;
  std::lock_guard<std::mutex> lock(fault_mutex);
  if (!fault.empty()) return;
  char message[512];
  std::snprintf(message, sizeof message, "cp.async copies pending at the end of block (%u,%u,%u) in %s (thread %u)",
                blockIdx.x, blockIdx.y, blockIdx.z, kernel_name,
                threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  fault = message;
}

// Run kernel(args...), named `name` in fault messages, over grid x block threads as described above.
template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) {
  kernel_name = name;
  mbarrier_used = false;
  wgmma_used = false;
  const unsigned threads = block.x * block.y * block.z;
  std::barrier<> barrier(static_cast<std::ptrdiff_t>(threads));
  std::deque<Warp> warps;  // Warp holds a barrier: not movable
  for (unsigned w = 0; w * 32 < threads; ++w) warps.emplace_back(threads - w * 32 < 32 ? threads - w * 32 : 32);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  block_unfenced.assign(threads, nullptr);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      blockDim = block;
      gridDim = grid;
      block_barrier = &barrier;
      warp = &warps[t / 32];
      lane = t % 32;
      unfenced = unfenced_loads = Unfenced{};
      block_unfenced[t] = &unfenced;
      for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
          for (unsigned x = 0; x < grid.x; ++x) {
            blockIdx = dim3(x, y, z);
            trace_seq = 0;
            kernel(args...);
            check_async_done();
            count_wgmma_issues();
            barrier.arrive_and_wait();
            unfenced = unfenced_loads = Unfenced{};  // after the barrier: no thread of the block reads the spans
            if (mbarrier_used || wgmma_used) {  // the block's barriers and warpgroups checked, then dropped
              if (t == 0) {
                check_mbarriers_done();
                check_wgmma_done();
              }
              barrier.arrive_and_wait();
            }
          }
      if (!trace_local.empty()) {
        std::lock_guard<std::mutex> lock(trace_mutex);
        trace_log.insert(trace_log.end(), trace_local.begin(), trace_local.end());
        trace_local.clear();
      }
    });
  }
  for (auto& thread : pool) thread.join();
}

// The launches of the test probes (tests/probes), which name no kernel.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) {
  launch("a probe kernel", kernel, grid, block, args...);
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
namespace emu {
// The kernels' atomicAdd: a global reduction (they make no shared-memory atomics), bounds-checked as red_add's.
template <class T>
inline T atomic_add_global(T* address, T value) {
  return inside_global(address, sizeof(T), "global reduction") ? atomic_add(address, value) : T(0);
}
}  // namespace emu
#define atomicAdd ::emu::atomic_add_global
