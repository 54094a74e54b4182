// Compressed sparse rows of an edge list, sorted by (row, column), in O(E + N).
//
// Equal to a stable sort of the edges by the key row * N + col (what GraphBatch computed
// with two torch.argsort passes before): a stable counting sort by row, then a stable sort
// of each row's entries by column (insertion sort for the short rows of sparse graphs, a
// merge sort for rows longer than kShortRow). Multi-edges keep their input order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpfast {

// rows, cols [E] in [0, N) -> rowptr [N + 1], col [E] (the columns in CSR order) and
// order [E] (order[k] = the edge in CSR slot k). Single-threaded: memory-bound and short.
inline void build_csr(const int64_t* rows, const int64_t* cols, int64_t E, int64_t N, int64_t* rowptr,
                      int64_t* col, int64_t* order) {
  for (int64_t e = 0; e < E; ++e)
    if (rows[e] < 0 || rows[e] >= N || cols[e] < 0 || cols[e] >= N)
      throw std::out_of_range("build_csr: edge " + std::to_string(e) + " (" + std::to_string(rows[e]) + " -> " +
                              std::to_string(cols[e]) + ") is outside [0, " + std::to_string(N) + ")");
  std::fill(rowptr, rowptr + N + 1, int64_t{0});
  for (int64_t e = 0; e < E; ++e) ++rowptr[rows[e] + 1];
  for (int64_t i = 0; i < N; ++i) rowptr[i + 1] += rowptr[i];
  std::vector<int64_t> cursor(rowptr, rowptr + N);
  for (int64_t e = 0; e < E; ++e) order[cursor[rows[e]]++] = e;  // stable: edges in input order

  constexpr int64_t kShortRow = 32;
  const auto by_col = [cols](int64_t a, int64_t b) { return cols[a] < cols[b]; };
  for (int64_t i = 0; i < N; ++i) {
    int64_t* begin = order + rowptr[i];
    int64_t* end = order + rowptr[i + 1];
    if (end - begin > kShortRow) {
      std::stable_sort(begin, end, by_col);
      continue;
    }
    for (int64_t* p = begin + 1; p < end; ++p) {  // stable insertion sort: strict comparison
      const int64_t edge = *p;
      int64_t* q = p;
      for (; q > begin && cols[*(q - 1)] > cols[edge]; --q) *q = *(q - 1);
      *q = edge;
    }
  }
  for (int64_t k = 0; k < E; ++k) col[k] = cols[order[k]];
}

}  // namespace rpfast
