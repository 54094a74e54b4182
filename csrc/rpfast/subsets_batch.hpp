// Batched drivers for subsets.hpp: one task per (graph, root vertex), run in parallel,
// and SubsetEnumerator, which streams the rows of a batch in chunks.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpfast/graph.hpp"
#include "cpu/parallel.hpp"
#include "rpfast/interrupt.hpp"
#include "rpfast/subsets.hpp"

namespace rpfast {

inline void check_subset_size(int64_t k) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
}

// graph_of[t] = the graph of node (task) t, for all N nodes of the batch.
inline std::vector<int64_t> graph_of_nodes(const GraphBatchView& batch) {
  std::vector<int64_t> graph_of(static_cast<size_t>(batch.total_nodes()));
  for (int64_t b = 0; b < batch.B; ++b)
    for (int64_t v = batch.ptr[b]; v < batch.ptr[b + 1]; ++v) graph_of[v] = b;
  return graph_of;
}

// Calls body(search, root, task) for every (graph, root) task t in [t_begin, t_end) with
// wanted(t), with a SubsetSearch for the task's graph; each thread keeps its search while
// consecutive tasks share a graph. Tasks are dealt out dynamically (their costs differ by
// orders of magnitude). Exceptions (bad_alloc, Ctrl-C) are rethrown after the loop.
// graph_of is graph_of_nodes(batch).
template <class Wanted, class Body>
void for_each_task(const GraphBatchView& batch, const std::vector<int64_t>& graph_of, int64_t k, Prune prune,
                   int64_t t_begin, int64_t t_end, int threads, Wanted&& wanted, Body&& body) {
  struct ThreadSearch {
    std::unique_ptr<SubsetSearch> search;
    int64_t graph = -1;
  };
  parallel_items(
      t_end - t_begin, threads, 8, Schedule::kLongItem, [] { return ThreadSearch{}; },
      [&](ThreadSearch& state, int64_t i) {
        poll_interrupt();
        const int64_t t = t_begin + i;
        if (!wanted(t)) return;
        const int64_t b = graph_of[t];
        if (batch.graph(b).n - (t - batch.ptr[b]) < k) return;  // too few vertices after the root
        if (b != state.graph) {
          state.search.reset();
          state.search = std::make_unique<SubsetSearch>(batch.graph(b), k, prune);
          state.graph = b;
        }
        body(*state.search, t - batch.ptr[b], t);
      });
}

// What count_tasks found: counts [N] per task are complete unless `exceeded`, in which
// case counting stopped early because graph `graph` (or the batch total, graph = -1)
// passed its limit.
struct CountResult {
  bool exceeded;
  int64_t graph;
};

// counts[t] = the subsets of task t, stopping as soon as a graph's total passes
// graph_limit or the batch total passes total_limit.
inline CountResult count_tasks(const GraphBatchView& batch, int64_t k, Prune prune, uint64_t graph_limit,
                               uint64_t total_limit, uint64_t* counts, int threads) {
  CountLimits limits{graph_limit, total_limit};
  std::vector<std::atomic<uint64_t>> per_graph(static_cast<size_t>(batch.B));
  for (auto& c : per_graph) c.store(0);
  const std::vector<int64_t> graph_of = graph_of_nodes(batch);
  for_each_task(
      batch, graph_of, k, prune, 0, batch.total_nodes(), threads,
      [&](int64_t t) {
        counts[t] = 0;
        return !limits.exceeded.load(std::memory_order_relaxed);
      },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        CountSink sink(limits, per_graph[graph_of[t]], graph_of[t]);
        search.count(root, sink);
        counts[t] = sink.count;
      });
  return CountResult{limits.exceeded.load(), limits.exceeded_graph.load()};
}

// What count_graphs_bounded found for one graph.
enum class BoundedStatus : int64_t { kComplete = 0, kCountOver = 1, kStepsOver = 2 };

// Counts each graph's subsets with bounded work: the roots of graph b run in order through
// one BoundedCountSink (step_limit, count_limit). Writes task_counts [N] (complete for a
// complete graph, zero after the root where it stopped), and per graph graph_counts [B]
// (saturating; a lower bound unless complete), graph_steps [B] and status [B]
// (BoundedStatus). Graphs run in parallel; each graph's result depends on it alone.
inline void count_graphs_bounded(const GraphBatchView& batch, int64_t k, Prune prune, uint64_t step_limit,
                                 uint64_t count_limit, uint64_t* task_counts, uint64_t* graph_counts,
                                 uint64_t* graph_steps, int64_t* status, int threads) {
  parallel_items(
      batch.B, threads, 1, Schedule::kLongItem, [] { return 0; },
      [&](int, int64_t b) {
        poll_interrupt();
        const int64_t n = batch.num_nodes(b);
        for (int64_t t = batch.ptr[b]; t < batch.ptr[b + 1]; ++t) task_counts[t] = 0;
        BoundedCountSink sink(step_limit, count_limit);
        if (n >= k) {
          SubsetSearch search(batch.graph(b), k, prune);
          for (int64_t root = 0; root <= n - k && !sink.stopped(); ++root) {
            poll_interrupt();
            const uint64_t before = sink.count;
            search.count(root, sink);
            task_counts[batch.ptr[b] + root] = sink.count - before;
          }
        }
        graph_counts[b] = sink.count;
        graph_steps[b] = sink.steps;
        status[b] = static_cast<int64_t>(sink.over_steps  ? BoundedStatus::kStepsOver
                                         : sink.over_count ? BoundedStatus::kCountOver
                                                           : BoundedStatus::kComplete);
      });
}

// offsets [N + 1]: row offsets of each task (prefix sums of count_tasks). Writes the rows
// of tasks [t_begin, t_end) to out, starting at row offsets[t_begin].
inline void fill_tasks(const GraphBatchView& batch, const std::vector<int64_t>& graph_of, int64_t k, Prune prune,
                       const int64_t* offsets, int64_t t_begin, int64_t t_end, int64_t* out, int threads) {
  for_each_task(
      batch, graph_of, k, prune, t_begin, t_end, threads, [&](int64_t t) { return offsets[t + 1] > offsets[t]; },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        search.fill_task(root, offsets[t + 1] - offsets[t], out + (offsets[t] - offsets[t_begin]) * k);
      });
}

inline void fill_tasks(const GraphBatchView& batch, int64_t k, Prune prune, const int64_t* offsets, int64_t t_begin,
                       int64_t t_end, int64_t* out, int threads) {
  fill_tasks(batch, graph_of_nodes(batch), k, prune, offsets, t_begin, t_end, out, threads);
}

// Throws unless pick_ptr [N + 1] (pick_ptr_len entries) groups `picks` [count] by task:
// starts at 0, never decreases, ends at count, and picks ascend within each task.
inline void check_picks(const int64_t* pick_ptr, int64_t pick_ptr_len, int64_t N, const uint64_t* picks,
                        int64_t count) {
  check_offsets(pick_ptr, pick_ptr_len, N, "pick_ptr");
  if (pick_ptr[N] != count) throw std::invalid_argument("pick_ptr must span picks");
  for (int64_t t = 0; t < N; ++t)
    for (int64_t i = pick_ptr[t] + 1; i < pick_ptr[t + 1]; ++i)
      if (picks[i] < picks[i - 1]) throw std::invalid_argument("picks must ascend within a task");
}

// Random access into the enumeration without storing it: pick_ptr [N + 1] groups the
// ascending task-local indices `picks` by task; out [pick_ptr[N], k] gets the rows.
inline void pick_tasks(const GraphBatchView& batch, int64_t k, Prune prune, const int64_t* pick_ptr,
                       const uint64_t* picks, int64_t* out, int threads) {
  for_each_task(
      batch, graph_of_nodes(batch), k, prune, 0, batch.total_nodes(), threads,
      [&](int64_t t) { return pick_ptr[t + 1] > pick_ptr[t]; },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        search.pick(root, picks + pick_ptr[t], pick_ptr[t + 1] - pick_ptr[t], out + pick_ptr[t] * k);
      });
}

// ------------------------------------------------------------------ streaming
// Streams the rows of fill_tasks over a whole batch in chunks of at most chunk_size rows,
// keeping its position between chunks. A chunk is either the consecutive whole tasks
// (from the next non-empty one) whose rows fit in chunk_size, filled in parallel, or, when
// the next task alone has more rows, the next chunk_size rows of that task, resumed in
// lexicographic order after the previous chunk's last row (O(n + k) memory).
//
// The enumerator owns copies of the batch's arrays and of offsets [N + 1] (the prefix sums
// of complete count_tasks results), checked once at construction. A fill that throws
// (Ctrl-C, bad_alloc) leaves the position where it was. One fill at a time: a concurrent
// call throws std::logic_error.
class SubsetEnumerator {
 public:
  SubsetEnumerator(std::vector<int64_t> ptr, std::vector<int64_t> rowptr, std::vector<int64_t> col, int64_t k,
                   Prune prune, std::vector<int64_t> offsets, int64_t chunk_size)
      : ptr_(std::move(ptr)), rowptr_(std::move(rowptr)), col_(std::move(col)), offsets_(std::move(offsets)),
        k_(k), prune_(prune), chunk_(chunk_size) {
    check_subset_size(k);
    if (chunk_size < 1) throw std::invalid_argument("chunk_size must be >= 1");
    if (ptr_.empty()) throw std::invalid_argument("ptr must start at 0 and have B + 1 entries");
    batch_ = checked_batch_view(ptr_.data(), static_cast<int64_t>(ptr_.size()), rowptr_.data(),
                                static_cast<int64_t>(rowptr_.size()), col_.data(), static_cast<int64_t>(col_.size()));
    check_offsets(offsets_.data(), static_cast<int64_t>(offsets_.size()), batch_.total_nodes(), "offsets");
    graph_of_ = graph_of_nodes(batch_);
  }

  SubsetEnumerator(const SubsetEnumerator&) = delete;
  SubsetEnumerator& operator=(const SubsetEnumerator&) = delete;

  int64_t k() const { return k_; }
  int64_t chunk_size() const { return chunk_; }
  // Rows of the whole enumeration, and rows already filled.
  int64_t total() const { return offsets_.back(); }
  int64_t position() const { return position_.load(); }

  // Rows the next fill() writes (0 once the enumeration is exhausted).
  int64_t next_rows() const {
    Busy busy(busy_);
    return rows_next();
  }

  // Writes the next chunk to out [>= rows, k] and the graph of each row to graph
  // [>= rows], where rows = next_rows() (out_rows and graph_rows give the buffers'
  // lengths), and returns rows. 0 once the enumeration is exhausted.
  int64_t fill(int64_t* out, int64_t out_rows, int64_t* graph, int64_t graph_rows, int threads) {
    Busy busy(busy_);
    const int64_t rows = rows_next();
    if (rows == 0) return 0;
    if (out_rows < rows || graph_rows < rows)
      throw std::invalid_argument("the next chunk has " + std::to_string(rows) + " rows, more than the buffers hold");
    const int64_t t = next_task();
    const int64_t end = t == task_ && done_ > 0 ? t : whole_tasks_end(t);
    if (end > t) {
      fill_tasks(batch_, graph_of_, k_, prune_, offsets_.data(), t, end, out, threads);
      int64_t row = 0;
      for (int64_t u = t; u < end; ++u)
        for (int64_t i = 0; i < rows_of(u); ++i) graph[row++] = graph_of_[u];
      task_ = end;
      done_ = 0;
      position_ += rows;
      return rows;
    }
    return fill_piece(t, rows, out, graph);
  }

 private:
  // Marks the enumerator in use for a scope; throws if another thread is using it.
  struct Busy {
    explicit Busy(std::atomic<bool>& flag) : flag_(flag) {
      if (flag_.exchange(true)) throw std::logic_error("this SubsetEnumerator is in use by another thread");
    }
    ~Busy() { flag_.store(false); }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;
    std::atomic<bool>& flag_;
  };

  int64_t rows_next() const {
    const int64_t t = next_task();
    if (t == num_tasks()) return 0;
    if (t == task_ && done_ > 0) return std::min(chunk_, rows_of(t) - done_);
    const int64_t end = whole_tasks_end(t);
    return end > t ? offsets_[end] - offsets_[t] : std::min(chunk_, rows_of(t));
  }

  int64_t num_tasks() const { return batch_.total_nodes(); }
  int64_t rows_of(int64_t t) const { return offsets_[t + 1] - offsets_[t]; }

  // The task the next chunk starts in: the current one, or the next with rows.
  int64_t next_task() const {
    int64_t t = task_;
    if (t < num_tasks() && done_ > 0) return t;
    while (t < num_tasks() && rows_of(t) == 0) ++t;
    return t;
  }

  // The largest end with offsets[end] <= offsets[t] + chunk_size: tasks [t, end) fit in a chunk.
  int64_t whole_tasks_end(int64_t t) const {
    const int64_t limit = offsets_[t] > std::numeric_limits<int64_t>::max() - chunk_
                              ? std::numeric_limits<int64_t>::max()
                              : offsets_[t] + chunk_;
    return static_cast<int64_t>(std::upper_bound(offsets_.begin(), offsets_.end(), limit) - offsets_.begin()) - 1;
  }

  [[noreturn]] void ended_early(int64_t b, int64_t t, bool resuming) const {
    throw std::runtime_error("subset stream of graph " + std::to_string(b) + " ended after " +
                             std::to_string(resuming ? done_ : 0) + " of " + std::to_string(rows_of(t)) + " rows");
  }

  // The next `rows` rows of task t, which has more than a chunk: resumes the task's
  // lexicographic search after the last row written so far.
  int64_t fill_piece(int64_t t, int64_t rows, int64_t* out, int64_t* graph) {
    const int64_t b = graph_of_[t];
    const int64_t root = t - batch_.ptr[b];
    const bool resuming = task_ == t && done_ > 0;
    if (batch_.num_nodes(b) - root < k_) ended_early(b, t, resuming);  // offsets disagree with the graph
    if (search_graph_ != b) {
      search_.reset();
      search_graph_ = -1;
      search_ = std::make_unique<SubsetSearch>(batch_.graph(b), k_, prune_);
      search_graph_ = b;
    }
    int64_t written = 0;
    try {
      written = search_->fill_window(root, 0, rows, resuming ? resume_.data() : nullptr, out);
    } catch (...) {  // an interrupted search leaves its scratch state mid-way: rebuild it next time
      search_.reset();
      search_graph_ = -1;
      throw;
    }
    if (written == 0) ended_early(b, t, resuming);  // cannot happen for consistent offsets; never loop forever
    std::fill(graph, graph + written, b);
    resume_.resize(static_cast<size_t>(k_));  // k_ <= n here (the task has rows), unlike k_ in general
    std::copy(out + (written - 1) * k_, out + written * k_, resume_.begin());
    task_ = t;
    done_ = (resuming ? done_ : 0) + written;
    if (done_ >= rows_of(t)) {  // task complete: the next chunk starts at the next task
      task_ = t + 1;
      done_ = 0;
      search_.reset();
      search_graph_ = -1;
    }
    position_ += written;
    return written;
  }

  std::vector<int64_t> ptr_, rowptr_, col_, offsets_, graph_of_;
  GraphBatchView batch_{0, nullptr, nullptr, nullptr};
  int64_t k_;
  Prune prune_;
  int64_t chunk_;
  int64_t task_ = 0;      // the next task (or the task being streamed when done_ > 0)
  int64_t done_ = 0;      // rows of task_ already written, when it is streamed in pieces
  std::atomic<int64_t> position_{0};  // rows written so far
  std::vector<int64_t> resume_;  // the last row written of task_ (when done_ > 0; sized on first use)
  std::unique_ptr<SubsetSearch> search_;
  int64_t search_graph_ = -1;
  mutable std::atomic<bool> busy_{false};
};

}  // namespace rpfast
