// The FP64 tensor-core baseline beyond the paper: CUTLASS's double-precision tensor-op GEMM for sm_80 in its
// default configuration (cutlass/gemm/device/default_gemm_configuration.h, OpClassTensorOp, Sm80, double:
// thread block 128 x 128 x 16, warp 32 x 64 x 16, mma.m8n8k4.f64, 3 stages, one double per access), with A, B
// and C row-major as this project stores them, built from the nvidia-cutlass package's headers with the same
// nvcc as kernels/. `strassenbench build` compiles it for sm_80 and later beside the DMMA kernels
// (kernels/dmma_primitive.cuh).
#include <cuda_runtime.h>

#include <cutlass/gemm/device/gemm.h>

namespace {

using RowMajor = cutlass::layout::RowMajor;
using CutlassDgemm = cutlass::gemm::device::Gemm<
    double, RowMajor, double, RowMajor, double, RowMajor, double, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 16>, cutlass::gemm::GemmShape<32, 64, 16>, cutlass::gemm::GemmShape<8, 8, 4>,
    cutlass::epilogue::thread::LinearCombination<double, 1, double, double>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3, 1, 1>;

}  // namespace

// C <- alpha A B + beta C on `stream` (a cudaStream_t); returns cutlass::Status (0: success).
extern "C" int sb_cutlass_dgemm(int m, int n, int k, double alpha, const double* A, int lda, const double* B,
                                int ldb, double beta, double* C, int ldc, void* stream) {
  CutlassDgemm gemm;
  CutlassDgemm::Arguments args({m, n, k}, {A, lda}, {B, ldb}, {C, ldc}, {C, ldc}, {alpha, beta});
  const cutlass::Status ok = gemm.can_implement(args);
  if (ok != cutlass::Status::kSuccess) return static_cast<int>(ok);
  return static_cast<int>(gemm(args, nullptr, static_cast<cudaStream_t>(stream)));
}
