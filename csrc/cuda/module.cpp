// rpfast._C_cuda: the CUDA kernels (launch.hpp) for Python, torch-free like rpfast._C, and called
// the same way: rpfast/_backend.py hands over DLPack capsules (csrc/bindings/arrays.hpp's Array,
// built here with RPFAST_CUDA_BINDINGS, so in_ptr and out_ptr refuse memory that is not a CUDA
// device's) and appends the stream to launch on (torch's current stream) where the CPU module
// gets its thread count. Each function has the name and the arguments of its CPU binding; one
// that needs device scratch memory takes it as one more array, allocated by the caller through
// torch's allocator. Every shape and the device index are checked here before any launch.
#include <pybind11/pybind11.h>

#include <initializer_list>
#include <string>

#include "bindings/arrays.hpp"
#include "cuda/launch.hpp"

namespace py = pybind11;
using rpfast_bindings::Array;
using rpfast_bindings::dispatch_float;
using rpfast_bindings::expect_dim;
using rpfast_bindings::expect_leading;
using rpfast_bindings::in_ptr;
using rpfast_bindings::out_ptr;

namespace {

// Every array on the first one's CUDA device (a launch reads one device's memory).
void same_device(std::initializer_list<const Array*> arrays) {
  const int index = (*arrays.begin())->device_index();
  for (const Array* a : arrays)
    if (a->device_index() != index)
      throw std::invalid_argument("the arrays are on cuda:" + std::to_string(index) + " and cuda:" +
                                  std::to_string(a->device_index()) + "; put them on one device");
}

void random_permutations(const Array& num_nodes, uint64_t seed, const Array& workspace, const Array& out,
                         uintptr_t stream) {
  same_device({&num_nodes, &workspace, &out});
  const int64_t B = num_nodes.shape(0);
  expect_dim(out, "out", 0, B);
  const int64_t P = out.ndim() == 3 ? out.shape(1) : 0, K = out.ndim() == 3 ? out.shape(2) : 0;
  expect_dim(workspace, "workspace", 0, B * P);
  rpfast_cuda::random_permutations(in_ptr<int64_t>(num_nodes, "num_nodes", 1), B, P, K, workspace.shape(1), seed,
                                   out_ptr<int64_t>(workspace, "workspace", 2), out_ptr<int64_t>(out, "out", 3),
                                   stream);
}

// seed_at: None, or one int64 on the device that the kernel reads instead of `seed` (the seed
// buffer of a captured CUDA graph, refilled before every replay).
void random_positions(const Array& ptr, int64_t modulus, uint64_t seed, const py::object& seed_at,
                      const Array& workspace, const Array& out, uintptr_t stream) {
  same_device({&ptr, &workspace, &out});
  const int64_t B = ptr.shape(0) - 1;
  if (B < 0) throw std::invalid_argument("ptr must have B + 1 >= 1 entries");
  const int64_t P = out.ndim() == 2 ? out.shape(0) : 0, N = out.ndim() == 2 ? out.shape(1) : 0;
  expect_dim(workspace, "workspace", 0, B * P);
  const int64_t* seed_ptr = nullptr;
  Array seed_array;
  if (!seed_at.is_none()) {
    if (!seed_array.load(seed_at)) throw std::invalid_argument("seed_at must be an array (one int64) or None");
    same_device({&ptr, &seed_array});
    expect_dim(seed_array, "seed_at", 0, 1);
    seed_ptr = in_ptr<int64_t>(seed_array, "seed_at", 1);
  }
  rpfast_cuda::random_positions(in_ptr<int64_t>(ptr, "ptr", 1), B, P, N, workspace.shape(1), modulus, seed, seed_ptr,
                                out_ptr<int64_t>(workspace, "workspace", 2), out_ptr<int64_t>(out, "out", 2), stream);
}

// FeatureNdim = 4: adjacency [B, N, N, C] -> out [B, P, K, K, C]; 3: nodes [B, N, F] -> out [B, P, K, F].
template <int FeatureNdim>
void permute_forward(const Array& src, const Array& perms, const Array& out, uintptr_t stream) {
  same_device({&src, &perms, &out});
  const int64_t B = src.shape(0), N = src.shape(1), C = src.shape(FeatureNdim - 1);
  const int64_t* p = in_ptr<int64_t>(perms, "perms", 3);
  expect_dim(perms, "perms", 0, B);
  const int64_t P = perms.shape(1), K = perms.shape(2);
  expect_leading(out, "out", {B, P, K});
  expect_dim(out, "out", FeatureNdim, C);
  if (FeatureNdim == 4) {
    expect_dim(src, "adj", 2, N);
    expect_dim(out, "out", 3, K);
  }
  dispatch_float(src, [&](auto tag) {
    using T = decltype(tag);
    const T* s = in_ptr<T>(src, "src", FeatureNdim);
    T* o = out_ptr<T>(out, "out", FeatureNdim + 1);
    if constexpr (FeatureNdim == 4)
      rpfast_cuda::permute_adjacency_forward<T>(s, p, o, B, N, C, P, K, stream);
    else
      rpfast_cuda::permute_nodes_forward<T>(s, p, o, B, N, C, P, K, stream);
  });
}

// The adjoint gather by the inverse permutations (written into `inverse` [B, P, N] first),
// summed over the samples in increasing order (no atomics).
template <int FeatureNdim>
void permute_backward(const Array& grad, const Array& perms, const Array& grad_src, const Array& inverse,
                      uintptr_t stream) {
  same_device({&grad, &perms, &grad_src, &inverse});
  const int64_t B = grad_src.shape(0), N = grad_src.shape(1), C = grad_src.shape(FeatureNdim - 1);
  const int64_t* p = in_ptr<int64_t>(perms, "perms", 3);
  expect_dim(perms, "perms", 0, B);
  const int64_t P = perms.shape(1), K = perms.shape(2);
  expect_leading(grad, "grad", {B, P, K});
  expect_dim(grad, "grad", FeatureNdim, C);
  if (FeatureNdim == 4) expect_dim(grad, "grad", 3, K);
  expect_leading(inverse, "inverse", {B, P, N});
  int64_t* inv = out_ptr<int64_t>(inverse, "inverse", 3);
  rpfast_cuda::invert_permutations(p, B * P, K, N, inv, stream);
  dispatch_float(grad_src, [&](auto tag) {
    using T = decltype(tag);
    const T* g = in_ptr<T>(grad, "grad", FeatureNdim + 1);
    T* o = out_ptr<T>(grad_src, "grad_src", FeatureNdim);
    if constexpr (FeatureNdim == 4)
      rpfast_cuda::permute_adjacency_backward<T>(g, inv, o, B, N, C, P, K, stream);
    else
      rpfast_cuda::permute_nodes_backward<T>(g, inv, o, B, N, C, P, K, stream);
  });
}

void segment_sum(const Array& x, const Array& ptr, const Array& out, uintptr_t stream) {
  same_device({&x, &ptr, &out});
  const int64_t R = x.shape(0), N = x.shape(1), F = x.shape(2), B = ptr.shape(0) - 1;
  expect_leading(out, "out", {R, B, F});
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    rpfast_cuda::segment_sum<T>(in_ptr<T>(x, "x", 3), p, out_ptr<T>(out, "out", 3), R, N, B, F, stream);
  });
}

void segment_max(const Array& x, const Array& ptr, const Array& out, const Array& ties, uintptr_t stream) {
  same_device({&x, &ptr, &out, &ties});
  const int64_t B = ptr.shape(0) - 1, F = x.shape(1);
  expect_leading(out, "out", {B, F});
  expect_leading(ties, "ties", {B, F});
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    rpfast_cuda::segment_max<T>(in_ptr<T>(x, "x", 2), p, out_ptr<T>(out, "out", 2), out_ptr<T>(ties, "ties", 2), B,
                                F, stream);
  });
}

void segment_max_backward(const Array& x, const Array& ptr, const Array& out, const Array& ties, const Array& g,
                          const Array& grad_x, uintptr_t stream) {
  same_device({&x, &ptr, &out, &ties, &g, &grad_x});
  const int64_t B = ptr.shape(0) - 1, F = x.shape(1);
  for (const Array* a : {&out, &ties, &g}) expect_leading(*a, "segment_max_backward array", {B, F});
  expect_leading(grad_x, "grad_x", {x.shape(0), F});
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    rpfast_cuda::segment_max_backward<T>(in_ptr<T>(x, "x", 2), p, in_ptr<T>(out, "out", 2),
                                         in_ptr<T>(ties, "ties", 2), in_ptr<T>(g, "g", 2),
                                         out_ptr<T>(grad_x, "grad_x", 2), B, F, stream);
  });
}

// x, out: [N, F] or [R, N, F]; rowptr [N + 1]; col [E]; eps: one element of x's dtype, read by the
// kernel (never by the host).
void gin_aggregate(const Array& x, const Array& rowptr, const Array& col, const Array& eps, const Array& out,
                   uintptr_t stream) {
  same_device({&x, &rowptr, &col, &eps, &out});
  if (eps.size() != 1) throw std::invalid_argument("eps: expected one element");
  if (x.ndim() != 2 && x.ndim() != 3) throw std::invalid_argument("x: expected [N, F] or [R, N, F]");
  const int64_t R = x.ndim() == 3 ? x.shape(0) : 1, N = x.shape(x.ndim() - 2), F = x.shape(x.ndim() - 1);
  for (int64_t d = 0; d < x.ndim(); ++d) expect_dim(out, "out", d, x.shape(d));
  expect_dim(rowptr, "rowptr", 0, N + 1);
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  const int64_t* cl = in_ptr<int64_t>(col, "col", 1);
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    rpfast_cuda::gin_aggregate<T>(in_ptr<T>(x, "x", x.ndim()), rp, cl, in_ptr<T>(eps, "eps", eps.ndim()),
                                  out_ptr<T>(out, "out", x.ndim()), R, N, F, stream);
  });
}

// x, y, xhat: [M, H]; gamma, beta, running_mean, running_var, invstd, workspace: [H] (the CPU
// binding's arguments, the scratch and the stream last).
void batch_norm_relu_forward(const Array& x, const Array& gamma, const Array& beta, const Array& running_mean,
                             const Array& running_var, bool training, double momentum, double eps, const Array& y,
                             const Array& xhat, const Array& invstd, const Array& workspace, uintptr_t stream) {
  same_device({&x, &gamma, &beta, &running_mean, &running_var, &y, &xhat, &invstd, &workspace});
  if (x.ndim() != 2) throw std::invalid_argument("x: expected [M, H]");
  const int64_t M = x.shape(0), H = x.shape(1);
  if (training && M < 1) throw std::invalid_argument("batch_norm_relu: training needs at least one row");
  for (const Array* a : {&gamma, &beta, &running_mean, &running_var, &invstd, &workspace})
    expect_dim(*a, "parameter", 0, H);
  expect_leading(y, "y", {M, H});
  expect_leading(xhat, "xhat", {M, H});
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    rpfast_cuda::batch_norm_relu_forward<T>(
        in_ptr<T>(x, "x", 2), in_ptr<T>(gamma, "gamma", 1), in_ptr<T>(beta, "beta", 1),
        out_ptr<T>(running_mean, "running_mean", 1), out_ptr<T>(running_var, "running_var", 1), training, momentum,
        eps, out_ptr<T>(y, "y", 2), out_ptr<T>(xhat, "xhat", 2), out_ptr<T>(invstd, "invstd", 1),
        out_ptr<T>(workspace, "workspace", 1), M, H, stream);
  });
}

// g, y, xhat, grad_x: [M, H]; gamma, invstd, grad_gamma, grad_beta: [H]; workspace: [2H].
void batch_norm_relu_backward(const Array& g, const Array& y, const Array& xhat, const Array& gamma,
                              const Array& invstd, bool training, const Array& grad_x, const Array& grad_gamma,
                              const Array& grad_beta, const Array& workspace, uintptr_t stream) {
  same_device({&g, &y, &xhat, &gamma, &invstd, &grad_x, &grad_gamma, &grad_beta, &workspace});
  if (g.ndim() != 2) throw std::invalid_argument("g: expected [M, H]");
  const int64_t M = g.shape(0), H = g.shape(1);
  for (const Array* a : {&y, &xhat, &grad_x}) expect_leading(*a, "activation", {M, H});
  for (const Array* a : {&gamma, &invstd, &grad_gamma, &grad_beta}) expect_dim(*a, "parameter", 0, H);
  expect_dim(workspace, "workspace", 0, 2 * H);
  dispatch_float(g, [&](auto tag) {
    using T = decltype(tag);
    rpfast_cuda::batch_norm_relu_backward<T>(
        in_ptr<T>(g, "g", 2), in_ptr<T>(y, "y", 2), in_ptr<T>(xhat, "xhat", 2), in_ptr<T>(gamma, "gamma", 1),
        in_ptr<T>(invstd, "invstd", 1), training, out_ptr<T>(grad_x, "grad_x", 2),
        out_ptr<T>(grad_gamma, "grad_gamma", 1), out_ptr<T>(grad_beta, "grad_beta", 1),
        out_ptr<T>(workspace, "workspace", 1), M, H, stream);
  });
}

}  // namespace

#ifndef RPFAST_CUDA_ARCHITECTURES
#define RPFAST_CUDA_ARCHITECTURES "unknown"
#endif

PYBIND11_MODULE(_C_cuda, m) {
  m.doc() = "rpfast's CUDA kernels: the CPU bindings' names and arguments, DLPack capsules in, the stream last";
  m.attr("architectures") = RPFAST_CUDA_ARCHITECTURES;
  m.def("device_count", [] {
    std::string error;
    const int count = rpfast_cuda::device_count(error);
    return py::make_tuple(count, error);
  }, "(number of CUDA devices, the runtime's reason when there is none)");
  m.def("random_permutations", &random_permutations, py::arg("num_nodes"), py::arg("seed"), py::arg("workspace"),
        py::arg("out"), py::arg("stream"));
  m.def("random_positions", &random_positions, py::arg("ptr"), py::arg("modulus"), py::arg("seed"),
        py::arg("seed_at"), py::arg("workspace"), py::arg("out"), py::arg("stream"));
  m.def("permute_adjacency_forward", &permute_forward<4>, py::arg("adj"), py::arg("perms"), py::arg("out"),
        py::arg("stream"));
  m.def("permute_adjacency_backward", &permute_backward<4>, py::arg("grad"), py::arg("perms"), py::arg("grad_adj"),
        py::arg("inverse"), py::arg("stream"));
  m.def("permute_nodes_forward", &permute_forward<3>, py::arg("x"), py::arg("perms"), py::arg("out"),
        py::arg("stream"));
  m.def("permute_nodes_backward", &permute_backward<3>, py::arg("grad"), py::arg("perms"), py::arg("grad_x"),
        py::arg("inverse"), py::arg("stream"));
  m.def("segment_sum", &segment_sum, py::arg("x"), py::arg("ptr"), py::arg("out"), py::arg("stream"));
  m.def("segment_max", &segment_max, py::arg("x"), py::arg("ptr"), py::arg("out"), py::arg("ties"), py::arg("stream"));
  m.def("segment_max_backward", &segment_max_backward, py::arg("x"), py::arg("ptr"), py::arg("out"), py::arg("ties"),
        py::arg("g"), py::arg("grad_x"), py::arg("stream"));
  m.def("gin_aggregate", &gin_aggregate, py::arg("x"), py::arg("rowptr"), py::arg("col"), py::arg("eps"),
        py::arg("out"), py::arg("stream"));
  m.def("batch_norm_relu_forward", &batch_norm_relu_forward, py::arg("x"), py::arg("gamma"), py::arg("beta"),
        py::arg("running_mean"), py::arg("running_var"), py::arg("training"), py::arg("momentum"), py::arg("eps"),
        py::arg("y"), py::arg("xhat"), py::arg("invstd"), py::arg("workspace"), py::arg("stream"));
  m.def("batch_norm_relu_backward", &batch_norm_relu_backward, py::arg("g"), py::arg("y"), py::arg("xhat"),
        py::arg("gamma"), py::arg("invstd"), py::arg("training"), py::arg("grad_x"), py::arg("grad_gamma"),
        py::arg("grad_beta"), py::arg("workspace"), py::arg("stream"));
}
