// Buffers to the C++ graph views (rpfast/graph.hpp), checked there.
#pragma once
#include "bindings/arrays.hpp"
#include "rpfast/graph.hpp"

namespace rpfast_bindings {

// ptr [B + 1], rowptr [N + 1], col [E] (GraphBatch.undirected_csr()) as a checked view;
// the arrays must outlive it.
inline rpfast::GraphBatchView batch_view(const py::array& ptr, const py::array& rowptr, const py::array& col) {
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  const int64_t* c = in_ptr<int64_t>(col, "col", 1);
  return rpfast::checked_batch_view(p, ptr.shape(0), rp, rowptr.shape(0), c, col.shape(0));
}

}  // namespace rpfast_bindings
