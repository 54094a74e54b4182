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

// start [N, D]; marker [H, D]; own, passed [H, L, D, D]; bias [H, L, D]; scale [N];
// roots [R, B, K]; graph_hash [B]; ptr [B + 1]; rowptr [N + 1]; col [E]; out [R, B, D].
void rooted_pool(const Array& start, const Array& marker, const Array& own, const Array& passed, const Array& bias,
                 const Array& scale, const Array& roots, const Array& graph_hash, const Array& ptr,
                 const Array& rowptr, const Array& col, Array& out, int threads) {
  if (start.ndim() != 2) throw std::invalid_argument("start: expected [N, D]");
  if (own.ndim() != 4) throw std::invalid_argument("own: expected [H, L, D, D]");
  if (roots.ndim() != 3) throw std::invalid_argument("roots: expected [R, B, K]");
  const int64_t N = start.shape(0), D = start.shape(1), H = own.shape(0), L = own.shape(1);
  const int64_t R = roots.shape(0), B = roots.shape(1), K = roots.shape(2);
  if (H < 1 || L < 1 || D < 1) throw std::invalid_argument("rooted_pool: H, L and D must be positive");
  expect_leading(own, "own", {H, L, D, D});
  expect_leading(passed, "passed", {H, L, D, D});
  expect_leading(bias, "bias", {H, L, D});
  expect_leading(marker, "marker", {H, D});
  expect_dim(scale, "scale", 0, N);
  expect_dim(graph_hash, "graph_hash", 0, B);
  expect_dim(ptr, "ptr", 0, B + 1);
  expect_leading(out, "out", {R, B, D});
  const int64_t* rs = in_ptr<int64_t>(roots, "roots", 3);
  const int64_t* gh = in_ptr<int64_t>(graph_hash, "graph_hash", 1);
  const int64_t* pt = in_ptr<int64_t>(ptr, "ptr", 1);
  if (pt[0] != 0 || pt[B] != N) throw std::invalid_argument("ptr: must run from 0 to the N rows of start");
  for (int64_t b = 0; b < B; ++b) {
    if (pt[b + 1] < pt[b]) throw std::invalid_argument("ptr: must not decrease");
    if (gh[b] < 0 || gh[b] >= H)
      throw std::out_of_range("graph_hash: " + std::to_string(gh[b]) + " at graph " + std::to_string(b) +
                              " is not one of the " + std::to_string(H) + " hashes");
  }
  const int64_t* cl = nullptr;
  const int64_t* rp = checked_csr(rowptr, col, N, &cl);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* st = in_ptr<T>(start, "start", 2);
    const T* mk = in_ptr<T>(marker, "marker", 2);
    const T* ow = in_ptr<T>(own, "own", 4);
    const T* pa = in_ptr<T>(passed, "passed", 4);
    const T* bi = in_ptr<T>(bias, "bias", 3);
    const T* sc = in_ptr<T>(scale, "scale", 1);
    T* os = out_ptr<T>(out, "out", 3);
    run_kernel([&] {
      rpfast::rooted_pool<T>(st, mk, ow, pa, bi, sc, rs, gh, pt, rp, cl, os, N, B, H, D, L, R, K, threads);
    });
  };
  dispatch_float(start, run);
}

}  // namespace

void bind_rooted(py::module_& m) {
  m.def("rooted_round", &rooted_round, py::arg("h"), py::arg("p"), py::arg("own"), py::arg("bias"),
        py::arg("scale"), py::arg("rowptr"), py::arg("col"), py::arg("z"), py::arg("threads"),
        "z[c, v] = bias[c] + sum_k own[c, k] h[k, v] + scale[v] (p[c, v] + sum over CSR row v of p[c, col]); "
        "h, p, z [D, N, R]");
  m.def("rooted_pool", &rooted_pool, py::arg("start"), py::arg("marker"), py::arg("own"), py::arg("passed"),
        py::arg("bias"), py::arg("scale"), py::arg("roots"), py::arg("graph_hash"), py::arg("ptr"), py::arg("rowptr"),
        py::arg("col"), py::arg("out"), py::arg("threads"),
        "out[r, b] = the mean over graph b's nodes of the last of L cosine rounds from the roots roots[r, b] "
        "(RootedRP's fixed hash, forward only)");
}

}  // namespace rpfast_bindings
