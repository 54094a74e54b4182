// What every CPU kernel module binds about itself: build_info() and the thread-policy setter.
// Each module (rpfast._C, _C_avx2, _C_avx512) compiles this file with its own RPFAST_SIMD and
// keeps its own thread-policy state, which rpfast/_backend.py sets on every module it loaded.
#include <omp.h>

#include "bindings/bindings.hpp"
#include "cpu/parallel.hpp"

#ifndef RPFAST_SIMD
#define RPFAST_SIMD "baseline"
#endif

namespace py = pybind11;

namespace rpfast_bindings {

void bind_module_info(py::module_& m) {
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
  m.def("set_adaptive_threads", [](bool adaptive) { rpfast::schedule_state().adaptive.store(adaptive); },
        py::arg("adaptive"),
        "Whether this module's kernels back off to one thread for a while when their other threads lag "
        "or run far apart (the 'adaptive' thread policy, default), or always use their threads ('fixed').");
  m.def("adaptive_threads", [] { return rpfast::schedule_state().adaptive.load(); },
        "Whether the adaptive thread policy is on for this module's kernels.");
}

}  // namespace rpfast_bindings
