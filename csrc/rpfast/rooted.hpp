// One round of RootedRP's message passing before its activation, in one pass over the nodes.
//
// The activations are feature-major: h and p are [D, N, R] (feature, node, root set), so a
// node's values for one feature are a contiguous run of R, and the neighbour sum of a run is
// the GIN aggregation of one feature's [N, R] slice.
#pragma once
#include <cstdint>

#include "cpu/parallel.hpp"
#include "rpfast/gin.hpp"

namespace rpfast {

// z[c, v, :] = bias[c] + sum_k own[c, k] h[k, v, :] + scale[v] (p[c, v, :] + sum_{u in row v} p[c, u, :])
// for h, p, z [D, N, R], own [D, D], bias [D], scale [N] and the incoming-edge CSR (rowptr, col).
// The neighbour sum is GIN's (aggregate_row: self, then the CSR row in order); it replaces four
// passes over [D, N, R] (the product with own, the aggregation, the scale, the sums) with one.
template <class T>
void rooted_round(const T* h, const T* p, const T* own, const T* bias, const T* scale, const int64_t* rowptr,
                  const int64_t* col, T* z, int64_t D, int64_t N, int64_t R, int threads) {
  const int64_t avg_degree = N ? rowptr[N] / N + 1 : 1;
  // one node per item, every feature of it: the node's D runs of h are read from memory once
  // and stay in cache for all D outputs (feature-major items re-read all of h D times)
  parallel_for(N, threads, D * (avg_degree + D) * R, [&](int64_t v) {
    const T s = scale[v];
    for (int64_t c = 0; c < D; ++c) {
      T* __restrict__ dst = z + (c * N + v) * R;
      aggregate_row(p + c * N * R, rowptr, col, T(1), v, R, dst);
      const T b = bias[c];
      for (int64_t f = 0; f < R; ++f) dst[f] = s * dst[f] + b;
      for (int64_t k = 0; k < D; ++k) {
        const T w = own[c * D + k];
        const T* __restrict__ hk = h + (k * N + v) * R;
        for (int64_t f = 0; f < R; ++f) dst[f] += w * hk[f];
      }
    }
  });
}

}  // namespace rpfast
