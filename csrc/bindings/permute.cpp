#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/permutations.hpp"
#include "rpfast/permute.hpp"

namespace rpfast_bindings {
namespace {

// Validates perms [B, P, K] against graphs of n_max nodes (num_nodes optional [B]).
void check_perms(const Array& perms, int64_t B, int64_t n_max, const py::object& num_nodes) {
  const int64_t* p = in_ptr<int64_t>(perms, "perms", 3);
  expect_dim(perms, "perms", 0, B);
  const int64_t* nn = nullptr;
  if (!num_nodes.is_none()) {
    Array nn_arr = num_nodes.cast<Array>();
    nn = in_ptr<int64_t>(nn_arr, "num_nodes", 1);
    expect_dim(nn_arr, "num_nodes", 0, B);
    run_kernel([&] { rpfast::check_permutations(p, B, perms.shape(1), perms.shape(2), n_max, nn); });
    return;
  }
  run_kernel([&] { rpfast::check_permutations(p, B, perms.shape(1), perms.shape(2), n_max, nullptr); });
}

// Checks perms and returns their inverse [B, P, n_max].
py::array_t<int64_t> checked_inverse(const Array& perms, int64_t B, int64_t n_max,
                                     int threads) {
  check_perms(perms, B, n_max, py::none());
  const int64_t P = perms.shape(1), K = perms.shape(2);
  py::array_t<int64_t> inv({B, P, n_max});
  const int64_t* p = static_cast<const int64_t*>(perms.data());
  int64_t* out = inv.mutable_data();
  run_kernel([&] {
    rpfast::invert_permutations(p, B * P, K, n_max, out, [&](int64_t n, int64_t cost, auto&& body) {
      rpfast::parallel_for(n, threads, cost, body);
    });
  });
  return inv;
}

// feature_ndim = 4 for adjacency [B, N, N, C] (out [B, P, K, K, C]),
//                3 for node features [B, N, F] (out [B, P, K, F]).
template <int FeatureNdim>
void forward(const Array& src, const Array& perms, Array& out, int threads) {
  const int64_t B = src.shape(0), N = src.shape(1), C = src.shape(FeatureNdim - 1);
  if (FeatureNdim == 4) expect_dim(src, "adj", 2, N);
  check_perms(perms, B, N, py::none());
  const rpfast::PermuteDims d{B, N, C, perms.shape(1), perms.shape(2)};
  const int64_t* p = static_cast<const int64_t*>(perms.data());
  const py::ssize_t out_ndim = FeatureNdim + 1;
  expect_leading(out, "out", {d.B, d.P, d.K});
  expect_dim(out, "out", out_ndim - 1, C);
  if (FeatureNdim == 4) expect_dim(out, "out", 3, d.K);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* s = in_ptr<T>(src, "src", FeatureNdim);
    T* o = out_ptr<T>(out, "out", out_ndim);
    run_kernel([&] {
      if constexpr (FeatureNdim == 4)
        rpfast::permute_adjacency_forward<T>(s, p, o, d, threads);
      else
        rpfast::permute_nodes_forward<T>(s, p, o, d, threads);
    });
  };
  dispatch_float(src, run);
}

template <int FeatureNdim>
void backward(const Array& grad, const Array& perms, Array& grad_src, int threads) {
  const int64_t B = grad_src.shape(0), N = grad_src.shape(1), C = grad_src.shape(FeatureNdim - 1);
  const py::array_t<int64_t> inv = checked_inverse(perms, B, N, threads);
  const rpfast::PermuteDims d{B, N, C, perms.shape(1), perms.shape(2)};
  expect_leading(grad, "grad", {d.B, d.P, d.K});
  expect_dim(grad, "grad", FeatureNdim, C);
  if (FeatureNdim == 4) expect_dim(grad, "grad", 3, d.K);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* g = in_ptr<T>(grad, "grad", FeatureNdim + 1);
    T* o = out_ptr<T>(grad_src, "grad_src", FeatureNdim);
    const int64_t* iv = inv.data();
    run_kernel([&] {
      if constexpr (FeatureNdim == 4)
        rpfast::permute_adjacency_backward<T>(g, static_cast<const int64_t*>(perms.data()), iv, o, d, threads);
      else
        rpfast::permute_nodes_backward<T>(g, iv, o, d, threads);
    });
  };
  dispatch_float(grad_src, run);
}

}  // namespace

void bind_permute(py::module_& m) {
  m.def("check_permutations", &check_perms, py::arg("perms"), py::arg("batch_size"),
        py::arg("n_max"), py::arg("num_nodes") = py::none(),
        "Raise IndexError/ValueError unless perms [B, P, K] holds valid partial permutations.");
  m.def("permute_adjacency_forward", &forward<4>, py::arg("adj"), py::arg("perms"), py::arg("out"),
        py::arg("threads"));
  m.def("permute_adjacency_backward", &backward<4>, py::arg("grad"), py::arg("perms"),
        py::arg("grad_adj"), py::arg("threads"));
  m.def("permute_nodes_forward", &forward<3>, py::arg("x"), py::arg("perms"), py::arg("out"),
        py::arg("threads"));
  m.def("permute_nodes_backward", &backward<3>, py::arg("grad"), py::arg("perms"),
        py::arg("grad_x"), py::arg("threads"));
}

}  // namespace rpfast_bindings
