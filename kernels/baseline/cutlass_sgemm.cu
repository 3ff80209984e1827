// The paper's "CUTLASS" line: CUTLASS's SIMT SGEMM with thread block 128 x 128 x 8, warp 32 x 64 x 8, two
// stages (figure tab:gpu_block_size, Huge), row-major operands, alignment 1, built from the nvidia-cutlass
// package's headers with the same nvcc and flags as kernels/. `strassenbench build` compiles it into a cubin
// (its machine code joins resources.csv) and, for GPU runs, a shared library with one extern "C" entry.
#include <cuda_runtime.h>

#include <cutlass/gemm/device/gemm.h>

namespace {

using RowMajor = cutlass::layout::RowMajor;
using CutlassSgemm = cutlass::gemm::device::Gemm<
    float, RowMajor, float, RowMajor, float, RowMajor, float, cutlass::arch::OpClassSimt, cutlass::arch::Sm50,
    cutlass::gemm::GemmShape<128, 128, 8>, cutlass::gemm::GemmShape<32, 64, 8>, cutlass::gemm::GemmShape<1, 1, 1>,
    cutlass::epilogue::thread::LinearCombination<float, 1, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 2>;

}  // namespace

// C <- alpha A B + beta C on `stream` (a cudaStream_t); returns cutlass::Status (0: success).
extern "C" int sb_cutlass_sgemm(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                                float beta, float* C, int ldc, void* stream) {
  CutlassSgemm gemm;
  CutlassSgemm::Arguments args({m, n, k}, {A, lda}, {B, ldb}, {C, ldc}, {C, ldc}, {alpha, beta});
  return static_cast<int>(gemm(args, nullptr, static_cast<cudaStream_t>(stream)));
}
