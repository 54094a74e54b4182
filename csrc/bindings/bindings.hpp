#pragma once
#include <pybind11/pybind11.h>

namespace rpfast_bindings {
void bind_permute(pybind11::module_& m);
void bind_random(pybind11::module_& m);
void bind_gin(pybind11::module_& m);
void bind_gin_network(pybind11::module_& m);
void bind_rooted(pybind11::module_& m);
void bind_norm(pybind11::module_& m);
void bind_segment(pybind11::module_& m);
void bind_subsets(pybind11::module_& m);
void bind_orient(pybind11::module_& m);
void bind_dense(pybind11::module_& m);
void bind_csr(pybind11::module_& m);
void bind_pool(pybind11::module_& m);
void bind_module_info(pybind11::module_& m);  // build_info() and the thread-policy setter
void bind_testing(pybind11::module_& m);  // the rpfast._C._testing submodule
}  // namespace rpfast_bindings
