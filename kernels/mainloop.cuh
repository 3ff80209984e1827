// The SIMT GEMM mainloop (paper, Algorithm a:gpu_stra, left; Sec. s:cutlass): per k_S slice of the shared
// tiles, each thread multiplies an m_R x 1 fragment of A by a 1 x n_R fragment of B into its m_R x n_R
// register accumulator, with the fragments double-buffered so that the next slice's shared-memory loads are
// in flight while the current slice's FMAs run.
#pragma once

#include "platform.cuh"

namespace sb {

template <class T, int N>
__device__ __forceinline__ void load_fragment(T (&frag)[N], const T* src) {
  constexpr int V = vec_width<T>(N);  // 128-bit LDS where the fragment allows
#pragma unroll
  for (int i = 0; i < N; i += V) *reinterpret_cast<Vec<T, V>*>(&frag[i]) = *reinterpret_cast<const Vec<T, V>*>(src + i);
}

// acc += A_tile[:, rows] (x) B_tile[:, cols] over the K_S slices of one pair of shared tiles.
template <class T, int M_S, int N_S, int K_S, int M_R, int N_R>
__device__ __forceinline__ void mainloop_tile(T (&acc)[M_R][N_R], const T (*tile_a)[M_S], const T (*tile_b)[N_S],
                                              int thread_row, int thread_col) {
  alignas(16) T frag_a[2][M_R];
  alignas(16) T frag_b[2][N_R];
  load_fragment(frag_a[0], &tile_a[0][thread_row]);
  load_fragment(frag_b[0], &tile_b[0][thread_col]);
#pragma unroll
  for (int p = 0; p < K_S; ++p) {
    if (p + 1 < K_S) {  // prefetch slice p + 1 into the other fragment buffer
      load_fragment(frag_a[(p + 1) & 1], &tile_a[p + 1][thread_row]);
      load_fragment(frag_b[(p + 1) & 1], &tile_b[p + 1][thread_col]);
    }
#pragma unroll
    for (int i = 0; i < M_R; ++i)
#pragma unroll
      for (int j = 0; j < N_R; ++j) acc[i][j] += frag_a[p & 1][i] * frag_b[p & 1][j];
  }
}

}  // namespace sb
