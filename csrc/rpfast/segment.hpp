// Segment sums over contiguous row ranges: graph readout for node-sorted batches.
//
//   out[r, b, :] = sum_{i = ptr[b]}^{ptr[b+1] - 1} x[r, i, :]      x [R, N, F], out [R, B, F]
//
// Each output row is owned by one thread and summed in row order (deterministic). The
// backward is a broadcast, grad_x[r, i] = g[r, graph of i].
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "rpfast/graph.hpp"
#include "cpu/parallel.hpp"

namespace rpfast {

template <class T>
void segment_sum(const T* x, const int64_t* ptr, int64_t R, int64_t N, int64_t B, int64_t F, T* out,
                 int threads) {
  const int64_t avg = B ? N / B + 1 : 1;
  parallel_for(R * B, threads, avg * F, [&](int64_t rb) {
    const int64_t r = rb / B, b = rb % B;
    T* __restrict__ dst = out + rb * F;
    for (int64_t f = 0; f < F; ++f) dst[f] = T(0);
    for (int64_t i = ptr[b]; i < ptr[b + 1]; ++i) {
      const T* __restrict__ row = x + (r * N + i) * F;
      for (int64_t f = 0; f < F; ++f) dst[f] += row[f];
    }
  });
}

template <class T>
void segment_broadcast(const T* g, const int64_t* ptr, int64_t R, int64_t N, int64_t B, int64_t F,
                       T* out, int threads) {
  const int64_t avg = B ? N / B + 1 : 1;
  parallel_for(R * B, threads, avg * F, [&](int64_t rb) {
    const int64_t r = rb / B, b = rb % B;
    const T* src = g + rb * F;
    for (int64_t i = ptr[b]; i < ptr[b + 1]; ++i) {
      T* row = out + (r * N + i) * F;
      for (int64_t f = 0; f < F; ++f) row[f] = src[f];
    }
  });
}

}  // namespace rpfast
