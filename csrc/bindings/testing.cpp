// rpfast._C._testing: hooks for the tests, benchmarks and diagnostics (the thread back-off's
// state, a parallel loop with a slow worker, the threads' round trip, a simulated Ctrl-C),
// kept off the production module's top level; rpfast/_testing.py is their Python facade.
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bindings/bindings.hpp"
#include "rpfast/interrupt.hpp"
#include "cpu/parallel.hpp"

namespace py = pybind11;

namespace rpfast_bindings {

void bind_testing(py::module_& m) {
  py::module_ t = m.def_submodule("_testing", "Hooks for tests, benchmarks and diagnostics (rpfast._testing)");
  t.def("serial_work", [](int64_t threshold, bool adaptive) {
        auto& state = rpfast::schedule_state();
        state.adaptive.store(adaptive);
        state.contended_until_ns.store(0);  // a fresh start: forget the lagging regions seen before
        state.lag_history.store(0);
        state.next_probe_ns.store(0);
        state.best_round_trip_ns.store(INT64_MAX);
        return threshold > 0 ? state.base.exchange(threshold) : state.base.load();
      }, py::arg("threshold"), py::arg("adaptive") = true,
        "the operation count below which kernels run on one thread "
        "(a positive threshold replaces it; returns the previous one), and whether lagging threads "
        "(late starts, too few chunks run) or a far round trip between them make them run "
        "mid-sized loops serially for a while (adaptive=False: never). Resets what the back-off "
        "has seen.");
  // Whether kernels now back off to serial loops (for the tests' records below).
  auto backing_off = [] { return rpfast::serial_work() > rpfast::schedule_state().base.load(); };
  t.def("record_region", [backing_off](bool lagging) {
        rpfast::note_region(lagging);
        return backing_off();
      }, py::arg("lagging"),
        "record a parallel region whose other threads lagged (or kept up), as "
        "parallel_for does, and return whether kernels now back off to serial loops.");
  t.def("record_round_trip", [backing_off](int64_t ns) {
        rpfast::note_round_trip(ns);
        return backing_off();
      }, py::arg("ns"),
        "record a round-trip probe of `ns` nanoseconds, as parallel_for does, and "
        "return whether kernels now back off to serial loops.");
  t.def("item_threads", [](int64_t n, int threads, int64_t worker_delay_us) {
        if (n < 0 || threads < 1 || worker_delay_us < 0)
          throw std::invalid_argument("item_threads: n and worker_delay_us must be >= 0 and threads >= 1");
        std::vector<int> owner(static_cast<size_t>(n), -1);
        {
          py::gil_scoped_release release;
          rpfast::parallel_for(n, threads, int64_t{1} << 40, [&](int64_t i) {
            owner[i] = omp_get_thread_num();
            if (owner[i] != 0) std::this_thread::sleep_for(std::chrono::microseconds(worker_delay_us));
          });
        }
        py::list result;
        for (int t : owner) result.append(t);
        return result;
      }, py::arg("n"), py::arg("threads"), py::arg("worker_delay_us"),
        "run a parallel loop of n items on `threads` threads in which every item "
        "a worker thread (not the calling one) runs takes worker_delay_us longer, and return "
        "the OpenMP thread number that ran each item.");
  t.def("thread_round_trip_ns", [] {
        py::gil_scoped_release release;
        return rpfast::thread_round_trip_ns(10'000'000);
      },
        "the median time of a cache-line round trip between two OpenMP threads, in ns, "
        "as parallel_for's placement probe measures it (round_trip.hpp), or -1 if the second thread "
        "did not run within 10 ms.");
  t.def("set_interrupt_countdown", [](int64_t polls) { rpfast::interrupt_countdown().store(polls); },
        py::arg("polls"),
        "raise the interrupt flag after `polls` further polls (<= 0: never), as a Ctrl-C would.");
}

}  // namespace rpfast_bindings
