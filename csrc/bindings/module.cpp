#include <omp.h>

#include "bindings/bindings.hpp"
#include "cpu/parallel.hpp"

namespace py = pybind11;

// The same sources build rpfast._C (baseline instruction set) and, on x86-64, rpfast._C_avx2
// (x86-64-v3: AVX2 + FMA); rpfast/_backend.py imports the one the CPU runs best.
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
  m.def("set_adaptive_threads", [](bool adaptive) { rpfast::schedule_state().adaptive.store(adaptive); },
        py::arg("adaptive"),
        "Whether kernels back off to one thread for a while when their other threads lag or run far "
        "apart (the 'adaptive' thread policy, default), or always use their threads ('fixed').");
  m.def("adaptive_threads", [] { return rpfast::schedule_state().adaptive.load(); },
        "Whether the adaptive thread policy is on.");
  rpfast_bindings::bind_permute(m);
  rpfast_bindings::bind_dense(m);
  rpfast_bindings::bind_csr(m);
  rpfast_bindings::bind_pool(m);
  rpfast_bindings::bind_random(m);
  rpfast_bindings::bind_gin(m);
  rpfast_bindings::bind_gin_network(m);
  rpfast_bindings::bind_rooted(m);
  rpfast_bindings::bind_norm(m);
  rpfast_bindings::bind_segment(m);
  rpfast_bindings::bind_subsets(m);
  rpfast_bindings::bind_orient(m);
  rpfast_bindings::bind_testing(m);
}
