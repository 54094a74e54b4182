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

#include "cpu/round_trip.hpp"
#include "cpu/schedule.hpp"

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
  if (runs_serially(n, threads, cost_per_item)) {
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
    if (other && steady_ns() - start > Schedule::kLateStartNs) late.store(true, std::memory_order_relaxed);
    if (probe && size >= 2) {
      const int64_t ns = median_round_trip_ns(ball, me, Schedule::kProbeBatches, start + Schedule::kProbeDeadlineNs);
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
// thread builds its state once with make_state() (which may allocate and throw), and items are
// dealt out dynamically in `grain`-sized runs. body(state, i) must write only item i's output; a
// body that should stop at Ctrl-C polls for it (rpfast/interrupt.hpp: its Interrupted ends the
// loop like any other exception). The loop itself knows nothing of interrupts. The schedule decides as for parallel_for
// whether the n * cost_per_item operations share the threads (Schedule::kLongItem: items long
// enough that two already do).
template <class MakeState, class Body>
void parallel_items(int64_t n, int threads, int64_t grain, int64_t cost_per_item, MakeState&& make_state,
                    Body&& body) {
  FirstError errors;
  const int team = runs_serially(n, threads, cost_per_item) ? 1 : threads;
#pragma omp parallel num_threads(team)
  {
    std::optional<decltype(make_state())> state;
    errors.run([&] { state.emplace(make_state()); });
#pragma omp for schedule(dynamic, grain)
    for (int64_t i = 0; i < n; ++i)
      errors.run([&] { body(*state, i); });
  }
  errors.rethrow();
}

}  // namespace rpfast
