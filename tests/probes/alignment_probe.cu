// Test probe of the emulator's alignment checks (kernels/emu/cuda_emu.hpp, check_aligned): one kernel per kind
// of checked access, at a byte offset the test chooses, each behind the emulator's entry macro (emu_<name>) so
// that a fault names it; tests/fused/test_emu_alignment.py reads the faults with emu_fault_take.
#include "instances.cuh"  // SB_EMU_ENTRY, emu_fault_take

// One global load of `bytes` (8 or 16) at p + offset bytes: unpredicated (ldg_at) when guard is -1, else
// predicated (ldg, read only when guard is 1); the values go to out.
extern "C" __global__ void align_ldg(const float* p, long long offset, int bytes, int guard, float* out) {
  const float* q = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) + offset);
  if (bytes == 16) {
    const auto x = guard < 0 ? sb::ldg_at<float, 4>(p, offset) : sb::ldg<float, 4>(q, guard != 0);
    for (int i = 0; i < 4; ++i) out[i] = x.v[i];
  } else {
    const auto x = guard < 0 ? sb::ldg_at<float, 2>(p, offset) : sb::ldg<float, 2>(q, guard != 0);
    for (int i = 0; i < 2; ++i) out[i] = x.v[i];
  }
}
#define SB_ALIGN_LDG_PARAMS const float *p, long long offset, int bytes, int guard, float *out
#define SB_ALIGN_LDG_ARGS p, offset, bytes, guard, out
SB_EMU_ENTRY(align_ldg, SB_ALIGN_LDG_PARAMS, SB_ALIGN_LDG_ARGS)

// A 16-byte shared store (when store) and load at offset bytes into a 16-byte aligned buffer; its address goes
// to *base, the loaded values to out.
extern "C" __global__ void align_shared(long long offset, int store, float* out, unsigned long long* base) {
  __shared__ sb::Vec<float, 4> buffer[4];
  auto* p = reinterpret_cast<sb::Vec<float, 4>*>(reinterpret_cast<char*>(buffer) + offset);
  if (store) sb::sts(p, sb::Vec<float, 4>{{1, 2, 3, 4}});
  const auto x = sb::lds(p);
  for (int i = 0; i < 4; ++i) out[i] = x.v[i];
  *base = reinterpret_cast<unsigned long long>(buffer);
}
#define SB_ALIGN_SHARED_PARAMS long long offset, int store, float *out, unsigned long long *base
#define SB_ALIGN_SHARED_ARGS offset, store, out, base
SB_EMU_ENTRY(align_shared, SB_ALIGN_SHARED_PARAMS, SB_ALIGN_SHARED_ARGS)

// One warp's ldmatrix_x4: lane l gives the row at offset bytes + 16 l into a 16-byte aligned buffer (whose
// address goes to *base); lane l's registers go to out[4 l ...].
extern "C" __global__ void align_ldmatrix(long long offset, float* out, unsigned long long* base) {
  __shared__ sb::Vec<float, 4> buffer[33];
  const unsigned l = threadIdx.x;
  sb::sts(&buffer[l], sb::Vec<float, 4>{{4.f * l, 4.f * l + 1, 4.f * l + 2, 4.f * l + 3}});
  __syncthreads();
  float r[4];
  sb::ldmatrix_x4(r, reinterpret_cast<const float*>(reinterpret_cast<const char*>(&buffer[l]) + offset));
  for (int i = 0; i < 4; ++i) out[4 * l + i] = r[i];
  *base = reinterpret_cast<unsigned long long>(buffer);
}
#define SB_ALIGN_LDMATRIX_PARAMS long long offset, float *out, unsigned long long *base
#define SB_ALIGN_LDMATRIX_ARGS offset, out, base
SB_EMU_ENTRY(align_ldmatrix, SB_ALIGN_LDMATRIX_PARAMS, SB_ALIGN_LDMATRIX_ARGS)

// The epilogue's write-back of a 1 x 4 accumulator into C (one row of 8 floats, ld 8) by a tile that places it
// `shift` columns right: shift 1 is a planted bug, a V = 4 read-modify-write (atomic: a vector reduction, the
// vector kernels' atomic write-back) off its 16-byte alignment. `term` elements into C is where the C term
// starts: 1 breaks the atomic vector write-back's contract (its terms aligned to V), which stops the kernel.
struct AlignTerm {
  float* c;
  __device__ float* ptr(int) const { return c; }
  __device__ int rows(int) const { return 1; }
  __device__ int cols(int) const { return 8; }
  __device__ float coeff(int) const { return 1; }
  template <int V>
  __device__ bool vectors_fit(int ld) const {
    return ld % V == 0 && reinterpret_cast<unsigned long long>(c) % (V * sizeof(float)) == 0;
  }
};
struct AlignTile {
  static constexpr int kVb = 4;
  int shift;
  __device__ int row(int i) const { return i; }
  __device__ int col(int j) const { return j + shift; }
};
extern "C" __global__ void align_epilogue(float* C, int shift, float beta, int atomic, int term) {
  const float acc[1][4] = {{1, 2, 3, 4}};
  if (atomic)
    sb::epilogue<1, true, true>(acc, AlignTerm{C + term}, 8, 0, 0, AlignTile{shift}, 1.0f, beta);
  else
    sb::epilogue<1, false, false>(acc, AlignTerm{C + term}, 8, 0, 0, AlignTile{shift}, 1.0f, beta);
}
#define SB_ALIGN_EPILOGUE_PARAMS float *C, int shift, float beta, int atomic, int term
#define SB_ALIGN_EPILOGUE_ARGS C, shift, beta, atomic, term
SB_EMU_ENTRY(align_epilogue, SB_ALIGN_EPILOGUE_PARAMS, SB_ALIGN_EPILOGUE_ARGS)
