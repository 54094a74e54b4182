// Neighbourhood max pooling over a CSR graph (DeepChem's GraphPool, Duvenaud et al.'s model):
//
//   out[i, f]  = max(x[i, f], max_{k in rowptr[i]..rowptr[i+1]} x[col[k], f])
//   ties[i, f] = how many of those entries equal out[i, f] (x[i] once, each edge once; 0 for NaN)
//
// With the incoming-edge CSR (rows = targets) row i covers the atoms bonded to i. The
// gradient is torch's scatter_reduce("amax", include_self=True) gradient: a tied maximum
// splits g[i, f] evenly among the entries that attain it,
//
//   grad_x[j, f] = sum_{i in {j} + out(j)} [x[j, f] == out[i, f]] * g[i, f] / ties[i, f],
//
// computed per source atom j over the outgoing-edge CSR (the transpose): no atomics, a fixed
// summation order, so the result does not depend on the thread count. A NaN in a
// neighbourhood makes its maximum NaN, which no entry equals: no gradient flows there.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/parallel.hpp"
#include "cpu/simd.hpp"
#include "rpfast/running_max.hpp"

namespace rpfast {

template <class T>
void neighbour_max(const T* x, const int64_t* rowptr, const int64_t* col, int64_t N, int64_t F, T* out, T* ties,
                   int threads) {
  using Vec = typename Block<T>::Vec;
  constexpr int64_t kLanes = Block<T>::kLanes;
  const int64_t avg_degree = N ? rowptr[N] / N + 1 : 1;
  parallel_for(N, threads, 2 * avg_degree * F, [&](int64_t i) {
    const Vec one = Vec{} + T(1);
    int64_t f0 = 0;
    for (; f0 + kLanes <= F; f0 += kLanes) {  // one vector of channels in registers over all neighbours
      Vec best = Block<T>::load(x + i * F + f0), count = one;
      for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) meet(Block<T>::load(x + col[k] * F + f0), best, count, one);
      count = ties_of(best, count);
      std::memcpy(out + i * F + f0, &best, sizeof best);
      std::memcpy(ties + i * F + f0, &count, sizeof count);
    }
    for (int64_t f = f0; f < F; ++f) {  // the tail channels, one at a time
      T best = x[i * F + f], count = T(1);
      for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) meet(x[col[k] * F + f], best, count, T(1));
      out[i * F + f] = best;
      ties[i * F + f] = ties_of(best, count);
    }
  });
}

// grad_x [N, F] from g, out, ties [N, F] and the outgoing-edge CSR (out_rowptr, out_col).
template <class T>
void neighbour_max_backward(const T* x, const T* out, const T* ties, const T* g, const int64_t* out_rowptr,
                            const int64_t* out_col, int64_t N, int64_t F, T* grad_x, int threads) {
  using Vec = typename Block<T>::Vec;
  constexpr int64_t kLanes = Block<T>::kLanes;
  const int64_t avg_degree = N ? out_rowptr[N] / N + 1 : 1;
  const auto share = [&](int64_t i, int64_t f, Vec xj) {  // g[i] / ties[i] where x[j] attains out[i]
    const Vec zero = Vec{};
    return xj == Block<T>::load(out + i * F + f) ? Block<T>::load(g + i * F + f) / Block<T>::load(ties + i * F + f)
                                                 : zero;
  };
  parallel_for(N, threads, 2 * avg_degree * F, [&](int64_t j) {
    int64_t f0 = 0;
    for (; f0 + kLanes <= F; f0 += kLanes) {
      const Vec xj = Block<T>::load(x + j * F + f0);
      Vec acc = share(j, f0, xj);
      for (int64_t k = out_rowptr[j]; k < out_rowptr[j + 1]; ++k) acc += share(out_col[k], f0, xj);
      std::memcpy(grad_x + j * F + f0, &acc, sizeof acc);
    }
    for (int64_t f = f0; f < F; ++f) {
      const T xj = x[j * F + f];
      T acc = xj == out[j * F + f] ? g[j * F + f] / ties[j * F + f] : T(0);
      for (int64_t k = out_rowptr[j]; k < out_rowptr[j + 1]; ++k) {
        const int64_t i = out_col[k];
        if (xj == out[i * F + f]) acc += g[i * F + f] / ties[i * F + f];
      }
      grad_x[j * F + f] = acc;
    }
  });
}

// Per-graph max readout (DeepChem's GraphGather max) over nodes sorted by graph, ptr [B + 1]:
//
//   out[b, f] = max_{ptr[b] <= i < ptr[b+1]} x[i, f]   (0 for a graph without nodes)
//
// with ties[b, f] as above, and the gradient of scatter_reduce("amax", include_self=False) on
// zeros: grad_x[i, f] = [x[i, f] == out[b(i), f]] * g[b, f] / ties[b, f].
template <class T>
void segment_max(const T* x, const int64_t* ptr, int64_t B, int64_t F, T* out, T* ties, int threads) {
  using Vec = typename Block<T>::Vec;
  constexpr int64_t kLanes = Block<T>::kLanes;
  const int64_t avg = B ? ptr[B] / B + 1 : 1;
  parallel_for(B, threads, 2 * avg * F, [&](int64_t b) {
    const Vec one = Vec{} + T(1);
    const int64_t begin = ptr[b], end = ptr[b + 1];
    if (begin == end) {
      for (int64_t f = 0; f < F; ++f) out[b * F + f] = ties[b * F + f] = T(0);
      return;
    }
    int64_t f0 = 0;
    for (; f0 + kLanes <= F; f0 += kLanes) {
      Vec best = Block<T>::load(x + begin * F + f0), count = one;
      for (int64_t i = begin + 1; i < end; ++i) meet(Block<T>::load(x + i * F + f0), best, count, one);
      count = ties_of(best, count);
      std::memcpy(out + b * F + f0, &best, sizeof best);
      std::memcpy(ties + b * F + f0, &count, sizeof count);
    }
    for (int64_t f = f0; f < F; ++f) {
      T best = x[begin * F + f], count = T(1);
      for (int64_t i = begin + 1; i < end; ++i) meet(x[i * F + f], best, count, T(1));
      out[b * F + f] = best;
      ties[b * F + f] = ties_of(best, count);
    }
  });
}

template <class T>
void segment_max_backward(const T* x, const int64_t* ptr, int64_t B, int64_t F, const T* out, const T* ties,
                          const T* g, T* grad_x, int threads) {
  const int64_t avg = B ? ptr[B] / B + 1 : 1;
  parallel_for(B, threads, avg * F, [&](int64_t b) {
    if (ptr[b] == ptr[b + 1]) return;
    const T* __restrict__ best = out + b * F;
    // g / ties once per graph, not once per node: the division is the loop's slowest instruction
    std::vector<T> share_buffer(static_cast<size_t>(F));
    T* __restrict__ share = share_buffer.data();
    for (int64_t f = 0; f < F; ++f) share[f] = g[b * F + f] / ties[b * F + f];
    for (int64_t i = ptr[b]; i < ptr[b + 1]; ++i) {
      const T* __restrict__ xi = x + i * F;
      T* __restrict__ dst = grad_x + i * F;
      for (int64_t f = 0; f < F; ++f) dst[f] = xi[f] == best[f] ? share[f] : T(0);
    }
  });
}

}  // namespace rpfast
