#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "bindings/interrupt.hpp"
#include "rpfast/orient.hpp"
#include "rpfast/wl.hpp"

namespace rpfast_bindings {
namespace {

void orders(const Array& ptr, const Array& rowptr, const Array& col, const Array& start,
            const py::object& tiebreak, bool depth_first, Array& out, int threads) {
  const auto batch = batch_view(ptr, rowptr, col);
  const int64_t* s = in_ptr<int64_t>(start, "start", 2);
  expect_dim(start, "start", 0, batch.B);
  const int64_t P = start.shape(1);
  int64_t* o = out_ptr<int64_t>(out, "out", 3);
  expect_leading(out, "out", {batch.B, P});
  const int64_t K = out.shape(2);
  const int64_t* t = nullptr;
  Array tie;
  if (!tiebreak.is_none()) {
    tie = tiebreak.cast<Array>();
    t = in_ptr<int64_t>(tie, "tiebreak", 3);
    expect_leading(tie, "tiebreak", {batch.B, P});
  }
  const int64_t stride = t ? tie.shape(2) : batch.max_nodes();
  rpfast::check_orientation_inputs(batch, s, t, P, stride);
  run_kernel([&] { rpfast::traversal_orders(batch, s, t, P, stride, K, depth_first, o, threads); });
}

void wl(const Array& ptr, const Array& rowptr, const Array& col, Array& colours, int threads) {
  const auto batch = batch_view(ptr, rowptr, col);
  int64_t* c = out_ptr<int64_t>(colours, "colours", 1);
  expect_dim(colours, "colours", 0, batch.total_nodes());
  run_kernel([&] { rpfast::wl_refine(batch, c, threads); });
}

}  // namespace

void bind_orient(py::module_& m) {
  m.def("traversal_orders", &orders, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("start"),
        py::arg("tiebreak"), py::arg("depth_first"), py::arg("out"), py::arg("threads"),
        "out [B, P, K]: DFS/BFS visiting orders with rank tie-breaking and restarts.");
  m.def("wl_refine", &wl, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("colours"),
        py::arg("threads"), "Refine colours [N] in place to the stable 1-WL partition (canonical names).");
}

}  // namespace rpfast_bindings
