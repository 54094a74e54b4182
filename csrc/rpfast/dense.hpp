// Gradients of the dense maps of a GNN layer, with deterministic reductions.
//
// y = x W^T (a linear map) has grad_W = g^T x, and y = W[index] (an embedding lookup, e.g.
// one-hot node IDs) has grad_W[v] = sum of g over rows with index v. Both reduce over all
// rows; torch computes them with thread-count-dependent BLAS splits or atomics, so these
// chunked versions (reduce.hpp) keep training bitwise reproducible.
#pragma once
#include <cstdint>
#include <vector>

#include "rpfast/reduce.hpp"

namespace rpfast {

// out [H1, H2] = a^T b for a [M, H1], b [M, H2]: the weight gradient of a linear map.
// Each chunk of rows sums in T (vectorised outer products, like a BLAS kernel), the chunks
// are added in double in chunk order.
template <class T>
void matmul_tn(const T* a, const T* b, int64_t M, int64_t H1, int64_t H2, T* out, int threads) {
  std::vector<double> sums(static_cast<size_t>(H1 * H2));
  chunked_row_sums(M, H1 * H2, H1 * H2, threads, sums.data(), [=](int64_t begin, int64_t end, double* acc) {
    std::vector<T> block(static_cast<size_t>(H1 * H2), T(0));
    T* __restrict__ blk = block.data();
    for (int64_t m = begin; m < end; ++m) {
      const T* __restrict__ ar = a + m * H1;
      const T* __restrict__ br = b + m * H2;
      for (int64_t i = 0; i < H1; ++i) {
        const T ai = ar[i];
        T* __restrict__ row = blk + i * H2;
#pragma omp simd
        for (int64_t j = 0; j < H2; ++j) row[j] += ai * br[j];
      }
    }
    for (int64_t k = 0; k < H1 * H2; ++k) acc[k] += double(blk[k]);
  });
  for (int64_t i = 0; i < H1 * H2; ++i) out[i] = T(sums[i]);
}

// out [V, H]: out[v] = sum of rows g[m] with index[m] = v, for index [M] in [0, V) and
// g [M, H]: the gradient of a row gather (an embedding lookup).
template <class T>
void scatter_rows_sum(const int64_t* index, const T* g, int64_t M, int64_t V, int64_t H, T* out, int threads) {
  std::vector<double> sums(static_cast<size_t>(V * H));
  chunked_row_sums(M, V * H, H, threads, sums.data(), [&](int64_t begin, int64_t end, double* acc) {
    for (int64_t m = begin; m < end; ++m) {
      double* __restrict__ row = acc + index[m] * H;
      const T* __restrict__ gr = g + m * H;
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) row[h] += double(gr[h]);
    }
  });
  for (int64_t i = 0; i < V * H; ++i) out[i] = T(sums[i]);
}

}  // namespace rpfast
