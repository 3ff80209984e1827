// The wgmma family's baseline beyond the paper: CUTLASS 4.2's sm_90 TF32 GEMM, TMA and warp-specialized
// (KernelTmaWarpSpecializedCooperative: a producer warpgroup, two consumer warpgroups on a 128 x 128 x 32 tile,
// as many stages as shared memory holds beside the epilogue's), from its CollectiveBuilder. A and B row-major as
// this project stores them: tf32 wgmma reads K-major operands only, so the builder swaps A and B and transposes
// the MN-major one through registers (its RS mainloop). FP32 operands are rounded to TF32 by the tensor cores
// (1xTF32). Built from the nvidia-cutlass package's headers with the same nvcc as kernels/, for sm_90a only.
#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

namespace {

using namespace cute;
using RowMajor = cutlass::layout::RowMajor;
constexpr int kAlignment = 4;  // floats per 128-bit access: operands' leading dimensions a multiple of 4
using Tile = Shape<_128, _128, _32>;
using Cluster = Shape<_1, _1, _1>;

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, float, RowMajor, kAlignment, float, RowMajor,
    kAlignment, cutlass::epilogue::collective::EpilogueScheduleAuto>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, float, RowMajor, kAlignment, float, RowMajor, kAlignment,
    float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using CutlassSgemmTf32Sm90 = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

}  // namespace

// C <- alpha A B + beta C on `stream` (a cudaStream_t); returns cutlass::Status (0: success; operands the kernel
// cannot take, and a kernel that would need a workspace, are refused: the baseline allocates nothing).
extern "C" int sb_cutlass_sgemm_tf32_sm90(int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                                          int ldb, float beta, float* C, int ldc, void* stream) {
  using StrideA = typename CutlassSgemmTf32Sm90::GemmKernel::StrideA;
  using StrideB = typename CutlassSgemmTf32Sm90::GemmKernel::StrideB;
  using StrideC = typename CutlassSgemmTf32Sm90::GemmKernel::StrideC;
  StrideA stride_a{};
  StrideB stride_b{};
  StrideC stride_c{};
  get<0>(stride_a) = lda;  // A (m x k) row-major: rows lda apart, columns adjacent
  get<1>(stride_b) = ldb;  // B as CUTLASS takes it (n x k): its k rows ldb apart, n adjacent
  get<0>(stride_c) = ldc;
  typename CutlassSgemmTf32Sm90::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                                {m, n, k, 1},
                                                {A, stride_a, B, stride_b},
                                                {{alpha, beta}, C, stride_c, C, stride_c}};
  CutlassSgemmTf32Sm90 gemm;
  const cutlass::Status ok = gemm.can_implement(args);
  if (ok != cutlass::Status::kSuccess) return static_cast<int>(ok);
  if (CutlassSgemmTf32Sm90::get_workspace_size(args) != 0) return static_cast<int>(cutlass::Status::kErrorWorkspaceNull);
  const cutlass::Status init = gemm.initialize(args, nullptr, static_cast<cudaStream_t>(stream));
  if (init != cutlass::Status::kSuccess) return static_cast<int>(init);
  return static_cast<int>(gemm.run(static_cast<cudaStream_t>(stream)));
}
