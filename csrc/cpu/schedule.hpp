// The thread schedule: when a loop runs on the calling thread, and the adaptive back-off that
// decides it on a shared machine. parallel_for and parallel_items apply it (runs_serially); no
// kernel reads it. The constants live in one struct, Schedule; the measurements behind them are
// in benchmarks/README.md ("Shared machines"), not here.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cpu/round_trip.hpp"

namespace rpfast {

// When to split a loop over threads. A parallel region costs a wake-up and a join of the team
// (tens of microseconds on a virtual machine, whose vCPU wake-ups are hypervisor exits), so
// loops below kBaseSerialWork operations run on the calling thread. Two things make the other
// threads lag, and parallel_for watches for both:
//   - Another process holds a core: a woken thread waits for that core's time slice
//     (milliseconds) and the join waits for it; a 50 us region then takes 3 ms. Seen as a thread
//     that starts more than kLateStartNs after the region began.
//   - The host places the vCPUs far apart: every line one thread wrote and another reads then
//     crosses that distance, and on small loops the other threads run at a fraction of the
//     calling thread's speed. Seen two ways: the other threads run at most a quarter of their
//     fair share of the chunks (parallel_for deals chunks out in turn), and, where they keep up
//     but every shared line is slow (wider layers), the round trip between threads 0 and 1
//     (round_trip.hpp), timed in one region every kProbeIntervalNs, is more than
//     kFarApartFactor times the shortest this process has seen and over kFarApartMinNs.
// When kLaggingToBackOff of the last kLagHistory regions lagged, or a round trip was far, loops
// below kContendedSerialWork run serially for kContendedBackoffNs before trying again: fast on
// an idle machine, graceful on a shared one. The round trip is compared with the process's own
// best so that machines whose threads are always that far apart (two sockets) keep their
// threads. One lagging region is not evidence: a virtual machine's vCPU is descheduled now and
// then, and backing off on each of those would run mid-sized kernels serially much of the
// time. Beside a busy process most regions lag, so the back-off still begins within a few
// regions. This is the "adaptive" thread policy (RPFAST_THREADS_POLICY, the README); "fixed"
// turns it off (ScheduleState::adaptive). The measurements behind these constants are in
// benchmarks/README.md ("Shared machines").
struct Schedule {
  static constexpr int64_t kBaseSerialWork = int64_t{1} << 18;
  static constexpr int64_t kContendedSerialWork = int64_t{1} << 24;
  static constexpr int64_t kContendedBackoffNs = 250'000'000;
  static constexpr int64_t kLateStartNs = 1'000'000;
  static constexpr int kLagHistory = 16;  // regions remembered (bits of ScheduleState::lag_history)
  static constexpr int kLaggingToBackOff = 2;
  static constexpr int64_t kProbeIntervalNs = 250'000'000;
  static constexpr int kProbeBatches = 8;  // of kRoundTripsPerBatch round trips (round_trip.hpp)
  static constexpr int64_t kProbeDeadlineNs = 200'000;  // a thread not running by then is a late start anyway
  static constexpr int64_t kFarApartFactor = 3;
  static constexpr int64_t kFarApartMinNs = 200;  // below this, threads are near (hyperthreads to one CCX)
  static constexpr int64_t kLongItem = int64_t{1} << 40;  // a cost that always shares two items or more
};


struct ScheduleState {
  std::atomic<int64_t> base{Schedule::kBaseSerialWork};
  std::atomic<bool> adaptive{true};            // false: base alone decides (tests, benchmarks)
  std::atomic<int64_t> contended_until_ns{0};  // steady-clock time; 0: no back-off yet
  std::atomic<uint32_t> lag_history{0};        // bit i: whether the i-th latest region lagged
  std::atomic<int64_t> next_probe_ns{0};       // steady-clock time of the next round-trip probe
  std::atomic<int64_t> best_round_trip_ns{INT64_MAX};
};

inline ScheduleState& schedule_state() {
  static ScheduleState state;
  return state;
}

// The operation count below which a loop runs on the calling thread now.
inline int64_t serial_work() {
  ScheduleState& state = schedule_state();
  const int64_t base = state.base.load(std::memory_order_relaxed);
  if (!state.adaptive.load(std::memory_order_relaxed)) return base;
  const int64_t until = state.contended_until_ns.load(std::memory_order_relaxed);
  if (until != 0 && steady_ns() < until) return base > Schedule::kContendedSerialWork ? base : Schedule::kContendedSerialWork;
  return base;
}

// Records whether a parallel region's other threads lagged, and starts the back-off when
// enough of the recent regions did. (Concurrent regions may drop each other's record: the
// history is a hint, not a count.)
inline void note_region(bool lagging) {
  ScheduleState& state = schedule_state();
  constexpr uint32_t kMask = (uint32_t{1} << Schedule::kLagHistory) - 1;
  const uint32_t history = ((state.lag_history.load(std::memory_order_relaxed) << 1) | (lagging ? 1u : 0u)) & kMask;
  state.lag_history.store(history, std::memory_order_relaxed);
  if (lagging && __builtin_popcount(history) >= Schedule::kLaggingToBackOff)
    state.contended_until_ns.store(steady_ns() + Schedule::kContendedBackoffNs, std::memory_order_relaxed);
}

// Whether this parallel region should time a round trip (one region per Schedule::kProbeIntervalNs).
inline bool claim_probe(int64_t now) {
  ScheduleState& state = schedule_state();
  if (!state.adaptive.load(std::memory_order_relaxed)) return false;
  int64_t due = state.next_probe_ns.load(std::memory_order_relaxed);
  return now >= due && state.next_probe_ns.compare_exchange_strong(due, now + Schedule::kProbeIntervalNs,
                                                                   std::memory_order_relaxed);
}

// Records a probe's median round trip; one more than Schedule::kFarApartFactor times the process's best,
// and more than Schedule::kFarApartMinNs (a move between hyperthreads and cores of one die is not far),
// starts the back-off.
inline void note_round_trip(int64_t ns) {
  ScheduleState& state = schedule_state();
  int64_t best = state.best_round_trip_ns.load(std::memory_order_relaxed);
  while (ns < best && !state.best_round_trip_ns.compare_exchange_weak(best, ns, std::memory_order_relaxed)) {
  }
  if (ns > Schedule::kFarApartMinNs && ns > Schedule::kFarApartFactor * std::min(best, ns))
    state.contended_until_ns.store(steady_ns() + Schedule::kContendedBackoffNs, std::memory_order_relaxed);
}

// Whether a loop of n items of cost_per_item operations runs on the calling thread now: one
// thread or item, or fewer than serial_work() operations (without overflowing n * cost).
inline bool runs_serially(int64_t n, int threads, int64_t cost_per_item) {
  if (threads <= 1 || n <= 1) return true;
  if (cost_per_item <= 0) return true;
  return n <= (serial_work() - 1) / cost_per_item;
}

}  // namespace rpfast
