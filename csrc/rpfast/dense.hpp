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

// acc[0 .. kBlock) += the block's values, in double.
template <class T>
void add_block(const Block<T>& s, double* acc) {
  T block[kBlock];
  s.store(block);
  for (int64_t j = 0; j < kBlock; ++j) acc[j] += double(block[j]);
}

// acc[i H2 + j] += sum over rows [begin, end) of a[m, i] b[m, j], for the columns j >= j0.
template <class T>
void tail_columns(const T* a, const T* b, int64_t begin, int64_t end, int64_t H1, int64_t H2, int64_t i, int64_t j0,
                  double* acc) {
  for (int64_t j = j0; j < H2; ++j) {
    T v = 0;
    for (int64_t m = begin; m < end; ++m) v += a[m * H1 + i] * b[m * H2 + j];
    acc[i * H2 + j] += double(v);
  }
}

// out [H1, H2] = a^T b for a [M, H1], b [M, H2]: the weight gradient of a linear map.
// Within a chunk of rows each (i, block of kBlock columns) sums in T in registers
// (simd.hpp), like a BLAS micro-kernel; the chunks are added in double in chunk order.
template <class T>
void matmul_tn(const T* a, const T* b, int64_t M, int64_t H1, int64_t H2, T* out, int threads) {
  std::vector<double> sums(static_cast<size_t>(H1 * H2));
  chunked_row_sums(M, H1 * H2, H1 * H2, threads, sums.data(), [=](int64_t begin, int64_t end, double* acc) {
    // kRows rows i of the output at a time: independent accumulator chains share each load of b
    constexpr int64_t kRows = 4;
    int64_t i0 = 0;
    for (; i0 + kRows <= H1; i0 += kRows) {
      int64_t j0 = 0;
      for (; j0 + kBlock <= H2; j0 += kBlock) {
        Block<T> s[kRows];
        for (int64_t r = 0; r < kRows; ++r) s[r] = Block<T>::zero();
        for (int64_t m = begin; m < end; ++m) {
          const T* __restrict__ br = b + m * H2 + j0;
          const T* __restrict__ ar = a + m * H1 + i0;
          for (int64_t r = 0; r < kRows; ++r) s[r].fma(ar[r], br);
        }
        for (int64_t r = 0; r < kRows; ++r) add_block(s[r], acc + (i0 + r) * H2 + j0);
      }
      for (int64_t i = i0; i < i0 + kRows; ++i) tail_columns(a, b, begin, end, H1, H2, i, j0, acc);
    }
    for (int64_t i = i0; i < H1; ++i) {
      int64_t j0 = 0;
      for (; j0 + kBlock <= H2; j0 += kBlock) {
        Block<T> s = Block<T>::zero();
        for (int64_t m = begin; m < end; ++m) s.fma(a[m * H1 + i], b + m * H2 + j0);
        add_block(s, acc + i * H2 + j0);
      }
      tail_columns(a, b, begin, end, H1, H2, i, j0, acc);
    }
  });
  for (int64_t i = 0; i < H1 * H2; ++i) out[i] = T(sums[i]);
}

// out [M, C] = a [M, K] b [K, C] (b row-major). Every output row is written by one work item, so rows are
// independent and the result does not depend on the thread count.
template <class T>
void rows_times(const T* a, int64_t M, int64_t K, const T* b, int64_t C, T* out, int threads) {
  // kRows output rows per work item: independent accumulator chains share each load of b
  constexpr int64_t kRows = 4;
  const int64_t groups = (M + kRows - 1) / kRows;
  parallel_for(groups, threads, kRows * K * C, [&](int64_t g) {
    const int64_t m0 = g * kRows, rows = std::min(kRows, M - m0);
    int64_t c0 = 0;
    for (; c0 + kBlock <= C; c0 += kBlock) {
      if (rows == kRows) {
        Block<T> s[kRows];
        for (int64_t r = 0; r < kRows; ++r) s[r] = Block<T>::zero();
        for (int64_t k = 0; k < K; ++k) {
          const T* __restrict__ br = b + k * C + c0;
          for (int64_t r = 0; r < kRows; ++r) s[r].fma(a[(m0 + r) * K + k], br);
        }
        for (int64_t r = 0; r < kRows; ++r) s[r].store(out + (m0 + r) * C + c0);
      } else {
        for (int64_t m = m0; m < m0 + rows; ++m) {
          Block<T> s = Block<T>::zero();
          for (int64_t k = 0; k < K; ++k) s.fma(a[m * K + k], b + k * C + c0);
          s.store(out + m * C + c0);
        }
      }
    }
    for (int64_t m = m0; m < m0 + rows; ++m)
      for (int64_t c = c0; c < C; ++c) {
        T v = 0;
        for (int64_t k = 0; k < K; ++k) v += a[m * K + k] * b[k * C + c];
        out[m * C + c] = v;
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
