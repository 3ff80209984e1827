// The fused Strassen primitive on TF32 tensor cores (sm_80 and later):
//
//   M = (sum_i u_i X_i)(sum_j v_j V_j);   C_l += alpha gamma_l M,  l = 1..W_C
//
// as strassen.cuh's, with the same terms (Products, Terms), the same loader (TileLoader::load_sum: the
// operand sums formed in registers between the global load and the shared store, the paper's idea) and the
// same write-back (epilogue.cuh). The sums are rounded to TF32 as they are stored: PARTS = 1 stores tf32(x)
// (1xTF32), PARTS = 2 also tf32(x - tf32(x)) (3xTF32), and each k-step then takes a_big b_small + a_small b_big
// + a_big b_big with mma.m16n8k8 (tensorcore.cuh).
//
// Thread block m_S x n_S x k_S of WARPS_M x WARPS_N warps; a warp's tile is (m_S / WARPS_M) x (n_S / WARPS_N),
// a grid of 16 x 8 mma tiles. The rest (mma_primitive: terms, loaders, main loop, write-back) is
// mma_mainloop.cuh's, shared with the DMMA family.
#pragma once

#include "mma_mainloop.cuh"
#include "tensorcore.cuh"
#include "tile_loader.cuh"

namespace sb {

// Both stages of the A (m_S x k_S, k contiguous) and B (k_S x n_S) tiles, PARTS parts each (big, small). A's
// rows are swizzled by 16-byte chunks (swizzle_a) and B's padded by 8 floats, so that an mma fragment load
// (8 rows x 4 columns of A, 4 rows x 8 columns of B) and a warp's 128-bit stores of the sums touch every
// bank once per wavefront: no bank conflict (tests/fused/test_tensorcore.py counts them on the emulator).
template <int M_S, int N_S, int K_S, int PARTS>
struct alignas(128) MmaTiles {
  static constexpr int kLdB = N_S + 8;
  alignas(16) float a[2][PARTS][M_S][K_S];
  alignas(16) float b[2][PARTS][K_S][kLdB];
};

// The column of element (m, k) of A's tile: k with its 16-byte chunk XORed with the index of the 128-byte
// line row m starts in (mod the chunks of a row). Rows that share banks then hold a column in different
// chunks, and a chunk stays whole (a 128-bit store of 4 consecutive k stays one store).
template <int K_S>
__device__ __forceinline__ int swizzle_a(int m, int k) {
  static_assert(K_S % 4 == 0 && 32 % (K_S / 4) == 0, "k_S: 4 floats per chunk, chunks per row a power of two");
  return k ^ (4 * ((m * K_S / 32) % (K_S / 4)));
}

// Where a thread's accumulator sits in the block tile. The accumulator is acc[2 kMt][2 kNt]: mma tile
// (mt, nt) holds c[0..3] (tensorcore.cuh's fragment) at acc[2 mt][2 nt], acc[2 mt][2 nt + 1],
// acc[2 mt + 1][2 nt], acc[2 mt + 1][2 nt + 1], so that row(i) and col(j) follow the PTX layout and columns
// 2 nt and 2 nt + 1 are side by side (kVb = 2) for the write-back.
template <int M_S, int N_S, int WARPS_M, int WARPS_N>
struct MmaWarpTile : MmaLane<WARPS_M, M_S / WARPS_M, N_S / WARPS_N> {
  static constexpr int kWm = M_S / WARPS_M, kWn = N_S / WARPS_N;  // the warp's tile
  static constexpr int kMt = kWm / 16, kNt = kWn / 8;              // its mma tiles
  static constexpr int kRows = 2 * kMt, kCols = 2 * kNt, kVb = 2;
  static constexpr int kThreads = WARPS_M * WARPS_N * 32;
  static_assert(kWm % 16 == 0 && kWn % 8 == 0, "a warp's tile is a grid of 16 x 8 mma tiles");
  using Lane = MmaLane<WARPS_M, kWm, kWn>;
  using Lane::row0;

  __device__ __forceinline__ explicit MmaWarpTile(int tid) : Lane(tid) {}
  __device__ __forceinline__ int row(int i) const { return row0 + (i / 2) * 16 + (i % 2) * 8; }
};

// Store a loader's sums to the PARTS parts of a tile, part p `part_stride` rows after part p - 1: tf32(x),
// then tf32(x - tf32(x)). The element at (row, column) of the tile goes to column column_of(row, column).
template <int PARTS, class Loader, int LD, class ColumnOf>
__device__ __forceinline__ void store_parts(const Loader& loader, float (*tile)[LD], int part_stride,
                                            ColumnOf column_of) {
  constexpr int V = Loader::kV;
  const int row0 = Loader::row(), col0 = Loader::col();
#pragma unroll
  for (int p = 0; p < PARTS; ++p)
#pragma unroll
    for (int c = 0; c < Loader::kChunks; ++c) {
      Vec<float, V> part;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float x = loader.sum[c].v[j], big = to_tf32(x);
        part.v[j] = p == 0 ? big : to_tf32(x - big);
      }
      const int r = row0 + c * Loader::kRowStep;
      sts(reinterpret_cast<Vec<float, V>*>(&tile[p * part_stride + r][column_of(r, col0)]), part);
    }
}

// One k-step of 8 of a warp's A and B fragments from a stage's tiles (PTX ISA fragment layouts, tensorcore.cuh):
// an ldmatrix_x4 per 16 x 8 A tile (the lane's row of matrix lane / 8), two LDS per 8 x 8 B tile.
template <class Tile, int M_S, int K_S, int LD>
__device__ __forceinline__ void load_fragments(const float (&ta)[M_S][K_S], const float (&tb)[K_S][LD],
                                               const Tile& tile, int kk, float (&a)[Tile::kMt][4],
                                               float (&b)[Tile::kNt][2]) {
#pragma unroll
  for (int mt = 0; mt < Tile::kMt; ++mt) {
    const int r = tile.wrow + mt * 16 + 8 * ((tile.lane / 8) % 2) + tile.lane % 8;
    ldmatrix_x4(a[mt], &ta[r][swizzle_a<K_S>(r, kk + 4 * (tile.lane / 16))]);
  }
#pragma unroll
  for (int nt = 0; nt < Tile::kNt; ++nt) {
    const int c = tile.wcol + nt * 8 + tile.g;
    b[nt][0] = lds(&tb[kk + tile.t][c]);
    b[nt][1] = lds(&tb[kk + tile.t + 4][c]);
  }
}

// The 3xTF32 products of one 16 x 8 tile and k-step into a staged sum s: the small ones first, then big x big.
__device__ __forceinline__ void mma_3xtf32(float (&s)[4], const float (&a_big)[4], const float (&a_small)[4],
                                           const float (&b_big)[2], const float (&b_small)[2]) {
  mma_m16n8k8_tf32(s, a_big, b_small, s);
  mma_m16n8k8_tf32(s, a_small, b_big, s);
  mma_m16n8k8_tf32(s, a_big, b_big, s);
}

// A fragment loaded as FP32, rounded to TF32 in place (1xTF32), or split into its big part in place and its small
// part into `small` (3xTF32): round_tf32, the multistage pipeline's transform of its fragments.
template <int N>
__device__ __forceinline__ void split_fragment(float (&x)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) x[e] = round_tf32(x[e]);
}
template <int N>
__device__ __forceinline__ void split_fragment(float (&x)[N], float (&small)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const Tf32Pair pair = split_3xtf32_fast(x[e]);
    x[e] = pair.big;
    small[e] = pair.small;
  }
}

// f(mt, nt, c) for every mma tile (mt, nt) of a warp's kMt x kNt tiles, c the tile's 4 accumulator values as an
// mma fragment (MmaWarpTile's layout: acc[2 mt][2 nt], acc[2 mt][2 nt + 1], acc[2 mt + 1][2 nt],
// acc[2 mt + 1][2 nt + 1]), put back after.
template <int kMt, int kNt, class Acc, class F>
__device__ __forceinline__ void for_each_tile(Acc& acc, const F& f) {
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
      float c[4] = {acc[2 * mt][2 * nt], acc[2 * mt][2 * nt + 1], acc[2 * mt + 1][2 * nt], acc[2 * mt + 1][2 * nt + 1]};
      f(mt, nt, c);
      acc[2 * mt][2 * nt] = c[0];
      acc[2 * mt][2 * nt + 1] = c[1];
      acc[2 * mt + 1][2 * nt] = c[2];
      acc[2 * mt + 1][2 * nt + 1] = c[3];
    }
}

// The multistage pipeline's tiles (STAGES >= 3, mma_multistage): every stage of the A and B tiles in FP32, as
// the global operands hold them (cp.async copies them unchanged), swizzled and padded as MmaTiles'. The split
// into TF32 parts is done on the fragments.
template <int M_S, int N_S, int K_S, int STAGES>
struct alignas(128) RawTiles {
  static constexpr int kLdB = N_S + 8;
  alignas(16) float a[STAGES][M_S][K_S];
  alignas(16) float b[STAGES][K_S][kLdB];
  __device__ __forceinline__ float* a_at(int stage, int m, int k) { return &a[stage][m][swizzle_a<K_S>(m, k)]; }
  __device__ __forceinline__ float* b_at(int stage, int k, int n) { return &b[stage][k][n]; }
};

template <int M_S, int N_S, int K_S, int WARPS_M, int WARPS_N, int W_A, int W_B, int W_C, bool ATOMIC, int Z,
          bool VECTOR, int PARTS, int STAGES = 2>
__device__ __forceinline__ void tensorcore_primitive(int lda, int ldb, int ldc, int bk, float alpha, float beta,
                                                     const Products<float, W_A + W_B + W_C, Z>& products) {
  static_assert(PARTS == 1 || PARTS == 2, "1xTF32 or 3xTF32");
  static_assert(K_S % 8 == 0, "k_S is a multiple of the mma's k = 8");
  using Tile = MmaWarpTile<M_S, N_S, WARPS_M, WARPS_N>;
  constexpr int kMt = Tile::kMt, kNt = Tile::kNt;
  if constexpr (STAGES > 2) {
    // The multistage pipeline: the tiles hold FP32, and each k-step's fragments are split (3xTF32: big and
    // small) or rounded (1xTF32) in registers, as CUTLASS's fast-FP32 path transforms its fragments. 3xTF32
    // stages its products once per slice: the slice's k_S / 8 k-steps of three products go into a sum of
    // their own, added to the accumulator with rounded FP32 (strassenbench.tensorcore.matmul, stage_k = k_S).
    auto mma_slice = [](const auto& smem, const Tile& tile, auto& acc, int stage) {
      float staged[kMt][kNt][4];
      if constexpr (PARTS == 2) {
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) staged[mt][nt][e] = 0.f;
      }
#pragma unroll
      for (int kk = 0; kk < K_S; kk += 8) {
        float a[kMt][4], b[kNt][2];
        load_fragments<Tile>(smem.a[stage], smem.b[stage], tile, kk, a, b);
        if constexpr (PARTS == 2) {
          float a_small[kMt][4], b_small[kNt][2];
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) split_fragment(a[mt], a_small[mt]);
#pragma unroll
          for (int nt = 0; nt < kNt; ++nt) split_fragment(b[nt], b_small[nt]);
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNt; ++nt) mma_3xtf32(staged[mt][nt], a[mt], a_small[mt], b[nt], b_small[nt]);
        } else {
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) split_fragment(a[mt]);
#pragma unroll
          for (int nt = 0; nt < kNt; ++nt) split_fragment(b[nt]);
          for_each_tile<kMt, kNt>(acc, [&](int mt, int nt, float (&c)[4]) { mma_m16n8k8_tf32(c, a[mt], b[nt], c); });
        }
      }
      if constexpr (PARTS == 2) {
        for_each_tile<kMt, kNt>(acc, [&](int mt, int nt, float (&c)[4]) {
#pragma unroll
          for (int e = 0; e < 4; ++e) c[e] += staged[mt][nt][e];
        });
      }
    };
    auto unused = [](auto&, auto&, auto&, int) {};  // mma_multistage stores through the tiles' a_at and b_at
    mma_primitive<float, RawTiles<M_S, N_S, K_S, STAGES>, Tile, M_S, N_S, K_S, W_A, W_B, W_C, ATOMIC, Z, VECTOR,
                  STAGES>(lda, ldb, ldc, bk, alpha, beta, products, unused, mma_slice);
  } else {
    // The loaders' sums, rounded and split, into a stage.
    auto store = [](auto& load_a, auto& load_b, auto& smem, int stage) {
      store_parts<PARTS>(load_a, smem.a[stage][0], M_S, [](int m, int kc) { return swizzle_a<K_S>(m, kc); });
      store_parts<PARTS>(load_b, smem.b[stage][0], K_S, [](int, int n) { return n; });
    };
    // One k_S slice of mma on a stage: per k-step of 8, each part's fragments, then the products of every 16 x 8
    // tile of the warp's tile.
    auto mma_slice = [](const auto& smem, const Tile& tile, auto& acc, int stage) {
#pragma unroll
      for (int kk = 0; kk < K_S; kk += 8) {
        float a[PARTS][kMt][4], b[PARTS][kNt][2];
#pragma unroll
        for (int p = 0; p < PARTS; ++p) load_fragments<Tile>(smem.a[stage][p], smem.b[stage][p], tile, kk, a[p], b[p]);
        for_each_tile<kMt, kNt>(acc, [&](int mt, int nt, float (&c)[4]) {
          if constexpr (PARTS == 2) {
            // Staged accumulation, as CUTLASS's MmaMultistage does for 3xTF32: the tensor core truncates each
            // sum it forms, which summed into the accumulator k / 8 x 3 times is a bias growing with k (an H200
            // lost 4e-5 at k = 4,096: data/nvidia-h200/3xtf32_bias.txt). So the k-step's three products go into
            // a sum of their own, added to the accumulator with rounded FP32.
            float s[4] = {0.f, 0.f, 0.f, 0.f};
            mma_3xtf32(s, a[0][mt], a[1][mt], b[0][nt], b[1][nt]);
#pragma unroll
            for (int e = 0; e < 4; ++e) c[e] += s[e];
          } else {
            mma_m16n8k8_tf32(c, a[0][mt], b[0][nt], c);
          }
        });
      }
    };
    mma_primitive<float, MmaTiles<M_S, N_S, K_S, PARTS>, Tile, M_S, N_S, K_S, W_A, W_B, W_C, ATOMIC, Z, VECTOR>(
        lda, ldb, ldc, bk, alpha, beta, products, store, mma_slice);
  }
}

}  // namespace sb
