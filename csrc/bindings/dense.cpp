#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/dense.hpp"

namespace rpfast_bindings {
namespace {

// out [H1, H2] = a^T b for a [M, H1], b [M, H2].
void matmul_tn(const Array& a, const Array& b, Array& out, int threads) {
  if (a.ndim() != 2 || b.ndim() != 2) throw std::invalid_argument("matmul_tn: a and b must be 2-D");
  const int64_t M = a.shape(0), H1 = a.shape(1), H2 = b.shape(1);
  expect_dim(b, "b", 0, M);
  expect_leading(out, "out", {H1, H2});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a", 2);
    const T* pb = in_ptr<T>(b, "b", 2);
    T* po = out_ptr<T>(out, "out", 2);
    run_kernel([&] { rpfast::matmul_tn<T>(pa, pb, M, H1, H2, po, threads); });
  };
  dispatch_float(a, run);
}

// out [M, C] = a [M, K] b [K, C].
void matmul(const Array& a, const Array& b, Array& out, int threads) {
  if (a.ndim() != 2 || b.ndim() != 2) throw std::invalid_argument("matmul: a and b must be 2-D");
  const int64_t M = a.shape(0), K = a.shape(1), C = b.shape(1);
  expect_dim(b, "b", 0, K);
  expect_leading(out, "out", {M, C});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a", 2);
    const T* pb = in_ptr<T>(b, "b", 2);
    T* po = out_ptr<T>(out, "out", 2);
    run_kernel([&] { rpfast::rows_times<T>(pa, M, K, pb, C, po, threads); });
  };
  dispatch_float(a, run);
}

// out [V, H]: out[v] = sum of g[m] over index[m] = v.
void scatter_rows_sum(const Array& index, const Array& g, Array& out, int threads) {
  const int64_t* idx = in_ptr<int64_t>(index, "index", 1);
  if (g.ndim() != 2 || out.ndim() != 2) throw std::invalid_argument("scatter_rows_sum: g and out must be 2-D");
  const int64_t M = index.shape(0), V = out.shape(0), H = g.shape(1);
  expect_leading(g, "g", {M, H});
  expect_dim(out, "out", 1, H);
  for (int64_t m = 0; m < M; ++m)
    if (idx[m] < 0 || idx[m] >= V)
      throw std::out_of_range("index[" + std::to_string(m) + "] = " + std::to_string(idx[m]) + " is outside [0, " +
                              std::to_string(V) + ")");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* pg = in_ptr<T>(g, "g", 2);
    T* po = out_ptr<T>(out, "out", 2);
    run_kernel([&] { rpfast::scatter_rows_sum<T>(idx, pg, M, V, H, po, threads); });
  };
  dispatch_float(g, run);
}

}  // namespace

void bind_dense(py::module_& m) {
  m.def("matmul_tn", &matmul_tn, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("threads"),
        "out = a^T b with a deterministic row reduction (weight gradient of a linear map).");
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("threads"),
        "out = a b, each output row computed whole by one thread (bitwise the same for any thread count).");
  m.def("scatter_rows_sum", &scatter_rows_sum, py::arg("index"), py::arg("g"), py::arg("out"), py::arg("threads"),
        "out[v] = sum of g[m] over index[m] = v, deterministic (gradient of a row gather).");
}

}  // namespace rpfast_bindings
