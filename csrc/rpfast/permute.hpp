// Batched permutation gathers of dense adjacency tensors and node features.
//
// Shapes (all arrays C-contiguous):
//   adj   [B, N, N, C]     dense padded adjacency, channel-last
//   x     [B, N, F]        dense padded node features
//   perms [B, P, K]        gather convention, -1 = padding (see permutations.hpp)
//   inv   [B, P, N]        inverse of perms (invert_permutations)
// Forward:  out_adj[b, p, i, j, c] = adj[b, perms[b,p,i], perms[b,p,j], c]   (0 if either is -1)
//           out_x[b, p, i, f]      = x[b, perms[b,p,i], f]                    (0 if -1)
// Backward (a gather with the inverse, so no atomics and a fixed summation order):
//   grad_adj[b, u, v, c] = sum_p g[b, p, inv[b,p,u], inv[b,p,v], c]   over p with both placed,
//   summed in increasing p, so results are bitwise reproducible for any thread count
//   grad_x[b, u, f]      = sum_p g[b, p, inv[b,p,u], f]               over p with u placed
#pragma once
#include <cstdint>
#include <cstring>

#include "cpu/parallel.hpp"

namespace rpfast {

struct PermuteDims {
  int64_t B, N, C, P, K;  // C is F for node features
};

template <class T>
void permute_adjacency_forward(const T* adj, const int64_t* perms, T* out, PermuteDims d,
                               int threads) {
  const int64_t rows = d.B * d.P * d.K;
  parallel_for(rows, threads, d.K * d.C, [&](int64_t r) {
    const int64_t b = r / (d.P * d.K);
    const int64_t i = r % d.K;
    const int64_t* prow = perms + (r - i);
    const int64_t u = prow[i];
    T* dst = out + r * d.K * d.C;
    if (u < 0) {
      std::memset(dst, 0, sizeof(T) * d.K * d.C);
      return;
    }
    const T* src = adj + (b * d.N + u) * d.N * d.C;
    if (d.C == 1) {
      for (int64_t j = 0; j < d.K; ++j) {
        const int64_t v = prow[j];
        dst[j] = v < 0 ? T(0) : src[v];
      }
      return;
    }
    for (int64_t j = 0; j < d.K; ++j) {
      const int64_t v = prow[j];
      if (v < 0)
        std::memset(dst + j * d.C, 0, sizeof(T) * d.C);
      else
        std::memcpy(dst + j * d.C, src + v * d.C, sizeof(T) * d.C);
    }
  });
}

// Each (b, u) row of grad_adj is owned by one thread. For every sample p that places u
// (at position iu = inv[b,p,u]) it adds row iu of g, scattered to columns perms[b,p,j]:
// reads of g stay sequential and only the K placed columns are visited.
template <class T>
void permute_adjacency_backward(const T* grad, const int64_t* perms, const int64_t* inv,
                                T* grad_adj, PermuteDims d, int threads) {
  const int64_t C = d.C;
  parallel_for(d.B * d.N, threads, d.P * d.K * C + d.N * C, [&](int64_t bu) {
    const int64_t b = bu / d.N;
    const int64_t u = bu % d.N;
    T* dst = grad_adj + bu * d.N * C;
    std::memset(dst, 0, sizeof(T) * d.N * C);
    for (int64_t p = 0; p < d.P; ++p) {
      const int64_t row = b * d.P + p;
      const int64_t iu = inv[row * d.N + u];
      if (iu < 0) continue;
      const T* g = grad + (row * d.K + iu) * d.K * C;
      const int64_t* prow = perms + row * d.K;
      for (int64_t j = 0; j < d.K; ++j) {
        const int64_t v = prow[j];
        if (v < 0) continue;
        const T* __restrict__ gj = g + j * C;
        T* __restrict__ dv = dst + v * C;
        for (int64_t c = 0; c < C; ++c) dv[c] += gj[c];
      }
    }
  });
}

template <class T>
void permute_nodes_forward(const T* x, const int64_t* perms, T* out, PermuteDims d, int threads) {
  const int64_t F = d.C;
  parallel_for(d.B * d.P * d.K, threads, F, [&](int64_t r) {
    const int64_t b = r / (d.P * d.K);
    const int64_t u = perms[r];
    T* dst = out + r * F;
    if (u < 0)
      std::memset(dst, 0, sizeof(T) * F);
    else
      std::memcpy(dst, x + (b * d.N + u) * F, sizeof(T) * F);
  });
}

template <class T>
void permute_nodes_backward(const T* grad, const int64_t* inv, T* grad_x, PermuteDims d,
                            int threads) {
  const int64_t F = d.C;
  parallel_for(d.B * d.N, threads, d.P * F, [&](int64_t bu) {
    const int64_t b = bu / d.N;
    const int64_t u = bu % d.N;
    T* dst = grad_x + bu * F;
    std::memset(dst, 0, sizeof(T) * F);
    for (int64_t p = 0; p < d.P; ++p) {
      const int64_t iu = inv[(b * d.P + p) * d.N + u];
      if (iu < 0) continue;
      const T* __restrict__ g = grad + ((b * d.P + p) * d.K + iu) * F;
      T* __restrict__ acc = dst;
      for (int64_t f = 0; f < F; ++f) acc[f] += g[f];
    }
  });
}

}  // namespace rpfast
