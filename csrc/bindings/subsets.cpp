#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "rpfast/grow.hpp"
#include "rpfast/subsets_batch.hpp"

namespace rpfast_bindings {
namespace {

rpfast::SubsetMode mode_of(int mode) {
  if (mode < 0 || mode > 3) throw std::invalid_argument("unknown subset mode " + std::to_string(mode));
  return static_cast<rpfast::SubsetMode>(mode);
}

py::array_t<uint64_t> count(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k,
                            int mode, int threads) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  const auto batch = batch_view(ptr, rowptr, col);
  const auto m = mode_of(mode);
  py::array_t<uint64_t> counts(batch.total_nodes());
  uint64_t* out = counts.mutable_data();
  py::gil_scoped_release release;
  rpfast::count_tasks(batch, k, m, out, threads);
  return counts;
}

// Writes the rows of tasks [t_begin, t_end) into out [offsets[t_end] - offsets[t_begin], k].
// offsets must be the prefix sums of subsets_count (the kernel trusts them as row counts).
void fill(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int mode,
          const py::array& offsets, int64_t t_begin, int64_t t_end, py::array& out, int threads) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  const auto batch = batch_view(ptr, rowptr, col);
  const auto m = mode_of(mode);
  const int64_t N = batch.total_nodes();
  const int64_t* off = in_ptr<int64_t>(offsets, "offsets", 1);
  expect_dim(offsets, "offsets", 0, N + 1);
  if (t_begin < 0 || t_end > N || t_begin > t_end) throw std::out_of_range("task range out of bounds");
  for (int64_t t = 0; t < N; ++t)
    if (off[t + 1] < off[t]) throw std::invalid_argument("offsets decrease");
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  expect_leading(out, "out", {off[t_end] - off[t_begin], k});
  py::gil_scoped_release release;
  rpfast::fill_tasks(batch, k, m, off, t_begin, t_end, o, threads);
}

int64_t fill_one(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k, int mode,
                 int64_t graph, int64_t root, int64_t skip, int64_t limit, const py::object& resume_after,
                 py::array& out) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  const auto batch = batch_view(ptr, rowptr, col);
  if (graph < 0 || graph >= batch.B) throw std::out_of_range("graph index out of range");
  const auto g = batch.graph(graph);
  if (root < 0 || root >= g.n) throw std::out_of_range("root out of range");
  if (skip < 0) throw std::invalid_argument("skip must be >= 0");
  int64_t* o = out_ptr<int64_t>(out, "out", 2);
  if (out.shape(1) != k || out.shape(0) < limit) throw std::invalid_argument("out must be [>= limit, k]");
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
  py::gil_scoped_release release;
  return rpfast::SubsetSearch(g, k, m).fill(root, skip, limit, resume.empty() ? nullptr : resume.data(), o);
}

void sample_grown(const py::array& ptr, const py::array& rowptr, const py::array& col, int64_t k,
                  bool depth_first, uint64_t seed, py::array& out, int threads) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  const auto batch = batch_view(ptr, rowptr, col);
  int64_t* o = out_ptr<int64_t>(out, "out", 3);
  expect_dim(out, "out", 0, batch.B);
  expect_dim(out, "out", 2, k);
  const int64_t S = out.shape(1);
  py::gil_scoped_release release;
  rpfast::sample_grown_subsets(batch, k, S, depth_first, seed, o, threads);
}

}  // namespace

void bind_subsets(py::module_& m) {
  m.def("subsets_count", &count, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("mode"), py::arg("threads"), "Subsets per (graph, root) task, saturating at 2^64 - 1.");
  m.def("subsets_fill", &fill, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("mode"), py::arg("offsets"), py::arg("t_begin"), py::arg("t_end"), py::arg("out"),
        py::arg("threads"));
  m.def("subsets_fill_task", &fill_one, py::arg("ptr"), py::arg("rowptr"), py::arg("col"), py::arg("k"),
        py::arg("mode"), py::arg("graph"), py::arg("root"), py::arg("skip"), py::arg("limit"),
        py::arg("resume_after"), py::arg("out"));
  m.def("sample_grown_subsets", &sample_grown, py::arg("ptr"), py::arg("rowptr"), py::arg("col"),
        py::arg("k"), py::arg("depth_first"), py::arg("seed"), py::arg("out"), py::arg("threads"),
        "out [B, S, k]: connected k-subsets grown by BFS/DFS from random starts, in visiting order.");
}

}  // namespace rpfast_bindings
