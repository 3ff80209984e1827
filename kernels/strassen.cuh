// The fused Strassen primitive (paper, Sec. s:gpu_stra, Algorithm a:gpu_stra):
//
//   M = (sum_i u_i X_i)(sum_j v_j V_j);   C_l += alpha gamma_l M,  l = 1..W_C
//
// with W_A, W_B, W_C fixed at compile time and the coefficients, block offsets and extents read at run time
// from parameter arrays indexed by blockIdx.z (one batched launch runs every product of one variant). The
// plain GEMM is W = (1, 1, 1) with coefficients 1: the paper's "CUTLASS" line.
//
// Thread block m_S x n_S x k_S, warp m_W x n_W, thread m_R x n_R (figure tab:gpu_block_size). The next
// k_S slice is prefetched from global memory into registers while the current one is computed from
// double-buffered shared tiles, so there is one __syncthreads per k_S slice.
#pragma once

#include "epilogue.cuh"
#include "mainloop.cuh"
#include "tile_loader.cuh"

namespace sb {

template <class T, int M_S, int N_S, int K_S, int M_R, int N_R, int WARP_M, int WARP_N, int W_A, int W_B, int W_C,
          bool ATOMIC>
__device__ __forceinline__ void strassen_primitive(const T* A, const T* B, T* C, int lda, int ldb, int ldc, int bk,
                                                   T alpha, T beta, const long long* offsets, const int* extents,
                                                   const T* coeffs) {
  constexpr int kThreads = (M_S / M_R) * (N_S / N_R);
  constexpr int kWarpsM = M_S / (WARP_M * M_R);
  static_assert(WARP_M * WARP_N == 32, "a warp has 32 threads");
  static_assert(M_S % (WARP_M * M_R) == 0 && N_S % (WARP_N * N_R) == 0, "warp tile must divide the block tile");

  using LoaderA = TileLoader<T, M_S, K_S, kThreads, W_A, true>;   // m_S x k_S, stored k-major
  using LoaderB = TileLoader<T, K_S, N_S, kThreads, W_B, false>;  // k_S x n_S, stored as is
  alignas(16) __shared__ T tile_a[2][K_S][M_S];
  alignas(16) __shared__ T tile_b[2][K_S][N_S];

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int thread_row = (warp % kWarpsM) * WARP_M * M_R + (lane % WARP_M) * M_R;
  const int thread_col = (warp / kWarpsM) * WARP_N * N_R + (lane / WARP_M) * N_R;
  const int row0 = blockIdx.y * M_S, col0 = blockIdx.x * N_S;

  // This product's terms: W_A blocks of A, W_B of B, W_C of C (Sec. "Task Parallelism: Batching").
  constexpr int kTerms = W_A + W_B + W_C;
  const long long z = blockIdx.z;
  const long long* off = offsets + z * kTerms;
  const int* ext = extents + 2 * z * kTerms;
  const T* coeff = coeffs + z * kTerms;
  __shared__ Term<const T*, T> terms_a[W_A];
  __shared__ Term<const T*, T> terms_b[W_B];
  __shared__ Term<T*, T> terms_c[W_C];
  read_terms<W_A>(terms_a, A, lda, LoaderA::V * sizeof(T), off, ext, coeff, tid);
  read_terms<W_B>(terms_b, B, ldb, LoaderB::V * sizeof(T), off + W_A, ext + 2 * W_A, coeff + W_A, tid);
  read_terms<W_C>(terms_c, C, ldc, vec_width<T>(N_R) * sizeof(T), off + W_A + W_B, ext + 2 * (W_A + W_B),
                  coeff + W_A + W_B, tid);
  __syncthreads();

  T acc[M_R][N_R];
#pragma unroll
  for (int i = 0; i < M_R; ++i)
#pragma unroll
    for (int j = 0; j < N_R; ++j) acc[i][j] = T(0);

  LoaderA load_a;
  LoaderB load_b;
  load_a.load(terms_a, lda, row0, 0, tid);
  load_b.load(terms_b, ldb, 0, col0, tid);
  load_a.store(tile_a[0], tid);
  load_b.store(tile_b[0], tid);
  __syncthreads();

  const int slices = (bk + K_S - 1) / K_S;
  int stage = 0;
  for (int s = 0; s < slices; ++s) {
    const bool more = s + 1 < slices;
    if (more) {  // prefetch the next k_S slice into registers (Algorithm a:gpu_stra, left, line "prefetch")
      load_a.load(terms_a, lda, row0, (s + 1) * K_S, tid);
      load_b.load(terms_b, ldb, (s + 1) * K_S, col0, tid);
    }
    mainloop_tile<T, M_S, N_S, K_S, M_R, N_R>(acc, tile_a[stage], tile_b[stage], thread_row, thread_col);
    if (more) {
      load_a.store(tile_a[stage ^ 1], tid);
      load_b.store(tile_b[stage ^ 1], tid);
    }
    __syncthreads();
    stage ^= 1;
  }

  epilogue<T, M_R, N_R, W_C, ATOMIC>(acc, terms_c, ldc, row0 + thread_row, col0 + thread_col, alpha, beta);
}

// C <- beta C over an m x n matrix (beta = 0 writes zeros without reading C): applied once before the
// products accumulate into C, never once per product. Grid-stride loop.
template <class T>
__device__ __forceinline__ void scale_matrix(T* C, int m, int n, int ldc, T beta) {
  const long long total = static_cast<long long>(m) * n;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    T* p = C + (e / n) * ldc + e % n;
    *p = beta == T(0) ? T(0) : beta * *p;
  }
}

}  // namespace sb
