// The tensor-core baseline beyond the paper: CUTLASS's 3xTF32 "fast accurate" SGEMM in its example-27
// configuration (thread block 128 x 64 x 16, warp 64 x 32 x 16, mma 16 x 8 x 8, 3 stages, 128-bit alignment,
// OpMultiplyAddFastF32: a = big + small in TF32, a_big b_big + a_big b_small + a_small b_big in FP32), with B
// row-major as this project stores it (the example's is column-major), built from the nvidia-cutlass package's
// headers with the same nvcc as kernels/. `strassenbench build` compiles it for sm_80 and later beside the SIMT
// baseline (cutlass_sgemm.cu).
#include <cuda_runtime.h>

#include <cutlass/gemm/device/gemm.h>

namespace {

using RowMajor = cutlass::layout::RowMajor;
constexpr int kAlignment = 4;  // floats per 128-bit access: operands' leading dimensions a multiple of 4
using CutlassSgemm3xTF32 = cutlass::gemm::device::Gemm<
    float, RowMajor, float, RowMajor, float, RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 64, 16>, cutlass::gemm::GemmShape<64, 32, 16>, cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, kAlignment, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3, kAlignment, kAlignment, false,
    cutlass::arch::OpMultiplyAddFastF32>;

}  // namespace

// C <- alpha A B + beta C on `stream` (a cudaStream_t); returns cutlass::Status (0: success; misaligned
// operands are refused by can_implement).
extern "C" int sb_cutlass_sgemm_3xtf32(int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                                       int ldb, float beta, float* C, int ldc, void* stream) {
  CutlassSgemm3xTF32 gemm;
  CutlassSgemm3xTF32::Arguments args({m, n, k}, {A, lda}, {B, ldb}, {C, ldc}, {C, ldc}, {alpha, beta});
  const cutlass::Status ok = gemm.can_implement(args);
  if (ok != cutlass::Status::kSuccess) return static_cast<int>(ok);
  return static_cast<int>(gemm(args, nullptr, static_cast<cudaStream_t>(stream)));
}
