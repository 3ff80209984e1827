// The fused Strassen primitive (paper, Sec. s:gpu_stra, Algorithm a:gpu_stra):
//
//   M = (sum_i u_i X_i)(sum_j v_j V_j);   C_l += alpha gamma_l M,  l = 1..W_C
//
// with W_A, W_B, W_C fixed at compile time and the coefficients, block offsets and extents read at run time
// from parameter arrays indexed by blockIdx.z (one batched launch runs every product of one variant). The
// plain GEMM is W = (1, 1, 1) with coefficients 1: the paper's "CUTLASS" line.
//
// Thread block m_S x n_S x k_S, warp m_W x n_W, thread m_R x n_R (figure tab:gpu_block_size). The main loop
// (mainloop.cuh) keeps the next slice's global loads in flight while the current one is computed.
#pragma once

#include "epilogue.cuh"
#include "mainloop.cuh"
#include "tile_loader.cuh"

namespace sb {

// The widest global loads the tiles of a strategy allow (128-bit for the paper's strategies); the vector
// kernels use them, the scalar kernels load one element at a time. strassenbench.fused.instances mirrors it.
template <class T, int M_S, int N_S, int K_S, int M_R, int N_R>
struct LoadWidths {
  static constexpr int kThreads = (M_S / M_R) * (N_S / N_R);
  static constexpr int kVa = vec_width<T>(cmin(M_S * K_S / kThreads, K_S));
  static constexpr int kVb = vec_width<T>(cmin(K_S * N_S / kThreads, N_S));
};

// VECTOR: V-wide global loads; the launch builder chooses this kernel only when every term of every product
// of the launch allows them (aligned pointer and leading dimension, extent along the row a multiple of V),
// otherwise the scalar kernel of the same variant. Two kernels rather than one with both paths: inlined
// together, the paths made the 128-register Huge kernels spill on sm_80. REREAD and FLIGHT: see mainloop().
template <class T, int M_S, int N_S, int K_S, int M_R, int N_R, int WARP_M, int WARP_N, int W_A, int W_B, int W_C,
          bool ATOMIC, int Z, bool VECTOR, bool REREAD = false, int FLIGHT = 16>
__device__ __forceinline__ void strassen_primitive(int lda, int ldb, int ldc, int bk, T alpha, T beta,
                                                   const Products<T, W_A + W_B + W_C, Z>& products) {
  using Widths = LoadWidths<T, M_S, N_S, K_S, M_R, N_R>;
  constexpr int kThreads = Widths::kThreads;
  constexpr int kW = W_A + W_B + W_C;
  constexpr int kVa = VECTOR ? Widths::kVa : 1, kVb = VECTOR ? Widths::kVb : 1;
  static_assert(WARP_M * WARP_N == 32, "a warp has 32 threads");
  static_assert(M_S % (WARP_M * M_R) == 0 && N_S % (WARP_N * N_R) == 0, "warp tile must divide the block tile");
  constexpr int kPadA = a_tile_padding<T, M_S, K_S, kThreads, Widths::kVa>();  // one layout for both kernels
  using Tiles = SharedTiles<T, M_S, N_S, K_S, kPadA>;
  __shared__ Tiles smem;

  // This product's terms: W_A blocks of A, W_B of B, W_C of C (Sec. "Task Parallelism: Batching").
  const int z = blockIdx.z;
  const auto terms = OperandTerms<T, W_A, W_B, kW, Z>::template checked<VECTOR, kVa, kVb>(products, z, lda, ldb);
  const auto& terms_a = terms.a;
  const auto& terms_b = terms.b;

  const int tid = threadIdx.x;
  const WarpTile<T, M_S, N_S, M_R, N_R, WARP_M, WARP_N> warp_tile(tid);
  const int row0 = blockIdx.y * M_S, col0 = blockIdx.x * N_S;

  T acc[M_R][N_R];
#pragma unroll
  for (int i = 0; i < M_R; ++i)
#pragma unroll
    for (int j = 0; j < N_R; ++j) acc[i][j] = T(0);
  mainloop<T, M_S, N_S, K_S, M_R, N_R, WARP_M, WARP_N, W_A, W_B, kVa, kVb, kPadA, REREAD, FLIGHT>(
      acc, terms_a, terms_b, lda, ldb, bk, row0, col0, smem, warp_tile);

  // A single-term operand sum is not scaled in the loads: its coefficient joins alpha here.
  const T scale = alpha * TileLoader<T, M_S, K_S, kThreads, W_A, 1, true>::fold_scale(terms_a) *
                  TileLoader<T, K_S, N_S, kThreads, W_B, 1, false>::fold_scale(terms_b);
  // The C terms, read only now (Terms reads the parameters at each use).
  const Terms<T*, T, W_C, W_A + W_B, kW, Z> terms_c{&products, z};
  // The thread's place in the tile, recomputed rather than kept in registers across the main loop.
  const WarpTile<T, M_S, N_S, M_R, N_R, WARP_M, WARP_N> out_tile(opaque(tid));
  epilogue<W_C, ATOMIC, VECTOR>(acc, terms_c, ldc, row0, col0, out_tile, scale, beta);
}

// C <- beta C over an m x n matrix (beta = 0 writes zeros without reading C): applied once before the
// products accumulate into C, never once per product. Grid-stride loop.
template <class T>
__device__ __forceinline__ void scale_matrix(T* C, int m, int n, int ldc, T beta) {
  const long long total = static_cast<long long>(m) * n;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    T* p = C + (e / n) * ldc + e % n;
    SB_STORE(p, beta == T(0) ? T(0) : beta * SB_LOAD(p, "global load"), "global store");
  }
}

}  // namespace sb
