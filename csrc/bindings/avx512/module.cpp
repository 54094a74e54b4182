// rpfast._C_avx512: the kernels whose AVX-512 build pays for itself in a job users run, built
// with -march=x86-64-v4 beside rpfast._C and rpfast._C_avx2 (which hold every kernel).
//
// Only RootedRP's fixed-hash rounds (rooted_pool, with rooted_round beside it in the same
// bindings file) are here: they are most of `rpfast pairs`' time, and 16-lane registers and
// 32 of them took its eval blocks 1.2x to 1.6x faster than the AVX2 build (benchmarks/README.md).
// rpfast/_backend.py takes these kernels from this module where the CPU runs AVX-512, every other
// kernel from the module it imports. The module keeps its own thread-policy and interrupt
// state, so it binds the same module info (module_info.cpp) and testing hooks, which _backend applies to every
// module it loaded.
#include "bindings/bindings.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C_avx512, m) {
  m.doc() = "rpfast compiled kernels built for AVX-512 (the ones listed by kernels())";
  rpfast_bindings::bind_module_info(m);
  m.def("kernels", [] { return py::make_tuple("rooted_pool", "rooted_round"); },
        "The kernels this module holds.");
  rpfast_bindings::bind_rooted(m);
  rpfast_bindings::bind_testing(m);
}
