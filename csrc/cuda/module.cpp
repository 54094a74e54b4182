// rpfast._C_cuda: the CUDA kernels (launch.hpp) for Python, torch-free like rpfast._C. Every
// function takes device pointers as integers (torch's Tensor.data_ptr()) and the stream to
// launch on (torch.cuda.current_stream().cuda_stream); rpfast/_cuda.py checks the tensors
// (device, dtype, contiguity, shapes) before it calls. float64 where `double_precision`.
#include <pybind11/pybind11.h>

#include <string>

#include "cuda/launch.hpp"

namespace py = pybind11;

namespace {

template <class T>
T* as(uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// Runs `body` with T = double or float.
template <class Body>
void by_precision(bool double_precision, Body&& body) {
  if (double_precision)
    body(double{});
  else
    body(float{});
}

}  // namespace

#ifndef RPFAST_CUDA_ARCHITECTURES
#define RPFAST_CUDA_ARCHITECTURES "unknown"
#endif

PYBIND11_MODULE(_C_cuda, m) {
  m.doc() = "rpfast's CUDA kernels (device pointers in, launches on the given stream)";
  m.attr("architectures") = RPFAST_CUDA_ARCHITECTURES;
  m.def("device_count", [] {
    std::string error;
    const int count = rpfast_cuda::device_count(error);
    return py::make_tuple(count, error);
  }, "(number of CUDA devices, the runtime's reason when there is none)");
  m.def("random_permutations", [](uintptr_t num_nodes, int64_t B, int64_t P, int64_t K, int64_t n_max,
                                  uint64_t seed, uintptr_t workspace, uintptr_t out, uintptr_t stream) {
    rpfast_cuda::random_permutations(as<const int64_t>(num_nodes), B, P, K, n_max, seed, as<int64_t>(workspace),
                                     as<int64_t>(out), stream);
  });
  m.def("random_positions", [](uintptr_t ptr, int64_t B, int64_t P, int64_t N, int64_t n_max, int64_t modulus,
                               uint64_t seed, uintptr_t workspace, uintptr_t out, uintptr_t stream) {
    rpfast_cuda::random_positions(as<const int64_t>(ptr), B, P, N, n_max, modulus, seed, as<int64_t>(workspace),
                                  as<int64_t>(out), stream);
  });
  m.def("invert_permutations", [](uintptr_t perms, int64_t rows, int64_t K, int64_t N, uintptr_t inv,
                                  uintptr_t stream) {
    rpfast_cuda::invert_permutations(as<const int64_t>(perms), rows, K, N, as<int64_t>(inv), stream);
  });
  m.def("permute_adjacency_forward", [](bool double_precision, uintptr_t adj, uintptr_t perms, uintptr_t out,
                                        int64_t B, int64_t N, int64_t C, int64_t P, int64_t K, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::permute_adjacency_forward<T>(as<const T>(adj), as<const int64_t>(perms), as<T>(out), B, N, C, P,
                                                K, stream);
    });
  });
  m.def("permute_adjacency_backward", [](bool double_precision, uintptr_t grad, uintptr_t inv, uintptr_t grad_adj,
                                         int64_t B, int64_t N, int64_t C, int64_t P, int64_t K, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::permute_adjacency_backward<T>(as<const T>(grad), as<const int64_t>(inv), as<T>(grad_adj), B, N,
                                                 C, P, K, stream);
    });
  });
  m.def("permute_nodes_forward", [](bool double_precision, uintptr_t x, uintptr_t perms, uintptr_t out, int64_t B,
                                    int64_t N, int64_t F, int64_t P, int64_t K, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::permute_nodes_forward<T>(as<const T>(x), as<const int64_t>(perms), as<T>(out), B, N, F, P, K,
                                            stream);
    });
  });
  m.def("permute_nodes_backward", [](bool double_precision, uintptr_t grad, uintptr_t inv, uintptr_t grad_x,
                                     int64_t B, int64_t N, int64_t F, int64_t P, int64_t K, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::permute_nodes_backward<T>(as<const T>(grad), as<const int64_t>(inv), as<T>(grad_x), B, N, F, P,
                                             K, stream);
    });
  });
  m.def("segment_sum", [](bool double_precision, uintptr_t x, uintptr_t ptr, uintptr_t out, int64_t R, int64_t N,
                          int64_t B, int64_t F, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::segment_sum<T>(as<const T>(x), as<const int64_t>(ptr), as<T>(out), R, N, B, F, stream);
    });
  });
  m.def("segment_max", [](bool double_precision, uintptr_t x, uintptr_t ptr, uintptr_t out, uintptr_t ties,
                          int64_t B, int64_t F, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::segment_max<T>(as<const T>(x), as<const int64_t>(ptr), as<T>(out), as<T>(ties), B, F, stream);
    });
  });
  m.def("segment_max_backward", [](bool double_precision, uintptr_t x, uintptr_t ptr, uintptr_t out, uintptr_t ties,
                                   uintptr_t g, uintptr_t grad_x, int64_t B, int64_t F, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::segment_max_backward<T>(as<const T>(x), as<const int64_t>(ptr), as<const T>(out),
                                           as<const T>(ties), as<const T>(g), as<T>(grad_x), B, F, stream);
    });
  });
  m.def("gin_aggregate", [](bool double_precision, uintptr_t x, uintptr_t rowptr, uintptr_t col, double eps,
                            uintptr_t out, int64_t R, int64_t N, int64_t F, uintptr_t stream) {
    by_precision(double_precision, [&](auto tag) {
      using T = decltype(tag);
      rpfast_cuda::gin_aggregate<T>(as<const T>(x), as<const int64_t>(rowptr), as<const int64_t>(col), eps, as<T>(out),
                                    R, N, F, stream);
    });
  });
}
