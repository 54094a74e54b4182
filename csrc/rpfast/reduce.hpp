// Deterministic column reductions over the rows of a row-major [M, H] matrix.
//
// Rows are split into fixed-size chunks whose partial sums are computed in parallel and
// then added in chunk order, so the result is bitwise identical for any thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "rpfast/parallel.hpp"

namespace rpfast {

constexpr int64_t kReduceChunkRows = 256;

// out[h] = sum over rows m of term(m, h) (accumulated in double), for h in [0, H).
template <class Term>
void column_sums(int64_t M, int64_t H, int threads, double* out, Term&& term) {
  const int64_t chunks = (M + kReduceChunkRows - 1) / kReduceChunkRows;
  std::vector<double> partial(static_cast<size_t>(chunks * H), 0.0);
  parallel_for(chunks, threads, kReduceChunkRows * H, [&](int64_t c) {
    double* acc = partial.data() + c * H;
    const int64_t end = (c + 1) * kReduceChunkRows < M ? (c + 1) * kReduceChunkRows : M;
    for (int64_t m = c * kReduceChunkRows; m < end; ++m)
      for (int64_t h = 0; h < H; ++h) acc[h] += term(m, h);
  });
  for (int64_t h = 0; h < H; ++h) out[h] = 0.0;
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t h = 0; h < H; ++h) out[h] += partial[c * H + h];
}

}  // namespace rpfast
