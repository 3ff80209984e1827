// What the two main loops share, the SIMT one (mainloop.cuh) and the tensor-core one (tensorcore_primitive.cuh):
// the product's A and B terms, the groups of terms whose loads are in flight together, and the cursor of the
// interior path's unpredicated loads (CUTLASS's MmaPipelined keeps the same state in its global iterators).
#pragma once

#include "tile_loader.cuh"

namespace sb {

// The A and B terms of product z: W_A blocks of A, then W_B of B (the W_C blocks of C follow them in the
// parameters, read only by the write-back; paper, "Task Parallelism: Batching").
template <class T, int W_A, int W_B, int W, int Z>
struct OperandTerms {
  Terms<const T*, T, W_A, 0, W, Z> a;
  Terms<const T*, T, W_B, W_A, W, Z> b;
};

// The terms of product z; a VECTOR kernel (V_A- and V_B-wide loads) fails unless every term allows them
// (Terms::vectors_fit), which the launch builder ensures.
template <int W_A, int W_B, bool VECTOR, int V_A, int V_B, class T, int W, int Z>
__device__ __forceinline__ OperandTerms<T, W_A, W_B, W, Z> operand_terms(const Products<T, W, Z>& products, int z,
                                                                         int lda, int ldb) {
  const OperandTerms<T, W_A, W_B, W, Z> terms{{&products, z}, {&products, z}};
  if (VECTOR && !(terms.a.template vectors_fit<V_A>(lda) && terms.b.template vectors_fit<V_B>(ldb)))
    fail("vector kernel launched with terms that are not aligned to its loads");
  return terms;
}

// Group g of G over the W_A + W_B terms: A's terms [a0, a1) and B's [b0, b1). With BY_OPERAND (two groups,
// each operand's raw data within the registers in flight) the groups are A's terms and B's, so that no partial
// sum is held while the other group is in flight; otherwise the terms are split evenly. ends_a (ends_b): the
// group holds A's (B's) last term, so the operand's sum is complete once the group is summed.
template <int g, int G, int W_A, int W_B, bool BY_OPERAND>
struct GroupRange {
  static constexpr int split(int i) {
    return BY_OPERAND ? (i == 0 ? 0 : i == 1 ? W_A : W_A + W_B) : i * (W_A + W_B) / G;
  }
  static constexpr int begin = split(g), end = split(g + 1);
  static constexpr int a0 = cmin(begin, W_A), a1 = cmin(end, W_A);
  static constexpr int b0 = begin > W_A ? begin - W_A : 0, b1 = end > W_A ? end - W_A : 0;
  static constexpr bool ends_a = a0 < a1 && a1 == W_A, ends_b = b0 < b1 && b1 == W_B;
};

// Sum group R's raw loads into the loaders' sums. An operand whose last term is in the group (R::ends_a,
// R::ends_b) then has its whole sum, to be stored at once, which frees its registers for the next group.
template <class R, class LoaderA, class LoaderB, class TermsA, class TermsB>
__device__ __forceinline__ void sum_group(LoaderA& load_a, LoaderB& load_b, const TermsA& terms_a,
                                          const TermsB& terms_b) {
  load_a.template accumulate<R::a0, R::a1>(terms_a);
  load_b.template accumulate<R::b0, R::b1>(terms_b);
}

// The interior path's cursor. While the slice in flight lies inside every term (the block's rows of every A
// term, its columns of every B term, and k below every term's extent: slices s < fast, interior_slices), its
// loads need no bounds and no address arithmetic beyond one step per operand and slice: the thread's first
// chunk of the slice in flight is at byte offset off_a (off_b) of every A (B) term block, its chunk c
// c step_a (c step_b) bytes further. The cursor starts at slice 1 (slice 0 is filled by the prologue).
template <class LoaderA, class LoaderB>
struct InteriorCursor {
  using T = typename LoaderA::Element;
  static constexpr int K_S = LoaderA::kCols;  // A's tile is m_S x k_S, B's k_S x n_S
  static_assert(LoaderB::kRows == K_S, "the A and B tiles of one k_S slice");

  // (off_b is declared before off_a and both are set in the constructor's body, in the order the main loops
  // computed them as locals: the machine code is then the same as theirs was.)
  int fast;
  long long off_b, off_a;
  long long step_a, step_b, next_b;

  template <class TermsA, class TermsB>
  __device__ __forceinline__ InteriorCursor(const TermsA& terms_a, const TermsB& terms_b, int lda, int ldb, int row0,
                                            int col0, int bk) {
    fast = interior_slices<LoaderA::kRows, LoaderB::kCols, K_S, LoaderA::kTerms, LoaderB::kTerms>(terms_a, terms_b,
                                                                                                   row0, col0, bk);
    off_a = LoaderA::offset(lda, row0, K_S);
    off_b = LoaderB::offset(ldb, K_S, col0);
    step_a = LoaderA::step(lda);
    step_b = LoaderB::step(ldb);
    next_b = static_cast<long long>(K_S) * ldb * static_cast<long long>(sizeof(T));
  }

  // Group R's loads of the slice in flight into the loaders' raw registers.
  template <class R, class TermsA, class TermsB>
  __device__ __forceinline__ void issue(LoaderA& load_a, LoaderB& load_b, const TermsA& terms_a,
                                        const TermsB& terms_b) const {
    load_a.template issue_at<R::a0, R::a1>(terms_a, off_a, step_a);
    load_b.template issue_at<R::b0, R::b1>(terms_b, off_b, step_b);
  }

  // On to the next slice: k_S columns of A, k_S rows of B.
  __device__ __forceinline__ void advance() {
    off_a += K_S * static_cast<long long>(sizeof(T));
    off_b += next_b;
  }
};

}  // namespace sb
