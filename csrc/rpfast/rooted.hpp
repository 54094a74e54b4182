// RootedRP's message passing: one round before its activation, in one pass over the nodes
// (rooted_round, the differentiable round of learned rounds), and every round of a fixed hash,
// activations and pooling included, in one call (rooted_pool, forward only).
//
// rooted_round's activations are feature-major: h and p are [D, N, R] (feature, node, root set), so a
// node's values for one feature are a contiguous run of R, and the neighbour sum of a run is
// the GIN aggregation of one feature's [N, R] slice.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/parallel.hpp"
#include "rpfast/cosine.hpp"
#include "rpfast/gin.hpp"
#include "cpu/simd.hpp"
#include "rpfast/interrupt.hpp"

namespace rpfast {

// z[c, v, :] = bias[c] + sum_k own[c, k] h[k, v, :] + scale[v] (p[c, v, :] + sum_{u in row v} p[c, u, :])
// for h, p, z [D, N, R], own [D, D], bias [D], scale [N] and the incoming-edge CSR (rowptr, col).
// The neighbour sum is GIN's (aggregate_row: self, then the CSR row in order); it replaces four
// passes over [D, N, R] (the product with own, the aggregation, the scale, the sums) with one.
template <class T>
void rooted_round(const T* h, const T* p, const T* own, const T* bias, const T* scale, const int64_t* rowptr,
                  const int64_t* col, T* z, int64_t D, int64_t N, int64_t R, int threads) {
  const int64_t avg_degree = N ? rowptr[N] / N + 1 : 1;
  // one node per item, every feature of it: the node's D runs of h are read from memory once
  // and stay in cache for all D outputs (feature-major items re-read all of h D times)
  parallel_for(N, threads, D * (avg_degree + D) * R, [&](int64_t v) {
    const T s = scale[v];
    for (int64_t c = 0; c < D; ++c) {
      T* __restrict__ dst = z + (c * N + v) * R;
      aggregate_row(p + c * N * R, rowptr, col, T(1), v, R, dst);
      const T b = bias[c];
      for (int64_t f = 0; f < R; ++f) dst[f] = s * dst[f] + b;
      for (int64_t k = 0; k < D; ++k) {
        const T w = own[c * D + k];
        const T* __restrict__ hk = h + (k * N + v) * R;
        for (int64_t f = 0; f < R; ++f) dst[f] += w * hk[f];
      }
    }
  });
}

}  // namespace rpfast

namespace rpfast {

// A vector register of values stored to p[0 .. lanes), p aligned only as T is: one unaligned
// vector store (a memcpy of a register from an array of them became a store to the stack and
// scalar reloads that stalled on store forwarding: 31 ns a row and round against 22 ns, width 8,
// in a standalone build)
template <class T, class Vec>
inline void store_lanes(T* p, Vec v) {
  typedef Vec Unaligned __attribute__((aligned(alignof(T)), may_alias));
  *reinterpret_cast<Unaligned*>(p) = v;
}

// cos of every lane: the float polynomial on the whole register, std::cos lane by lane for double.
template <class T, class Vec>
inline Vec cosine_lanes(Vec x) {
  if constexpr (std::is_same_v<T, float>) {
    return cosine_float(x);
  } else {
    for (size_t i = 0; i < sizeof(Vec) / sizeof(T); ++i) x[i] = cosine(x[i]);
    return x;
  }
}

// The pooled states of all L rounds of RootedRP's fixed hash from marked roots, in one call
// (forward only: the rounds need no gradient when they do not learn, and in eval mode).
//
// For the R root sets of every graph b (roots [R, B, K], local vertex indices; a vertex is
// marked in set r when it is one of roots[r, b, :]) and each graph's hash g = graph_hash[b]
// (its own input map, marker and rounds: own, passed [H, L, D, D], bias [H, L, D], marker [H, D]):
//   h0[v, r]    = cos(start[v] + [v marked in r] marker[g])
//   h_{l+1}[v]  = cos(bias_l + own_l h_l[v] + scale[v] (p_l[v] + sum_{u in row v} p_l[u])),  p_l = passed_l h_l
//   out[r, b]   = (1 / n_b) sum_{v in b} h_L[v, r]                                 (0 for an empty graph)
// with start [N, D], scale [N], ptr [B + 1] and the incoming-edge CSR (rowptr, col; edges stay
// inside their graph, std::invalid_argument otherwise).
//
// The work is split into tiles: one graph and a run of at most `tile` of its root sets
// (rooted_pool_tile), each taken through all L rounds and the pooling by one thread in scratch
// of its own, node-major [n_b, D, tile]: a node's states for every feature and root set of the
// tile are one run of D tile values, so the neighbour sum is GIN's aggregation of rows of D tile
// (aggregate_row) and a node's whole state stays in cache for its D x D products. Four buffers:
// h and p of this round and of the next. A tile holds at most kTileSets sets and its four buffers
// fit in kTileBytes, so its rounds run in a core's own cache: with one batch-wide buffer per round (4 x N D R values: 16 MB for
// 32 relabelings of a 64-vertex graph, 64 sets, width 8) every round streamed them from the
// shared cache, and a barrier ended each round. A value's operations and their order depend on
// neither the tiling nor the thread count.
//
// kD > 0 fixes D at compile time, which unrolls the D x D products (rooted_pool below picks the
// widths it instantiates); 0 reads it from D_given.

//: a tile's four buffers at most (the largest graph's), in bytes: within a core's L2 cache
constexpr int64_t kTileBytes = int64_t(1) << 19;
//: a tile's root sets at most: its p, which each node's neighbour sum reads deg + 1 times a round,
//: then stays near the L1 cache on graphs of up to about 50 vertices at width 8. Measured with
//: tiles of 16, 32, 48 and 64 sets (eval blocks of 32 relabelings, width 4 and 8, AVX-512): 32
//: was the fastest or within the VM's noise on every block, and 64 sets took 1.6x as long on
//: dense strongly regular graphs (degree 14 to 18), as fast on sparse CFI graphs.
constexpr int64_t kTileSets = 32;
static_assert(kTileSets % kBlock == 0, "tiles hold whole blocks of root sets");

// Root sets per tile: a multiple of kBlock (and so of the vector lanes: the sets left to the
// one-at-a-time paths are R's last ones, as they would be without tiles), at most kTileSets and
// at most what keeps the four buffers for n_max vertices within kTileBytes, at least kBlock, at
// most R.
inline int64_t rooted_tile_sets(int64_t R, int64_t n_max, int64_t D, int64_t value_bytes) {
  const int64_t per_set = 4 * (n_max > 0 ? n_max : 1) * D * value_bytes;
  int64_t tile = kTileBytes / per_set / kBlock * kBlock;
  if (tile > kTileSets) tile = kTileSets;
  if (tile < kBlock) tile = kBlock;
  return tile < R ? tile : R;
}

template <class T>
struct RootedScratch {
  std::vector<T> h, h_next, p, p_next;
  void fit(size_t size) {
    for (auto* buffer : {&h, &h_next, &p, &p_next})
      if (buffer->size() < size) buffer->resize(size);  // grown, never shrunk: a thread's tiles reuse it
  }
};

// One tile of rooted_pool_width: graph b (its n vertices from `first`, its hash g, its CSR rows
// `rowptr` from the graph's first node, sources in `local_col` as indices inside the graph) and
// its root sets r0 .. r0 + sets - 1, through every round into out[r, b].
template <class T, int64_t kD>
void rooted_pool_tile(const T* start, const T* marker, const T* own, const T* passed, const T* bias,
                      const T* scale, const int64_t* roots, int64_t g, int64_t first, int64_t n,
                      const int64_t* rowptr, const int64_t* local_col, const T* own_t, const T* passed_t, T* out,
                      RootedScratch<T>& scratch, int64_t b, int64_t B, int64_t D_given, int64_t L, int64_t r0,
                      int64_t sets, int64_t K) {
  const int64_t D = kD > 0 ? kD : D_given;
  const int64_t R = sets, run = D * R;  // R: this tile's sets, the stride of a node's runs
  if (n == 0) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < D; ++c) out[((r0 + r) * B + b) * D + c] = T(0);
    return;
  }
  scratch.fit(static_cast<size_t>(n * run));
  T* h = scratch.h.data();
  T* h_next = scratch.h_next.data();
  T* p = scratch.p.data();
  T* p_next = scratch.p_next.data();
  using Vec = typename Block<T>::Vec;
  constexpr int64_t kLanes = Block<T>::kLanes;
  // one node's kD features as one vector (training's single root set; kD > 0 only)
  typedef T Row __attribute__((vector_size((kD > 0 ? kD : 1) * sizeof(T))));
  auto load_row = [](Row& x, const T* src) { std::memcpy(&x, src, sizeof x); };  // by reference: a
  // vector wider than the build's registers returned by value changes the ABI (-Wpsabi)

  // out[c R + (0 .. kLanes)] = sum_k P[c, k] z[k] for the kD features of kLanes sets in
  // registers (kD > 0), P [kD, kD]
  auto passed_lanes = [R](const T* P, const Vec* z, T* dst) {
    Vec y[kD > 0 ? kD : 1];
    for (int64_t c = 0; c < kD; ++c) y[c] = P[c * kD] * z[0];
    for (int64_t k = 1; k < kD; ++k)
      for (int64_t c = 0; c < kD; ++c) y[c] += P[c * kD + k] * z[k];
    for (int64_t c = 0; c < kD; ++c) store_lanes(dst + c * R, y[c]);
  };

  // pv = W hv for one node's runs: W [D, D]; blocks of kBlock root sets summed in registers
  auto product = [D, R](const T* W, const T* hv, T* pv) {
    int64_t f0 = 0;
    for (; f0 + kBlock <= R; f0 += kBlock)
      for (int64_t c = 0; c < D; ++c) {
        Block<T> z = Block<T>::scaled(W[c * D], hv + f0);
        for (int64_t k = 1; k < D; ++k) z.fma(W[c * D + k], hv + k * R + f0);
        z.store(pv + c * R + f0);
      }
    for (; f0 < R; ++f0)
      for (int64_t c = 0; c < D; ++c) {
        T z = W[c * D] * hv[f0];
        for (int64_t k = 1; k < D; ++k) z += W[c * D + k] * hv[k * R + f0];
        pv[c * R + f0] = z;
      }
  };

  for (int64_t v = 0; v < n; ++v) {
    T* __restrict__ hv = h + v * run;
    for (int64_t r = 0; r < R; ++r) {  // the marks, 0 or 1, held in feature 0's run until it is written
      const int64_t* set = roots + ((r0 + r) * B + b) * K;
      bool marked = false;
      for (int64_t k = 0; k < K; ++k) marked |= set[k] == v;
      hv[r] = marked ? T(1) : T(0);
    }
    for (int64_t c = D - 1; c >= 0; --c) {
      const T s = start[(first + v) * D + c], m = marker[g * D + c];
      for (int64_t r = 0; r < R; ++r) hv[c * R + r] = cosine(s + m * hv[r]);
    }
    product(passed + g * L * D * D, hv, p + v * run);
  }

  for (int64_t l = 0; l < L; ++l) {
    poll_interrupt();
    const bool last = l + 1 == L;
    const T* W = own + (g * L + l) * D * D;
    const T* bl = bias + (g * L + l) * D;
    for (int64_t v = 0; v < n; ++v) {
      const T* __restrict__ hv = h + v * run;
      T* __restrict__ fresh = h_next + v * run;
      T* __restrict__ sums = p_next + v * run;  // the neighbour sums, then the next round's p
      aggregate_row(p, rowptr, local_col, T(1), v, run, sums);  // p[v] + sum of the neighbours' p
      const T s = scale[first + v];
      int64_t f0 = 0;
      if constexpr (kD > 0) {
        // kLanes root sets at a time with all kD features in registers: each product is kD
        // independent sums (one feature's sum at a time waited on each multiply-add before the
        // next), and the next round's p is formed before z leaves the registers
        const T* P = last ? nullptr : passed + (g * L + l + 1) * D * D;
        for (; f0 + kLanes <= R; f0 += kLanes) {
          Vec z[kD];
          for (int64_t c = 0; c < kD; ++c) z[c] = s * Block<T>::load(sums + c * R + f0) + bl[c];
          for (int64_t k = 0; k < kD; ++k) {
            const Vec hk = Block<T>::load(hv + k * R + f0);
            for (int64_t c = 0; c < kD; ++c) z[c] += W[c * kD + k] * hk;
          }
          for (int64_t c = 0; c < kD; ++c) {
            z[c] = cosine_lanes<T>(z[c]);
            store_lanes<T>(fresh + c * R + f0, z[c]);
          }
          if (!last) passed_lanes(P, z, sums + f0);
        }
        // the last R mod kLanes sets (all of them in training, where R = 1) one at a time, each
        // a vector over the kD features: the transposed weights make column k of W contiguous
        const T* Wt = own_t + (g * L + l) * D * D;
        const T* Pt = last ? nullptr : passed_t + (g * L + l + 1) * D * D;
        for (; f0 < R; ++f0) {
          T z[kD];
          if (R == 1) {
            // training's single set: the node's kD states are contiguous, one vector of kD lanes
            // (as many registers as that takes; this and the product below are written out: one
            // helper for both, through a T[kD] array, made the ten-seed training benchmark's CFI
            // case 1.7x slower)
            Row acc, w;
            load_row(acc, sums);
            load_row(w, bl);
            acc = s * acc + w;
            for (int64_t k = 0; k < kD; ++k) {
              load_row(w, Wt + k * kD);
              acc += hv[k] * w;
            }
            std::memcpy(z, &acc, sizeof z);
          } else {
            for (int64_t c = 0; c < kD; ++c) z[c] = s * sums[c * R + f0] + bl[c];
            for (int64_t k = 0; k < kD; ++k)
              for (int64_t c = 0; c < kD; ++c) z[c] += Wt[k * kD + c] * hv[k * R + f0];
          }
          for (int64_t c = 0; c < kD; ++c) z[c] = cosine(z[c]);
          for (int64_t c = 0; c < kD; ++c) fresh[c * R + f0] = z[c];
          if (last) continue;
          if (R == 1) {
            Row acc, w;
            load_row(w, Pt);
            acc = z[0] * w;
            for (int64_t k = 1; k < kD; ++k) {
              load_row(w, Pt + k * kD);
              acc += z[k] * w;
            }
            std::memcpy(sums, &acc, sizeof(T) * kD);
            continue;
          }
          T y[kD] = {};
          for (int64_t k = 0; k < kD; ++k)
            for (int64_t c = 0; c < kD; ++c) y[c] += Pt[k * kD + c] * z[k];
          for (int64_t c = 0; c < kD; ++c) sums[c * R + f0] = y[c];
        }
      } else {
        for (; f0 + kBlock <= R; f0 += kBlock)  // blocks of kBlock root sets, summed in registers
          for (int64_t c = 0; c < D; ++c) {
            Block<T> z = Block<T>::scaled(s, sums + c * R + f0);
            for (int64_t i = 0; i < Block<T>::kVecs; ++i) z.v[i] += bl[c];
            for (int64_t k = 0; k < D; ++k) z.fma(W[c * D + k], hv + k * R + f0);
            T* dst = fresh + c * R + f0;
            z.store(dst);
            for (int64_t f = 0; f < kBlock; ++f) dst[f] = cosine(dst[f]);
          }
        for (; f0 < R; ++f0)  // the last R mod kBlock sets one at a time
          for (int64_t c = 0; c < D; ++c) {
            T z = s * sums[c * R + f0] + bl[c];
            for (int64_t k = 0; k < D; ++k) z += W[c * D + k] * hv[k * R + f0];
            fresh[c * R + f0] = cosine(z);
          }
        if (!last) product(passed + (g * L + l + 1) * D * D, fresh, sums);  // over the sums, read by now
      }
    }
    std::swap(h, h_next);
    std::swap(p, p_next);
  }

  for (int64_t c = 0; c < D; ++c)
    for (int64_t r = 0; r < R; ++r) {
      T sum = 0;
      for (int64_t v = 0; v < n; ++v) sum += h[(v * D + c) * R + r];
      out[((r0 + r) * B + b) * D + c] = sum / static_cast<T>(n);
    }
}

template <class T, int64_t kD>
void rooted_pool_width(const T* start, const T* marker, const T* own, const T* passed, const T* bias,
                       const T* scale, const int64_t* roots, const int64_t* graph_hash, const int64_t* ptr,
                       const int64_t* rowptr, const int64_t* col, T* out, int64_t N, int64_t B, int64_t H,
                       int64_t D_given, int64_t L, int64_t R, int64_t K, int threads) {
  const int64_t D = kD > 0 ? kD : D_given;
  // each edge's source as an index inside its graph, so a tile addresses its own scratch
  std::vector<int64_t> local_col(static_cast<size_t>(N ? rowptr[N] : 0));
  int64_t n_max = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = ptr[b], n = ptr[b + 1] - first;
    n_max = n > n_max ? n : n_max;
    for (int64_t e = rowptr[first]; e < rowptr[first + n]; ++e) {
      if (col[e] < first || col[e] >= first + n)
        throw std::invalid_argument("rooted_pool: an edge from node " + std::to_string(col[e]) + " into graph " +
                                    std::to_string(b) + " crosses graphs; edges must stay inside their graph");
      local_col[e] = col[e] - first;
    }
  }
  // each round's weights transposed ([k, c]), for the sets taken one at a time
  std::vector<T> own_t(static_cast<size_t>(kD > 0 ? (H * L * D * D) : 0)), passed_t(own_t.size());
  for (size_t m = 0; m < own_t.size(); m += static_cast<size_t>(D * D))
    for (int64_t c = 0; c < D; ++c)
      for (int64_t k = 0; k < D; ++k) {
        own_t[m + k * D + c] = own[m + c * D + k];
        passed_t[m + k * D + c] = passed[m + c * D + k];
      }

  const int64_t tile = R ? rooted_tile_sets(R, n_max, D, sizeof(T)) : 1;
  const int64_t tiles = R ? (R + tile - 1) / tile : 0;
  const int64_t avg_degree = N ? rowptr[N] / N + 1 : 1;
  const int64_t avg_nodes = N / (B ? B : 1) + 1;
  parallel_items(
      B * tiles, threads, 1, avg_nodes * L * D * tile * (avg_degree + 2 * D + 8),
      [] { return RootedScratch<T>{}; },
      [&](RootedScratch<T>& scratch, int64_t item) {
        const int64_t b = item / tiles, r0 = (item % tiles) * tile;
        const int64_t sets = R - r0 < tile ? R - r0 : tile;
        rooted_pool_tile<T, kD>(start, marker, own, passed, bias, scale, roots, graph_hash[b], ptr[b],
                                ptr[b + 1] - ptr[b], rowptr + ptr[b], local_col.data(), own_t.data(), passed_t.data(),
                                out, scratch, b, B, D, L, r0, sets, K);
      });
}

// rooted_pool_width at the hash widths RootedRP uses (4, and 8: rpfast pairs' default),
// any other width with D read at run time.
template <class T>
void rooted_pool(const T* start, const T* marker, const T* own, const T* passed, const T* bias, const T* scale,
                 const int64_t* roots, const int64_t* graph_hash, const int64_t* ptr, const int64_t* rowptr,
                 const int64_t* col, T* out, int64_t N, int64_t B, int64_t H, int64_t D, int64_t L, int64_t R,
                 int64_t K, int threads) {
  auto run = [&](auto width) {
    rooted_pool_width<T, decltype(width)::value>(start, marker, own, passed, bias, scale, roots, graph_hash, ptr,
                                                 rowptr, col, out, N, B, H, D, L, R, K, threads);
  };
  if (D == 4) return run(std::integral_constant<int64_t, 4>{});
  if (D == 8) return run(std::integral_constant<int64_t, 8>{});
  run(std::integral_constant<int64_t, 0>{});
}

}  // namespace rpfast
