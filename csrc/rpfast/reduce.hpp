// Deterministic reductions over the rows of row-major matrices.
//
// Rows are split into chunks whose size depends only on the problem's shape; chunk
// partial sums are computed in parallel and then added in chunk order, so results are
// bitwise identical for any thread count (BLAS reductions over rows are not: they split
// the reduced dimension by thread). Inner loops run over contiguous columns with
// `omp simd`, so they vectorise; a row's terms never depend on data (no branches).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "rpfast/parallel.hpp"

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

// Columns are processed in blocks of kBlock: a block's accumulators stay in registers
// while the loops stream over rows (accumulating into memory would chain every row's add
// through a store and a reload).
constexpr int64_t kBlock = 16;

// out[h] = sum_m a[m, h] (b == nullptr) or sum_m a[m, h] * b[m, h], in double, for a, b [M, H].
template <class T>
void column_sums(const T* a, const T* b, int64_t M, int64_t H, int threads, double* out) {
  chunked_row_sums(M, H, H, threads, out, [=](int64_t begin, int64_t end, double* __restrict__ acc) {
    int64_t h0 = 0;
    for (; h0 + kBlock <= H; h0 += kBlock) {
      double s[kBlock] = {};  // fixed-size loops (no omp simd), so the block lives in registers
      for (int64_t m = begin; m < end; ++m) {
        const T* __restrict__ ar = a + m * H + h0;
        if (b == nullptr) {
#pragma omp simd
          for (int64_t j = 0; j < kBlock; ++j) s[j] += double(ar[j]);
        } else {
          const T* __restrict__ br = b + m * H + h0;
#pragma omp simd
          for (int64_t j = 0; j < kBlock; ++j) s[j] += double(ar[j]) * double(br[j]);
        }
      }
      for (int64_t j = 0; j < kBlock; ++j) acc[h0 + j] += s[j];
    }
    for (int64_t h = h0; h < H; ++h) {
      double v = 0;
      for (int64_t m = begin; m < end; ++m) v += double(a[m * H + h]) * (b == nullptr ? 1.0 : double(b[m * H + h]));
      acc[h] += v;
    }
  });
}

}  // namespace rpfast
