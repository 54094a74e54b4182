// Batched GIN aggregation over a CSR graph (Xu et al. 2019, eq. 4.1 before the MLP).
//
//   out[r, i, :] = (1 + eps) * x[r, i, :] + sum_{k in rowptr[i]..rowptr[i+1]} x[r, col[k], :]
//
// x and out are [R, N, F] (R replicas sharing one graph), rowptr [N + 1], col [E].
// With the CSR of incoming edges (rows = targets) this is PyG's GINConv aggregation;
// its adjoint is the same kernel over the outgoing-edge CSR (the transpose), so the
// backward needs no atomics and sums in a fixed order. The binding checks the CSR with
// check_csr (graph.hpp).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpfast/graph.hpp"
#include "cpu/parallel.hpp"
#include "rpfast/reduce.hpp"

namespace rpfast {

// One output row: dst = scale * xr[i] + sum over CSR row i of xr[col]; xr is one replica [N, F].
template <class T>
inline void aggregate_row(const T* __restrict__ xr, const int64_t* rowptr, const int64_t* col, T scale, int64_t i,
                          int64_t F, T* __restrict__ dst) {
  const T* __restrict__ self = xr + i * F;
  // blocks of kBlock features summed in registers (simd.hpp), then single vectors, the tail in
  // memory. Four
  // blocks at a time where F allows: four independent add chains per neighbour hide the
  // add latency that a single block's chain waits on. Every element is summed in the same
  // order (self, then neighbours in CSR order) on every path.
  int64_t f0 = 0;
  for (; f0 + 4 * kBlock <= F; f0 += 4 * kBlock) {
    Block<T> s0 = Block<T>::scaled(scale, self + f0), s1 = Block<T>::scaled(scale, self + f0 + kBlock),
             s2 = Block<T>::scaled(scale, self + f0 + 2 * kBlock), s3 = Block<T>::scaled(scale, self + f0 + 3 * kBlock);
    for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) {
      const T* nb = xr + col[k] * F + f0;
      s0.add(nb);
      s1.add(nb + kBlock);
      s2.add(nb + 2 * kBlock);
      s3.add(nb + 3 * kBlock);
    }
    s0.store(dst + f0);
    s1.store(dst + f0 + kBlock);
    s2.store(dst + f0 + 2 * kBlock);
    s3.store(dst + f0 + 3 * kBlock);
  }
  for (; f0 + kBlock <= F; f0 += kBlock) {
    Block<T> s = Block<T>::scaled(scale, self + f0);
    for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) s.add(xr + col[k] * F + f0);
    s.store(dst + f0);
  }
  using Vec = typename Block<T>::Vec;  // one vector register (8 floats in the AVX2 build)
  for (; f0 + Block<T>::kLanes <= F; f0 += Block<T>::kLanes) {  // a row of a few features, e.g. one of 8
    Vec s = scale * Block<T>::load(self + f0);
    for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) s += Block<T>::load(xr + col[k] * F + f0);
    std::memcpy(dst + f0, &s, sizeof s);
  }
  for (int64_t f = f0; f < F; ++f) dst[f] = scale * self[f];
  for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) {
    const T* __restrict__ nb = xr + col[k] * F;
    for (int64_t f = f0; f < F; ++f) dst[f] += nb[f];
  }
}

template <class T>
void gin_aggregate(const T* x, const int64_t* rowptr, const int64_t* col, T scale, T* out,
                   int64_t R, int64_t N, int64_t F, int threads) {
  const int64_t avg_degree = N ? rowptr[N] / N + 1 : 1;
  parallel_for(R * N, threads, avg_degree * F, [&](int64_t ri) {
    aggregate_row(x + (ri / N) * N * F, rowptr, col, scale, ri % N, F, out + ri * F);
  });
}

// The backward of out = (1 + eps) z + A z, reading the gradient g ([R, N, F]) once for both:
//   grad_z = (1 + eps) g + A^T g   (the aggregation over the outgoing-edge CSR, into grad_z)
//   returns grad_eps = sum(g * z)
// Rows are processed in fixed chunks of about kDotChunk elements; a chunk's products are
// summed in T while its rows are hot in cache and the chunk sums are added in double in chunk
// order, so the result is independent of the thread count.
template <class T>
double gin_aggregate_adjoint(const T* g, const int64_t* out_rowptr, const int64_t* out_col, T scale, const T* z,
                             T* grad_z, int64_t R, int64_t N, int64_t F, int threads) {
  constexpr int64_t kDotChunk = 1024;
  const int64_t rows = R * N;
  const int64_t chunk_rows = F >= kDotChunk ? 1 : kDotChunk / (F > 0 ? F : 1);
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  const int64_t avg_degree = N ? out_rowptr[N] / N + 1 : 1;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, threads, chunk_rows * (avg_degree + 1) * F, [&](int64_t c) {
    const int64_t begin = c * chunk_rows, end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
    for (int64_t ri = begin; ri < end; ++ri)
      aggregate_row(g + (ri / N) * N * F, out_rowptr, out_col, scale, ri % N, F, grad_z + ri * F);
    const T* __restrict__ gp = g;
    const T* __restrict__ zp = z;
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t k = begin * F; k < end * F; ++k) acc += gp[k] * zp[k];
    partial[c] = static_cast<double>(acc);
  });
  double total = 0;
  for (double v : partial) total += v;
  return total;
}

// sum(a * b) over n elements, accumulated in double. Fixed-size chunks are summed in
// parallel and then added in chunk order, so the result is independent of the thread count.
template <class T>
double sum_product(const T* a, const T* b, int64_t n, int threads) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, threads, kChunk, [&](int64_t c) {
    const int64_t end = (c + 1) * kChunk < n ? (c + 1) * kChunk : n;
    double acc = 0;
    const T* __restrict__ ap = a;
    const T* __restrict__ bp = b;
    // The simd reduction splits the chunk into a fixed number of lanes: the order depends on
    // the build, never on the thread count.
#pragma omp simd reduction(+ : acc)
    for (int64_t k = c * kChunk; k < end; ++k) acc += static_cast<double>(ap[k]) * static_cast<double>(bp[k]);
    partial[c] = acc;
  });
  double total = 0;
  for (double v : partial) total += v;
  return total;
}

}  // namespace rpfast
