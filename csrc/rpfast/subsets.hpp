// k-subset enumeration of the vertices of small graphs with pruning inside the search.
//
// A graph is a simple undirected adjacency in CSR form with local vertex ids (LocalGraph,
// graph.hpp: col sorted ascending, no self-loops, no duplicates). A "task" is one root
// vertex: the subsets whose smallest vertex is the root. Within a task, subsets come out
// in lexicographic order; tasks in root order, so the concatenation over roots is the
// lexicographic order of all subsets of the graph.
//
// Prune modes (which k-subsets S are dropped; Prune names what is dropped):
//   kNone          nothing: every S is kept;
//   kEdgeless      drop S whose induced subgraph has no edge;
//   kIsolated      drop S in which some vertex has no neighbour inside S;
//   kDisconnected  drop S whose induced subgraph is disconnected.
// The lexicographic modes run a depth-first search over increasing vertex sequences with
// a per-vertex count of neighbours inside the current prefix; a prefix is cut as soon as
// no completion can be kept. Counting sinks skip whole subtrees whose size has a closed
// form (every completion is kept: kNone, or kEdgeless once the prefix has an edge), so
// counts of astronomically many subsets take O(prefixes that matter).
// kDisconnected has two searches: ESU (Wernicke 2006), which only ever visits connected
// sets and is fastest for whole tasks (counted, or generated and then sorted), and the
// lexicographic search with connectivity checks, which streams a task in order in O(k)
// memory (windows, resumption, sampling). Long searches poll for Ctrl-C. The searches
// hand each subset to a sink (subset_sinks.hpp: count, write, pick).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpfast/graph.hpp"
#include "rpfast/interrupt.hpp"
#include "rpfast/subset_sinks.hpp"

namespace rpfast {

// What a subset enumeration drops. The values are the codes the bindings receive
// (rpfast.ops.subsets.Prune carries the same codes).
enum class Prune : int { kNone = 0, kEdgeless = 1, kIsolated = 2, kDisconnected = 3 };

// The Prune of a binding's integer code; std::invalid_argument for any other value.
inline Prune prune_from_code(int64_t code) {
  switch (code) {
    case static_cast<int>(Prune::kNone):
      return Prune::kNone;
    case static_cast<int>(Prune::kEdgeless):
      return Prune::kEdgeless;
    case static_cast<int>(Prune::kIsolated):
      return Prune::kIsolated;
    case static_cast<int>(Prune::kDisconnected):
      return Prune::kDisconnected;
    default:
      throw std::invalid_argument("unknown prune mode " + std::to_string(code) +
                                  " (0 none, 1 edgeless, 2 isolated, 3 disconnected)");
  }
}

// C(n, r), saturating at 2^64 - 1; 0 if r < 0 or r > n. Each step c * (n - i) / (i + 1)
// is exact, so only the final value can saturate.
inline uint64_t binomial(int64_t n, int64_t r) {
  if (r < 0 || n < 0 || r > n) return 0;
  if (r > n - r) r = n - r;
  unsigned __int128 c = 1;
  const unsigned __int128 cap = std::numeric_limits<uint64_t>::max();
  for (int64_t i = 0; i < r; ++i) {
    c = c * static_cast<uint64_t>(n - i) / static_cast<uint64_t>(i + 1);
    if (c > cap) return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(c);
}

// ------------------------------------------------------------------ lexicographic search
// All modes, kDisconnected included (with connectivity checks instead of ESU): subsets of a
// root come out in lexicographic order, so a task can be streamed, resumed after any
// row, windowed and sampled in O(n + k) memory.
class LexSearch {
 public:
  LexSearch(const LocalGraph& g, int64_t k, Prune prune)
      : g_(g), k_(k), prune_(prune), chosen_(k), inside_(g.n, 0), in_prefix_(g.n, 0), max_nb_(g.n),
        edge_from_(g.n + 1, 0), stamp_(g.n, 0), component_(k) {
    for (int64_t u = 0; u < g.n; ++u) max_nb_[u] = g.max_neighbour(u);
    // edge_from_[t] = 1 if some edge (a, b) has t <= a < b.
    for (int64_t a = g.n - 1; a >= 0; --a) edge_from_[a] = edge_from_[a + 1] || max_nb_[a] > a;
  }

  // Runs the subsets rooted at `root`; if resume_after is given (a subset of this root
  // already emitted), emission starts strictly after it. Returns false if the sink stopped.
  bool run(int64_t root, const int64_t* resume_after, SubsetSink& sink) {
    resume_ = resume_after;
    resuming_ = resume_after != nullptr;
    sink_ = &sink;
    edges_ = 0;
    uncovered_ = 0;
    if (g_.n - root < k_) return true;
    push(0, root);
    const bool go_on = extend(1);
    pop(0);
    return go_on;
  }

 private:
  void push(int64_t depth, int64_t w) {
    chosen_[depth] = w;
    edges_ += inside_[w];
    if (inside_[w] == 0) ++uncovered_;
    for (const int64_t* p = g_.begin(w); p != g_.end(w); ++p) {
      const int64_t x = *p;
      if (inside_[x] == 0 && in_prefix_[x]) --uncovered_;
      ++inside_[x];
    }
    in_prefix_[w] = 1;
  }

  void pop(int64_t depth) {
    const int64_t w = chosen_[depth];
    in_prefix_[w] = 0;
    for (const int64_t* p = g_.begin(w); p != g_.end(w); ++p) {
      const int64_t x = *p;
      --inside_[x];
      if (inside_[x] == 0 && in_prefix_[x]) ++uncovered_;
    }
    if (inside_[w] == 0) --uncovered_;
    edges_ -= inside_[w];
  }

  // Labels the connected components of the prefix chosen_[0..depth) in component_ and
  // returns their number (union-find over the prefix; depth <= k is small).
  int64_t label_components(int64_t depth) {
    for (int64_t d = 0; d < depth; ++d) component_[d] = d;
    auto find = [&](int64_t d) {
      while (component_[d] != d) d = component_[d] = component_[component_[d]];
      return d;
    };
    int64_t count = depth;
    for (int64_t a = 0; a < depth; ++a)
      for (int64_t b = a + 1; b < depth; ++b)
        if (g_.adjacent(chosen_[a], chosen_[b])) {
          const int64_t ra = find(a), rb = find(b);
          if (ra != rb) {
            component_[ra] = rb;
            --count;
          }
        }
    for (int64_t d = 0; d < depth; ++d) component_[d] = find(d);
    return count;
  }

  // Can the prefix chosen_[0..depth) still be completed to a kept subset?
  bool feasible(int64_t depth) {
    const int64_t last = chosen_[depth - 1];
    const int64_t remaining = k_ - depth;
    if (g_.n - 1 - last < remaining) return false;
    if (prune_ == Prune::kEdgeless && edges_ == 0) {
      if (remaining == 0) return false;
      bool neighbour_later = false;
      for (int64_t d = 0; d < depth && !neighbour_later; ++d) neighbour_later = max_nb_[chosen_[d]] > last;
      return neighbour_later || (remaining >= 2 && edge_from_[last + 1]);
    }
    if (prune_ == Prune::kIsolated && uncovered_ > 0) {
      if (remaining == 0) return false;
      for (int64_t d = 0; d < depth; ++d) {
        const int64_t u = chosen_[d];
        if (inside_[u] == 0 && max_nb_[u] <= last) return false;  // u can never be covered
      }
    }
    if (prune_ == Prune::kDisconnected && remaining > 0) {
      // Every component of the prefix must still reach a later vertex.
      label_components(depth);
      for (int64_t d = 0; d < depth; ++d) reaches_later_[d] = 0;
      for (int64_t d = 0; d < depth; ++d)
        if (max_nb_[chosen_[d]] > last) reaches_later_[component_[d]] = 1;
      for (int64_t d = 0; d < depth; ++d)
        if (component_[d] == d && !reaches_later_[d]) return false;
    }
    return true;
  }

  // Every completion of the prefix qualifies (its count has a closed form).
  bool all_completions_qualify() const {
    return prune_ == Prune::kNone || (prune_ == Prune::kEdgeless && edges_ > 0);
  }

  bool extend(int64_t depth) {
    poller_.tick();
    if (!sink_->step(1 + static_cast<uint64_t>(g_.degree(chosen_[depth - 1]) + depth) / 64)) return false;
    if (!feasible(depth)) return true;
    if (!resuming_ && all_completions_qualify() &&
        sink_->skip(binomial(g_.n - 1 - chosen_[depth - 1], k_ - depth)))
      return !sink_->stopped();
    if (depth == k_) {  // k == 1: the root alone
      if (resuming_) {
        resuming_ = false;
        return true;
      }
      return sink_->emit(chosen_.data());
    }
    if (depth == k_ - 1) return last_position();
    int64_t first = chosen_[depth - 1] + 1;
    if (resuming_) first = resume_[depth];
    for (int64_t w = first; w <= g_.n - (k_ - depth); ++w) {
      if (resuming_ && w != resume_[depth]) resuming_ = false;  // passed the resume point
      push(depth, w);
      const bool go_on = extend(depth + 1);
      pop(depth);
      if (!go_on) return false;
    }
    return true;
  }

  // The last vertex decides directly, without pushing it: either every w after the prefix
  // qualifies, or only neighbours of the prefix (collected from its neighbour lists).
  bool last_position() {
    const int64_t depth = k_ - 1;
    int64_t after = chosen_[depth - 1];
    if (resuming_) {  // resume strictly after resume_[depth]
      after = resume_[depth];
      resuming_ = false;
    }
    if (all_completions_qualify()) {
      for (int64_t w = after + 1; w < g_.n; ++w) {
        chosen_[depth] = w;
        if (!sink_->emit(chosen_.data())) return false;
      }
      return true;
    }
    // Candidates: neighbours of the prefix after `after`, ascending, each once.
    ++round_;
    candidates_.clear();
    for (int64_t d = 0; d < depth; ++d) {
      const int64_t u = chosen_[d];
      for (const int64_t* p = std::upper_bound(g_.begin(u), g_.end(u), after); p != g_.end(u); ++p)
        if (stamp_[*p] != round_) {
          stamp_[*p] = round_;
          candidates_.push_back(*p);
        }
    }
    std::sort(candidates_.begin(), candidates_.end());
    const int64_t components = prune_ == Prune::kDisconnected ? label_components(depth) : 1;
    for (int64_t w : candidates_) {
      if (!sink_->step(1 + static_cast<uint64_t>(depth) / 64)) return false;
      if (prune_ == Prune::kIsolated && !covers_prefix(depth, w)) continue;
      if (components > 1 && !joins_components(depth, w)) continue;
      chosen_[depth] = w;
      if (!sink_->emit(chosen_.data())) return false;
    }
    return true;
  }

  // For kIsolated: w (a neighbour of the prefix) must be adjacent to every prefix vertex
  // that has no neighbour inside the prefix yet.
  bool covers_prefix(int64_t depth, int64_t w) const {
    for (int64_t d = 0; d < depth; ++d) {
      const int64_t u = chosen_[d];
      if (inside_[u] == 0 && !g_.adjacent(u, w)) return false;
    }
    return true;
  }

  // For kDisconnected: w must touch every component of the prefix (component_ is labelled).
  bool joins_components(int64_t depth, int64_t w) {
    for (int64_t d = 0; d < depth; ++d) reaches_later_[d] = 0;
    for (int64_t d = 0; d < depth; ++d)
      if (g_.adjacent(chosen_[d], w)) reaches_later_[component_[d]] = 1;
    for (int64_t d = 0; d < depth; ++d)
      if (component_[d] == d && !reaches_later_[d]) return false;
    return true;
  }

  LocalGraph g_;
  int64_t k_;
  Prune prune_;
  std::vector<int64_t> chosen_;
  std::vector<int32_t> inside_;     // neighbours of each vertex inside the prefix
  std::vector<char> in_prefix_;     // membership of the prefix
  std::vector<int64_t> max_nb_;
  std::vector<char> edge_from_;
  std::vector<uint64_t> stamp_;     // last_position() de-duplication
  uint64_t round_ = 0;
  std::vector<int64_t> candidates_;
  std::vector<int64_t> component_;  // kDisconnected: component label of each prefix position
  std::vector<char> reaches_later_ = std::vector<char>(static_cast<size_t>(k_));
  int64_t edges_ = 0, uncovered_ = 0;
  const int64_t* resume_ = nullptr;
  bool resuming_ = false;
  SubsetSink* sink_ = nullptr;
  InterruptPoller<> poller_;
};

// ------------------------------------------------------------------ connected (ESU)
class ConnectedSearch {
 public:
  ConnectedSearch(const LocalGraph& g, int64_t k) : g_(g), k_(k), chosen_(k), near_(g.n, 0) {}

  // Emits every connected k-subset whose smallest vertex is root (ascending ids), in
  // ESU order (not sorted). Returns false if the sink stopped.
  bool run(int64_t root, SubsetSink& sink) {
    sink_ = &sink;
    root_ = root;
    if (g_.n - root < k_) return true;
    chosen_[0] = root;
    mark(root, +1);
    std::vector<int64_t> extension;
    for (const int64_t* p = g_.begin(root); p != g_.end(root); ++p)
      if (*p > root) extension.push_back(*p);
    const bool go_on = extend(1, extension);
    mark(root, -1);
    return go_on;
  }

 private:
  // near_[x] > 0 iff x is in the current set or adjacent to it.
  void mark(int64_t w, int delta) {
    near_[w] += delta;
    for (const int64_t* p = g_.begin(w); p != g_.end(w); ++p) near_[*p] += delta;
  }

  bool extend(int64_t size, std::vector<int64_t> extension) {
    poller_.tick();
    // 2: a node allocates its extension
    if (!sink_->step(2 + static_cast<uint64_t>(extension.size() + g_.degree(chosen_[size - 1])) / 64))
      return false;
    if (size == k_) {  // ESU adds vertices in search order; rows list them ascending
      buf_.assign(chosen_.begin(), chosen_.end());
      std::sort(buf_.begin(), buf_.end());
      return sink_->emit(buf_.data());
    }
    while (!extension.empty()) {
      const int64_t w = extension.back();
      extension.pop_back();
      std::vector<int64_t> next = extension;
      // Exclusive neighbours of w: beyond the root, not in or next to the current set.
      for (const int64_t* p = g_.begin(w); p != g_.end(w); ++p)
        if (*p > root_ && near_[*p] == 0) next.push_back(*p);
      chosen_[size] = w;
      mark(w, +1);
      const bool go_on = extend(size + 1, std::move(next));
      mark(w, -1);
      if (!go_on) return false;
    }
    return true;
  }

  LocalGraph g_;
  int64_t k_;
  std::vector<int64_t> chosen_, buf_;
  std::vector<int32_t> near_;
  int64_t root_ = 0;
  SubsetSink* sink_ = nullptr;
  InterruptPoller<> poller_;
};

// ------------------------------------------------------------------ one graph
// The searches of one graph, built once (O(n)) and reused for all of its root tasks.
class SubsetSearch {
 public:
  SubsetSearch(const LocalGraph& g, int64_t k, Prune prune) : g_(g), k_(k), prune_(prune), lex_(g, k, prune) {
    if (prune == Prune::kDisconnected) connected_ = std::make_unique<ConnectedSearch>(g, k);
  }

  // Counts `root`'s task into sink (closed form for kNone).
  void count(int64_t root, CountSink& sink) {
    if (prune_ == Prune::kNone) {
      sink.add(binomial(g_.n - 1 - root, k_ - 1));
    } else if (connected_) {
      connected_->run(root, sink);
    } else {
      lex_.run(root, nullptr, sink);
    }
    sink.flush();
  }

  // Counts `root`'s task into a bounded sink (closed form for kNone).
  void count(int64_t root, BoundedCountSink& sink) {
    if (prune_ == Prune::kNone) {
      if (sink.step()) sink.add(binomial(g_.n - 1 - root, k_ - 1));
    } else if (connected_) {
      connected_->run(root, sink);
    } else {
      lex_.run(root, nullptr, sink);
    }
  }

  // Writes all `rows` subsets of `root`'s task, in lexicographic order, to out.
  // kDisconnected runs ESU and sorts (fastest when the whole task is wanted).
  void fill_task(int64_t root, int64_t rows, int64_t* out) {
    if (rows <= 0) return;
    WriteSink sink(k_, out, 0, rows);
    if (connected_) {
      connected_->run(root, sink);
      sort_rows(out, sink.written, k_);
    } else {
      lex_.run(root, nullptr, sink);
    }
  }

  // Writes at most `limit` rows of `root`'s task in lexicographic order: a window that
  // skips `skip` rows, or starts strictly after `resume_after` (a subset of this task).
  // Streams in O(n + k) memory for every mode. Returns the rows written.
  int64_t fill_window(int64_t root, uint64_t skip, int64_t limit, const int64_t* resume_after, int64_t* out) {
    if (limit <= 0) return 0;
    WriteSink sink(k_, out, skip, limit);
    lex_.run(root, resume_after, sink);
    return sink.written;
  }

  // Rows at ascending task-local indices `picks` (repeats allowed) into out [count, k].
  void pick(int64_t root, const uint64_t* picks, int64_t count, int64_t* out) {
    if (count <= 0) return;
    PickSink sink(k_, picks, count, out);
    lex_.run(root, nullptr, sink);
  }

 private:
  LocalGraph g_;
  int64_t k_;
  Prune prune_;
  LexSearch lex_;
  std::unique_ptr<ConnectedSearch> connected_;
};

}  // namespace rpfast
