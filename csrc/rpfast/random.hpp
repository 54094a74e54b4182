// Uniform random (partial) permutations on the CPU, from the device-neutral streams of
// stream_rng.hpp (the CUDA kernels draw the same rows for a seed).
#pragma once
#include <cstdint>
#include <vector>

#include "cpu/parallel.hpp"
#include "rpfast/interrupt.hpp"
#include "rpfast/stream_rng.hpp"

namespace rpfast {

// The positions of a virtual array a[v] = v (v < n) that a partial Fisher-Yates shuffle
// has overwritten, in O(touched) memory: an open-addressing table that is cleared in
// O(touched) between rows. Used when k is much smaller than n.
class SparseSwaps {
 public:
  // Prepares for a row that overwrites at most `entries` positions.
  void reset(int64_t entries) {
    size_t capacity = 16;
    while (capacity < 2 * static_cast<size_t>(entries) + 2) capacity <<= 1;
    if (keys_.size() < capacity) {
      keys_.assign(capacity, -1);
      values_.resize(capacity);
      used_.clear();
    } else {
      for (size_t slot : used_) keys_[slot] = -1;
      used_.clear();
    }
    mask_ = keys_.size() - 1;
  }
  int64_t get(int64_t v) const {
    for (size_t slot = hash(v);; slot = (slot + 1) & mask_) {
      if (keys_[slot] == v) return values_[slot];
      if (keys_[slot] == -1) return v;
    }
  }
  void set(int64_t v, int64_t value) {
    size_t slot = hash(v);
    while (keys_[slot] != v && keys_[slot] != -1) slot = (slot + 1) & mask_;
    if (keys_[slot] == -1) {
      keys_[slot] = v;
      used_.push_back(slot);
    }
    values_[slot] = value;
  }

 private:
  size_t hash(int64_t v) const { return static_cast<size_t>((static_cast<uint64_t>(v) * 0x9E3779B97F4A7C15ULL) >> 17) & mask_; }
  std::vector<int64_t> keys_, values_;
  std::vector<size_t> used_;
  size_t mask_ = 0;
};

// Draws row `row` (its own stream) into dst[0..K): the first min(K, n) entries of a
// uniformly random permutation of 0..n-1 by partial Fisher-Yates, then -1 padding.
// `pool` is a dense scratch array of >= n entries, or nullptr to use `sparse` (O(K)
// memory); both give identical rows.
inline void random_permutation_row(uint64_t seed, int64_t row, int64_t n, int64_t K, int64_t* pool,
                                   SparseSwaps& sparse, int64_t* dst) {
  const int64_t take = n < K ? n : K;
  StreamRng rng(seed, static_cast<uint64_t>(row));
  if (pool) {
    for (int64_t v = 0; v < n; ++v) pool[v] = v;
    shuffle_prefix(rng, n, take, pool, dst);
  } else {
    sparse.reset(take);
    for (int64_t i = 0; i < take; ++i) {
      const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - i)));
      const int64_t picked = sparse.get(j);
      sparse.set(j, sparse.get(i));  // position i is never read again
      dst[i] = picked;
    }
  }
  for (int64_t i = take; i < K; ++i) dst[i] = -1;
}

// out[b, p, :] = the first K entries of a uniformly random permutation of 0..n_b-1
// (partial Fisher-Yates), padded with -1 beyond min(K, n_b). num_nodes must be >= 0.
// Scratch memory per thread is O(n_max) when K is a sizeable part of n_max, else O(K).
inline void random_permutations(const int64_t* num_nodes, int64_t B, int64_t P, int64_t K,
                                uint64_t seed, int64_t* out, int threads) {
  int64_t n_max = 0;
  for (int64_t b = 0; b < B; ++b) n_max = num_nodes[b] > n_max ? num_nodes[b] : n_max;
  const bool dense = n_max <= 4 * K + 1024;
  const int64_t rows = B * P;
  const int64_t cost = dense ? n_max + K : 4 * K + 1;
  struct Scratch {
    std::vector<int64_t> pool;
    SparseSwaps sparse;
  };
  parallel_items(
      rows, threads, 64, cost,
      [&] {
        Scratch s;
        if (dense) s.pool.resize(static_cast<size_t>(n_max));
        return s;
      },
      [&](Scratch& s, int64_t row) {
        poll_interrupt();
        random_permutation_row(seed, row, num_nodes[row / P], K, dense ? s.pool.data() : nullptr, s.sparse,
                               out + row * K);
      });
}

// out[p, ptr[b] + i] = perm_{b,p}[i] mod modulus for the nodes i of every graph b, where
// perm_{b,p} is row b * P + p of random_permutations (same seed, same streams): every node's
// position under a uniform relabeling of its graph, mod m, i.e. RP-GIN's one-hot IDs
// (Murphy et al. eq. 3), written as [P, N] without the [B, P, n_max] intermediate.
inline void random_positions(const int64_t* ptr, int64_t B, int64_t P, int64_t modulus, uint64_t seed,
                             int64_t* out, int threads) {
  const int64_t N = ptr[B];
  int64_t n_max = 0;
  for (int64_t b = 0; b < B; ++b) n_max = ptr[b + 1] - ptr[b] > n_max ? ptr[b + 1] - ptr[b] : n_max;
  const int64_t rows = B * P;
  struct Scratch {
    std::vector<int64_t> pool, row;
    SparseSwaps sparse;
  };
  parallel_items(
      rows, threads, 64, 2 * n_max + 1,
      [&] {
        Scratch s;
        s.pool.resize(static_cast<size_t>(n_max));
        s.row.resize(static_cast<size_t>(n_max));
        return s;
      },
      [&](Scratch& s, int64_t r) {
        poll_interrupt();
        const int64_t b = r / P, p = r % P, n = ptr[b + 1] - ptr[b];
        random_permutation_row(seed, r, n, n, s.pool.data(), s.sparse, s.row.data());
        int64_t* dst = out + p * N + ptr[b];
        for (int64_t i = 0; i < n; ++i) dst[i] = s.row[i] % modulus;
      });
}

}  // namespace rpfast
