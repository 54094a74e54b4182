#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "bindings/interrupt.hpp"
#include "rpfast/grow.hpp"
#include "rpfast/subsets_batch.hpp"

namespace rpfast_bindings {
namespace {

rpfast::SubsetMode mode_of(int mode) {
  if (mode < 0 || mode > 3) throw std::invalid_argument("unknown subset mode " + std::to_string(mode));
  return static_cast<rpfast::SubsetMode>(mode);
}

void check_k(int64_t k) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
}

// A per-task offset array [N + 1]: starts at 0, never decreases.
const int64_t* task_offsets(const py::array& offsets, const char* name, int64_t N) {
  const int64_t* off = in_ptr<int64_t>(offsets, name, 1);
  expect_dim(offsets, name, 0, N + 1);
  if (off[0] != 0) throw std::invalid_argument(std::string(name) + " must start at 0");
  for (int64_t t = 0; t < N; ++t)
    if (off[t + 1] < off[t]) throw std::invalid_argument(std::string(name) + " decreases at task " + std::to_string(t));
  return off;
}

// Subsets per (graph, root) task. Counting stops as soon as a graph's total passes
// graph_limit or the batch total passes total_limit; returns (counts [N] uint64,
// exceeded, graph that exceeded or -1 for the total). Counts are partial when exceeded.
py::tuple count(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int mode,
                uint64_t graph_limit, uint64_t total_limit, int threads) {
  check_k(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto m = mode_of(mode);
  py::array_t<uint64_t> counts(batch.total_nodes());
  uint64_t* out = counts.mutable_data();
  rpfast::CountResult result{false, -1};
  run_kernel([&] { result = rpfast::count_tasks(batch, k, m, graph_limit, total_limit, out, threads); });
  return py::make_tuple(counts, result.exceeded, result.graph);
}

// Writes the rows of tasks [t_begin, t_end) into out [offsets[t_end] - offsets[t_begin], k].
// offsets must be the prefix sums of complete subsets_count results.
void fill(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int mode,
          const py::array& offsets, int64_t t_begin, int64_t t_end, py::array& out, int threads) {
  check_k(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto m = mode_of(mode);
  const int64_t N = batch.total_nodes();
  const int64_t* off = task_offsets(offsets, "offsets", N);
  if (t_begin < 0 || t_end > N || t_begin > t_end) throw std::out_of_range("task range out of bounds");
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_leading(out, "out", {off[t_end] - off[t_begin], k});
  run_kernel([&] { rpfast::fill_tasks(batch, k, m, off, t_begin, t_end, o, threads); });
}

// A window of one task in lexicographic order (see SubsetSearch::fill_window).
int64_t fill_window(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int mode,
                    int64_t graph, int64_t root, uint64_t skip, int64_t limit, const py::object& resume_after,
                    py::array& out) {
  check_k(k);
  const auto batch = batch_view(ptr, rowptr, col);
  if (graph < 0 || graph >= batch.B) throw std::out_of_range("graph index out of range");
  const auto g = batch.graph(graph);
  if (root < 0 || root >= g.n) throw std::out_of_range("root out of range");
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  if (limit < 0 || out.shape(1) != k || out.shape(0) < limit) throw std::invalid_argument("out must be [>= limit, k]");
  std::vector<int64_t> resume;
  if (!resume_after.is_none()) {
    py::array r = resume_after.cast<py::array>();
    const int64_t* rp = in_ptr<int64_t>(r, "resume_after", 1);
    expect_dim(r, "resume_after", 0, k);
    if (rp[0] != root) throw std::invalid_argument("resume_after must start at the root");
    for (int64_t i = 0; i < k; ++i) {
      if (rp[i] < 0 || rp[i] >= g.n || (i && rp[i] <= rp[i - 1]))
        throw std::invalid_argument("resume_after must be an increasing subset of the graph");
    }
    resume.assign(rp, rp + k);
  }
  const rpfast::SubsetMode m = mode_of(mode);
  if (g.n - root < k) return 0;  // no subset (and no search state of size k to build)
  int64_t written = 0;
  run_kernel([&] {
    rpfast::SubsetSearch search(g, k, m);
    written = search.fill_window(root, skip, limit, resume.empty() ? nullptr : resume.data(), o);
  });
  return written;
}

// Rows at task-local indices: pick_ptr [N + 1] groups `picks` (ascending within a task,
// each below its task's count) by task; out [pick_ptr[N], k].
void pick(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int mode,
          const py::array& pick_ptr, const py::array& picks, py::array& out, int threads) {
  check_k(k);
  const auto batch = batch_view(ptr, rowptr, col);
  const auto m = mode_of(mode);
  const int64_t N = batch.total_nodes();
  const int64_t* pp = task_offsets(pick_ptr, "pick_ptr", N);
  const uint64_t* pk = in_ptr<uint64_t>(picks, "picks", 1);
  if (pp[N] != picks.shape(0)) throw std::invalid_argument("pick_ptr must span picks");
  for (int64_t t = 0; t < N; ++t) {
    for (int64_t i = pp[t] + 1; i < pp[t + 1]; ++i)
      if (pk[i] < pk[i - 1]) throw std::invalid_argument("picks must ascend within a task");
  }
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_leading(out, "out", {picks.shape(0), k});
  run_kernel([&] { rpfast::pick_tasks(batch, k, m, pp, pk, o, threads); });
}

void sample_grown(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k,
                  bool depth_first, uint64_t seed, py::array& out, int threads) {
  check_k(k);
  const auto batch = batch_view(ptr, rowptr, col);
  int64_t* o = out_ptr<int64_t>(out, "out", 3);
  expect_dim(out, "out", 0, batch.B);
  expect_dim(out, "out", 2, k);
  const int64_t S = out.shape(1);
  run_kernel([&] { rpfast::sample_grown_subsets(batch, k, S, depth_first, seed, o, threads); });
}

}  // namespace

void bind_subsets(py::module_& m) {
  m.def("subsets_count", &count, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("mode"), py::arg("graph_limit"), py::arg("total_limit"), py::arg("threads"),
        "(counts [N] per (graph, root) task, exceeded, graph): counting stops once a limit is passed.");
  m.def("subsets_fill", &fill, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("mode"), py::arg("offsets"), py::arg("t_begin"), py::arg("t_end"), py::arg("out"),
        py::arg("threads"));
  m.def("subsets_fill_window", &fill_window, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("mode"), py::arg("graph"), py::arg("root"), py::arg("skip"), py::arg("limit"),
        py::arg("resume_after"), py::arg("out"));
  m.def("subsets_pick", &pick, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"), py::arg("mode"),
        py::arg("pick_ptr"), py::arg("picks"), py::arg("out"), py::arg("threads"));
  m.def("sample_grown_subsets", &sample_grown, py::arg("ptr"), py::arg("rowptr"), py::arg("col"),
        py::arg("k"), py::arg("depth_first"), py::arg("seed"), py::arg("out"), py::arg("threads"),
        "out [B, S, k]: connected k-subsets grown by BFS/DFS from random starts, in visiting order.");
}

}  // namespace rpfast_bindings
