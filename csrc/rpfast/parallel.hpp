// Parallel loops over independent work items (OpenMP) that never let an exception escape.
//
// An exception thrown inside an OpenMP region is std::terminate, so every region here
// runs its items through FirstError: the first exception (bad_alloc, Interrupted, a
// failed check) is kept, the remaining items are skipped, and it is rethrown after the
// region on the calling thread, where pybind11 turns it into a Python exception.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>

#include <omp.h>

#include "rpfast/interrupt.hpp"
#include "rpfast/round_trip.hpp"

namespace rpfast {

class FirstError {
 public:
  // Runs f() unless an earlier item failed; records the exception if f throws.
  template <class F>
  void run(F&& f) noexcept {
    if (failed()) return;
    try {
      f();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr error_;
};

// body(i) for i in [begin, end). Never inlined: the serial path and every thread of the
// parallel path run this one compiled copy of the loop, so the body's floating-point code
// (FMA contraction, vectorised reductions) and hence its results cannot depend on the
// thread count.
template <class Body>
__attribute__((noinline)) void run_range(Body& body, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) body(i);
}

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
// turns it off (SerialWorkState::adaptive). The measurements behind these constants are in
// benchmarks/README.md ("Shared machines").
constexpr int64_t kBaseSerialWork = int64_t{1} << 18;
constexpr int64_t kContendedSerialWork = int64_t{1} << 24;
constexpr int64_t kContendedBackoffNs = 250'000'000;
constexpr int64_t kLateStartNs = 1'000'000;
constexpr int kLagHistory = 16;  // regions remembered (bits of SerialWorkState::lag_history)
constexpr int kLaggingToBackOff = 2;
constexpr int64_t kProbeIntervalNs = 250'000'000;
constexpr int kProbeBatches = 8;  // of kRoundTripsPerBatch round trips (round_trip.hpp)
constexpr int64_t kProbeDeadlineNs = 200'000;  // a thread not running by then is a late start anyway
constexpr int64_t kFarApartFactor = 3;
constexpr int64_t kFarApartMinNs = 200;  // below this, threads are near (hyperthreads to one CCX)

struct SerialWorkState {
  std::atomic<int64_t> base{kBaseSerialWork};
  std::atomic<bool> adaptive{true};            // false: base alone decides (tests, benchmarks)
  std::atomic<int64_t> contended_until_ns{0};  // steady-clock time; 0: no back-off yet
  std::atomic<uint32_t> lag_history{0};        // bit i: whether the i-th latest region lagged
  std::atomic<int64_t> next_probe_ns{0};       // steady-clock time of the next round-trip probe
  std::atomic<int64_t> best_round_trip_ns{INT64_MAX};
};

inline SerialWorkState& serial_work_state() {
  static SerialWorkState state;
  return state;
}

// The operation count below which a loop runs on the calling thread now.
inline int64_t serial_work() {
  SerialWorkState& state = serial_work_state();
  const int64_t base = state.base.load(std::memory_order_relaxed);
  if (!state.adaptive.load(std::memory_order_relaxed)) return base;
  const int64_t until = state.contended_until_ns.load(std::memory_order_relaxed);
  if (until != 0 && steady_ns() < until) return base > kContendedSerialWork ? base : kContendedSerialWork;
  return base;
}

// Records whether a parallel region's other threads lagged, and starts the back-off when
// enough of the recent regions did. (Concurrent regions may drop each other's record: the
// history is a hint, not a count.)
inline void note_region(bool lagging) {
  SerialWorkState& state = serial_work_state();
  constexpr uint32_t kMask = (uint32_t{1} << kLagHistory) - 1;
  const uint32_t history = ((state.lag_history.load(std::memory_order_relaxed) << 1) | (lagging ? 1u : 0u)) & kMask;
  state.lag_history.store(history, std::memory_order_relaxed);
  if (lagging && __builtin_popcount(history) >= kLaggingToBackOff)
    state.contended_until_ns.store(steady_ns() + kContendedBackoffNs, std::memory_order_relaxed);
}

// Whether this parallel region should time a round trip (one region per kProbeIntervalNs).
inline bool claim_probe(int64_t now) {
  SerialWorkState& state = serial_work_state();
  if (!state.adaptive.load(std::memory_order_relaxed)) return false;
  int64_t due = state.next_probe_ns.load(std::memory_order_relaxed);
  return now >= due && state.next_probe_ns.compare_exchange_strong(due, now + kProbeIntervalNs,
                                                                   std::memory_order_relaxed);
}

// Records a probe's median round trip; one more than kFarApartFactor times the process's best,
// and more than kFarApartMinNs (a move between hyperthreads and cores of one die is not far),
// starts the back-off.
inline void note_round_trip(int64_t ns) {
  SerialWorkState& state = serial_work_state();
  int64_t best = state.best_round_trip_ns.load(std::memory_order_relaxed);
  while (ns < best && !state.best_round_trip_ns.compare_exchange_weak(best, ns, std::memory_order_relaxed)) {
  }
  if (ns > kFarApartMinNs && ns > kFarApartFactor * std::min(best, ns))
    state.contended_until_ns.store(steady_ns() + kContendedBackoffNs, std::memory_order_relaxed);
}

// Calls body(i) for every i in [0, n) using up to `threads` threads. Work items must be
// independent; the result never depends on the thread count because each item writes
// only its own output. Loops of fewer than serial_work() operations (n * cost_per_item)
// run serially.
//
// The items are cut into kChunksPerThread contiguous chunks per thread, which the threads take
// in turn from a shared counter: a thread that runs slowly gets fewer of them instead of
// holding the region up for a static share, and the count it got tells whether it lagged.
constexpr int64_t kChunksPerThread = 4;

template <class Body>
void parallel_for(int64_t n, int threads, int64_t cost_per_item, Body&& body) {
  const bool serial = threads <= 1 || n <= 1 || n * cost_per_item < serial_work();
  if (serial) {
    run_range(body, 0, n);
    return;
  }
  FirstError errors;
  const int64_t team = threads < n ? threads : n;
  const int64_t chunks = team * kChunksPerThread < n ? team * kChunksPerThread : n;
  const int64_t start = steady_ns();
  std::atomic<bool> late{false};
  std::atomic<int64_t> next_chunk{0}, other_chunks{0}, ball{0}, round_trip{-1};
  std::atomic<int> team_size{1};  // what OpenMP gave (one thread in a nested region)
  const bool probe = claim_probe(start);
#pragma omp parallel num_threads(team)
  {
    const int me = omp_get_thread_num(), size = omp_get_num_threads();
    const bool other = me != 0;
    if (me == 0) team_size.store(size, std::memory_order_relaxed);
    if (other && steady_ns() - start > kLateStartNs) late.store(true, std::memory_order_relaxed);
    if (probe && size >= 2) {
      const int64_t ns = median_round_trip_ns(ball, me, kProbeBatches, start + kProbeDeadlineNs);
      if (me == 0) round_trip.store(ns, std::memory_order_relaxed);
    }
    errors.run([&] {
      int64_t ran = 0;
      for (int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed); c < chunks && !errors.failed();
           c = next_chunk.fetch_add(1, std::memory_order_relaxed), ++ran)
        run_range(body, n * c / chunks, n * (c + 1) / chunks);
      if (other) other_chunks.fetch_add(ran, std::memory_order_relaxed);
    });
  }
  const int64_t size = team_size.load(std::memory_order_relaxed);
  const int64_t fair_share = chunks * (size - 1) / size;  // the other threads' chunks, evenly dealt
  note_region(late.load(std::memory_order_relaxed) ||
              (size > 1 && 4 * other_chunks.load(std::memory_order_relaxed) <= fair_share));
  if (round_trip.load(std::memory_order_relaxed) > 0) note_round_trip(round_trip.load(std::memory_order_relaxed));
  errors.rethrow();
}

// The median round trip between the two threads of a fresh team (round_trip.hpp), in ns, or -1
// when the second thread did not run within timeout_ns or there is none (nested in a region):
// diagnostics, rpfast._testing.thread_round_trip_ns.
inline int64_t thread_round_trip_ns(int64_t timeout_ns) {
  std::atomic<int64_t> ball{0}, median{-1};
  const int64_t deadline = steady_ns() + timeout_ns;
#pragma omp parallel num_threads(2)
  {
    const int me = omp_get_thread_num();
    if (omp_get_num_threads() == 2) {
      const int64_t ns = median_round_trip_ns(ball, me, kMaxRoundTripBatches, deadline);
      if (me == 0) median.store(ns, std::memory_order_relaxed);
    }
  }
  return median.load(std::memory_order_relaxed);
}

// Like parallel_for for long, uneven items that need per-thread scratch state: each
// thread builds its state once with make_state() (which may allocate and throw), items are
// dealt out dynamically in `grain`-sized runs, and Ctrl-C is polled before every item.
// body(state, i) must write only item i's output.
template <class MakeState, class Body>
void parallel_items(int64_t n, int threads, int64_t grain, MakeState&& make_state, Body&& body) {
  FirstError errors;
  const int team = n > 1 && threads > 1 ? threads : 1;
#pragma omp parallel num_threads(team)
  {
    std::optional<decltype(make_state())> state;
    errors.run([&] { state.emplace(make_state()); });
#pragma omp for schedule(dynamic, grain)
    for (int64_t i = 0; i < n; ++i)
      errors.run([&] {
        poll_interrupt();
        body(*state, i);
      });
  }
  errors.rethrow();
}

}  // namespace rpfast
