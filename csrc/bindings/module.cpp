#include <omp.h>

#include "bindings/bindings.hpp"
#include "rpfast/interrupt.hpp"
#include "rpfast/parallel.hpp"

namespace py = pybind11;

// The same sources build rpfast._C (baseline instruction set) and, on x86-64, rpfast._C_avx2
// (x86-64-v3: AVX2 + FMA); rpfast/ops/_backend.py imports the one the CPU runs best.
#ifndef RPFAST_MODULE_NAME
#define RPFAST_MODULE_NAME _C
#endif
#ifndef RPFAST_SIMD
#define RPFAST_SIMD "baseline"
#endif

PYBIND11_MODULE(RPFAST_MODULE_NAME, m) {
  m.doc() = "rpfast compiled kernels (C++17, OpenMP); see the rpfast.ops wrappers";
  m.def("build_info", [] {
    py::dict info;
    info["compiler"] = RPFAST_COMPILER;
    info["cxx_flags"] = RPFAST_CXX_FLAGS;
    info["openmp"] = RPFAST_OPENMP;
    info["omp_max_threads"] = omp_get_max_threads();
    info["cuda"] = false;
    info["simd"] = RPFAST_SIMD;
    return info;
  });
  m.def("_serial_work", [](int64_t threshold, bool adaptive) {
        auto& state = rpfast::serial_work_state();
        state.adaptive.store(adaptive);
        state.contended_until_ns.store(0);  // a fresh start: forget the late starts seen before
        state.late_history.store(0);
        return threshold > 0 ? state.base.exchange(threshold) : state.base.load();
      }, py::arg("threshold"), py::arg("adaptive") = true,
        "Tests and benchmarks only: the operation count below which kernels run on one thread "
        "(a positive threshold replaces it; returns the previous one), and whether a late-starting "
        "thread makes them run mid-sized loops serially for a while (adaptive=False: never).");
  m.def("_record_region", [](bool late) {
        rpfast::note_region(late);
        return rpfast::serial_work() > rpfast::serial_work_state().base.load();
      }, py::arg("late"),
        "Tests only: record a parallel region that started late (or on time), as parallel_for "
        "does, and return whether kernels now back off to serial loops.");
  m.def("_set_interrupt_countdown", [](int64_t polls) { rpfast::interrupt_countdown().store(polls); },
        py::arg("polls"),
        "Testing only: raise the interrupt flag after `polls` further polls (<= 0: never), as a Ctrl-C would.");
  rpfast_bindings::bind_permute(m);
  rpfast_bindings::bind_dense(m);
  rpfast_bindings::bind_csr(m);
  rpfast_bindings::bind_pool(m);
  rpfast_bindings::bind_random(m);
  rpfast_bindings::bind_gin(m);
  rpfast_bindings::bind_gin_network(m);
  rpfast_bindings::bind_norm(m);
  rpfast_bindings::bind_segment(m);
  rpfast_bindings::bind_subsets(m);
  rpfast_bindings::bind_orient(m);
}
