// Thread-pool-free parallel loops over independent work items (OpenMP).
#pragma once
#include <cstdint>

#include <omp.h>

namespace rpfast {

// Calls body(i) for every i in [0, n) using up to `threads` threads. Work items must be
// independent; the result never depends on the thread count because each item writes
// only its own output. Small loops (n * cost_per_item below ~256k operations) run
// serially: waking sleeping threads (tens of microseconds) costs more than the work.
template <class Body>
void parallel_for(int64_t n, int threads, int64_t cost_per_item, Body&& body) {
  const bool serial = threads <= 1 || n <= 1 || n * cost_per_item < (int64_t{1} << 18);
  if (serial) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace rpfast
