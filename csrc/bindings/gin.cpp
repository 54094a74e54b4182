#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/gin.hpp"

namespace rpfast_bindings {
namespace {

// x, out: [R, N, F]; rowptr [N + 1]; col [E]. out = (1 + eps) x + A x over the CSR.
void gin_aggregate(const py::array& x, const py::array& rowptr, const py::array& col, double eps,
                   py::array& out, int threads) {
  if (x.ndim() != 3) throw std::invalid_argument("x: expected [R, N, F]");
  const int64_t R = x.shape(0), N = x.shape(1), F = x.shape(2);
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  const int64_t* cl = in_ptr<int64_t>(col, "col", 1);
  expect_dim(rowptr, "rowptr", 0, N + 1);
  expect_leading(out, "out", {R, N, F});
  {
    py::gil_scoped_release release;
    rpfast::check_csr(rp, cl, N, col.shape(0), "graph CSR");
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* xs = in_ptr<T>(x, "x", 3);
    T* o = out_ptr<T>(out, "out", 3);
    py::gil_scoped_release release;
    rpfast::gin_aggregate<T>(xs, rp, cl, static_cast<T>(1 + eps), o, R, N, F, threads);
  };
  if (is_float64(x)) run(double{}); else run(float{});
}

double sum_product(const py::array& a, const py::array& b, int threads) {
  if (a.ndim() != b.ndim()) throw std::invalid_argument("sum_product: a and b differ in shape");
  for (py::ssize_t d = 0; d < a.ndim(); ++d) expect_dim(b, "b", d, a.shape(d));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a", a.ndim());
    const T* pb = in_ptr<T>(b, "b", a.ndim());
    py::gil_scoped_release release;
    return rpfast::sum_product<T>(pa, pb, a.size(), threads);
  };
  return is_float64(a) ? run(double{}) : run(float{});
}

}  // namespace

void bind_gin(py::module_& m) {
  m.def("gin_aggregate", &gin_aggregate, py::arg("x"), py::arg("rowptr"), py::arg("col"),
        py::arg("eps"), py::arg("out"), py::arg("threads"),
        "out[r, i] = (1 + eps) x[r, i] + sum over CSR row i of x[r, col]");
  m.def("sum_product", &sum_product, py::arg("a"), py::arg("b"), py::arg("threads"),
        "sum(a * b) accumulated in float64, identical for any thread count.");
}

}  // namespace rpfast_bindings
