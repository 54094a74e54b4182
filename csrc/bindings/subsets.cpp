#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "bindings/interrupt.hpp"
#include "rpfast/graph.hpp"
#include "rpfast/grow.hpp"
#include "rpfast/subsets_batch.hpp"
#include "rpfast/subsets_complement.hpp"
#include "rpfast/subsets_rejection.hpp"

namespace rpfast_bindings {
namespace {

// A copy of a 1-D int64 buffer (for objects that outlive the call).
std::vector<int64_t> copy_of(const Array& a, const char* name) {
  const int64_t* p = in_ptr<int64_t>(a, name, 1);
  return std::vector<int64_t>(p, p + a.shape(0));
}

// Subsets per (graph, root) task. Counting stops as soon as a graph's total passes
// graph_limit or the batch total passes total_limit; returns (counts [N] uint64,
// exceeded, graph that exceeded or -1 for the total). Counts are partial when exceeded.
py::tuple count(const Array& ptr, const Array& rowptr, const Array& col, int64_t k, int64_t prune,
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

// Per graph, bounded counting (subsets_batch.hpp, count_graphs_bounded): returns
// (task_counts [N] uint64, graph_counts [B] uint64, graph_steps [B] uint64, status [B] int64).
py::tuple count_bounded(const Array& ptr, const Array& rowptr, const Array& col, int64_t k,
                        int64_t prune, uint64_t step_limit, uint64_t count_limit, int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto p = rpfast::prune_from_code(prune);
  py::array_t<uint64_t> tasks(batch.total_nodes()), counts(batch.B), steps(batch.B);
  py::array_t<int64_t> status(batch.B);
  uint64_t *t = tasks.mutable_data(), *c = counts.mutable_data(), *s = steps.mutable_data();
  int64_t* st = status.mutable_data();
  run_kernel([&] { rpfast::count_graphs_bounded(batch, k, p, step_limit, count_limit, t, c, s, st, threads); });
  return py::make_tuple(tasks, counts, steps, status);
}

// comp [N] int64: every vertex's connected component within its graph, numbered from 0 in
// the order of the components' smallest vertices.
void components(const Array& ptr, const Array& rowptr, const Array& col, Array& out, int threads) {
  const auto batch = batch_view(ptr, rowptr, col);
  int64_t* o = out_ptr<int64_t>(out, "out", 1);
  expect_dim(out, "out", 0, batch.total_nodes());
  run_kernel([&] { rpfast::component_labels_batch(batch, o, threads); });
}

// The complement histogram of graph `graph` (subsets_complement.hpp): mode 0 independent
// sets (a = j_lo, b = j_hi), mode 1 connected sets (b = k). Returns (sizes [H] int64,
// others [H] int64, counts [H] uint64, steps, exceeded), sorted by (size, other); empty
// when exceeded. One thread (threads is accepted for the common kernel signature).
py::tuple complement_histogram(const Array& ptr, const Array& rowptr, const Array& col, int64_t graph,
                               int64_t mode, int64_t a, int64_t b, uint64_t step_limit, int /*threads*/) {
  const auto batch = batch_view(ptr, rowptr, col);
  if (graph < 0 || graph >= batch.B) throw std::out_of_range("graph " + std::to_string(graph) + " out of range");
  if (mode != 0 && mode != 1) throw std::invalid_argument("mode must be 0 (independent sets) or 1 (connected sets)");
  const rpfast::LocalGraph g = batch.graph(graph);
  rpfast::ComplementHistogram h;
  run_kernel([&] {
    rpfast::ComplementSearch search(g, step_limit);
    h = mode == 0 ? search.independent_sets(a, b) : search.connected_sets(b);
  });
  std::vector<std::pair<uint64_t, uint64_t>> entries(h.counts.begin(), h.counts.end());
  if (h.exceeded) entries.clear();
  std::sort(entries.begin(), entries.end());
  const auto H = static_cast<py::ssize_t>(entries.size());
  py::array_t<int64_t> sizes(H), others(H);
  py::array_t<uint64_t> counts(H);
  const uint64_t width = static_cast<uint64_t>(g.n) + 1;
  for (py::ssize_t i = 0; i < H; ++i) {
    sizes.mutable_data()[i] = static_cast<int64_t>(entries[i].first / width);
    others.mutable_data()[i] = static_cast<int64_t>(entries[i].first % width);
    counts.mutable_data()[i] = entries[i].second;
  }
  return py::make_tuple(sizes, others, counts, h.steps, h.exceeded);
}

// out [S, k]: uniform kept k-subsets of graph `graph` by rejection (subsets_rejection.hpp);
// returns (work, exceeded).
py::tuple sample_rejection(const Array& ptr, const Array& rowptr, const Array& col, int64_t graph,
                           int64_t k, int64_t prune, uint64_t seed, uint64_t work_limit, Array& out,
                           int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto p = rpfast::prune_from_code(prune);
  if (graph < 0 || graph >= batch.B) throw std::out_of_range("graph " + std::to_string(graph) + " out of range");
  const rpfast::LocalGraph g = batch.graph(graph);
  if (k > g.n) throw std::invalid_argument("k = " + std::to_string(k) + " exceeds the graph's " +
                                           std::to_string(g.n) + " vertices");
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_dim(out, "out", 1, k);
  rpfast::RejectionResult result{0, false};
  run_kernel([&] { result = rpfast::sample_by_rejection(g, k, p, seed, out.shape(0), work_limit, o, threads); });
  return py::make_tuple(result.work, result.exceeded);
}

// Writes the rows of tasks [t_begin, t_end) into out [offsets[t_end] - offsets[t_begin], k].
// offsets must be the prefix sums of complete subsets_count results.
void fill(const Array& ptr, const Array& rowptr, const Array& col, int64_t k, int64_t prune,
          const Array& offsets, int64_t t_begin, int64_t t_end, Array& out, int threads) {
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
void pick(const Array& ptr, const Array& rowptr, const Array& col, int64_t k, int64_t prune,
          const Array& pick_ptr, const Array& picks, Array& out, int threads) {
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

void sample_grown(const Array& ptr, const Array& rowptr, const Array& col, int64_t k,
                  bool depth_first, uint64_t seed, Array& out, int threads) {
  rpfast::check_subset_size(k);
  const auto batch = batch_view(ptr, rowptr, col);
  int64_t* o = out_ptr<int64_t>(out, "out", 3);
  expect_dim(out, "out", 0, batch.B);
  expect_dim(out, "out", 2, k);
  const int64_t S = out.shape(1);
  run_kernel([&] { rpfast::sample_grown_subsets(batch, k, S, depth_first, seed, o, threads); });
}

// SubsetEnumerator from buffers: copies of the batch's arrays and offsets, checked once.
std::unique_ptr<rpfast::SubsetEnumerator> make_enumerator(const Array& ptr, const Array& rowptr,
                                                          const Array& col, int64_t k, int64_t prune,
                                                          const Array& offsets, int64_t chunk_size) {
  const auto p = rpfast::prune_from_code(prune);
  return std::make_unique<rpfast::SubsetEnumerator>(copy_of(ptr, "ptr"), copy_of(rowptr, "rowptr"),
                                                    copy_of(col, "col"), k, p, copy_of(offsets, "offsets"),
                                                    chunk_size);
}

int64_t enumerator_fill(rpfast::SubsetEnumerator& self, Array& out, Array& graph, int threads) {
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
  m.def("subsets_count_bounded", &count_bounded, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("prune"), py::arg("step_limit"), py::arg("count_limit"), py::arg("threads"),
        "(task_counts [N], graph_counts [B], graph_steps [B], status [B]): each graph counted root by root "
        "until its steps pass step_limit (status 2) or its count passes count_limit (status 1).");
  m.def("graph_components", &components, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("out"),
        py::arg("threads"), "out [N]: each vertex's connected component within its graph.");
  m.def("subsets_complement_histogram", &complement_histogram, py::arg("ptr"), py::arg("rowptr"), py::arg("col"),
        py::arg("graph"), py::arg("mode"), py::arg("a"), py::arg("b"), py::arg("step_limit"), py::arg("threads"),
        "(sizes, others, counts, steps, exceeded): independent sets (mode 0) or connected sets (mode 1) of "
        "one graph by size and common non-neighbours (rpfast/subsets_complement.hpp).");
  m.def("subsets_sample_rejection", &sample_rejection, py::arg("ptr"), py::arg("rowptr"), py::arg("col"),
        py::arg("graph"), py::arg("k"), py::arg("prune"), py::arg("seed"), py::arg("work_limit"), py::arg("out"),
        py::arg("threads"), "(work, exceeded): out [S, k] uniform kept k-subsets of one graph by rejection.");
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
