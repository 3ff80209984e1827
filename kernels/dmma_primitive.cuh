// The fused Strassen primitive on FP64 tensor cores (sm_80 and later):
//
//   M = (sum_i u_i X_i)(sum_j v_j V_j);   C_l += alpha gamma_l M,  l = 1..W_C
//
// as strassen.cuh's and tensorcore_primitive.cuh's, with the same terms (Products, Terms), loader (the operand
// sums formed in registers between the global load and the shared store, the paper's idea) and write-back
// (epilogue.cuh), in float64 throughout: each k-step of 4 takes mma.m8n8k4.f64 (dmma.cuh) on every 8 x 8 tile of
// the warp's tile on sm_80, and sm_90 takes its m16n8k16 (or k8 where k_S is 8) on every 16 x 8 tile.
//
// Thread block m_S x n_S x k_S of WARPS_M x WARPS_N warps; a warp's tile is (m_S / WARPS_M) x (n_S / WARPS_N),
// a grid of 8 x 8 mma tiles. The rest (mma_primitive: terms, loaders, main loop, write-back) is
// mma_mainloop.cuh's, shared with the TF32 family.
#pragma once

#include "dmma.cuh"
#include "mma_mainloop.cuh"
#include "tile_loader.cuh"

namespace sb {

// Both stages of the A (m_S x k_S, k contiguous) and B (k_S x n_S) tiles. There is no ldmatrix for 64-bit
// elements: each fragment is one 64-bit shared load per lane, and a warp's load is served by half-warps of 16
// lanes (128 bytes). A fragment (lane: row g, column t of an 8 x 4 block) has its 16 lanes on distinct 8-byte
// bank pairs when a row is 4 doubles modulo 16 long, and so does B's (row t, column g): both are padded by 4
// doubles (k_S and n_S multiples of 8). The loader's 128-bit stores of a row stay contiguous: no bank conflict
// (tests/fused/test_dmma.py counts them on the emulator).
template <int M_S, int N_S, int K_S>
struct alignas(128) DmmaTiles {
  static constexpr int kLdA = K_S + 4, kLdB = N_S + 4;
  static_assert(K_S % 8 == 0 && N_S % 8 == 0, "rows of 4 doubles modulo 16: k_S and n_S multiples of 8");
  alignas(16) double a[2][M_S][kLdA];
  alignas(16) double b[2][K_S][kLdB];
};

// Where a thread's accumulator sits in the block tile. The accumulator is acc[kMt][2 kNt]: mma tile (mt, nt)
// holds the fragment's c[0], c[1] (dmma.cuh) at acc[mt][2 nt], acc[mt][2 nt + 1], so that row(i) and col(j)
// follow the PTX layout and columns 2 nt and 2 nt + 1 are side by side (kVb = 2) for the write-back.
template <int M_S, int N_S, int WARPS_M, int WARPS_N>
struct DmmaWarpTile : MmaLane<WARPS_M, M_S / WARPS_M, N_S / WARPS_N> {
  static constexpr int kWm = M_S / WARPS_M, kWn = N_S / WARPS_N;  // the warp's tile
  static constexpr int kMt = kWm / 8, kNt = kWn / 8;              // its mma tiles
  static constexpr int kRows = kMt, kCols = 2 * kNt, kVb = 2;
  static constexpr int kThreads = WARPS_M * WARPS_N * 32;
  static_assert(kWm % 8 == 0 && kWn % 8 == 0, "a warp's tile is a grid of 8 x 8 mma tiles");
  using Lane = MmaLane<WARPS_M, kWm, kWn>;
  using Lane::row0;

  __device__ __forceinline__ explicit DmmaWarpTile(int tid) : Lane(tid) {}
  __device__ __forceinline__ int row(int i) const { return row0 + 8 * i; }
};

template <int M_S, int N_S, int K_S, int WARPS_M, int WARPS_N, int W_A, int W_B, int W_C, bool ATOMIC, int Z,
          bool VECTOR>
__device__ __forceinline__ void dmma_primitive(int lda, int ldb, int ldc, int bk, double alpha, double beta,
                                               const Products<double, W_A + W_B + W_C, Z>& products) {
  static_assert(K_S % 4 == 0, "k_S is a multiple of the mma's k = 4");
  using Tile = DmmaWarpTile<M_S, N_S, WARPS_M, WARPS_N>;
  // sm_90's m16n8kK where a warp's tile has 16-row pairs of mma tiles: the widest k of 16, 8, 4 that divides k_S.
  constexpr bool kWide = SB_DMMA_M16N8 && Tile::kMt % 2 == 0;
  constexpr int kK = !kWide ? 4 : K_S % 16 == 0 ? 16 : K_S % 8 == 0 ? 8 : 4;
  // The loaders' sums into a stage, as they are.
  auto store = [](auto& load_a, auto& load_b, auto& smem, int stage) {
    load_a.store(smem.a[stage]);
    load_b.store(smem.b[stage]);
  };
  // One k_S slice of mma on a stage: per instruction's k (kK, a multiple of 4), the warp's fragments of each
  // k-step of 4 from shared memory (one 64-bit load per lane and 8 x 8 tile side, PTX ISA fragment layout),
  // then the mma of every tile of its tile: every 8 x 8 tile's m8n8k4 (sm_80), or on sm_90 every 16 x 8 tile's
  // m16n8kK, whose fragments are the two 8-row halves' m8n8k4 fragments interleaved (dmma.cuh).
  auto mma_slice = [](const auto& smem, const Tile& tile, auto& acc, int stage) {
    const auto& ta = smem.a[stage];
    const auto& tb = smem.b[stage];
#pragma unroll
    for (int kk = 0; kk < K_S; kk += kK) {
      double a[kK / 4][Tile::kMt], b[kK / 4][Tile::kNt];
#pragma unroll
      for (int s = 0; s < kK / 4; ++s) {
#pragma unroll
        for (int mt = 0; mt < Tile::kMt; ++mt) a[s][mt] = lds(&ta[tile.wrow + 8 * mt + tile.g][kk + 4 * s + tile.t]);
#pragma unroll
        for (int nt = 0; nt < Tile::kNt; ++nt) b[s][nt] = lds(&tb[kk + 4 * s + tile.t][tile.wcol + 8 * nt + tile.g]);
      }
      if constexpr (kWide) {
#pragma unroll
        for (int mp = 0; mp < Tile::kMt; mp += 2)
#pragma unroll
          for (int nt = 0; nt < Tile::kNt; ++nt) {
            double fa[kK / 2], fb[kK / 4];
#pragma unroll
            for (int s = 0; s < kK / 4; ++s) {
              fa[2 * s] = a[s][mp];
              fa[2 * s + 1] = a[s][mp + 1];
              fb[s] = b[s][nt];
            }
            double c[4] = {acc[mp][2 * nt], acc[mp][2 * nt + 1], acc[mp + 1][2 * nt], acc[mp + 1][2 * nt + 1]};
            mma_m16n8k_f64<kK>(c, fa, fb, c);
            acc[mp][2 * nt] = c[0];
            acc[mp][2 * nt + 1] = c[1];
            acc[mp + 1][2 * nt] = c[2];
            acc[mp + 1][2 * nt + 1] = c[3];
          }
      } else {
#pragma unroll
        for (int mt = 0; mt < Tile::kMt; ++mt)
#pragma unroll
          for (int nt = 0; nt < Tile::kNt; ++nt) {
            double c[2] = {acc[mt][2 * nt], acc[mt][2 * nt + 1]};
            mma_m8n8k4_f64(c, a[0][mt], b[0][nt], c);
            acc[mt][2 * nt] = c[0];
            acc[mt][2 * nt + 1] = c[1];
          }
      }
    }
  };

  mma_primitive<double, DmmaTiles<M_S, N_S, K_S>, Tile, M_S, N_S, K_S, W_A, W_B, W_C, ATOMIC, Z, VECTOR>(
      lda, ldb, ldc, bk, alpha, beta, products, store, mma_slice);
}

}  // namespace sb
