// Deterministic reductions over the rows of row-major matrices.
//
// Rows are split into chunks whose size depends only on the problem's shape; chunk
// partial sums are computed in parallel and then added in chunk order, so results are
// bitwise identical for any thread count (BLAS reductions over rows are not: they split
// the reduced dimension by thread). Inner loops accumulate blocks of columns in vector
// registers (simd.hpp); a row's terms never depend on data (no branches).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/parallel.hpp"
#include "cpu/simd.hpp"

namespace rpfast {

constexpr int64_t kReduceChunkRows = 256;

// out[j] = sum over rows m of row m's contribution, for j in [0, width):
// accumulate(begin, end, acc) adds rows [begin, end) into acc [width] (doubles, zeroed).
// At most ~32 MB of partial sums are kept, whatever M.
template <class Accumulate>
void chunked_row_sums(int64_t M, int64_t width, int64_t cost_per_row, int threads, double* out,
                      Accumulate&& accumulate) {
  const int64_t max_chunks = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(width, 1));
  int64_t rows = kReduceChunkRows;
  while ((M + rows - 1) / rows > max_chunks) rows *= 2;
  const int64_t chunks = (M + rows - 1) / rows;
  std::vector<double> partial(static_cast<size_t>(chunks * width), 0.0);
  parallel_for(chunks, threads, rows * cost_per_row, [&](int64_t c) {
    accumulate(c * rows, std::min(M, (c + 1) * rows), partial.data() + c * width);
  });
  std::fill(out, out + width, 0.0);
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t j = 0; j < width; ++j) out[j] += partial[c * width + j];
}

// out[h] = sum_m a[m, h] (b == nullptr) or sum_m a[m, h] * b[m, h], for a, b [M, H]. Each
// chunk of rows sums a block of kBlock columns in T in registers (simd.hpp); the chunks are
// added in double.
template <class T>
void column_sums(const T* a, const T* b, int64_t M, int64_t H, int threads, double* out) {
  chunked_row_sums(M, H, H, threads, out, [=](int64_t begin, int64_t end, double* __restrict__ acc) {
    int64_t h0 = 0;
    for (; h0 + kBlock <= H; h0 += kBlock) {
      Block<T> s = Block<T>::zero();
      if (b == nullptr) {
        for (int64_t m = begin; m < end; ++m) s.add(a + m * H + h0);
      } else {
        for (int64_t m = begin; m < end; ++m) s.fma(a + m * H + h0, b + m * H + h0);
      }
      T block[kBlock];
      s.store(block);
      for (int64_t j = 0; j < kBlock; ++j) acc[h0 + j] += double(block[j]);
    }
    for (int64_t h = h0; h < H; ++h) {
      T v = 0;
      for (int64_t m = begin; m < end; ++m) v += a[m * H + h] * (b == nullptr ? T(1) : b[m * H + h]);
      acc[h] += double(v);
    }
  });
}

}  // namespace rpfast
