#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/norm.hpp"

namespace rpfast_bindings {
namespace {

// x, y, xhat: [M, H]; gamma, beta, running_mean, running_var, invstd: [H].
void forward(const Array& x, const Array& gamma, const Array& beta, Array& running_mean,
             Array& running_var, bool training, double momentum, double eps, Array& y,
             Array& xhat, Array& invstd, int threads) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected [M, H]");
  const int64_t M = x.shape(0), H = x.shape(1);
  if (training && M < 1) throw std::invalid_argument("batch_norm_relu: training needs at least one row");
  for (const Array* a : std::initializer_list<const Array*>{&gamma, &beta, &running_mean, &running_var, &invstd})
    expect_dim(*a, "parameter", 0, H);
  expect_leading(y, "y", {M, H});
  expect_leading(xhat, "xhat", {M, H});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    rpfast::BatchNormParams<T> p{in_ptr<T>(gamma, "gamma", 1), in_ptr<T>(beta, "beta", 1),
                                 out_ptr<T>(running_mean, "running_mean", 1),
                                 out_ptr<T>(running_var, "running_var", 1), momentum, eps, training};
    const T* xs = in_ptr<T>(x, "x", 2);
    T* ys = out_ptr<T>(y, "y", 2);
    T* ns = out_ptr<T>(xhat, "xhat", 2);
    T* is = out_ptr<T>(invstd, "invstd", 1);
    run_kernel([&] { rpfast::batch_norm_relu_forward<T>(xs, M, H, p, ys, ns, is, threads); });
  };
  dispatch_float(x, run);
}

void backward(const Array& g, const Array& y, const Array& xhat, const Array& gamma,
              const Array& invstd, bool training, Array& grad_x, Array& grad_gamma,
              Array& grad_beta, int threads) {
  if (g.ndim() != 2) throw std::invalid_argument("g: expected [M, H]");
  const int64_t M = g.shape(0), H = g.shape(1);
  for (const Array* a : std::initializer_list<const Array*>{&y, &xhat, &grad_x}) expect_leading(*a, "activation", {M, H});
  for (const Array* a : std::initializer_list<const Array*>{&gamma, &invstd, &grad_gamma, &grad_beta}) expect_dim(*a, "parameter", 0, H);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* gs = in_ptr<T>(g, "g", 2);
    const T* ys = in_ptr<T>(y, "y", 2);
    const T* ns = in_ptr<T>(xhat, "xhat", 2);
    const T* gm = in_ptr<T>(gamma, "gamma", 1);
    const T* is = in_ptr<T>(invstd, "invstd", 1);
    T* gx = out_ptr<T>(grad_x, "grad_x", 2);
    T* gg = out_ptr<T>(grad_gamma, "grad_gamma", 1);
    T* gb = out_ptr<T>(grad_beta, "grad_beta", 1);
    run_kernel([&] { rpfast::batch_norm_relu_backward<T>(gs, ys, ns, gm, is, training, M, H, gx, gg, gb, threads); });
  };
  dispatch_float(g, run);
}

}  // namespace

void bind_norm(py::module_& m) {
  m.def("batch_norm_relu_forward", &forward, py::arg("x"), py::arg("gamma"), py::arg("beta"),
        py::arg("running_mean"), py::arg("running_var"), py::arg("training"), py::arg("momentum"),
        py::arg("eps"), py::arg("y"), py::arg("xhat"), py::arg("invstd"), py::arg("threads"));
  m.def("batch_norm_relu_backward", &backward, py::arg("g"), py::arg("y"), py::arg("xhat"),
        py::arg("gamma"), py::arg("invstd"), py::arg("training"), py::arg("grad_x"),
        py::arg("grad_gamma"), py::arg("grad_beta"), py::arg("threads"));
}

}  // namespace rpfast_bindings
