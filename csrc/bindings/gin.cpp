#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "rpfast/gin.hpp"

namespace rpfast_bindings {
namespace {

// The [R, N, F] sizes of a node tensor given as [N, F] (R = 1) or [R, N, F]; `like` (out, z)
// must have the same shape.
struct NodeShape {
  int64_t R, N, F;
  py::ssize_t ndim;
};

NodeShape node_shape(const Array& x, const char* name) {
  if (x.ndim() == 2) return {1, x.shape(0), x.shape(1), 2};
  if (x.ndim() == 3) return {x.shape(0), x.shape(1), x.shape(2), 3};
  throw std::invalid_argument(std::string(name) + ": expected [N, F] or [R, N, F]");
}

// a must have the shape of `like` (named like_name in the message)
void expect_same_shape(const Array& a, const char* name, const Array& like, const char* like_name) {
  if (a.ndim() != like.ndim())
    throw std::invalid_argument(std::string(name) + ": differs in rank from " + like_name);
  for (py::ssize_t d = 0; d < like.ndim(); ++d) expect_dim(a, name, d, like.shape(d));
}

// 1 + eps in T, rounded once from double as everywhere (eps: one element of T, a tensor so that
// no caller reads it back to the host; the CUDA binding hands its pointer to the kernel).
template <class T>
T one_plus_eps(const Array& eps) {
  if (eps.size() != 1) throw std::invalid_argument("eps: expected one element");
  return static_cast<T>(1.0 + static_cast<double>(*in_ptr<T>(eps, "eps", eps.ndim())));
}

// x, out: [N, F] or [R, N, F]; rowptr [N + 1]; col [E]. out = (1 + eps) x + A x over the CSR.
void gin_aggregate(const Array& x, const Array& rowptr, const Array& col, const Array& eps,
                   Array& out, int threads) {
  const NodeShape s = node_shape(x, "x");
  expect_same_shape(out, "out", x, "x");
  const int64_t* cl = nullptr;
  const int64_t* rp = checked_csr(rowptr, col, s.N, &cl);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* xs = in_ptr<T>(x, "x", s.ndim);
    T* o = out_ptr<T>(out, "out", s.ndim);
    const T scale = one_plus_eps<T>(eps);
    run_kernel([&] { rpfast::gin_aggregate<T>(xs, rp, cl, scale, o, s.R, s.N, s.F, threads); });
  };
  dispatch_float(x, run);
}

// Writes `value` into `out`, one element of float32 or float64 (a gradient of eps, of eps's
// dtype): the reductions below hand their result over in a tensor, not as a Python float.
void store_scalar(const Array& out, const char* name, double value) {
  if (out.size() != 1) throw std::invalid_argument(std::string(name) + ": expected one element");
  dispatch_float(out, [&](auto tag) {
    using T = decltype(tag);
    *out_ptr<T>(out, name, out.ndim()) = static_cast<T>(value);
  });
}

// The aggregation's backward in one pass: grad_z = (1 + eps) g + A^T g over the outgoing CSR
// (rowptr, col), and grad_eps = sum(g * z) into its one element. g, z, grad_z: [N, F] or [R, N, F].
void gin_aggregate_adjoint(const Array& g, const Array& rowptr, const Array& col, const Array& eps,
                           const Array& z, Array& grad_z, const Array& grad_eps, int threads) {
  const NodeShape s = node_shape(g, "g");
  expect_same_shape(z, "z", g, "g");
  expect_same_shape(grad_z, "grad_z", g, "g");
  const int64_t* cl = nullptr;
  const int64_t* rp = checked_csr(rowptr, col, s.N, &cl);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* gs = in_ptr<T>(g, "g", s.ndim);
    const T* zs = in_ptr<T>(z, "z", s.ndim);
    T* o = out_ptr<T>(grad_z, "grad_z", s.ndim);
    const T scale = one_plus_eps<T>(eps);
    return run_kernel([&] {
      return rpfast::gin_aggregate_adjoint<T>(gs, rp, cl, scale, zs, o, s.R, s.N, s.F, threads);
    });
  };
  store_scalar(grad_eps, "grad_eps", dispatch_float(g, run));
}

// out (one element) = sum(a * b)
void sum_product(const Array& a, const Array& b, const Array& out, int threads) {
  if (a.ndim() != b.ndim()) throw std::invalid_argument("sum_product: a and b differ in shape");
  for (py::ssize_t d = 0; d < a.ndim(); ++d) expect_dim(b, "b", d, a.shape(d));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a", a.ndim());
    const T* pb = in_ptr<T>(b, "b", a.ndim());
    return run_kernel([&] { return rpfast::sum_product<T>(pa, pb, a.size(), threads); });
  };
  store_scalar(out, "out", dispatch_float(a, run));
}

}  // namespace

void bind_gin(py::module_& m) {
  m.def("gin_aggregate", &gin_aggregate, py::arg("x"), py::arg("rowptr"), py::arg("col"),
        py::arg("eps"), py::arg("out"), py::arg("threads"),
        "out[r, i] = (1 + eps) x[r, i] + sum over CSR row i of x[r, col]; x [N, F] or [R, N, F], eps one element "
        "of x's dtype");
  m.def("gin_aggregate_adjoint", &gin_aggregate_adjoint, py::arg("g"), py::arg("rowptr"), py::arg("col"),
        py::arg("eps"), py::arg("z"), py::arg("grad_z"), py::arg("grad_eps"), py::arg("threads"),
        "grad_z = (1 + eps) g + A^T g over the outgoing CSR; grad_eps (one element) = sum(g * z) (chunks "
        "of rows summed in the input's dtype, then in float64; the same for any thread count)");
  m.def("sum_product", &sum_product, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("threads"),
        "out (one element) = sum(a * b), accumulated in float64, identical for any thread count.");
}

}  // namespace rpfast_bindings
