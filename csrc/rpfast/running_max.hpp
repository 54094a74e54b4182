// One step of a running maximum with its tie count, device-neutral: the CPU's max pools
// (pool.hpp, on whole vectors of channels) and the CUDA segment max (csrc/cuda/segment.cu, one
// channel per thread) meet values in the same way, so they agree on values, ties and NaN.
#pragma once

#include "rpfast/device.hpp"

namespace rpfast {

// (best, count) after meeting v. Written with selects, so on whole vectors (GCC vector
// extensions) it runs branch-free on a block of channels; V may also be a scalar.
template <class V>
RPFAST_HD inline void meet(V v, V& best, V& count, V one) {
  const auto greater = (v > best) | (v != v);  // v != v: a NaN wins and stays
  const auto equal = v == best;
  best = greater ? v : best;
  count = greater ? one : (equal ? count + one : count);
}

// The tie count to report for a finished maximum: how many entries equal it, so none for a
// NaN maximum (NaN equals nothing; no gradient flows through it), as torch's x == out counts.
template <class V>
RPFAST_HD inline V ties_of(V best, V count) {
  return best == best ? count : V{};
}

}  // namespace rpfast
