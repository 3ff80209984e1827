// Global -> register -> shared-memory tile loads with Strassen's operand sums packed in (paper, Sec.
// s:gpu_stra and Algorithm a:gpu_stra, right: "pack sum_i u_i X_i into the A tile while loading").
//
// Each thread owns kChunks chunks of V consecutive elements of the tile. A chunk is read from every term of
// the operand sum, scaled by the term's coefficient and accumulated in registers, so the shared-memory tile
// holds the packed sum and the mainloop is the GEMM mainloop unchanged. Chunks fully inside an aligned term
// use one V-wide (up to 128-bit) load; chunks at a fringe or with unaligned leading dimension use scalar
// loads, and elements past a term's extent read as zero (Sec. s:fringe).
#pragma once

#include "platform.cuh"

namespace sb {

// One term of an operand sum: a block of rows x cols elements at ptr, weighted by coeff.
template <class P, class T>
struct Term {
  P ptr;
  int rows;
  int cols;
  T coeff;
  bool vector_ok;  // ptr and the leading dimension allow V-wide loads
};

// Read the W terms of product blockIdx.z from the parameter arrays (paper, "Task Parallelism: Batching").
// Called by every thread; thread t < W writes term t (terms live in shared memory: they are read at every
// tile load, and keeping them in registers would cost the accumulator its registers).
template <int W, class P, class T>
__device__ __forceinline__ void read_terms(Term<P, T> (&terms)[W], P base, int ld, int vec_bytes,
                                           const long long* offsets, const int* extents, const T* coeffs, int tid) {
  if (tid < W) {
    const int t = tid;
    terms[t].ptr = base + offsets[t];
    terms[t].rows = extents[2 * t];
    terms[t].cols = extents[2 * t + 1];
    terms[t].coeff = coeffs[t];
    terms[t].vector_ok = (reinterpret_cast<std::uintptr_t>(terms[t].ptr) % vec_bytes == 0) &&
                         (static_cast<long long>(ld) * static_cast<long long>(sizeof(T)) % vec_bytes == 0);
  }
}

// sum = sum_t coeff_t X_t[row, col .. col + V) over the W terms, zeros outside each term's extent.
template <class T, int V, int W>
__device__ __forceinline__ void gather(Vec<T, V>& sum, const Term<const T*, T> (&terms)[W], int ld, int row, int col) {
#pragma unroll
  for (int j = 0; j < V; ++j) sum.v[j] = T(0);
#pragma unroll
  for (int t = 0; t < W; ++t) {
    const Term<const T*, T> term = terms[t];  // one read of the shared descriptor per term and chunk
    if (row < term.rows) {
      const T* p = term.ptr + static_cast<long long>(row) * ld + col;
      const T u = term.coeff;
      if (term.vector_ok && col + V <= term.cols) {
        const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
        for (int j = 0; j < V; ++j) sum.v[j] += u * x.v[j];
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (col + j < term.cols) sum.v[j] += u * p[j];
      }
    }
  }
}

// A ROWS x COLS tile of a row-major operand. Each thread owns kChunks chunks of V consecutive elements
// along the contiguous dimension (COLS). TRANSPOSE stores it column-major (tile[COLS][ROWS]): the A tile
// (m_S x k_S, stored k-major so that a thread's m_R fragment is contiguous). Otherwise it is stored as is
// (tile[ROWS][COLS]): the B tile (k_S x n_S).
template <class T, int ROWS, int COLS, int THREADS, int W, bool TRANSPOSE>
struct TileLoader {
  static_assert((ROWS * COLS) % THREADS == 0, "the tile must divide among the threads");
  static constexpr int kElements = ROWS * COLS / THREADS;
  static constexpr int V = vec_width<T>(cmin(kElements, COLS));
  static constexpr int kChunks = kElements / V;
  static constexpr int kChunksPerRow = COLS / V;
  using TileRow = T[TRANSPOSE ? ROWS : COLS];
  Vec<T, V> regs[kChunks];

  __device__ __forceinline__ void load(const Term<const T*, T> (&terms)[W], int ld, int row0, int col0, int tid) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int idx = tid + c * THREADS;
      gather<T, V, W>(regs[c], terms, ld, row0 + idx / kChunksPerRow, col0 + (idx % kChunksPerRow) * V);
    }
  }

  __device__ __forceinline__ void store(TileRow* tile, int tid) const {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int idx = tid + c * THREADS;
      const int r = idx / kChunksPerRow, cc = (idx % kChunksPerRow) * V;
      if constexpr (TRANSPOSE) {
#pragma unroll
        for (int j = 0; j < V; ++j) tile[cc + j][r] = regs[c].v[j];
      } else {
        *reinterpret_cast<Vec<T, V>*>(&tile[r][cc]) = regs[c];
      }
    }
  }
};

}  // namespace sb
