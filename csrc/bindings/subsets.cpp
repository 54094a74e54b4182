#include <utility>
#include <vector>

#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "bindings/interrupt.hpp"
#include "rpfast/graph.hpp"
#include "rpfast/grow.hpp"
#include "rpfast/subsets_batch.hpp"

namespace rpfast_bindings {
namespace {

// A copy of a 1-D int64 buffer (for objects that outlive the call).
std::vector<int64_t> copy_of(const py::array& a, const char* name) {
  const int64_t* p = in_ptr<int64_t>(a, name, 1);
  return std::vector<int64_t>(p, p + a.shape(0));
}

// Subsets per (graph, root) task. Counting stops as soon as a graph's total passes
// graph_limit or the batch total passes total_limit; returns (counts [N] uint64,
// exceeded, graph that exceeded or -1 for the total). Counts are partial when exceeded.
py::tuple count(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int64_t prune,
                uint64_t graph_limit, uint64_t total_limit, int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto p = rpfast::prune_from_code(prune);
  py::array_t<uint64_t> counts(batch.total_nodes());
  uint64_t* out = counts.mutable_data();
  rpfast::CountResult result{false, -1};
  run_kernel([&] { result = rpfast::count_tasks(batch, k, p, graph_limit, total_limit, out, threads); });
  return py::make_tuple(counts, result.exceeded, result.graph);
}

// Writes the rows of tasks [t_begin, t_end) into out [offsets[t_end] - offsets[t_begin], k].
// offsets must be the prefix sums of complete subsets_count results.
void fill(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int64_t prune,
          const py::array& offsets, int64_t t_begin, int64_t t_end, py::array& out, int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto p = rpfast::prune_from_code(prune);
  const int64_t N = batch.total_nodes();
  const int64_t* off = in_ptr<int64_t>(offsets, "offsets", 1);
  rpfast::check_offsets(off, offsets.shape(0), N, "offsets");
  if (t_begin < 0 || t_end > N || t_begin > t_end) throw std::out_of_range("task range out of bounds");
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_leading(out, "out", {off[t_end] - off[t_begin], k});
  run_kernel([&] { rpfast::fill_tasks(batch, k, p, off, t_begin, t_end, o, threads); });
}

// Rows at task-local indices: pick_ptr [N + 1] groups `picks` (ascending within a task,
// each below its task's count) by task; out [pick_ptr[N], k].
void pick(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int64_t prune,
          const py::array& pick_ptr, const py::array& picks, py::array& out, int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto p = rpfast::prune_from_code(prune);
  const int64_t* pp = in_ptr<int64_t>(pick_ptr, "pick_ptr", 1);
  const uint64_t* pk = in_ptr<uint64_t>(picks, "picks", 1);
  rpfast::check_picks(pp, pick_ptr.shape(0), batch.total_nodes(), pk, picks.shape(0));
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_leading(out, "out", {picks.shape(0), k});
  run_kernel([&] { rpfast::pick_tasks(batch, k, p, pp, pk, o, threads); });
}

void sample_grown(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k,
                  bool depth_first, uint64_t seed, py::array& out, int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  int64_t* o = out_ptr<int64_t>(out, "out", 3);
  expect_dim(out, "out", 0, batch.B);
  expect_dim(out, "out", 2, k);
  const int64_t S = out.shape(1);
  run_kernel([&] { rpfast::sample_grown_subsets(batch, k, S, depth_first, seed, o, threads); });
}

// SubsetEnumerator from buffers: copies of the batch's arrays and offsets, checked once.
std::unique_ptr<rpfast::SubsetEnumerator> make_enumerator(const py::array& ptr, const py::array& rowptr,
                                                          const py::array& col, int64_t k, int64_t prune,
                                                          const py::array& offsets, int64_t chunk_size) {
  const auto p = rpfast::prune_from_code(prune);
  return std::make_unique<rpfast::SubsetEnumerator>(copy_of(ptr, "ptr"), copy_of(rowptr, "rowptr"),
                                                    copy_of(col, "col"), k, p, copy_of(offsets, "offsets"),
                                                    chunk_size);
}

int64_t enumerator_fill(rpfast::SubsetEnumerator& self, py::array& out, py::array& graph, int threads) {
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_dim(out, "out", 1, self.k());
  int64_t* g = out_ptr<int64_t>(graph, "graph", 1);
  int64_t written = 0;
  run_kernel([&] { written = self.fill(o, out.shape(0), g, graph.shape(0), threads); });
  return written;
}

}  // namespace

void bind_subsets(py::module_& m) {
  m.def("subsets_count", &count, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("prune"), py::arg("graph_limit"), py::arg("total_limit"), py::arg("threads"),
        "(counts [N] per (graph, root) task, exceeded, graph): counting stops once a limit is passed.");
  m.def("subsets_fill", &fill, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("prune"), py::arg("offsets"), py::arg("t_begin"), py::arg("t_end"), py::arg("out"),
        py::arg("threads"));
  m.def("subsets_pick", &pick, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"), py::arg("prune"),
        py::arg("pick_ptr"), py::arg("picks"), py::arg("out"), py::arg("threads"));
  m.def("sample_grown_subsets", &sample_grown, py::arg("ptr"), py::arg("rowptr"), py::arg("col"),
        py::arg("k"), py::arg("depth_first"), py::arg("seed"), py::arg("out"), py::arg("threads"),
        "out [B, S, k]: connected k-subsets grown by BFS/DFS from random starts, in visiting order.");
  py::class_<rpfast::SubsetEnumerator>(
      m, "SubsetEnumerator",
      "Streams the rows of subsets_fill over a whole batch, chunk_size rows at a time, keeping its position "
      "between chunks (rpfast/subsets_batch.hpp). Built once from copies of ptr [B + 1], rowptr [N + 1], "
      "col [E] and offsets [N + 1] (prefix sums of complete subsets_count results), checked here.",
      py::module_local())  // the SIMD variants of the module each register their own class
      .def(py::init(&make_enumerator), py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
           py::arg("prune"), py::arg("offsets"), py::arg("chunk_size"))
      .def("next_rows", &rpfast::SubsetEnumerator::next_rows, "Rows the next fill writes (0 when exhausted).")
      .def("fill", &enumerator_fill, py::arg("out"), py::arg("graph"), py::arg("threads"),
           "Write the next chunk to out [>= next_rows(), k] and each row's graph to graph [>= next_rows()]; "
           "returns the rows written (0 when exhausted). Ctrl-C raises KeyboardInterrupt and keeps the position.")
      .def_property_readonly("k", &rpfast::SubsetEnumerator::k)
      .def_property_readonly("chunk_size", &rpfast::SubsetEnumerator::chunk_size)
      .def_property_readonly("total", &rpfast::SubsetEnumerator::total)
      .def_property_readonly("position", &rpfast::SubsetEnumerator::position);
}

}  // namespace rpfast_bindings
