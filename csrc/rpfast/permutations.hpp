// Checking and inverting batched partial permutations in the gather convention.
//
// A batch of permutations is an int64 array perms[B, P, K]: perms[b, p, i] is the
// original vertex of graph b placed at position i by sample p, or -1 for padding.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpfast {

inline std::string perm_where(int64_t b, int64_t p, int64_t i) {
  return "perms[" + std::to_string(b) + ", " + std::to_string(p) + ", " + std::to_string(i) + "]";
}

// Throws std::out_of_range (IndexError in Python) if an entry is < -1 or >= the size of
// its graph (num_nodes[b] when num_nodes is given, else n_max), and std::invalid_argument
// (ValueError) if a vertex repeats within one row. O(B * P * K) time, O(n_max) memory.
inline void check_permutations(const int64_t* perms, int64_t B, int64_t P, int64_t K,
                               int64_t n_max, const int64_t* num_nodes) {
  std::vector<int64_t> seen_in_row(static_cast<size_t>(n_max), -1);
  std::vector<int64_t> seen_at(static_cast<size_t>(n_max), -1);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t limit = num_nodes ? num_nodes[b] : n_max;
    if (limit < 0 || limit > n_max)
      throw std::out_of_range("num_nodes[" + std::to_string(b) + "] = " + std::to_string(limit) +
                              " is outside [0, " + std::to_string(n_max) + "]");
    for (int64_t p = 0; p < P; ++p) {
      const int64_t row = b * P + p;
      const int64_t* r = perms + row * K;
      for (int64_t i = 0; i < K; ++i) {
        const int64_t v = r[i];
        if (v == -1) continue;
        if (v < -1 || v >= limit)
          throw std::out_of_range(perm_where(b, p, i) + " = " + std::to_string(v) +
                                  " is out of range for graph " + std::to_string(b) + " with " +
                                  std::to_string(limit) + " nodes (valid: -1 for padding, 0.." +
                                  std::to_string(limit - 1) + ")");
        if (seen_in_row[v] == row)
          throw std::invalid_argument(perm_where(b, p, i) + " repeats vertex " + std::to_string(v) +
                                      " already placed at position " + std::to_string(seen_at[v]) +
                                      " (graph " + std::to_string(b) + ", sample " +
                                      std::to_string(p) + ")");
        seen_in_row[v] = row;
        seen_at[v] = i;
      }
    }
  }
}

// inv[b, p, v] = i where perms[b, p, i] = v, or -1 if vertex v is not placed.
// perms must already be valid (check_permutations).
template <class ParallelFor>
void invert_permutations(const int64_t* perms, int64_t rows, int64_t K, int64_t n_max,
                         int64_t* inv, ParallelFor&& pfor) {
  pfor(rows, n_max + K, [&](int64_t row) {
    int64_t* out = inv + row * n_max;
    for (int64_t v = 0; v < n_max; ++v) out[v] = -1;
    const int64_t* r = perms + row * K;
    for (int64_t i = 0; i < K; ++i)
      if (r[i] >= 0) out[r[i]] = i;
  });
}

}  // namespace rpfast
