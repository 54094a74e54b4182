#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "rpfast/rooted.hpp"

namespace rpfast_bindings {
namespace {

// h, p, z: [D, N, R]; own [D, D]; bias [D]; scale [N]; rowptr [N + 1]; col [E].
void rooted_round(const Array& h, const Array& p, const Array& own, const Array& bias,
                  const Array& scale, const Array& rowptr, const Array& col, Array& z, int threads) {
  if (h.ndim() != 3) throw std::invalid_argument("h: expected [D, N, R]");
  const int64_t D = h.shape(0), N = h.shape(1), R = h.shape(2);
  auto like_h = [&](const Array& a, const char* name) {
    if (a.ndim() != 3) throw std::invalid_argument(std::string(name) + ": expected [D, N, R]");
    for (py::ssize_t d = 0; d < 3; ++d) expect_dim(a, name, d, h.shape(d));
  };
  like_h(p, "p");
  like_h(z, "z");
  expect_dim(own, "own", 0, D);
  expect_dim(own, "own", 1, D);
  expect_dim(bias, "bias", 0, D);
  expect_dim(scale, "scale", 0, N);
  const int64_t* cl = nullptr;
  const int64_t* rp = checked_csr(rowptr, col, N, &cl);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* hs = in_ptr<T>(h, "h", 3);
    const T* ps = in_ptr<T>(p, "p", 3);
    const T* ws = in_ptr<T>(own, "own", 2);
    const T* bs = in_ptr<T>(bias, "bias", 1);
    const T* ss = in_ptr<T>(scale, "scale", 1);
    T* zs = out_ptr<T>(z, "z", 3);
    run_kernel([&] { rpfast::rooted_round<T>(hs, ps, ws, bs, ss, rp, cl, zs, D, N, R, threads); });
  };
  dispatch_float(h, run);
}

}  // namespace

void bind_rooted(py::module_& m) {
  m.def("rooted_round", &rooted_round, py::arg("h"), py::arg("p"), py::arg("own"), py::arg("bias"),
        py::arg("scale"), py::arg("rowptr"), py::arg("col"), py::arg("z"), py::arg("threads"),
        "z[c, v] = bias[c] + sum_k own[c, k] h[k, v] + scale[v] (p[c, v] + sum over CSR row v of p[c, col]); "
        "h, p, z [D, N, R]");
}

}  // namespace rpfast_bindings
