// The SIMT GEMM main loop with Strassen's operand sums packed into the tile loads (paper, Algorithm
// a:gpu_stra; Sec. s:cutlass), software-pipelined as CUTLASS's two-stage MmaPipelined:
//
//   - two shared-memory stages of the A and B tiles, one __syncthreads per k_S slice;
//   - in interior tiles of the vector kernels, the global loads of slice s + 1 are in flight while slice s
//     is computed: unpredicated, at an offset that advances by a constant per slice; their raw vectors sit in
//     registers and are summed (sum_i u_i X_i) only when stored to the other stage, so an FFMA never waits
//     for global memory. When the operand sums hold too many terms for the register budget, the terms are
//     issued in G groups spread over the slice, each summed before the next group is issued, and an operand's
//     sum is stored as soon as its last term is summed (the stage being filled is not read during the slice);
//   - edge tiles, the last slices and the scalar kernels take a predicated loop that forms the next slice's
//     sums after the current one's FFMAs, a term at a time (few registers, one copy of the load code);
//   - per k-step, m_R x n_R FFMAs from double-buffered register fragments; the first fragment of the next
//     slice is loaded right after the barrier, before the last k-step's FFMAs of the current slice.
#pragma once

#include "tile_loader.cuh"

namespace sb {

template <class F, int... I>
__device__ __forceinline__ void static_for_impl(F&& f, stdx::integer_sequence<int, I...>) {
  (f(stdx::integral_constant<int, I>{}), ...);
}

// f(stdx::integral_constant<int, i>) for i = 0 .. N-1, each i a compile-time constant.
template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, stdx::make_integer_sequence<int, N>{});
}

// The value of an int or of a compile-time constant (stdx::integral_constant).
__device__ __forceinline__ int int_value(int x) { return x; }
template <int V>
__device__ __forceinline__ constexpr int int_value(stdx::integral_constant<int, V>) { return V; }

// The A and B tiles of both stages. One object, aligned to 128 bytes, so that its bank layout is the same on
// the GPU and in the emulator.
template <class T, int M_S, int N_S, int K_S, int PAD_A>
struct alignas(128) SharedTiles {
  static constexpr int kLdA = M_S + PAD_A;
  alignas(16) T a[2][K_S][kLdA];
  alignas(16) T b[2][K_S][N_S];
};

// Where a thread's m_R x n_R accumulator sits in the block tile (figure tab:gpu_block_size). A warp is
// WARP_M x WARP_N threads. Lane bit 0 selects a column and bit 1 a row (the other bits fill the row index,
// then the column index): lanes l and l^1 share their A fragment and lanes l and l^2 their B fragment, so a
// warp's 128-bit fragment load has 16 distinct addresses and returns in 2 wavefronts, not 4 (the effect of
// CUTLASS's RowMajorInterleaved<2> lane layout). A thread's m_R rows are m_R / V_A vectors of V_A rows,
// WARP_M V_A rows apart, so that the lanes of one fragment load read consecutive words (no bank conflict).
template <class T, int M_S, int N_S, int M_R, int N_R, int WARP_M, int WARP_N>
struct WarpTile {
  static constexpr int kVa = vec_width<T>(M_R), kVb = vec_width<T>(N_R);
  static constexpr int kWarpsM = M_S / (WARP_M * M_R);
  static constexpr int log2(int x) { return x <= 1 ? 0 : 1 + log2(x / 2); }
  static constexpr int kRowBits = log2(WARP_M);
  static_assert((1 << kRowBits) == WARP_M && WARP_M >= 2 && WARP_N >= 2, "warp shape: powers of two, >= 2");

  int row0, col0;  // the first row and column of this thread's accumulator in the block tile

  __device__ __forceinline__ explicit WarpTile(int tid) {
    const int warp = tid / 32, lane = tid % 32;
    const int lane_row = ((lane >> 1) & 1) | (((lane >> 2) & ((1 << (kRowBits - 1)) - 1)) << 1);
    const int lane_col = (lane & 1) | ((lane >> (kRowBits + 1)) << 1);
    row0 = (warp % kWarpsM) * WARP_M * M_R + lane_row * kVa;
    col0 = (warp / kWarpsM) * WARP_N * N_R + lane_col * kVb;
  }
  // Row of accumulator row i, column of accumulator column j, in the block tile.
  __device__ __forceinline__ int row(int i) const { return row0 + (i / kVa) * WARP_M * kVa + i % kVa; }
  __device__ __forceinline__ int col(int j) const { return col0 + (j / kVb) * WARP_N * kVb + j % kVb; }

  template <int LDA, int LDB>
  __device__ __forceinline__ void load(T (&a)[M_R], T (&b)[N_R], const T (*tile_a)[LDA], const T (*tile_b)[LDB],
                                       int k) const {
#pragma unroll
    for (int i = 0; i < M_R; i += kVa)
      *reinterpret_cast<Vec<T, kVa>*>(&a[i]) = lds(reinterpret_cast<const Vec<T, kVa>*>(&tile_a[k][row(i)]));
#pragma unroll
    for (int j = 0; j < N_R; j += kVb)
      *reinterpret_cast<Vec<T, kVb>*>(&b[j]) = lds(reinterpret_cast<const Vec<T, kVb>*>(&tile_b[k][col(j)]));
  }
};

// Group g of G over the W_A + W_B terms: A's terms [a0, a1) and B's [b0, b1). With BY_OPERAND (two groups,
// each operand's raw data within the registers in flight) the groups are A's terms and B's, so that no partial
// sum is held while the other group is in flight; otherwise the terms are split evenly.
template <int g, int G, int W_A, int W_B, bool BY_OPERAND>
struct GroupRange {
  static constexpr int split(int i) {
    return BY_OPERAND ? (i == 0 ? 0 : i == 1 ? W_A : W_A + W_B) : i * (W_A + W_B) / G;
  }
  static constexpr int begin = split(g), end = split(g + 1);
  static constexpr int a0 = cmin(begin, W_A), a1 = cmin(end, W_A);
  static constexpr int b0 = begin > W_A ? begin - W_A : 0, b1 = end > W_A ? end - W_A : 0;
};

// Group g of NG groups of terms (GroupRange), as a type.
template <int G_, int NG_>
struct Group {
  static constexpr int g = G_, n = NG_;
};

// acc += (sum_i u_i A_i)(sum_j v_j B_j) over the bk columns of the A terms (rows of the B terms) for the
// m_S x n_S tile at (row0, col0) of every term block, in the phases CUTLASS's MmaPipelined names: prologue
// (slice 0 into stage 0), gemm_iters (the interior slices, the next one's loads in flight) and wind_down (the
// predicated slices that remain: edge tiles, the last slices, the scalar kernels).
template <class T, int M_S, int N_S, int K_S, int M_R, int N_R, int WARP_M, int WARP_N, int W_A, int W_B,
          int V_A, int V_B, int PAD_A, bool REREAD, int FLIGHT, class TermsA, class TermsB>
__device__ __forceinline__ void mainloop(T (&acc)[M_R][N_R], const TermsA& terms_a, const TermsB& terms_b, int lda,
                                         int ldb, int bk,
                                         int row0, int col0, SharedTiles<T, M_S, N_S, K_S, PAD_A>& smem,
                                         const WarpTile<T, M_S, N_S, M_R, N_R, WARP_M, WARP_N>& warp_tile) {
  constexpr int kThreads = (M_S / M_R) * (N_S / N_R);
  using LoaderA = TileLoader<T, M_S, K_S, kThreads, W_A, V_A, true>;   // m_S x k_S, stored k-major
  using LoaderB = TileLoader<T, K_S, N_S, kThreads, W_B, V_B, false>;  // k_S x n_S, stored as is
  // Two paths. Interior tiles of the vector kernels (gemm_iters) keep the next slice's loads in flight during
  // the current one, issued in G groups at an unpredicated offset; the registers of raw data in flight at once
  // are FLIGHT (float32; twice as many in float64). 16 leaves the Huge kernel its 128-register budget (64
  // accumulators, 32 fragment registers); fewer (8: two groups where each operand fits, A's terms then B's; 4:
  // about a term a group) leave ptxas more room. The build compiles the Huge float32 kernels with each and keeps
  // the best machine code (strassenbench.fused.build.FLIGHTS). Everything else (wind_down: edge tiles, the last
  // slices, and the scalar kernels, whose terms are not aligned to 128 bits: odd shapes, unaligned views) is
  // predicated and fills the next slice after the current one's FFMAs, a term at a time (fill), which needs few
  // registers beyond the accumulator and the fragments.
  constexpr bool kPipelined = V_A * V_B > 1;
  constexpr int kFlightRegisters = FLIGHT * static_cast<int>(sizeof(T)) / 4;
  constexpr int G = cmin(cmin(W_A + W_B, K_S), cdiv(LoaderA::kRegisters + LoaderB::kRegisters, kFlightRegisters));
  constexpr bool kByOperand =
      G == 2 && LoaderA::kRegisters <= kFlightRegisters && LoaderB::kRegisters <= kFlightRegisters;

  LoaderA load_a;
  LoaderB load_b;
  TermsA ta = terms_a;
  TermsB tb = terms_b;
  // Sum group g (GroupRange: A's terms [a0, a1) and B's [b0, b1)). An operand whose last term is in group g is
  // stored to `stage` at once, which frees its registers for the next group (the stage not being read is free
  // for the whole slice).
  auto accumulate = [&](auto group, int stage) {
    using X = decltype(group);
    using R = GroupRange<X::g, X::n, W_A, W_B, kByOperand && X::n == G>;
    load_a.template accumulate<R::a0, R::a1>(ta);
    load_b.template accumulate<R::b0, R::b1>(tb);
    if constexpr (R::a0 < R::a1 && R::a1 == W_A) load_a.store(smem.a[stage]);
    if constexpr (R::b0 < R::b1 && R::b1 == W_B) load_b.store(smem.b[stage]);
  };
  // The predicated path: the whole slice at k, a term at a time (TileLoader::load_sum), stored to `stage`.
  // The scalar kernels, whose sums take a register per element (16 per operand in float64 Large), store A's
  // sum before B's loads; in the vector kernels the two sums are 8 registers, and both stores come last.
  auto fill = [&](int stage, int k) {
    load_a.load_sum(ta, lda, row0, k);
    if constexpr (!kPipelined) load_a.store(smem.a[stage]);
    load_b.load_sum(tb, ldb, k, col0);
    if constexpr (kPipelined) load_a.store(smem.a[stage]);
    load_b.store(smem.b[stage]);
  };

  alignas(16) T frag_a[2][M_R];
  alignas(16) T frag_b[2][N_R];

  // One k_S slice: the FFMAs on `stage` while issue_next(g) puts the next slice's loads in flight. Group g
  // is issued before k-step kIssue(g), once group g - 1 is summed into the other stage; the last group is
  // summed before the last k-step. With at most K_S / 2 groups, group g goes at g K_S / G, so that every group
  // but the last has K_S / G k-steps of FFMAs to arrive and the last K_S / G - 1; with more, the K_S - 1
  // k-steps before the last are shared out evenly. Without overlap (the predicated path), issue_next(stage)
  // fills the whole next slice in the last k-step. `stage` is a compile-time constant on the interior path
  // (its shared-memory addresses are then immediates).
  auto slice = [&](auto stage_, auto overlap, auto issue_next) {
    const int stage = int_value(stage_);
    constexpr int NG = G;
    constexpr bool kOverlap = decltype(overlap)::value;
    static_for<K_S>([&](auto p_) {
      constexpr int p = decltype(p_)::value;
      static_for<NG>([&](auto g_) {
        constexpr int g = decltype(g_)::value;
        constexpr int kIssue = 2 * NG <= K_S ? g * K_S / NG : g * (K_S - 1) / NG;
        if constexpr (kOverlap && p == kIssue) {
          if constexpr (g > 0) accumulate(Group<g - 1, NG>{}, stage ^ 1);
          issue_next(Group<g, NG>{});
        }
      });
      // This k-step's FFMAs on rows [i0, i1) of the accumulator.
      auto ffma = [&](auto i0, auto i1) {
#pragma unroll
        for (int i = decltype(i0)::value; i < decltype(i1)::value; ++i)
#pragma unroll
          for (int j = 0; j < N_R; ++j) acc[i][j] += frag_a[p & 1][i] * frag_b[p & 1][j];
      };
      if constexpr (p == K_S - 1) {
        // Half of this k-step's FFMAs (more time for the last group's loads to arrive), the next slice's sums
        // stored to the other stage, one barrier, its first fragments, then the other half of the FFMAs,
        // which hides the fragment loads' latency.
        constexpr int kHalf = kOverlap ? M_R / 2 : 0;
        ffma(stdx::integral_constant<int, 0>{}, stdx::integral_constant<int, kHalf>{});
        if constexpr (kOverlap)
          accumulate(Group<NG - 1, NG>{}, stage ^ 1);
        else
          issue_next(stage ^ 1);  // the whole next slice (fill)
        __syncthreads();
        warp_tile.load(frag_a[(p + 1) & 1], frag_b[(p + 1) & 1], smem.a[stage ^ 1], smem.b[stage ^ 1], 0);
        ffma(stdx::integral_constant<int, kHalf>{}, stdx::integral_constant<int, M_R>{});
      } else {
        warp_tile.load(frag_a[(p + 1) & 1], frag_b[(p + 1) & 1], smem.a[stage], smem.b[stage], p + 1);
        ffma(stdx::integral_constant<int, 0>{}, stdx::integral_constant<int, M_R>{});
      }
    });
  };

  // Prologue: slice 0 into stage 0, and its first fragments.
  auto prologue = [&] {
    fill(0, 0);
    __syncthreads();
    warp_tile.load(frag_a[0], frag_b[0], smem.a[0], smem.b[0], 0);
  };

  prologue();  // before the slice count is computed: computed first, it changes Huge w2x2x1's code on sm_90

  const int slices = cdiv(bk, K_S);
  int stage = 0, s = 0;  // the next slice to compute, and its stage
  // The main iterations over interior tiles: while the slice in flight lies inside every term (the block's
  // rows of every A term, its columns of every B term, and k below every term's extent), its loads need no
  // bounds and no address arithmetic beyond one step per operand and slice. Unrolled by two so that the stages
  // are constants. Slices s < fast issue a whole interior slice s + 1.
  auto gemm_iters = [&] {
    if constexpr (kPipelined) {
      InteriorCursor<T, M_S, N_S, K_S, W_A, W_B, LoaderA, LoaderB> at(terms_a, terms_b, lda, ldb, row0, col0, bk);
      auto issue_at = [&](auto group) {
        using X = decltype(group);
        using R = GroupRange<X::g, X::n, W_A, W_B, kByOperand && X::n == G>;
        load_a.template issue_at<R::a0, R::a1>(ta, at.off_a, at.step_a);
        load_b.template issue_at<R::b0, R::b1>(tb, at.off_b, at.step_b);
      };
      // REREAD: the terms' addresses and coefficients are read afresh from the parameters every slice
      // (Terms::reread), so that the compiler cannot hold them in registers across the loop (3 registers a
      // term). The build compiles a kernel so only when it spills otherwise (strassenbench.fused.build).
      auto fresh = [&] {
        if constexpr (REREAD) {
          ta = terms_a.reread();
          tb = terms_b.reread();
        }
      };
      // A count of pairs, down to zero: one uniform add, compare and branch a pair (a count of slices up to
      // `fast` took an add more, and on sm_90 half an instruction a slice).
      const int pairs = at.fast > 0 ? at.fast / 2 : 0;
      for (int n = pairs; n > 0; --n) {
        fresh();
        slice(stdx::integral_constant<int, 0>{}, stdx::true_type{}, issue_at);
        at.advance();
        fresh();
        slice(stdx::integral_constant<int, 1>{}, stdx::true_type{}, issue_at);
        at.advance();
      }
      s = 2 * pairs;
      if (s < at.fast) {
        fresh();
        slice(stdx::integral_constant<int, 0>{}, stdx::true_type{}, issue_at);
        ++s;
        stage = 1;
      }
    }
  };

  // Wind-down: the slices left (s onwards) on the predicated path, each filling the next one after its FFMAs.
  auto wind_down = [&] {
    for (; s < slices; ++s) {
      const int next = (s + 1) * K_S;  // first k of the slice in flight (loads past bk are predicated off)
      ta = terms_a.reread();
      tb = terms_b.reread();
      slice(stage, stdx::false_type{}, [&](int to) { fill(to, next); });
      stage ^= 1;
    }
  };

  gemm_iters();
  wind_down();
}

}  // namespace sb
