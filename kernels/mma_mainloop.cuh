// The main loop both tensor-core primitives share (tensorcore_primitive.cuh, dmma_primitive.cuh), in the phases
// of CUTLASS's MmaPipelined: the prologue (slice 0 into stage 0), the main iterations over interior tiles of the
// vector kernels (slice s + 1's global loads issued unpredicated before slice s's mma, summed and stored to the
// other stage after it, so that their latency hides behind the tensor cores' work; double-buffered shared memory,
// one barrier per slice) and the wind-down on the predicated path (edge tiles, the last slices, the scalar
// kernels: the next slice filled after the mma).
#pragma once

#include "tile_loader.cuh"

namespace sb {

// mma_slice(stage): one k_S slice of mma on a stage; store(stage): the loaders' sums into a stage; fill(stage, k):
// the predicated loads, sums and stores of the slice at k.
template <class T, int M_S, int N_S, int K_S, int W_A, int W_B, bool VECTOR, class LoaderA, class LoaderB,
          class TermsA, class TermsB, class Slice, class Store, class Fill>
__device__ __forceinline__ void mma_mainloop(LoaderA& load_a, LoaderB& load_b, const TermsA& terms_a,
                                             const TermsB& terms_b, int lda, int ldb, int row0, int col0, int bk,
                                             const Slice& mma_slice, const Store& store, const Fill& fill) {
  fill(0, 0);  // prologue
  __syncthreads();
  const int slices = cdiv(bk, K_S);
  int s = 0, stage = 0;
  if constexpr (VECTOR) {  // main iterations: while the slice in flight lies inside every term
    InteriorCursor<T, M_S, N_S, K_S, W_A, W_B, LoaderA, LoaderB> at(terms_a, terms_b, lda, ldb, row0, col0, bk);
    for (; s < at.fast; ++s) {
      load_a.template issue_at<0, W_A>(terms_a, at.off_a, at.step_a);
      load_b.template issue_at<0, W_B>(terms_b, at.off_b, at.step_b);
      mma_slice(stage);
      load_a.template accumulate<0, W_A>(terms_a);
      load_b.template accumulate<0, W_B>(terms_b);
      store(stage ^ 1);  // the stage read in slice s - 1, free since its barrier
      __syncthreads();
      stage ^= 1;
      at.advance();
    }
  }
  for (; s < slices; ++s) {  // wind-down: the predicated path
    mma_slice(stage);
    if (s + 1 < slices) fill(stage ^ 1, (s + 1) * K_S);
    __syncthreads();
    stage ^= 1;
  }
}

}  // namespace sb
