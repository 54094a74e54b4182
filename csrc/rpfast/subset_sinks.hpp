// The receivers of a k-subset search (subsets.hpp): the SubsetSink interface and the sinks
// that count a task's subsets (against shared limits, or within a work bound), write a window
// of its rows, or pick rows at given indices; and sort_rows for searches that emit out of order.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace rpfast {

// Receives each k-subset (ascending local ids) in search order. emit returns false to
// stop the search. Before a subtree of `count` subsets whose rows all qualify, the search
// offers skip(count): a sink that needs none of those rows accounts for them and returns
// true (counting, or a window that starts later), and the subtree is not visited; the
// search then asks stopped() whether to go on. The search calls step(cost) once per search
// node and per candidate it tests for the last position, with cost 1 plus one per 64
// neighbour-list entries or vertices it went through for them (the work it does besides
// emitting); a sink that bounds the work returns false to stop the search.
struct SubsetSink {
  virtual bool emit(const int64_t* subset) = 0;
  virtual bool skip(uint64_t) { return false; }
  virtual bool stopped() const { return false; }
  virtual bool step(uint64_t /*cost*/ = 1) { return true; }
  virtual ~SubsetSink() = default;
};

inline uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

// Counts the subsets of one task and adds them, in batches, to shared running totals
// (the task's graph and the whole batch). Stops every search as soon as either total
// passes its limit, so counting never runs far beyond what could be stored.
struct CountLimits {
  uint64_t graph_limit, total_limit;
  std::atomic<uint64_t> total{0};
  std::atomic<bool> exceeded{false};
  std::atomic<int64_t> exceeded_graph{-1};  // -1: the batch total
};

struct CountSink : SubsetSink {
  static constexpr uint64_t kFlushEvery = 1 << 14;
  CountLimits& limits;
  std::atomic<uint64_t>& graph_total;
  int64_t graph;
  uint64_t count = 0, pending = 0;

  CountSink(CountLimits& l, std::atomic<uint64_t>& g, int64_t b) : limits(l), graph_total(g), graph(b) {}
  bool emit(const int64_t*) override { return add(1); }
  bool skip(uint64_t c) override {
    add(c);
    return true;
  }
  bool stopped() const override { return limits.exceeded.load(std::memory_order_relaxed); }
  bool add(uint64_t c) {
    count = saturating_add(count, c);
    pending = saturating_add(pending, c);
    return pending < kFlushEvery || flush();
  }
  // Publishes the pending count; returns false once a limit is passed.
  bool flush() {
    const uint64_t c = pending;
    pending = 0;
    if (add_checked(graph_total, c) > limits.graph_limit) mark(graph);
    if (add_checked(limits.total, c) > limits.total_limit) mark(-1);
    return !stopped();
  }

 private:
  static uint64_t add_checked(std::atomic<uint64_t>& a, uint64_t c) {
    uint64_t old = a.load(std::memory_order_relaxed);
    while (!a.compare_exchange_weak(old, saturating_add(old, c), std::memory_order_relaxed)) {
    }
    return saturating_add(old, c);
  }
  void mark(int64_t which) {
    bool expected = false;
    if (limits.exceeded.compare_exchange_strong(expected, true)) limits.exceeded_graph.store(which);
  }
};

// Counts the subsets of one graph, root after root through the same sink, and bounds the
// work: stops as soon as the search steps (the costs passed to step(), and one per skipped
// subtree) pass step_limit or the count passes count_limit. Only one thread uses a sink, so where it
// stops depends on the graph alone, never on the thread count.
struct BoundedCountSink : SubsetSink {
  uint64_t step_limit, count_limit;
  uint64_t steps = 0, count = 0;
  bool over_steps = false, over_count = false;

  BoundedCountSink(uint64_t steps_, uint64_t count_) : step_limit(steps_), count_limit(count_) {}
  bool emit(const int64_t*) override { return add(1); }  // the search charged the step that found it
  bool skip(uint64_t c) override {
    if (step()) add(c);
    return true;  // accounted for (or stopped, which the search asks next)
  }
  bool stopped() const override { return over_steps || over_count; }
  bool step(uint64_t cost = 1) override {
    steps = saturating_add(steps, cost);
    if (steps > step_limit) over_steps = true;
    return !stopped();
  }
  bool add(uint64_t c) {
    count = saturating_add(count, c);
    if (count > count_limit) over_count = true;
    return !stopped();
  }
};

// Writes rows into out, skipping the first `skip` rows and stopping after `limit`.
struct WriteSink : SubsetSink {
  int64_t k;
  uint64_t skip_left;
  int64_t limit, written = 0;
  int64_t* out;
  WriteSink(int64_t k_, int64_t* out_, uint64_t skip_, int64_t limit_)
      : k(k_), skip_left(skip_), limit(limit_), out(out_) {}
  bool emit(const int64_t* subset) override {
    if (skip_left > 0) {
      --skip_left;
      return true;
    }
    std::memcpy(out + written * k, subset, sizeof(int64_t) * k);
    return ++written < limit;
  }
  bool skip(uint64_t c) override {
    if (c > skip_left) return false;
    skip_left -= c;
    return true;
  }
};

// Writes the rows at the given ascending indices (repeats allowed) of a task's
// enumeration: picks[i] to out[i]. Stops after the last pick.
struct PickSink : SubsetSink {
  int64_t k;
  const uint64_t* picks;
  int64_t count, next = 0;
  uint64_t index = 0;  // index of the next row the search produces
  int64_t* out;
  PickSink(int64_t k_, const uint64_t* picks_, int64_t count_, int64_t* out_)
      : k(k_), picks(picks_), count(count_), out(out_) {}
  bool emit(const int64_t* subset) override {
    while (next < count && picks[next] == index) std::memcpy(out + k * next++, subset, sizeof(int64_t) * k);
    ++index;
    return next < count;
  }
  bool skip(uint64_t c) override {
    if (next < count && picks[next] < index + c) return false;
    index += c;
    return true;
  }
  bool stopped() const override { return next >= count; }
};

// Sorts `count` rows of k ids into lexicographic order (for ESU output).
inline void sort_rows(int64_t* rows, int64_t count, int64_t k) {
  std::vector<int64_t> order(count);
  for (int64_t i = 0; i < count; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(rows + a * k, rows + a * k + k, rows + b * k, rows + b * k + k);
  });
  std::vector<int64_t> copy(rows, rows + count * k);
  for (int64_t i = 0; i < count; ++i) std::memcpy(rows + i * k, copy.data() + order[i] * k, sizeof(int64_t) * k);
}

}  // namespace rpfast
