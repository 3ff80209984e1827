// Write-back of the register accumulator to the W_C blocks of C (paper, Sec. s:gpu_stra: "C_l += gamma_l M
// from registers", Algorithm a:gpu_stra, right). Plain read-modify-write when no other product writes the
// same block concurrently, atomicAdd otherwise (paper, "Task Parallelism: Atomic write"); a compile-time
// choice. Elements past a block's extent are dropped (Sec. s:fringe).
#pragma once

#include "tile_loader.cuh"

namespace sb {

template <class T, int M_R, int N_R, int W_C, bool ATOMIC>
__device__ __forceinline__ void epilogue(const T (&acc)[M_R][N_R], const Term<T*, T> (&terms)[W_C], int ld,
                                         int row0, int col0, T alpha, T beta) {
  constexpr int V = vec_width<T>(N_R);
#pragma unroll
  for (int t = 0; t < W_C; ++t) {
    // A register copy: the stores below go through a generic pointer that the compiler must assume may
    // alias the shared-memory descriptor, which would otherwise be re-read after every store.
    const Term<T*, T> term = terms[t];
    const T scale = alpha * term.coeff;
#pragma unroll
    for (int i = 0; i < M_R; ++i) {
      const int row = row0 + i;
      if (row >= term.rows) continue;
      T* out = term.ptr + static_cast<long long>(row) * ld;
#pragma unroll
      for (int j = 0; j < N_R; j += V) {
        const int col = col0 + j;
        if (!ATOMIC && term.vector_ok && col + V <= term.cols) {  // one V-wide read-modify-write
          Vec<T, V>* p = reinterpret_cast<Vec<T, V>*>(out + col);
          Vec<T, V> c = beta == T(0) ? Vec<T, V>{} : *p;
#pragma unroll
          for (int v = 0; v < V; ++v) c.v[v] = (beta == T(1) ? c.v[v] : beta * c.v[v]) + scale * acc[i][j + v];
          *p = c;
          continue;
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
          if (col + v >= term.cols) continue;
          const T value = scale * acc[i][j + v];
          if (ATOMIC) {
            atomicAdd(out + col + v, value);
          } else if (beta == T(0)) {  // C is not read when beta = 0 (no NaN from uninitialised C)
            out[col + v] = value;
          } else {
            out[col + v] = (beta == T(1) ? out[col + v] : beta * out[col + v]) + value;
          }
        }
      }
    }
  }
}

}  // namespace sb
