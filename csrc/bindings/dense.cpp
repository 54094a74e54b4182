#include <string>
#include <utility>
#include <vector>

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

// The rows of a [..., K] (their count M) and K; out must be [..., C] with a's leading dimensions.
std::pair<int64_t, int64_t> leading_rows(const Array& a, const Array& out, int64_t C, const char* what) {
  if (a.ndim() < 1 || out.ndim() != a.ndim())
    throw std::invalid_argument(std::string(what) + ": expected a [..., K] and out [..., C] of the same rank");
  int64_t M = 1;
  for (int64_t d = 0; d + 1 < a.ndim(); ++d) {
    expect_dim(out, "out", d, a.shape(d));
    M *= a.shape(d);
  }
  expect_dim(out, "out", a.ndim() - 1, C);
  return {M, a.shape(a.ndim() - 1)};
}

// out [..., C] = a [..., K] b + bias, for b [K, C] or, with b_transposed, b [C, K] (a linear map's
// weight, transposed into a scratch copy of C * K values here), and bias [C] or None. Every output
// row is rows_times' whole row, the bias added after it: bitwise what a product and torch's add gave.
void dense_product(const Array& a, const Array& b, bool b_transposed, const py::object& bias, Array& out,
                   int threads, const char* what) {
  if (b.ndim() != 2) throw std::invalid_argument(std::string(what) + ": the matrix must be 2-D");
  const int64_t C = b.shape(b_transposed ? 0 : 1);
  const std::pair<int64_t, int64_t> rows = leading_rows(a, out, C, what);
  const int64_t M = rows.first, K = rows.second;
  expect_dim(b, b_transposed ? "weight" : "b", b_transposed ? 1 : 0, K);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a", a.ndim());
    const T* pb = in_ptr<T>(b, b_transposed ? "weight" : "b", 2);
    T* po = out_ptr<T>(out, "out", out.ndim());
    const T* bias_ptr = nullptr;
    Array bias_array;
    if (!bias.is_none()) {
      bias_array = py::cast<Array>(bias);
      expect_dim(bias_array, "bias", 0, C);
      bias_ptr = in_ptr<T>(bias_array, "bias", 1);
    }
    run_kernel([&] {
      std::vector<T> transposed;
      if (b_transposed) {
        transposed.resize(static_cast<size_t>(K * C));
        for (int64_t c = 0; c < C; ++c)
          for (int64_t k = 0; k < K; ++k) transposed[k * C + c] = pb[c * K + k];
      }
      rpfast::rows_times<T>(pa, M, K, b_transposed ? transposed.data() : pb, C, po, threads);
      if (bias_ptr != nullptr)
        rpfast::parallel_for(M, threads, C, [&](int64_t m) {
          for (int64_t c = 0; c < C; ++c) po[m * C + c] += bias_ptr[c];
        });
    });
  };
  dispatch_float(a, run);
}

// out [..., C] = a [..., K] b [K, C].
void matmul(const Array& a, const Array& b, Array& out, int threads) {
  dense_product(a, b, false, py::none(), out, threads, "matmul");
}

// out [..., C] = x [..., K] weight^T + bias (weight [C, K], bias [C] or None): torch.nn.functional.linear,
// without the transposed copy, the reshapes and the bias add torch would make around a product.
void linear(const Array& x, const Array& weight, const py::object& bias, Array& out, int threads) {
  dense_product(x, weight, true, bias, out, threads, "linear");
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
  m.def("linear", &linear, py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("out"), py::arg("threads"),
        "out = x weight^T + bias, each output row computed whole by one thread (bitwise the same for any thread "
        "count): torch.nn.functional.linear's result with rpfast's row products.");
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("threads"),
        "out = a b, each output row computed whole by one thread (bitwise the same for any thread count).");
  m.def("scatter_rows_sum", &scatter_rows_sum, py::arg("index"), py::arg("g"), py::arg("out"), py::arg("threads"),
        "out[v] = sum of g[m] over index[m] = v, deterministic (gradient of a row gather).");
}

}  // namespace rpfast_bindings
