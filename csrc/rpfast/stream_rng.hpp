// Counter-based random numbers, device-neutral: the same streams, and so the same
// permutations for a seed, on the CPU (random.hpp's loops) and on a CUDA device
// (csrc/cuda/random.cu, one row per thread).
//
// Every (graph, sample) row gets its own stream derived from (seed, row index) by a
// SplitMix64 hash, so the output depends only on the seed, never on the thread count or on
// the order in which rows are processed.
#pragma once
#include <cstdint>

#include "rpfast/device.hpp"

namespace rpfast {

RPFAST_HD inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// SplitMix64 generator (passes BigCrush) started at a per-stream state.
class StreamRng {
 public:
  RPFAST_HD StreamRng(uint64_t seed, uint64_t stream)
      : state_(splitmix64_mix(seed ^ splitmix64_mix(stream + 0x632BE59BD9B4E019ULL))) {}

  RPFAST_HD uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return splitmix64_mix(state_);
  }

  // Unbiased integer in [0, range), range >= 1 (Lemire's multiply-and-reject method on the
  // 128-bit product x * range: its low half decides rejection, its high half is the result).
  RPFAST_HD uint64_t below(uint64_t range) {
    uint64_t x = next();
    uint64_t low = x * range;
    if (low < range) {
      const uint64_t threshold = (0 - range) % range;
      while (low < threshold) {
        x = next();
        low = x * range;
      }
    }
    return mul_high(x, range);
  }

 private:
  uint64_t state_;
};

// The first `take` entries of a uniformly random permutation of 0..n-1 into dst, by partial
// Fisher-Yates over pool[0..n), which must hold 0..n-1 on entry (it is left shuffled).
RPFAST_HD inline void shuffle_prefix(StreamRng& rng, int64_t n, int64_t take, int64_t* pool, int64_t* dst) {
  for (int64_t i = 0; i < take; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - i)));
    const int64_t picked = pool[j];
    pool[j] = pool[i];
    dst[i] = picked;
  }
}

}  // namespace rpfast
