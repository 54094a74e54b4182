#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "bindings/interrupt.hpp"
#include "rpfast/random.hpp"

namespace rpfast_bindings {
namespace {

void random_permutations(const Array& num_nodes, uint64_t seed, Array& out, int threads) {
  const int64_t* nn = in_ptr<int64_t>(num_nodes, "num_nodes", 1);
  int64_t* o = out_ptr<int64_t>(out, "out", 3);
  const int64_t B = num_nodes.shape(0);
  expect_dim(out, "out", 0, B);
  for (int64_t b = 0; b < B; ++b)
    if (nn[b] < 0)
      throw std::invalid_argument("num_nodes[" + std::to_string(b) + "] = " +
                                  std::to_string(nn[b]) + " is negative");
  run_kernel([&] { rpfast::random_permutations(nn, B, out.shape(1), out.shape(2), seed, o, threads); });
}

// out [P, N]: every node's position mod `modulus` under P uniform relabelings of its graph.
void random_positions(const Array& ptr, int64_t modulus, uint64_t seed, Array& out, int threads) {
  const int64_t* pp = in_ptr<int64_t>(ptr, "ptr", 1);
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  const int64_t B = ptr.shape(0) - 1;
  if (B < 0 || pp[0] != 0) throw std::invalid_argument("ptr must start at 0");
  for (int64_t b = 0; b < B; ++b)
    if (pp[b + 1] < pp[b]) throw std::invalid_argument("ptr must be non-decreasing");
  if (modulus < 1) throw std::invalid_argument("modulus must be >= 1");
  expect_dim(out, "out", 1, pp[B]);
  run_kernel([&] { rpfast::random_positions(pp, B, out.shape(0), modulus, seed, o, threads); });
}

}  // namespace

void bind_random(py::module_& m) {
  m.def("random_permutations", &random_permutations, py::arg("num_nodes"), py::arg("seed"),
        py::arg("out"), py::arg("threads"),
        "Fill out [B, P, K] with uniform random partial permutations (-1 padded).");
  m.def("random_positions", &random_positions, py::arg("ptr"), py::arg("modulus"), py::arg("seed"), py::arg("out"),
        py::arg("threads"), "out [P, N]: each node's position mod `modulus` under P uniform relabelings of its graph.");
}

}  // namespace rpfast_bindings
