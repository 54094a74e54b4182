#include "bindings/bindings.hpp"

namespace py = pybind11;

// The same sources build rpfast._C (baseline instruction set) and, on x86-64, rpfast._C_avx2
// (x86-64-v3: AVX2 + FMA); rpfast/_backend.py imports the one the CPU runs best.
#ifndef RPFAST_MODULE_NAME
#define RPFAST_MODULE_NAME _C
#endif

PYBIND11_MODULE(RPFAST_MODULE_NAME, m) {
  m.doc() = "rpfast compiled kernels (C++17, OpenMP); see the rpfast.ops wrappers";
  rpfast_bindings::bind_module_info(m);
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
