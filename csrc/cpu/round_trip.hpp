// How far apart two threads run: the time a cache line takes to travel from one to the other
// and back, measured by handing a counter back and forth.
//
// On a virtual machine the host decides where the vCPUs run, and can change it at any time: a
// round trip can grow several-fold for seconds to minutes when the host places the vCPUs far
// apart (measurements: benchmarks/README.md, "Shared machines"). In those windows every line
// that one kernel thread writes and another reads crosses that distance, and small and
// mid-sized loops run faster on one thread (parallel.hpp).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace rpfast {

inline int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int kMaxRoundTripBatches = 16;
constexpr int kRoundTripsPerBatch = 8;  // one clock reading per batch: a reading costs about a round trip

// Called by every thread of a team with its thread number `me`, and `ball` zeroed before the
// team started: threads 0 and 1 hand `ball` back and forth `batches` (at most
// kMaxRoundTripBatches) times kRoundTripsPerBatch times. Thread 0 returns the median over the
// batches of the time per round trip in ns, timed on its side; every other thread returns -1,
// and so does thread 0 when thread 1 has not answered by `deadline_ns` (steady clock: it was
// not running), in which case thread 1 returns at once when it arrives.
inline int64_t median_round_trip_ns(std::atomic<int64_t>& ball, int me, int batches, int64_t deadline_ns) {
  constexpr int64_t kAbandoned = -1;
  batches = std::min(batches, kMaxRoundTripBatches);
  const int64_t trips = int64_t{batches} * kRoundTripsPerBatch;
  if (me == 1) {
    for (int64_t i = 0; i < trips; ++i) {
      int64_t seen;
      while ((seen = ball.load(std::memory_order_acquire)) != 2 * i + 1)
        if (seen == kAbandoned) return -1;
      if (!ball.compare_exchange_strong(seen, 2 * i + 2, std::memory_order_acq_rel)) return -1;  // abandoned meanwhile
    }
    return -1;
  }
  if (me != 0 || batches < 1) return -1;
  int64_t per_trip[kMaxRoundTripBatches];
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t start = steady_ns();
    for (int64_t i = b * kRoundTripsPerBatch; i < (b + 1) * kRoundTripsPerBatch; ++i) {
      ball.store(2 * i + 1, std::memory_order_release);
      for (int64_t spins = 1; ball.load(std::memory_order_acquire) != 2 * i + 2; ++spins) {
        if (spins % 64 == 0 && steady_ns() > deadline_ns) {
          int64_t expected = 2 * i + 1;
          if (ball.compare_exchange_strong(expected, kAbandoned, std::memory_order_acq_rel)) return -1;
        }
      }
    }
    per_trip[b] = (steady_ns() - start) / kRoundTripsPerBatch;
  }
  std::nth_element(per_trip, per_trip + batches / 2, per_trip + batches);
  return per_trip[batches / 2];
}

}  // namespace rpfast
