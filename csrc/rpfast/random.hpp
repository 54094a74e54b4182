// Counter-based random numbers and uniform random (partial) permutations.
//
// Every (graph, sample) row gets its own stream derived from (seed, row index) by a
// SplitMix64 hash, so the output depends only on the seed, never on the thread count
// or on the order in which rows are processed.
#pragma once
#include <cstdint>
#include <vector>

#include <omp.h>

namespace rpfast {

inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// SplitMix64 generator (passes BigCrush) started at a per-stream state.
class StreamRng {
 public:
  StreamRng(uint64_t seed, uint64_t stream)
      : state_(splitmix64_mix(seed ^ splitmix64_mix(stream + 0x632BE59BD9B4E019ULL))) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return splitmix64_mix(state_);
  }

  // Unbiased integer in [0, range), range >= 1 (Lemire's multiply-and-reject method).
  uint64_t below(uint64_t range) {
    __uint128_t m = static_cast<__uint128_t>(next()) * range;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < range) {
      const uint64_t threshold = (0 - range) % range;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next()) * range;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

// out[b, p, :] = the first K entries of a uniformly random permutation of 0..n_b-1
// (partial Fisher-Yates), padded with -1 beyond min(K, n_b). num_nodes must be >= 0.
inline void random_permutations(const int64_t* num_nodes, int64_t B, int64_t P, int64_t K,
                                uint64_t seed, int64_t* out, int threads) {
  int64_t n_max = 0;
  for (int64_t b = 0; b < B; ++b) n_max = num_nodes[b] > n_max ? num_nodes[b] : n_max;
  const int64_t rows = B * P;
  const bool serial = threads <= 1 || rows * (n_max + K) < (int64_t{1} << 18);
#pragma omp parallel num_threads(serial ? 1 : threads)
  {
    std::vector<int64_t> pool(static_cast<size_t>(n_max));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t n = num_nodes[row / P];
      const int64_t take = n < K ? n : K;
      int64_t* dst = out + row * K;
      for (int64_t v = 0; v < n; ++v) pool[v] = v;
      StreamRng rng(seed, static_cast<uint64_t>(row));
      for (int64_t i = 0; i < take; ++i) {
        const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - i)));
        const int64_t picked = pool[j];
        pool[j] = pool[i];
        pool[i] = picked;
        dst[i] = picked;
      }
      for (int64_t i = take; i < K; ++i) dst[i] = -1;
    }
  }
}

}  // namespace rpfast
