// The Wg family (sm_90a, beyond the paper): the fused Strassen primitive of kernels/strassen.cuh on Hopper's
// warpgroup tensor cores (wgmma), warp-specialized and persistent.
//
//   M = (sum_i u_i X_i)(sum_j v_j V_j);   C_l += alpha gamma_l M,  l = 1..W_C   (paper, Algorithm a:gpu_stra)
//
// A block is one loader warpgroup and M_S / 64 consumer warpgroups, and it runs tiles (m_S x n_S of one product
// of the launch) until the launch's are done (a persistent grid; tile = blockIdx.x + i gridDim.x, n fastest).
//
// - The loader (128 threads, setmaxnreg down to kLoaderRegs) brings the operands' term tiles of a k_S slice into
//   shared memory: with TMA (a tensor map of A and one of B, thread 0 issuing the boxes of raw ring stages
//   ahead, each stage one term of A and one of B, its bytes completing on raw_full) in the TMA kernels, by
//   plain loads in the scalar ones (any leading dimension). It forms the operand sums in registers (paper,
//   "pack sum_i u_i X_i into the A tile"), zeros outside each term's extent (Sec. s:fringe), rounds to TF32 or
//   splits big/small (3xTF32), and writes the wgmma operands K-major in the 128-byte swizzle: the A tile as
//   it is, the B tile transposed (wgmma reads tf32 operands K-major only). fence.proxy.async, then op_full.
// - Each consumer (128 threads, setmaxnreg up to kConsumerRegs) multiplies its 64 rows of the tile with
//   m64n{n_S}k8 wgmma from the operand stage, frees it (op_empty) and, after the tile's last slice, writes its
//   accumulator to the W_C blocks of C: from registers (kernels/epilogue.cuh), or in the atomic TMA kernels as
//   tile reductions (cp.reduce.async.bulk.tensor .add.f32 of whole boxes, through staging boxes in shared
//   memory) where a warp's rows of the tile lie wholly inside the term, and from registers at its fringes.
// - 1xTF32 keeps one wgmma group in flight across slices; 3xTF32 sums a slice's small products (a_small b_big,
//   a_big b_small), then its a_big b_big, in a staging accumulator, then adds it to the accumulator (staged
//   accumulation, as CUTLASS's fast FP32 does).
#pragma once

#include "epilogue.cuh"
#include "tensorcore.cuh"
#include "tile_loader.cuh"

namespace sb {

// The staging boxes of the tile reductions (the atomic TMA kernels): BOXES of 16 rows x 32 columns of C (2 KiB
// each, 128-byte rows in the 128-byte swizzle), two a consumer warp; none in the other kernels.
template <int BOXES>
struct WgOutBoxes {
  alignas(1024) float out[BOXES][16 * 32];
};
template <>
struct WgOutBoxes<0> {};

// The shared memory of a Wg kernel: the staging boxes (WgOutBoxes), OP_STAGES operand stages (PARTS tf32 parts
// of the A and B tiles, K-major, 128-byte rows in the 128-byte swizzle's 1024-byte atoms), RAW_STAGES raw stages
// (one A term tile, row-major m_S x k_S, and one B term tile, row-major k_S x n_S, as TMA lands them without
// swizzle) and the barriers.
template <int M_S, int N_S, int K_S, int PARTS, int RAW_STAGES, int OP_STAGES, int OUT_BOXES>
struct WgShared : WgOutBoxes<OUT_BOXES> {
  struct alignas(1024) Operands {
    float a[PARTS][M_S * K_S];
    float b[PARTS][N_S * K_S];
  };
  struct alignas(1024) Raw {
    float a[M_S * K_S];
    float b[K_S * N_S];
  };
  Operands op[OP_STAGES];
  Raw raw[RAW_STAGES];
  stdx::uint64_t raw_full[RAW_STAGES], raw_empty[RAW_STAGES], op_full[OP_STAGES], op_empty[OP_STAGES];
};

// Where the persistent block's tile number lies: product z of the launch, tile row tm, tile column tn.
struct WgTileIndex {
  int z, row0, col0;
};

// The launch's tiles: tiles_n x tiles_m per product, `batch` products.
struct WgGrid {
  int tiles_n, tiles_m, batch;
  __device__ __forceinline__ int count() const { return tiles_n * tiles_m * batch; }
  template <int M_S, int N_S>
  __device__ __forceinline__ WgTileIndex at(int tile) const {
    const int per = tiles_n * tiles_m, rest = tile % per;
    return {tile / per, rest / tiles_n * M_S, rest % tiles_n * N_S};
  }
};

// A consumer's accumulator as the epilogue places it: acc[r][j] = D[row(r)][col(j)] for its warp w, g = lane / 4,
// t = lane % 4 (wgmma_tf32's layout: d[4 i + e] = D[16 w + g + 8 (e / 2)][8 i + 2 t + e % 2], with r = e / 2 and
// j = 2 i + e % 2); pairs of columns lie side by side (kVb).
struct WgWarpTile {
  static constexpr int kVb = 2;
  int row_base, t;
  __device__ __forceinline__ int row(int r) const { return row_base + 8 * r; }
  __device__ __forceinline__ int col(int j) const { return 8 * (j / 2) + 2 * t + j % 2; }
};

// The W terms FIRST .. FIRST + W - 1 of product z as the Wg kernels take them: a term's address field holds its
// block's place in the operand, row << 32 | column (strassenbench.fused.launch), which is where TMA's box goes;
// its pointer is the operand's base plus that place. Read from the parameters at each use.
template <class P, int W, int FIRST, int WALL, int Z>
struct WgTerms {
  const Products<float, WALL, Z>* products;
  int z;
  P base;
  int ld;
  __device__ __forceinline__ int row(int t) const { return static_cast<int>(products->address[z][FIRST + t] >> 32); }
  __device__ __forceinline__ int col(int t) const {
    return static_cast<int>(products->address[z][FIRST + t] & 0xFFFFFFFFu);
  }
  __device__ __forceinline__ P ptr(int t) const { return base + static_cast<long long>(row(t)) * ld + col(t); }
  __device__ __forceinline__ int rows(int t) const { return products->rows[z][FIRST + t]; }
  __device__ __forceinline__ int cols(int t) const { return products->cols[z][FIRST + t]; }
  __device__ __forceinline__ float coeff(int t) const { return products->coeff[z][FIRST + t]; }
};

template <int M_S, int N_S, int K_S, int W_A, int W_B, int W_C, bool ATOMIC, int Z, bool TMA, int PARTS,
          int RAW_STAGES, int OP_STAGES>
struct WgKernel {
  static_assert(K_S == 32, "a k_S slice is one 128-byte row of the 128-byte swizzle");
  static_assert(M_S % 64 == 0 && M_S / 64 >= 1, "consumer warpgroups of 64 rows each");
  static_assert(N_S == 128, "m64n128k8 (other n_S: their wgmma and the loader's column map)");
  static_assert(PARTS == 1 || PARTS == 2, "1xTF32 or 3xTF32");
  static_assert(RAW_STAGES >= 2 && OP_STAGES >= 2, "at least two stages of each ring");
  static constexpr int kConsumers = M_S / 64;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kW = W_A > W_B ? W_A : W_B;  // raw stages a slice takes (one term of each operand each)
  static constexpr int kWall = W_A + W_B + W_C;
  // Registers after setmaxnreg: the block's 65,536 / kThreads (the launch's, in multiples of 8) regrouped, the
  // loader keeping its sums (two operand tiles' shares, 64 floats) and the consumers their accumulators.
  static constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kLoaderRegs = 104;
  static constexpr int kConsumerRegs = ((kLaunchRegs * kThreads - 128 * kLoaderRegs) / (128 * kConsumers)) / 8 * 8;
  static_assert(kConsumerRegs <= 256 && kConsumerRegs >= kLaunchRegs, "the consumers' registers");
  static constexpr int kAChunks = M_S * K_S / 4 / 128;  // 16-byte chunks of the A tile per loader thread
  static constexpr unsigned kRawBytesA = M_S * K_S * 4, kRawBytesB = K_S * N_S * 4;
  // The tile reductions (the atomic TMA kernels; kOutBoxes staging boxes, two a consumer warp).
  static constexpr bool kReduce = ATOMIC && TMA;
  static constexpr int kOutBoxes = kReduce ? 2 * 4 * kConsumers : 0;
  using Shared = WgShared<M_S, N_S, K_S, PARTS, RAW_STAGES, OP_STAGES, kOutBoxes>;
  using Prods = Products<float, kWall, Z>;
  using TermsA = WgTerms<const float*, W_A, 0, kWall, Z>;
  using TermsB = WgTerms<const float*, W_B, W_A, kWall, Z>;
  using TermsC = WgTerms<float*, W_C, W_A + W_B, kWall, Z>;

  // The launch's operands: the products' terms and where A, B and C begin, with their leading dimensions.
  struct Operands {
    const Prods* products;
    const float *a, *b;
    float* c;
    int lda, ldb, ldc;
    __device__ __forceinline__ TermsA terms_a(int z) const { return {products, z, a, lda}; }
    __device__ __forceinline__ TermsB terms_b(int z) const { return {products, z, b, ldb}; }
    __device__ __forceinline__ TermsC terms_c(int z) const { return {products, z, c, ldc}; }
  };

  // Slices of k_S in the products' depth.
  __device__ __forceinline__ static int slices(int bk) { return (bk + K_S - 1) / K_S; }

  // ---- the loader ----

  // Thread 0 issues raw stage `r` of the block's sequence (tile i, slice, term j; kW stages a slice): the box of
  // A's term j (j < W_A) and of B's term j (j < W_B) at the term's place in the tensor (its block's first element
  // found from its address), completing on raw_full.
  struct Issuer {
    int issued = 0, tile, slice = 0, j = 0;
    __device__ __forceinline__ void run_ahead(int upto, Shared& s, const Operands& ops, const WgGrid& grid, int bk,
                                              const TensorMap* map_a, const TensorMap* map_b) {
      for (; issued < upto && tile < grid.count(); ++issued) {
        const int slot = issued % RAW_STAGES;
        if (issued >= RAW_STAGES) mbarrier_wait(&s.raw_empty[slot], (issued / RAW_STAGES - 1) & 1);
        const WgTileIndex at = grid.at<M_S, N_S>(tile);
        const unsigned bytes = (j < W_A ? kRawBytesA : 0u) + (j < W_B ? kRawBytesB : 0u);
        mbarrier_arrive_expect_tx(&s.raw_full[slot], bytes);
        const int k0 = slice * K_S;
        if (j < W_A) {
          const TermsA terms = ops.terms_a(at.z);
          tma_load_2d(s.raw[slot].a, map_a, terms.col(j) + k0, terms.row(j) + at.row0, &s.raw_full[slot]);
        }
        if (j < W_B) {
          const TermsB terms = ops.terms_b(at.z);
          tma_load_2d(s.raw[slot].b, map_b, terms.col(j) + at.col0, terms.row(j) + k0, &s.raw_full[slot]);
        }
        if (++j == kW) {
          j = 0;
          if (++slice == slices(bk)) {
            slice = 0;
            tile += gridDim.x;
          }
        }
      }
    }
  };

  // Term j of an operand (W terms) into the thread's 16-byte chunk c of row r of its operand tile, x already
  // weighted (weight 1 for the first term, whose coefficient joins the epilogue's scale; the normalised ones
  // after it: strassenbench.fused.launch.normalised). The sum is kept in FP32 in the tile's first part until the
  // last term, then rounded to TF32 (1xTF32) or split into big and small parts (3xTF32) at its K-major place in
  // the 128-byte swizzle (chunk c of row r at swizzle_128b(128 r + 16 c)). Each thread reads back only what it
  // wrote: no barrier between terms, and the thread's registers hold one chunk of one term at a time.
  template <int W, int ROWS>
  __device__ __forceinline__ static void combine(float (&tile)[PARTS][ROWS * K_S], int r, int c, int j,
                                                 Vec<float, 4> x) {
    const unsigned place = swizzle_128b(128u * r + 16u * c) / 4;
    auto* at = reinterpret_cast<Vec<float, 4>*>(tile[0] + place);
    if (j > 0) {
      const Vec<float, 4> sum = lds(at);
#pragma unroll
      for (int e = 0; e < 4; ++e) x.v[e] += sum.v[e];
    }
    if (j < W - 1) {
      sts(at, x);
      return;
    }
    Vec<float, 4> big, small;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (PARTS == 1) {
        big.v[e] = round_tf32(x.v[e]);
      } else {
        const Tf32Pair pair = split_3xtf32_fast(x.v[e]);
        big.v[e] = pair.big;
        small.v[e] = pair.small;
      }
    }
    sts(at, big);
    if constexpr (PARTS == 2) sts(reinterpret_cast<Vec<float, 4>*>(tile[PARTS - 1] + place), small);
  }

  // Term j of this slice into the operand stage, zeros outside the term's extent (Sec. s:fringe): from the raw
  // stage (TMA) or from global memory. The thread's share: A's chunk lt % 8 of rows lt / 8 + 16 i as they are;
  // B's column lt as row lt of its K-major tile (transposed). Eight threads in a row write the eight chunks of
  // eight rows: every bank once. A term whose extent holds the whole tile and slice (WHOLE: the interior, most
  // of a large problem's tiles) is summed without a mask, an element's weight its only instruction beside the
  // sum's.
  __device__ __forceinline__ static void accumulate(int j, const typename Shared::Raw* raw,
                                                    typename Shared::Operands& op, const Operands& ops,
                                                    const WgTileIndex& at, int k0, int lt) {
    if (j < W_A) {
      const TermsA terms = ops.terms_a(at.z);
      const TermSlice ts{j, k0, lt, terms.rows(j) - at.row0, terms.cols(j) - k0};
      if (whole(ts, M_S, K_S))
        accumulate_term<0, true>(ts, terms, raw, op, ops, at);
      else
        accumulate_term<0, false>(ts, terms, raw, op, ops, at);
    }
    if (j < W_B) {
      const TermsB terms = ops.terms_b(at.z);
      const TermSlice ts{j, k0, lt, terms.rows(j) - k0, terms.cols(j) - at.col0};
      if (whole(ts, K_S, N_S))
        accumulate_term<1, true>(ts, terms, raw, op, ops, at);
      else
        accumulate_term<1, false>(ts, terms, raw, op, ops, at);
    }
  }

  // Term j of an operand in the slice at k0, for loader thread lt, and the term's extent from the tile on.
  struct TermSlice {
    int j, k0, lt, rows, cols;
  };

  // Whether the term's extent holds the whole R x C tile of the slice.
  __device__ __forceinline__ static bool whole(const TermSlice& ts, int R, int C) {
    return ts.rows >= R && ts.cols >= C;
  }

  // Term ts.j of A (SIDE 0) or of B (SIDE 1) into the operand stage; WHOLE: without masks.
  template <int SIDE, bool WHOLE, class Terms>
  __device__ __forceinline__ static void accumulate_term(const TermSlice& ts, const Terms& terms,
                                                         const typename Shared::Raw* raw,
                                                         typename Shared::Operands& op, const Operands& ops,
                                                         const WgTileIndex& at) {
    const auto [j, k0, lt, rows, cols] = ts;
    const float w = j == 0 ? 1.f : terms.coeff(j);
    if constexpr (SIDE == 0) {
      const float* src = terms.ptr(j) + static_cast<long long>(at.row0) * ops.lda + k0;
#pragma unroll
      for (int i = 0; i < kAChunks; ++i) {
        const int r = lt / 8 + 16 * i, k = 4 * (lt % 8);
        Vec<float, 4> x;
        if constexpr (TMA) x = lds(reinterpret_cast<const Vec<float, 4>*>(raw->a + r * K_S + k));
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool in = WHOLE || (r < rows && k + e < cols);
          if constexpr (!TMA) x.v[e] = in ? src[static_cast<long long>(r) * ops.lda + k + e] : 0.f;
          x.v[e] = in ? w * x.v[e] : 0.f;
        }
        combine<W_A, M_S>(op.a, r, lt % 8, j, x);
      }
    } else {
      const bool col_in = WHOLE || lt < cols;
      const float* src = terms.ptr(j) + static_cast<long long>(k0) * ops.ldb + at.col0 + lt;
#pragma unroll
      for (int c = 0; c < K_S / 4; ++c) {
        Vec<float, 4> x;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = 4 * c + e;
          const bool in = WHOLE || (col_in && k < rows);
          float v;
          if constexpr (TMA)
            v = lds(raw->b + k * N_S + lt);
          else
            v = in ? src[static_cast<long long>(k) * ops.ldb] : 0.f;
          x.v[e] = in ? w * v : 0.f;
        }
        combine<W_B, N_S>(op.b, lt, c, j, x);
      }
    }
  }

  __device__ __forceinline__ static void loader(Shared& s, const Operands& ops, const WgGrid& grid, int bk,
                                                const TensorMap* map_a, const TensorMap* map_b) {
    const int lt = static_cast<int>(threadIdx.x);
    Issuer issuer{0, static_cast<int>(blockIdx.x)};  // thread 0's
    int raw = 0, op = 0;
    for (int tile = blockIdx.x; tile < grid.count(); tile += gridDim.x) {
      const WgTileIndex at = grid.at<M_S, N_S>(tile);
      for (int slice = 0; slice < slices(bk); ++slice, ++op) {
        const int op_slot = op % OP_STAGES;
        mbarrier_wait(&s.op_empty[op_slot], ((op / OP_STAGES) & 1) ^ 1);  // the first pass finds it free
#pragma unroll
        for (int j = 0; j < kW; ++j, ++raw) {
          const int slot = raw % RAW_STAGES;
          if constexpr (TMA) {
            if (lt == 0) issuer.run_ahead(raw + RAW_STAGES, s, ops, grid, bk, map_a, map_b);
            mbarrier_wait(&s.raw_full[slot], (raw / RAW_STAGES) & 1);
          }
          accumulate(j, &s.raw[slot], s.op[op_slot], ops, at, slice * K_S, lt);
          if constexpr (TMA) {  // the stage's plain reads ordered before TMA's next write into it (another proxy)
            fence_proxy_async();
            mbarrier_arrive(&s.raw_empty[slot]);
          }
        }
        fence_proxy_async();  // the operands, visible to the consumers' wgmma (the async proxy)
        mbarrier_arrive(&s.op_full[op_slot]);
      }
    }
  }

  // ---- the consumers ----

  static constexpr int kAcc = N_S / 2;  // accumulator registers of m64n{N_S}k8

  // A slice's wgmma into d: 1xTF32, a_big b_big per k-step (the first of a tile without scale-d when `first`);
  // 3xTF32 (d a staging accumulator, from zero), the slice's small products first, a_small b_big and a_big b_small
  // per k-step, then its a_big b_big: the tensor cores truncate each sum they form, and the small products, summed
  // while the staging sum is still small, lose less there than after the big ones.
  __device__ __forceinline__ static void mma_slice(float (&d)[kAcc], const typename Shared::Operands& op,
                                                   const Shared& s, int consumer, bool first) {
    const float* a0 = op.a[0] + consumer * 64 * K_S;
    const float* b0 = op.b[0];
    auto desc = [&](const float* tile) { return wgmma_desc(&s, tile, 16, 1024, 1); };
    if constexpr (PARTS == 2) {
#pragma unroll
      for (int ks = 0; ks < K_S / 8; ++ks) {
        wgmma_tf32<N_S>(d, desc(op.a[1] + consumer * 64 * K_S + 8 * ks), desc(b0 + 8 * ks), ks > 0, &s);
        wgmma_tf32<N_S>(d, desc(a0 + 8 * ks), desc(op.b[1] + 8 * ks), true, &s);
      }
    }
#pragma unroll
    for (int ks = 0; ks < K_S / 8; ++ks)
      wgmma_tf32<N_S>(d, desc(a0 + 8 * ks), desc(b0 + 8 * ks), PARTS == 2 || !(first && ks == 0), &s);
  }

  // A warp's 16 rows of the tile, times `scale`, added to C's box at (c0, c1) and the three beside it (32
  // columns each) by tile reductions: for each box lane 0 waits until the box before last has been read from the
  // staging box (of `staging`'s two) this one reuses, the warp writes it in the 128-byte swizzle (lane g t, its
  // rows g and g + 8 and columns 8 i + 2 t + {0, 1}: eight float2 stores, two wavefronts each), fences it for
  // the async proxy, and lane 0 issues its reduction in a bulk group of its own (predicated instructions, not a
  // branch: the warp stays converged for wgmma). Box q takes staging box q % 2 (N_S / 32 boxes, an even number:
  // the box before last is always the same staging box, across terms and tiles too).
  __device__ __forceinline__ static void reduce_rows(float* staging, const float (&acc)[kAcc], float scale,
                                                     const TensorMap* map_c, int c0, int c1, int lane) {
    static_assert(N_S / 32 % 2 == 0, "an even number of boxes a row of tiles");
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int q = 0; q < N_S / 32; ++q) {
      float* tile = staging + (q % 2) * 16 * 32;
      bulk_wait_read<1>(lane == 0);
      syncwarp();
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int d = 4 * (4 * q + i) + 2 * r;  // wgmma's d[4 i + e]: row g + 8 (e / 2), column 8 i + 2 t + e % 2
          const unsigned offset = 128u * (g + 8 * r) + 4u * (8 * i + 2 * t);
          sts(reinterpret_cast<Vec<float, 2>*>(reinterpret_cast<char*>(tile) + swizzle_128b(offset)),
              Vec<float, 2>{{scale * acc[d], scale * acc[d + 1]}});
        }
      fence_proxy_async();
      syncwarp();
      tma_store_2d<true>(map_c, c0 + 32 * q, c1, tile, lane == 0);
      bulk_commit(lane == 0);
    }
  }

  __device__ __forceinline__ static void consumer(Shared& s, const Operands& ops, const WgGrid& grid, int bk,
                                                  float alpha, float beta, const TensorMap* map_c) {
    const int consumer = static_cast<int>(threadIdx.x) / 128 - 1, ct = static_cast<int>(threadIdx.x) % 128;
    int op = 0;
    for (int tile = blockIdx.x; tile < grid.count(); tile += gridDim.x) {
      const WgTileIndex at = grid.at<M_S, N_S>(tile);
      float acc[kAcc];
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
      const int n = slices(bk);
      for (int slice = 0; slice < n; ++slice, ++op) {
        const int slot = op % OP_STAGES;
        mbarrier_wait(&s.op_full[slot], (op / OP_STAGES) & 1);
        if constexpr (PARTS == 1) {
          // One group in flight: slice s's wgmma are issued before slice s - 1's are waited for and its stage freed.
          wgmma_fence_operand(acc);
          wgmma_fence();
          mma_slice(acc, s.op[slot], s, consumer, false);
          wgmma_commit();
          wgmma_fence_operand(acc);
          wgmma_wait<1>();
          if (slice > 0) mbarrier_arrive(&s.op_empty[(op - 1) % OP_STAGES]);
        } else {
          float stage[kAcc];
          wgmma_fence_operand(stage);
          wgmma_fence();
          mma_slice(stage, s.op[slot], s, consumer, true);
          wgmma_commit();
          wgmma_wait<0>();
          wgmma_fence_operand(stage);
          mbarrier_arrive(&s.op_empty[slot]);
#pragma unroll
          for (int i = 0; i < kAcc; ++i) acc[i] += stage[i];
        }
      }
      if constexpr (PARTS == 1) {
        wgmma_wait<0>();
        wgmma_fence_operand(acc);
        if (n > 0) mbarrier_arrive(&s.op_empty[(op - 1) % OP_STAGES]);
      }
      // The accumulator in the epilogue's order, then C's W_C blocks updated (alpha u_0 v_0 gamma_l).
      float out[2][kAcc / 2];
#pragma unroll
      for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) out[e / 2][2 * i + e % 2] = acc[4 * i + e];
      const float scale = alpha * ops.terms_a(at.z).coeff(0) * ops.terms_b(at.z).coeff(0);
      const WgWarpTile wt{64 * consumer + 16 * (ct / 32) + ct % 32 / 4, ct % 4};
      if constexpr (kReduce) {
        const TermsC terms = ops.terms_c(at.z);
        const int row = at.row0 + 64 * consumer + 16 * (ct / 32);  // the warp's first row in its terms' tiles
#pragma unroll
        for (int t = 0; t < W_C; ++t) {
          if (warp_all(row + 16 <= terms.rows(t) && at.col0 + N_S <= terms.cols(t)))  // uniform, as it is
            reduce_rows(s.out[8 * consumer + 2 * (ct / 32)], acc, scale * terms.coeff(t), map_c,
                        terms.col(t) + at.col0, terms.row(t) + row, ct % 32);
          else  // the term's fringe (Sec. s:fringe)
            write_back_term<true, false>(out, terms, t, ops.ldc, at.row0, at.col0, wt, scale, beta);
        }
      } else {
        epilogue<W_C, ATOMIC, false>(out, ops.terms_c(at.z), ops.ldc, at.row0, at.col0, wt, scale, beta);
      }
    }
    if constexpr (kReduce)  // the staging boxes read before the block ends (C's reductions land by themselves)
      bulk_wait_read<0>(ct % 32 == 0);
  }

  __device__ __forceinline__ static void run(int lda, int ldb, int ldc, int bk, float alpha, float beta,
                                             const WgGrid& grid, const float* a, const float* b, float* c,
                                             const TensorMap& map_a, const TensorMap& map_b, const TensorMap& map_c,
                                             const Prods& products) {
    SB_DYNAMIC_SHARED(Shared, s);
#if defined(__CUDACC__)
    // The 128-byte swizzle's atoms and the descriptors' addresses assume the tiles 1024-byte aligned in the block's
    // shared window (the emulator checks its own at every wgmma).
    if (threadIdx.x == 0 && shared_address(&s) % 1024 != 0) fail("Wg tiles not 1024-byte aligned in shared memory");
#endif
    const Operands ops{&products, a, b, c, lda, ldb, ldc};
    if (threadIdx.x == 0) {
      for (int i = 0; i < RAW_STAGES; ++i) {
        mbarrier_init(&s.raw_full[i], 1);
        mbarrier_init(&s.raw_empty[i], 128);
      }
      for (int i = 0; i < OP_STAGES; ++i) {
        mbarrier_init(&s.op_full[i], 128);
        mbarrier_init(&s.op_empty[i], 128 * kConsumers);
      }
      mbarrier_init_fence();
    }
    __syncthreads();
    if (threadIdx.x < 128) {
      setmaxnreg_dec<kLoaderRegs>();
      loader(s, ops, grid, bk, &map_a, &map_b);
    } else {
      setmaxnreg_inc<kConsumerRegs>();
      consumer(s, ops, grid, bk, alpha, beta, &map_c);
    }
  }
};

}  // namespace sb
