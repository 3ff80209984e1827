// The presum scheme's operand sums (strassenbench.fused.launch, scheme "presum"): S = sum_t u_t X_t formed once
// into a workspace block, which the products then load as a single term: one tile per operand in their main
// loops, where the paper's fused kernels form the sum in every tile load (Sec. s:gpu_stra) and pay no
// workspace. SubCuber forms such presums once too.
//
// A launch forms up to Z sums, one per blockIdx.z. Term 0 of sum z is its output block (leading dimension
// ld_out), terms 1..W its inputs (leading dimension ld_in), each with its in-bounds extent: an input
// contributes zeros past it (padding by bounds, Sec. s:fringe) and an unused input has extent 0. The threads
// of a block take consecutive columns of one row (coalesced loads and stores); blockIdx.y strides over rows.
#pragma once

#include "tile_loader.cuh"

namespace sb {

template <class T, int W, int Z>
__device__ __forceinline__ void presum(int ld_in, int ld_out, const Products<T, W + 1, Z>& sums) {
  const int z = blockIdx.z;
  T* const out = reinterpret_cast<T*>(sums.address[z][0]);
  const int rows = sums.rows[z][0], cols = sums.cols[z][0];
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    T s = T(0);
    for (int t = 1; t <= W; ++t) {  // in term order, as the NumPy engine adds them
      if (r < sums.rows[z][t] && c < sums.cols[z][t]) {
        const T* x = reinterpret_cast<const T*>(sums.address[z][t]);
        s += sums.coeff[z][t] * SB_LOAD(&x[static_cast<long long>(r) * ld_in + c], "global load");
      }
    }
    SB_STORE(&out[static_cast<long long>(r) * ld_out + c], s, "global store");
  }
}

}  // namespace sb
