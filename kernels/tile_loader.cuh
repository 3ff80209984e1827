// Global -> register -> shared-memory tile loads with Strassen's operand sums packed in (paper, Sec.
// s:gpu_stra and Algorithm a:gpu_stra, right: "pack sum_i u_i X_i into the A tile").
//
// In interior tiles the loads of a k_S slice are issued well before the slice is needed: `issue_at` puts the
// raw vectors of some terms into registers, `accumulate` folds them into the weighted sum sum_i u_i X_i, and
// `store` writes the sum to shared memory. The main loop (mainloop.cuh) issues a slice's loads while it
// computes on the slice before and calls `accumulate` and `store` only when the registers must be free again,
// so the global-memory latency is hidden behind FFMAs. Elsewhere `load_sum` forms the sum a term at a time
// from predicated loads (`issue`, `load`: zeros outside a term's extent, Sec. s:fringe).
#pragma once

#include "platform.cuh"

namespace sb {

// The terms of up to Z products, one per blockIdx.z (paper, "Task Parallelism: Batching"): for product z and
// term t (W_A terms of A, then W_B of B, then W_C of C), the address of the term's block (its first element
// in A, B or C), its extent and its coefficient. It is a kernel parameter (__grid_constant__): the kernel reads the
// constant bank at every use and holds no register for it, and no device memory is needed for parameters.
// strassenbench.fused.launch builds the same layout.
template <class T, int W, int Z>
struct Products {
  unsigned long long address[Z][W];
  int rows[Z][W];
  int cols[Z][W];
  T coeff[Z][W];
};

// The W terms FIRST .. FIRST + W - 1 of product z, read from the parameters at each use.
template <class P, class T, int W, int FIRST, int WALL, int Z>
struct Terms {
  const Products<T, WALL, Z>* products;
  int z;
  __device__ __forceinline__ P ptr(int t) const { return reinterpret_cast<P>(products->address[z][FIRST + t]); }
  __device__ __forceinline__ int rows(int t) const { return products->rows[z][FIRST + t]; }
  __device__ __forceinline__ int cols(int t) const { return products->cols[z][FIRST + t]; }
  __device__ __forceinline__ T coeff(int t) const { return products->coeff[z][FIRST + t]; }

  // The same terms, read afresh: the compiler must not keep parameter values live in registers across the
  // main loop (it would hoist them out of the loop and then spill them); an opaque product index once per
  // k_S slice keeps every read a constant-bank load (LDC) inside the loop.
  __device__ __forceinline__ Terms reread() const { return {products, opaque(z)}; }

  // True when V-wide accesses are valid for every term: the pointer and the leading dimension are multiples
  // of V elements, and so is the extent along the contiguous dimension (a chunk of V elements is then either
  // wholly inside a term or wholly outside it). Block-uniform, decided once per kernel.
  template <int V>
  __device__ __forceinline__ bool vectors_fit(int ld) const {
    bool ok = ld % V == 0;
#pragma unroll
    for (int t = 0; t < W; ++t)
      ok = ok && reinterpret_cast<stdx::uintptr_t>(ptr(t)) % (V * sizeof(T)) == 0 && cols(t) % V == 0;
    return ok;
  }
};

// The operands of this block's product z (blockIdx.z of the launch's batch, Sec. "Task Parallelism:
// Batching"): its W_A terms of A and W_B of B, the first W_A + W_B of the product's WALL parameters. Both main
// loops (SIMT and tensor-core) take them from here.
template <class T, int W_A, int W_B, int WALL, int Z>
struct OperandTerms {
  Terms<const T*, T, W_A, 0, WALL, Z> a;
  Terms<const T*, T, W_B, W_A, WALL, Z> b;

  __device__ __forceinline__ OperandTerms(const Products<T, WALL, Z>& products, int z)
      : a{&products, z}, b{&products, z} {}

  // The terms of product z, checked: a vector kernel (VECTOR, V_A and V_B elements per load) refuses terms
  // that are not aligned to its loads; a scalar kernel takes any.
  template <bool VECTOR, int V_A, int V_B>
  __device__ __forceinline__ static OperandTerms checked(const Products<T, WALL, Z>& products, int z, int lda,
                                                         int ldb) {
    OperandTerms terms(products, z);
    if constexpr (VECTOR)
      if (!(terms.a.template vectors_fit<V_A>(lda) && terms.b.template vectors_fit<V_B>(ldb)))
        fail("vector kernel launched with terms that are not aligned to its loads");
    return terms;
  }
};

// Whether the block's tile lies inside every term (its M_S rows inside every A term, its N_S columns inside every
// B term), and the smallest k extent of the terms (bk at most): what interior_slices reads.
struct TileExtent {
  bool inside;
  int kfull;
};
template <int M_S, int N_S, int W_A, int W_B, class TermsA, class TermsB>
__device__ __forceinline__ TileExtent tile_extent(const TermsA& terms_a, const TermsB& terms_b, int row0, int col0,
                                                  int bk) {
  bool inside = true;
  int kfull = bk;
#pragma unroll
  for (int t = 0; t < W_A; ++t) {
    inside = inside && row0 + M_S <= terms_a.rows(t);
    kfull = terms_a.cols(t) < kfull ? terms_a.cols(t) : kfull;
  }
#pragma unroll
  for (int t = 0; t < W_B; ++t) {
    inside = inside && col0 + N_S <= terms_b.cols(t);
    kfull = terms_b.rows(t) < kfull ? terms_b.rows(t) : kfull;
  }
  return {inside, kfull};
}

// The slices of a tile's main loop whose slice AHEAD slices on lies inside every term (tile_extent, and k below
// every term's extent): slices s < interior_slices(...) may issue slice s + AHEAD's loads unpredicated (the
// interior path of the vector kernels: one slice ahead on the register pipeline, STAGES - 1 on the multistage
// one); none for an edge tile.
template <int M_S, int N_S, int K_S, int W_A, int W_B, int AHEAD = 1, class TermsA, class TermsB>
__device__ __forceinline__ int interior_slices(const TermsA& terms_a, const TermsB& terms_b, int row0, int col0,
                                               int bk) {
  const TileExtent e = tile_extent<M_S, N_S, W_A, W_B>(terms_a, terms_b, row0, col0, bk);
  return e.inside ? e.kfull / K_S - AHEAD : 0;
}

// A ROWS x COLS tile of a row-major operand whose terms are W blocks. Thread tid owns kChunks chunks of V
// consecutive elements along the contiguous dimension (COLS): chunk c is at tile row row_ + c kRowStep, tile
// column col_. Consecutive lanes read consecutive chunks of a row, so a warp's loads are coalesced.
//
// TRANSPOSE stores the tile k-major (tile[COLS][LD]): the A tile (m_S x k_S), so that a thread's m_R
// fragment is contiguous. Otherwise it is stored as is (tile[ROWS][LD]): the B tile (k_S x n_S).
template <class T, int ROWS, int COLS, int THREADS, int W, int V, bool TRANSPOSE>
struct TileLoader {
  static_assert((ROWS * COLS) % (THREADS * V) == 0 && COLS % V == 0, "the tile must divide among the threads");
  static constexpr int kChunks = ROWS * COLS / (THREADS * V);
  static constexpr int kChunksPerRow = COLS / V;
  static_assert(THREADS % kChunksPerRow == 0, "a thread's chunks must share their column");
  static constexpr int kRowStep = THREADS / kChunksPerRow;
  static constexpr int kRegisters = W * kChunks * V * static_cast<int>(sizeof(T)) / 4;  // raw data in flight
  static constexpr int kV = V;

  Vec<T, V> raw[W][kChunks];
  Vec<T, V> sum[kChunks];

  // The thread's first chunk: tile row and column. From an opaque thread index, so that the addresses
  // derived from them are recomputed at each use rather than held in registers across the main loop.
  __device__ __forceinline__ static int tid() { return opaque(static_cast<int>(threadIdx.x)); }
  __device__ __forceinline__ static int row() { return tid() / kChunksPerRow; }
  __device__ __forceinline__ static int col() { return (tid() % kChunksPerRow) * V; }

  // Predicated loads of terms [BEGIN, END) of the tile whose top-left corner is (row0, col0) of every term block.
  template <int BEGIN, int END, class Terms>
  __device__ __forceinline__ void issue(const Terms& terms, int ld, int row0, int col0) {
    const int col = col0 + this->col(), first_row = row0 + row();
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int t = BEGIN; t < END; ++t) raw[t][c] = load(terms, t, ld, first_row + c * kRowStep, col);
  }

  // The chunk at (row, col) of term t's block: zeros outside the term's extent.
  template <class Terms>
  __device__ __forceinline__ static Vec<T, V> load(const Terms& terms, int t, int ld, int row, int col) {
    return ldg<T, V>(terms.ptr(t) + (static_cast<long long>(row) * ld + col), row < terms.rows(t) && col < terms.cols(t));
  }

  // The whole sum, one term at a time with the term a run-time index: the predicated path (scalar kernels,
  // edge tiles and last slices of the vector kernels). It holds one term's registers and one copy of the load
  // code whatever W is, and the compiler cannot hoist a term's loads above the sum of the one before, so this
  // path never raises the register pressure of the kernel (at the 128-register cap, a spill).
  template <class Terms>
  __device__ __forceinline__ void load_sum(const Terms& terms, int ld, int row0, int col0) {
    issue<0, 1>(terms, ld, row0, col0);
    accumulate<0, 1>(terms);
    const int col = col0 + this->col(), first_row = row0 + row();
#pragma unroll 1
    for (int t = 1; t < W; ++t) {
      const T u = terms.coeff(t);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const Vec<T, V> x = load(terms, t, ld, first_row + c * kRowStep, col);
#pragma unroll
        for (int j = 0; j < V; ++j) sum[c].v[j] += u * x.v[j];
      }
    }
  }

  // The same loads inside an interior tile (every element of every term inside its extent): no bounds, the
  // thread's first chunk at byte offset `offset` of every term block, chunk c `c * step` bytes further.
  template <int BEGIN, int END, class Terms>
  __device__ __forceinline__ void issue_at(const Terms& terms, long long offset, long long step) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int t = BEGIN; t < END; ++t) raw[t][c] = ldg_at<T, V>(terms.ptr(t), offset + c * step);
  }

  // Byte offset of the thread's first chunk in the tile whose top-left corner is (row0, col0) of a term
  // block, and the step between its chunks.
  __device__ __forceinline__ static long long offset(int ld, int row0, int col0) {
    return (static_cast<long long>(row0 + row()) * ld + col0 + col()) * static_cast<long long>(sizeof(T));
  }
  __device__ __forceinline__ static long long step(int ld) {
    return static_cast<long long>(kRowStep) * ld * static_cast<long long>(sizeof(T));
  }

  // sum (+)= coeff_t raw_t for t in [BEGIN, END); BEGIN = 0 starts the sum with the first term unscaled: the
  // coefficients are normalised (strassenbench.fused.launch.normalised), coeff_t = u_t / u_0 for t > 0, and
  // u_0 joins the epilogue's scale (fold_scale), so each extra term costs one FFMA per element.
  template <int BEGIN, int END, class Terms>
  __device__ __forceinline__ void accumulate(const Terms& terms) {
#pragma unroll
    for (int t = BEGIN; t < END; ++t) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (t == 0)
            sum[c].v[j] = raw[t][c].v[j];
          else
            sum[c].v[j] += terms.coeff(t) * raw[t][c].v[j];
        }
    }
  }

  // The sum, as is, to at(tile row, tile column): the multistage pipeline's store of a sum of terms.
  template <class At>
  __device__ __forceinline__ void store_at(const At& at) const {
    const int r0 = row(), c0 = col();
#pragma unroll
    for (int c = 0; c < kChunks; ++c) sts(reinterpret_cast<Vec<T, V>*>(at(r0 + c * kRowStep, c0)), sum[c]);
  }

  // The factor this operand contributes to the epilogue's scale: its first coefficient u_0.
  template <class Terms>
  __device__ __forceinline__ static T fold_scale(const Terms& terms) {
    return terms.coeff(0);
  }

  template <int LD>
  __device__ __forceinline__ void store(T (*tile)[LD]) const {
    const int row0 = row(), col0 = col();
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int r = row0 + c * kRowStep;
      if constexpr (TRANSPOSE) {
#pragma unroll
        for (int j = 0; j < V; ++j) sts(&tile[col0 + j][r], sum[c].v[j]);
      } else {
        sts(reinterpret_cast<Vec<T, V>*>(&tile[r][col0]), sum[c]);
      }
    }
  }
};

// The multistage pipeline's copies of a one-term operand (W = 1, kernels/mma_mainloop.cuh: mma_multistage): each
// slice's chunks of the thread go straight into shared memory, a cp.async each, zeros outside the term's
// extent. Its addresses are worked out once per block (a multistage kernel has the registers: 128 threads at
// up to 255): the source of the thread's first chunk moves on a slice per copy, its chunks `step` elements apart;
// the rows and column of its chunks in the tile are fixed, and so is whether each chunk lies inside the term
// along the dimension that is not k. K_IN_COLS: k runs along the tile's columns (A's m_S x k_S tile), else along
// its rows (B's k_S x n_S tile).
template <class Loader, class T, int K_S, bool K_IN_COLS>
struct SliceCopier {
  static constexpr int kChunks = Loader::kChunks, kV = Loader::kV;
  const T* src;        // the thread's first chunk of the next slice
  long long step;      // elements between its chunks
  long long advance;   // elements from one slice to the next
  int row, col;        // its first chunk's row and column in the tile
  int inside;          // bit c: chunk c inside the term across k
  int k, k_limit;      // the first k of the thread's chunks in the next slice, and the term's extent along k

  template <class Terms>
  __device__ __forceinline__ SliceCopier(const Terms& terms, int ld, int row0, int col0) {
    const int tid = static_cast<int>(threadIdx.x);
    row = tid / Loader::kChunksPerRow;
    col = (tid % Loader::kChunksPerRow) * kV;
    src = terms.ptr(0) + (static_cast<long long>(row0 + row) * ld + col0 + col);
    step = static_cast<long long>(Loader::kRowStep) * ld;
    advance = K_IN_COLS ? K_S : static_cast<long long>(K_S) * ld;
    inside = 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const bool ok = K_IN_COLS ? row0 + row + c * Loader::kRowStep < terms.rows(0) : col0 + col < terms.cols(0);
      inside |= static_cast<int>(ok) << c;
    }
    k = K_IN_COLS ? col0 + col : row0 + row;
    k_limit = K_IN_COLS ? terms.cols(0) : terms.rows(0);
  }

  // The next slice into the stage whose element (tile row, tile column) is at(row, column).
  template <class At>
  __device__ __forceinline__ void copy(const At& at) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const bool along = K_IN_COLS ? k < k_limit : k + c * Loader::kRowStep < k_limit;
      cp_async<kV * sizeof(T)>(at(row + c * Loader::kRowStep, col), src + c * step, ((inside >> c) & 1) && along);
    }
    src += advance;
    k += K_S;
  }
};

// Padding of the k-major A tile's rows: the smallest multiple of a 128-bit vector such that the transposed
// store of the vector loader (lane l writes element j of its chunk to tile[col_l + j][row_l]) puts the lanes
// of each phase of a warp's store (32 lanes for 32-bit, 16 for 64-bit accesses) on distinct banks, as
// CUTLASS pads its SIMT A tile (128 + 4 floats for 128 x 8).
template <class T, int M_S, int K_S, int THREADS, int V>
SB_HOST_DEVICE constexpr int a_tile_padding() {
  constexpr int kStep = 16 / static_cast<int>(sizeof(T));
  constexpr int kWords = static_cast<int>(sizeof(T)) / 4;
  constexpr int kPhase = 32 / kWords;
  constexpr int kChunksPerRow = K_S / V;
  for (int pad = 0; pad < 32 * kStep; pad += kStep) {
    bool conflict = false;
    for (int j = 0; j < V; ++j)
      for (int phase = 0; phase < cmin(32, THREADS); phase += kPhase) {
        int used[32] = {};
        for (int lane = phase; lane < cmin(phase + kPhase, THREADS); ++lane) {
          const int row = lane / kChunksPerRow, col = (lane % kChunksPerRow) * V + j;
          const int word = (col * (M_S + pad) + row) * kWords;
          for (int w = 0; w < kWords; ++w) conflict = conflict || used[(word + w) % 32]++ > 0;
        }
      }
    if (!conflict) return pad;
  }
  return 0;
}


// The interior path's cursor, shared by both main loops: how many slices are interior (interior_slices, their
// slice in flight AHEAD slices on), the unpredicated offsets (bytes) of the slice in flight in every A and B term,
// the step between a term's rows, and advance() to the next slice (k_S columns of A, k_S rows of B).
template <class T, int M_S, int N_S, int K_S, int W_A, int W_B, class LoaderA, class LoaderB, int AHEAD = 1>
struct InteriorCursor {
  int fast;
  long long off_a, off_b;
  long long step_a, step_b, next_b;

  template <class TermsA, class TermsB>
  __device__ __forceinline__ InteriorCursor(const TermsA& terms_a, const TermsB& terms_b, int lda, int ldb, int row0,
                                            int col0, int bk)
      : fast(interior_slices<M_S, N_S, K_S, W_A, W_B, AHEAD>(terms_a, terms_b, row0, col0, bk)),
        off_a(LoaderA::offset(lda, row0, AHEAD * K_S)),
        off_b(LoaderB::offset(ldb, AHEAD * K_S, col0)),
        step_a(LoaderA::step(lda)),
        step_b(LoaderB::step(ldb)),
        next_b(static_cast<long long>(K_S) * ldb * static_cast<long long>(sizeof(T))) {}

  __device__ __forceinline__ void advance() {
    off_a += K_S * static_cast<long long>(sizeof(T));
    off_b += next_b;
  }
};

}  // namespace sb
