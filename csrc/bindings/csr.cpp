#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/csr.hpp"

namespace rpfast_bindings {
namespace {

// rows, cols [E] int64 -> rowptr [N + 1], col [E], order [E] (outputs the caller allocated).
void build_csr(const Array& rows, const Array& cols, int64_t N, Array& rowptr, Array& col,
               Array& order) {
  const int64_t* r = in_ptr<int64_t>(rows, "rows", 1);
  const int64_t* c = in_ptr<int64_t>(cols, "cols", 1);
  const int64_t E = rows.shape(0);
  if (N < 0) throw std::invalid_argument("build_csr: N must be >= 0");
  expect_dim(cols, "cols", 0, E);
  expect_dim(rowptr, "rowptr", 0, N + 1);
  expect_dim(col, "col", 0, E);
  expect_dim(order, "order", 0, E);
  int64_t* rp = out_ptr<int64_t>(rowptr, "rowptr", 1);
  int64_t* cp = out_ptr<int64_t>(col, "col", 1);
  int64_t* op = out_ptr<int64_t>(order, "order", 1);
  run_kernel([&] { rpfast::build_csr(r, c, E, N, rp, cp, op); });
}

// graphs [G] of a batch (ptr, edge_ptr [B + 1]) -> (new node count, new edge count), writing the
// new ptr [G + 1]; checks the range.
py::tuple select_sizes(const Array& ptr, const Array& edge_ptr, const Array& graphs, Array& new_ptr) {
  const int64_t B = ptr.shape(0) - 1;
  if (B < 0) throw std::invalid_argument("select_sizes: empty ptr");
  expect_dim(edge_ptr, "edge_ptr", 0, B + 1);
  expect_dim(new_ptr, "new_ptr", 0, graphs.shape(0) + 1);
  const auto sizes = rpfast::select_sizes(in_ptr<int64_t>(ptr, "ptr", 1), in_ptr<int64_t>(edge_ptr, "edge_ptr", 1), B,
                                          in_ptr<int64_t>(graphs, "graphs", 1), graphs.shape(0),
                                          out_ptr<int64_t>(new_ptr, "new_ptr", 1));
  return py::make_tuple(sizes.first, sizes.second);
}

// One CSR's slices for graphs [G] (see rpfast/csr.hpp). edge_index [2, E'], old_edge [E'] and
// nodes [N'] are None for the transpose CSR; outputs are the caller's, sized by select_sizes.
void select_csr(const Array& ptr, const Array& edge_ptr, const Array& edge_rank, const Array& graphs,
                const Array& rowptr, const Array& col, const Array& order, Array& new_rowptr,
                Array& new_col, Array& new_order, const py::object& edge_index, const py::object& old_edge,
                const py::object& nodes) {
  const int64_t B = ptr.shape(0) - 1, N = rowptr.shape(0) - 1, E = col.shape(0), G = graphs.shape(0);
  if (B < 0 || N < 0) throw std::invalid_argument("select_csr: empty ptr or rowptr");
  expect_dim(edge_ptr, "edge_ptr", 0, B + 1);
  expect_dim(edge_rank, "edge_rank", 0, E);
  expect_dim(order, "order", 0, E);
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  const int64_t* ep = in_ptr<int64_t>(edge_ptr, "edge_ptr", 1);
  const int64_t* g = in_ptr<int64_t>(graphs, "graphs", 1);
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  if (p[B] != N || ep[B] != E || rp[N] != E) throw std::invalid_argument("select_csr: ptr, edge_ptr and rowptr disagree");
  const auto sizes = rpfast::select_sizes(p, ep, B, g, G, nullptr);
  expect_dim(new_rowptr, "new_rowptr", 0, sizes.first + 1);
  expect_dim(new_col, "new_col", 0, sizes.second);
  expect_dim(new_order, "new_order", 0, sizes.second);
  int64_t *sources = nullptr, *targets = nullptr, *old = nullptr, *node_ids = nullptr;
  if (!edge_index.is_none()) {
    const Array ei = edge_index.cast<Array>(), oe = old_edge.cast<Array>(), nd = nodes.cast<Array>();
    expect_leading(ei, "edge_index", {2, sizes.second});
    expect_dim(oe, "old_edge", 0, sizes.second);
    expect_dim(nd, "nodes", 0, sizes.first);
    sources = out_ptr<int64_t>(ei, "edge_index", 2);
    targets = sources + sizes.second;
    old = out_ptr<int64_t>(oe, "old_edge", 1);
    node_ids = out_ptr<int64_t>(nd, "nodes", 1);
  }
  const int64_t* c = in_ptr<int64_t>(col, "col", 1);
  const int64_t* o = in_ptr<int64_t>(order, "order", 1);
  const int64_t* rank = in_ptr<int64_t>(edge_rank, "edge_rank", 1);
  int64_t* nr = out_ptr<int64_t>(new_rowptr, "new_rowptr", 1);
  int64_t* nc = out_ptr<int64_t>(new_col, "new_col", 1);
  int64_t* no = out_ptr<int64_t>(new_order, "new_order", 1);
  run_kernel([&] { rpfast::select_csr(p, ep, rank, g, G, rp, c, o, nr, nc, no, sources, targets, old, node_ids); });
}

}  // namespace

void bind_csr(py::module_& m) {
  m.def("select_sizes", &select_sizes, py::arg("ptr"), py::arg("edge_ptr"), py::arg("graphs"), py::arg("new_ptr"));
  m.def("select_csr", &select_csr, py::arg("ptr"), py::arg("edge_ptr"), py::arg("edge_rank"), py::arg("graphs"),
        py::arg("rowptr"), py::arg("col"), py::arg("order"), py::arg("new_rowptr"), py::arg("new_col"),
        py::arg("new_order"), py::arg("edge_index"), py::arg("old_edge"), py::arg("nodes"));
  m.def("build_csr", &build_csr, py::arg("rows"), py::arg("cols"), py::arg("num_nodes"), py::arg("rowptr"),
        py::arg("col"), py::arg("order"));
}

}  // namespace rpfast_bindings
