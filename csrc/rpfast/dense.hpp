// Gradients of the dense maps of a GNN layer, with deterministic reductions.
//
// y = x W^T (a linear map) has grad_W = g^T x, and y = W[index] (an embedding lookup, e.g.
// one-hot node IDs) has grad_W[v] = sum of g over rows with index v. Both reduce over all
// rows; torch computes them with thread-count-dependent BLAS splits or atomics, so these
// chunked versions (reduce.hpp) keep training bitwise reproducible.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "rpfast/reduce.hpp"

namespace rpfast {

// out [H1, H2] = a^T b for a [M, H1], b [M, H2]: the weight gradient of a linear map.
// Within a chunk of rows each (i, block of kBlock columns) sums in T in registers, like a
// BLAS micro-kernel; the chunks are added in double in chunk order.
template <class T>
void matmul_tn(const T* a, const T* b, int64_t M, int64_t H1, int64_t H2, T* out, int threads) {
  std::vector<double> sums(static_cast<size_t>(H1 * H2));
  chunked_row_sums(M, H1 * H2, H1 * H2, threads, sums.data(), [=](int64_t begin, int64_t end, double* acc) {
    for (int64_t i = 0; i < H1; ++i) {
      int64_t j0 = 0;
      for (; j0 + kBlock <= H2; j0 += kBlock) {
        T s[kBlock] = {};
        for (int64_t m = begin; m < end; ++m) {
          const T av = a[m * H1 + i];
          const T* __restrict__ br = b + m * H2 + j0;
#pragma omp simd
          for (int64_t j = 0; j < kBlock; ++j) s[j] += av * br[j];
        }
        for (int64_t j = 0; j < kBlock; ++j) acc[i * H2 + j0 + j] += double(s[j]);
      }
      for (int64_t j = j0; j < H2; ++j) {
        T v = 0;
        for (int64_t m = begin; m < end; ++m) v += a[m * H1 + i] * b[m * H2 + j];
        acc[i * H2 + j] += double(v);
      }
    }
  });
  for (int64_t i = 0; i < H1 * H2; ++i) out[i] = T(sums[i]);
}

// out [M, C] = a [M, K] b [K, C] (b row-major), one output row per work item, so rows are
// independent and the result does not depend on the thread count.
template <class T>
void rows_times(const T* a, int64_t M, int64_t K, const T* b, int64_t C, T* out, int threads) {
  parallel_for(M, threads, K * C, [&](int64_t m) {
    const T* __restrict__ ar = a + m * K;
    T* __restrict__ o = out + m * C;
    int64_t c0 = 0;
    for (; c0 + kBlock <= C; c0 += kBlock) {
      // fixed-size loops (not omp simd, which keeps the block in memory), so the block lives in registers
      T s[kBlock] = {};
      for (int64_t k = 0; k < K; ++k) {
        const T av = ar[k];
        const T* __restrict__ br = b + k * C + c0;
        for (int64_t j = 0; j < kBlock; ++j) s[j] += av * br[j];
      }
      for (int64_t j = 0; j < kBlock; ++j) o[c0 + j] = s[j];
    }
    for (int64_t c = c0; c < C; ++c) {
      T v = 0;
      for (int64_t k = 0; k < K; ++k) v += ar[k] * b[k * C + c];
      o[c] = v;
    }
  });
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
