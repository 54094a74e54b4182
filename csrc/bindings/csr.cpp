#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/csr.hpp"

namespace rpfast_bindings {
namespace {

// rows, cols [E] int64 -> rowptr [N + 1], col [E], order [E] (outputs the caller allocated).
void build_csr(const py::array& rows, const py::array& cols, int64_t N, py::array& rowptr, py::array& col,
               py::array& order) {
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
  py::gil_scoped_release release;
  rpfast::build_csr(r, c, E, N, rp, cp, op);
}

}  // namespace

void bind_csr(py::module_& m) {
  m.def("build_csr", &build_csr, py::arg("rows"), py::arg("cols"), py::arg("num_nodes"), py::arg("rowptr"),
        py::arg("col"), py::arg("order"));
}

}  // namespace rpfast_bindings
