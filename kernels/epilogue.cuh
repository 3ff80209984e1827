// Write-back of the register accumulator to the W_C blocks of C (paper, Sec. s:gpu_stra: "C_l += gamma_l M
// from registers", Algorithm a:gpu_stra, right). Plain read-modify-write when no other product writes the
// same block concurrently, atomic otherwise (paper, "Task Parallelism: Atomic write"); a compile-time
// choice. Elements past a block's extent are dropped (Sec. s:fringe).
#pragma once

#include "mainloop.cuh"

namespace sb {

// C_t[row0 + rows of the warp tile, col0 + its columns] = beta C_t + alpha scale gamma_t acc for every term t.
// `Tile` places the thread's accumulator in the block tile: row(i), col(j), and kVb, how many consecutive
// columns j, j + 1, ... (from a multiple of kVb) lie side by side in C (WarpTile; MmaWarpTile of the
// tensor-core kernels).
//
// The atomic write-back of a float32 vector kernel (VECTOR) reduces kVb columns at a time (red_add: one vector
// reduction on sm_90): the launch builder chooses that kernel only when every C term is aligned to kVb
// elements, as is its leading dimension and its extent along the row (checked here), so a chunk of kVb
// columns is wholly inside a term or wholly outside it, and no scalar path is compiled beside it. float64
// reduces element by element (PTX has no vector reduction of f64), its C terms as any.
//
// write_back_term writes term t alone (the Wg kernels reduce a term's interior tiles otherwise, from shared
// memory: wgmma_primitive.cuh); epilogue writes every term.
template <bool ATOMIC, bool VECTOR, class T, int M_R, int N_R, class Terms, class Tile>
__device__ __forceinline__ void write_back_term(const T (&acc)[M_R][N_R], const Terms& terms, int t, int ld,
                                                int row0, int col0, const Tile& wt, T alpha, T beta) {
  constexpr int V = Tile::kVb;
  constexpr bool kVectorReduce = ATOMIC && VECTOR && stdx::is_same_v<T, float>;  // PTX has no vector red of f64
  T* const ptr = terms.ptr(t);
  const int rows = terms.rows(t), cols = terms.cols(t);
  const T scale = alpha * terms.coeff(t);
  const bool vectors = ld % V == 0 && reinterpret_cast<stdx::uintptr_t>(ptr) % (V * sizeof(T)) == 0;
#pragma unroll
  for (int i = 0; i < M_R; ++i) {
    const int row = row0 + wt.row(i);
    if (row >= rows) continue;
    T* out = ptr + static_cast<long long>(row) * ld;
#pragma unroll
    for (int j = 0; j < N_R; j += V) {
      const int col = col0 + wt.col(j);
      if constexpr (kVectorReduce) {  // V columns, all inside the term or all outside it
        if (col < cols) {
          Vec<T, V> c;
#pragma unroll
          for (int v = 0; v < V; ++v) c.v[v] = scale * acc[i][j + v];
          red_add(out + col, c);
        }
        continue;
      }
      if (!ATOMIC && vectors && col + V <= cols) {  // one V-wide read-modify-write
        Vec<T, V>* p = reinterpret_cast<Vec<T, V>*>(out + col);
        Vec<T, V> c = beta == T(0) ? Vec<T, V>{} : SB_LOAD(p, "global load");
#pragma unroll
        for (int v = 0; v < V; ++v) c.v[v] = (beta == T(1) ? c.v[v] : beta * c.v[v]) + scale * acc[i][j + v];
        SB_STORE(p, c, "global store");
        continue;
      }
#pragma unroll
      for (int v = 0; v < V; ++v) {
        if (col + v >= cols) continue;
        const T value = scale * acc[i][j + v];
        if (ATOMIC) {
          atomicAdd(out + col + v, value);
        } else if (beta == T(0)) {  // C is not read when beta = 0 (no NaN from uninitialised C)
          SB_STORE(&out[col + v], value, "global store");
        } else {
          SB_STORE(&out[col + v], (beta == T(1) ? SB_LOAD(&out[col + v], "global load")
                                                : beta * SB_LOAD(&out[col + v], "global load")) + value,
                   "global store");
        }
      }
    }
  }
}

template <int W_C, bool ATOMIC, bool VECTOR, class T, int M_R, int N_R, class Terms, class Tile>
__device__ __forceinline__ void epilogue(const T (&acc)[M_R][N_R], const Terms& terms, int ld, int row0, int col0,
                                         const Tile& wt, T alpha, T beta) {
  constexpr bool kVectorReduce = ATOMIC && VECTOR && stdx::is_same_v<T, float>;
  if constexpr (kVectorReduce)
    if (!terms.template vectors_fit<Tile::kVb>(ld)) fail("vector kernel launched with C terms not aligned to its reductions");
#pragma unroll
  for (int t = 0; t < W_C; ++t) write_back_term<ATOMIC, VECTOR>(acc, terms, t, ld, row0, col0, wt, alpha, beta);
}

}  // namespace sb
