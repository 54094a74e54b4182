#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "rpfast/pool.hpp"

namespace rpfast_bindings {
namespace {

void check_graph(const Array& rowptr, const Array& col, int64_t N, const char* name) {
  const int64_t* rp = in_ptr<int64_t>(rowptr, name, 1);
  const int64_t* cl = in_ptr<int64_t>(col, name, 1);
  expect_dim(rowptr, name, 0, N + 1);
  run_kernel([&] { rpfast::check_csr(rp, cl, N, col.shape(0), name); });
}

// The checked pointers of a max pool's backward: forward input and output, tie counts,
// incoming gradient, and the gradient to write (2-D arrays of one dtype).
template <class T>
struct BackwardArrays {
  const T* x;
  const T* out;
  const T* ties;
  const T* g;
  T* grad_x;
};

template <class T>
BackwardArrays<T> backward_arrays(const Array& x, const Array& out, const Array& ties,
                                  const Array& g, Array& grad_x) {
  return {in_ptr<T>(x, "x", 2), in_ptr<T>(out, "out", 2), in_ptr<T>(ties, "ties", 2), in_ptr<T>(g, "g", 2),
          out_ptr<T>(grad_x, "grad_x", 2)};
}

// x, out, ties: [N, F]; (rowptr, col): the incoming-edge CSR.
void neighbour_max(const Array& x, const Array& rowptr, const Array& col, Array& out,
                   Array& ties, int threads) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected [N, F]");
  const int64_t N = x.shape(0), F = x.shape(1);
  expect_leading(out, "out", {N, F});
  expect_leading(ties, "ties", {N, F});
  check_graph(rowptr, col, N, "incoming-edge CSR");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* xs = in_ptr<T>(x, "x", 2);
    T* o = out_ptr<T>(out, "out", 2);
    T* t = out_ptr<T>(ties, "ties", 2);
    const int64_t* rp = static_cast<const int64_t*>(rowptr.data());
    const int64_t* cl = static_cast<const int64_t*>(col.data());
    run_kernel([&] { rpfast::neighbour_max<T>(xs, rp, cl, N, F, o, t, threads); });
  };
  dispatch_float(x, run);
}

// x, out, ties, g, grad_x: [N, F]; (out_rowptr, out_col): the outgoing-edge CSR.
void neighbour_max_backward(const Array& x, const Array& out, const Array& ties, const Array& g,
                            const Array& out_rowptr, const Array& out_col, Array& grad_x, int threads) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected [N, F]");
  const int64_t N = x.shape(0), F = x.shape(1);
  for (const Array* a : {&out, &ties, &g, static_cast<const Array*>(&grad_x)})
    expect_leading(*a, "neighbour_max_backward array", {N, F});
  check_graph(out_rowptr, out_col, N, "outgoing-edge CSR");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const auto a = backward_arrays<T>(x, out, ties, g, grad_x);
    const int64_t* rp = static_cast<const int64_t*>(out_rowptr.data());
    const int64_t* cl = static_cast<const int64_t*>(out_col.data());
    run_kernel([&] { rpfast::neighbour_max_backward<T>(a.x, a.out, a.ties, a.g, rp, cl, N, F, a.grad_x, threads); });
  };
  dispatch_float(x, run);
}

// x [N, F], ptr [B + 1] -> out, ties [B, F].
void segment_max(const Array& x, const Array& ptr, Array& out, Array& ties, int threads) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected [N, F]");
  const int64_t N = x.shape(0), F = x.shape(1);
  int64_t B = 0;
  const int64_t* p = checked_ptr(ptr, N, &B);
  expect_leading(out, "out", {B, F});
  expect_leading(ties, "ties", {B, F});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* xs = in_ptr<T>(x, "x", 2);
    T* o = out_ptr<T>(out, "out", 2);
    T* t = out_ptr<T>(ties, "ties", 2);
    run_kernel([&] { rpfast::segment_max<T>(xs, p, B, F, o, t, threads); });
  };
  dispatch_float(x, run);
}

// x, grad_x [N, F]; out, ties, g [B, F].
void segment_max_backward(const Array& x, const Array& ptr, const Array& out, const Array& ties,
                          const Array& g, Array& grad_x, int threads) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected [N, F]");
  const int64_t N = x.shape(0), F = x.shape(1);
  int64_t B = 0;
  const int64_t* p = checked_ptr(ptr, N, &B);
  for (const Array* a : {&out, &ties, &g}) expect_leading(*a, "segment_max_backward array", {B, F});
  expect_leading(grad_x, "grad_x", {N, F});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const auto a = backward_arrays<T>(x, out, ties, g, grad_x);
    run_kernel([&] { rpfast::segment_max_backward<T>(a.x, p, B, F, a.out, a.ties, a.g, a.grad_x, threads); });
  };
  dispatch_float(x, run);
}

}  // namespace

void bind_pool(py::module_& m) {
  m.def("neighbour_max", &neighbour_max, py::arg("x"), py::arg("rowptr"), py::arg("col"), py::arg("out"),
        py::arg("ties"), py::arg("threads"));
  m.def("neighbour_max_backward", &neighbour_max_backward, py::arg("x"), py::arg("out"), py::arg("ties"),
        py::arg("g"), py::arg("out_rowptr"), py::arg("out_col"), py::arg("grad_x"), py::arg("threads"));
  m.def("segment_max", &segment_max, py::arg("x"), py::arg("ptr"), py::arg("out"), py::arg("ties"),
        py::arg("threads"));
  m.def("segment_max_backward", &segment_max_backward, py::arg("x"), py::arg("ptr"), py::arg("out"),
        py::arg("ties"), py::arg("g"), py::arg("grad_x"), py::arg("threads"));
}

}  // namespace rpfast_bindings
