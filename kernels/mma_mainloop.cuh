// The body both tensor-core primitives share (tensorcore_primitive.cuh, dmma_primitive.cuh): mma_primitive, around
// mma_mainloop. The main loop is in the phases
// of CUTLASS's MmaPipelined: the prologue (slice 0 into stage 0), the main iterations over interior tiles of the
// vector kernels (slice s + 1's global loads issued unpredicated before slice s's mma, summed and stored to the
// other stage after it, so that their latency hides behind the tensor cores' work; double-buffered shared memory,
// one barrier per slice) and the wind-down on the predicated path (edge tiles, the last slices, the scalar
// kernels: the next slice filled after the mma).
#pragma once

#include "epilogue.cuh"
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

// What mma_multistage does for one operand (W terms, its stage's element (tile row, tile column) at at(...))
// before the slice's mma: one term, copied by cp.async; a sum of terms, its raw loads issued into registers. On
// the predicated path (edge tiles, the last slices, the scalar kernels) at the slice's tile corner (row, col) of
// every term; stage_begin_at: unpredicated, at the interior cursor's offset and step (a vector kernel's slices
// wholly inside every term).
template <int W, bool VECTOR, class Loader, class Copier, class Terms, class At>
__device__ __forceinline__ void stage_begin(Loader& load, Copier& copier, const Terms& terms, int ld, int row,
                                            int col, const At& at) {
  if constexpr (W == 1)
    copier.copy(at);
  else if constexpr (VECTOR)
    load.template issue<0, W>(terms, ld, row, col);
}
template <int W, class Loader, class Copier, class Terms, class At>
__device__ __forceinline__ void stage_begin_at(Loader& load, Copier& copier, const Terms& terms, long long offset,
                                               long long step, const At& at) {
  if constexpr (W == 1)
    copier.copy(at);
  else
    load.template issue_at<0, W>(terms, offset, step);
}

// ... and after it: a sum of terms formed and stored to the stage. A scalar kernel forms it here, a term at a
// time (load_sum): its chunks are single elements, and holding every term's across the mma would spill.
template <int W, bool VECTOR, class Loader, class Terms, class At>
__device__ __forceinline__ void stage_end(Loader& load, const Terms& terms, int ld, int row, int col, const At& at) {
  if constexpr (W > 1) {
    if constexpr (VECTOR)
      load.template accumulate<0, W>(terms);
    else
      load.load_sum(terms, ld, row, col);
    load.store_at(at);
  }
}

// The multistage pipeline (STAGES >= 3 shared-memory stages, CUTLASS's MmaMultistage): slice s is computed on
// stage s % STAGES while slices s + 1 .. s + STAGES - 1 are in flight. Each iteration first fetches slice
// s + STAGES - 1 into the stage that slice s - 1 freed at its barrier (stage_begin): a one-term operand (W = 1)
// straight into shared memory by cp.async (SliceCopier; zeros outside the term, so edge tiles need no other
// path), a sum of terms into registers. Then the slice's mma, then the register sums into their stage
// (stage_end), then one commit group per slice, a wait for all but the newest STAGES - 2 (slice s + 1's copies
// have landed) and one barrier. A vector kernel with a sum of terms runs its main iterations first, while the
// slice it fetches lies wholly inside every term: its loads unpredicated, at the interior cursor's offsets
// (InteriorCursor, STAGES - 1 slices ahead), as mma_mainloop's; then the predicated path. The tiles give the
// address of tile element (row, column) of a stage: smem.a_at(stage, m, k), smem.b_at(stage, k, n).
template <class T, int M_S, int N_S, int K_S, int W_A, int W_B, int STAGES, bool VECTOR, class LoaderA,
          class LoaderB, class TermsA, class TermsB, class Tiles, class Slice>
__device__ __forceinline__ void mma_multistage(LoaderA& load_a, LoaderB& load_b, const TermsA& terms_a,
                                               const TermsB& terms_b, int lda, int ldb, int row0, int col0, int bk,
                                               Tiles& smem, const Slice& mma_slice) {
  static_assert(STAGES >= 3, "the register pipeline is mma_mainloop");
  constexpr int kAhead = STAGES - 1;
  const int slices = cdiv(bk, K_S);
  SliceCopier<LoaderA, T, K_S, true> copy_a(terms_a, lda, row0, 0);  // used when W_A = 1
  SliceCopier<LoaderB, T, K_S, false> copy_b(terms_b, ldb, 0, col0);  // used when W_B = 1
  auto a_at = [&](int stage) { return [&smem, stage](int m, int kc) { return smem.a_at(stage, m, kc); }; };
  auto b_at = [&](int stage) { return [&smem, stage](int kr, int n) { return smem.b_at(stage, kr, n); }; };
  auto begin = [&](int stage, int s) {  // slice s's copies and register loads, s one more than the last call's
    if (s >= slices) return;
    stage_begin<W_A, VECTOR>(load_a, copy_a, terms_a, lda, row0, s * K_S, a_at(stage));
    stage_begin<W_B, VECTOR>(load_b, copy_b, terms_b, ldb, s * K_S, col0, b_at(stage));
  };
  auto end = [&](int stage, int s) {  // slice s's register sums into its stage
    if (s >= slices) return;
    stage_end<W_A, VECTOR>(load_a, terms_a, lda, row0, s * K_S, a_at(stage));
    stage_end<W_B, VECTOR>(load_b, terms_b, ldb, s * K_S, col0, b_at(stage));
  };
#pragma unroll 1
  for (int s = 0; s < kAhead; ++s) {  // prologue: slices 0 .. STAGES - 2
    begin(s, s);
    end(s, s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  int s = 0, stage = 0, next = kAhead;
  auto retire = [&] {  // the slice's commit group, the wait for slice s + 1's and the barrier; the next stages
    cp_async_commit();
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    stage = stage + 1 == STAGES ? 0 : stage + 1;
    next = next + 1 == STAGES ? 0 : next + 1;
  };
  if constexpr (VECTOR && (W_A > 1 || W_B > 1)) {  // main iterations: slice s + STAGES - 1 inside every term
    InteriorCursor<T, M_S, N_S, K_S, W_A, W_B, LoaderA, LoaderB, kAhead> at(terms_a, terms_b, lda, ldb, row0, col0,
                                                                              bk);
#pragma unroll 1
    for (; s < at.fast; ++s) {
      stage_begin_at<W_A>(load_a, copy_a, terms_a, at.off_a, at.step_a, a_at(next));
      stage_begin_at<W_B>(load_b, copy_b, terms_b, at.off_b, at.step_b, b_at(next));
      mma_slice(stage);
      stage_end<W_A, VECTOR>(load_a, terms_a, lda, row0, 0, a_at(next));
      stage_end<W_B, VECTOR>(load_b, terms_b, ldb, 0, col0, b_at(next));
      retire();
      at.advance();
    }
  }
#pragma unroll 1
  for (; s < slices; ++s) {  // the predicated path
    begin(next, s + kAhead);
    mma_slice(stage);
    end(next, s + kAhead);
    retire();
  }
  cp_async_wait<0>();  // every group is empty by now: nothing outlives the loop
}

// A thread's place in its warp's kWm x kWn tile of the block tile, warps column-major over WARPS_M rows, in the
// PTX ISA's mma fragment layout (lane: group g = lane / 4, thread t = lane % 4): the warp tiles of both families
// (tensorcore_primitive.cuh, dmma_primitive.cuh) derive from it and add their mma tiles.
template <int WARPS_M, int kWm, int kWn>
struct MmaLane {
  int row0, col0;  // the thread's first row and column in the block tile
  int wrow, wcol;  // the warp's first row and column
  int lane, g, t;  // the lane, lane / 4 and lane % 4

  __device__ __forceinline__ explicit MmaLane(int tid) {
    const int warp = tid / 32;
    lane = tid % 32;
    g = lane / 4;
    t = lane % 4;
    wrow = (warp % WARPS_M) * kWm;
    wcol = (warp / WARPS_M) * kWn;
    row0 = wrow + g;
    col0 = wcol + 2 * t;
  }
  // The column of the accumulator's column j: the n-tile j / 2, whose two columns 2t and 2t + 1 the thread holds.
  __device__ __forceinline__ int col(int j) const { return col0 + (j / 2) * 8 + j % 2; }
};

// The fused primitive M = (sum_i u_i X_i)(sum_j v_j V_j), C_l += alpha gamma_l M of a tensor-core family: the
// block's terms (checked) and origin, its loaders (the operand sums formed between the global load and the
// shared store, stored as is: k contiguous), the warp tile's accumulator, mma_mainloop, then the write-back
// (epilogue.cuh) of alpha times the loaders' folded scales. The family gives its shared tiles (Tiles), its warp
// tile (Tile: the accumulator's layout, Tile::kThreads threads), how the loaders' sums go into a stage
// (store(load_a, load_b, smem, stage)) and its slice of mma on a stage (slice(smem, tile, acc, stage)). With
// STAGES >= 3 the main loop is mma_multistage instead, and the tiles place the elements (a_at, b_at).
template <class T, class Tiles, class Tile, int M_S, int N_S, int K_S, int W_A, int W_B, int W_C, bool ATOMIC, int Z,
          bool VECTOR, int STAGES = 2, class Store, class Slice>
__device__ __forceinline__ void mma_primitive(int lda, int ldb, int ldc, int bk, T alpha, T beta,
                                              const Products<T, W_A + W_B + W_C, Z>& products,
                                              const Store& store_stage, const Slice& slice) {
  constexpr int kThreads = Tile::kThreads;
  constexpr int kW = W_A + W_B + W_C;
  constexpr int kVa = VECTOR ? vec_width<T>(cmin(M_S * K_S / kThreads, K_S)) : 1;
  constexpr int kVb = VECTOR ? vec_width<T>(cmin(K_S * N_S / kThreads, N_S)) : 1;
  using LoaderA = TileLoader<T, M_S, K_S, kThreads, W_A, kVa, false>;
  using LoaderB = TileLoader<T, K_S, N_S, kThreads, W_B, kVb, false>;
  __shared__ Tiles smem;

  const int z = blockIdx.z;
  const auto terms = OperandTerms<T, W_A, W_B, kW, Z>::template checked<VECTOR, kVa, kVb>(products, z, lda, ldb);
  const auto& terms_a = terms.a;
  const auto& terms_b = terms.b;
  const int row0 = blockIdx.y * M_S, col0 = blockIdx.x * N_S;
  const Tile tile(static_cast<int>(threadIdx.x));

  T acc[Tile::kRows][Tile::kCols];
#pragma unroll
  for (int i = 0; i < Tile::kRows; ++i)
#pragma unroll
    for (int j = 0; j < Tile::kCols; ++j) acc[i][j] = T(0);

  LoaderA load_a;
  LoaderB load_b;
  auto store = [&](int stage) { store_stage(load_a, load_b, smem, stage); };
  auto fill = [&](int stage, int k) {  // the predicated path: loads, sums and stores of one slice
    load_a.load_sum(terms_a, lda, row0, k);
    load_b.load_sum(terms_b, ldb, k, col0);
    store(stage);
  };
  auto mma_slice = [&](int stage) { slice(smem, tile, acc, stage); };
  if constexpr (STAGES > 2) {
    mma_multistage<T, M_S, N_S, K_S, W_A, W_B, STAGES, VECTOR>(load_a, load_b, terms_a, terms_b, lda, ldb, row0,
                                                               col0, bk, smem, mma_slice);
  } else {
    mma_mainloop<T, M_S, N_S, K_S, W_A, W_B, VECTOR>(load_a, load_b, terms_a, terms_b, lda, ldb, row0, col0, bk,
                                                     mma_slice, store, fill);
  }

  const T scale = alpha * LoaderA::fold_scale(terms_a) * LoaderB::fold_scale(terms_b);
  const Terms<T*, T, W_C, W_A + W_B, kW, Z> terms_c{&products, z};
  epilogue<W_C, ATOMIC, VECTOR>(acc, terms_c, ldc, row0, col0, tile, scale, beta);
}

}  // namespace sb
