// A whole GIN network (every layer and its sum readout) forward and backward in one call.
//
// Layer l, with R replicas of a batch of N nodes in B graphs (M = R N rows), width H and S
// MLP stages:
//   z   = h W_first^T + W_id[ids]                       [M, H]  (either term may be absent)
//   a   = (1 + eps) z + A z                             (gin_aggregate over the incoming CSR)
//   u_1 = ReLU(BN_1(a)),  u_s = ReLU(BN_s(u_{s-1} W_s^T)),  h' = u_S
//   pooled[r, b, l H : (l + 1) H] = sum over the nodes i of graph b of h'[r, i]
// The input h of layer 0 may be one copy [N, F] shared by all replicas. The backward runs
// the same steps in reverse (BatchNorm-ReLU backward, weight gradients by chunked row
// reductions, the aggregation's adjoint over the outgoing CSR), so every result is
// bitwise identical for any thread count.
//
// For the small widths of the RP paper's models (16-64) the matrix products here (one
// row of the output per work item, the inner loop vectorised over the output's columns)
// are as fast as BLAS, and running the network in one call removes the per-operation
// dispatch that otherwise dominates a training step. GINNetwork keeps the activations the
// backward needs and reuses its buffers from step to step.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "rpfast/dense.hpp"
#include "rpfast/gin.hpp"
#include "rpfast/norm.hpp"
#include "rpfast/parallel.hpp"
#include "rpfast/segment.hpp"

namespace rpfast {

// [K, C] -> [C, K]
template <class T>
std::vector<T> transposed(const T* w, int64_t K, int64_t C) {
  std::vector<T> t(static_cast<size_t>(K * C));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) t[c * K + k] = w[k * C + c];
  return t;
}

template <class T>
struct GINLayerWeights {
  int64_t hidden = 0;            // H
  const T* first = nullptr;      // [H, F] or nullptr
  int64_t in_dim = 0;            // F
  const T* id_weight = nullptr;  // [id_rows, H] or nullptr
  int64_t id_rows = 0;
  double eps = 0;
  std::vector<const T*> weights;   // S - 1 maps [H, H]
  std::vector<const T*> gammas, betas;
  std::vector<T*> running_means, running_vars;
  std::vector<double> momenta, bn_eps;
  int64_t stages() const { return static_cast<int64_t>(gammas.size()); }
};

template <class T>
struct GINLayerGrads {
  T* first = nullptr;  // [H, F] or nullptr (not wanted)
  T* id_weight = nullptr;
  std::vector<T*> weights, gammas, betas;
  double eps = 0;  // written by backward
};

struct GINGraph {
  const int64_t* in_rowptr;  // incoming edges: rows are targets
  const int64_t* in_col;
  const int64_t* out_rowptr;  // outgoing edges (the transpose), for the backward
  const int64_t* out_col;
  const int64_t* ptr;  // [B + 1] node offsets of the graphs
  int64_t N, B;
};

template <class T>
class GINNetwork {
 public:
  // x [R or 1, N, F0] or nullptr, ids [R, N] or nullptr; writes pooled [R, B, L H].
  // With save, keeps what backward needs (a later forward overwrites it).
  void forward(const T* x, int64_t x_replicas, const int64_t* ids, int64_t R, const GINGraph& g,
               const std::vector<GINLayerWeights<T>>& layers, bool training, bool save, T* pooled,
               int threads) {
    const int64_t N = g.N, M = R * N, L = static_cast<int64_t>(layers.size());
    R_ = R;
    x_ = x;
    x_replicas_ = x_replicas;
    ids_ = ids;
    saved_ = save;  // without save the buffers are still used (and kept for the next call)
    layers_.resize(static_cast<size_t>(L));
    int64_t offset = 0;
    for (int64_t l = 0; l < L; ++l) offset += width(layers[l]);
    const int64_t pooled_width = offset;
    offset = 0;
    for (int64_t l = 0; l < L; ++l) {
      const GINLayerWeights<T>& w = layers[l];
      Saved& s = layers_[l];
      const int64_t H = width(w), S = w.stages();
      s.z.resize(static_cast<size_t>(M * H));
      // z = h W_first^T (+ W_id[ids])
      const T* h = l == 0 ? x : layers_[l - 1].y.back().data();
      const int64_t h_rows = l == 0 ? x_replicas * N : M;
      if (w.first != nullptr) {
        const std::vector<T> wt = transposed(w.first, H, w.in_dim);  // [F, H]
        rows_times(h, h_rows, w.in_dim, wt.data(), H, s.z.data(), threads);
        for (int64_t r = N ? h_rows / N : R; r < R; ++r)  // one shared input: copy its product to every replica
          std::copy(s.z.begin(), s.z.begin() + N * H, s.z.begin() + r * N * H);
      } else {
        std::fill(s.z.begin(), s.z.end(), T(0));
      }
      if (w.id_weight != nullptr) {
        T* z = s.z.data();
        parallel_for(M, threads, H, [&](int64_t m) {
          const T* __restrict__ row = w.id_weight + ids[m] * H;
          T* __restrict__ zr = z + m * H;
#pragma omp simd
          for (int64_t c = 0; c < H; ++c) zr[c] += row[c];
        });
      }
      work_.resize(static_cast<size_t>(M * H));
      gin_aggregate<T>(s.z.data(), g.in_rowptr, g.in_col, static_cast<T>(1 + w.eps), work_.data(), R, N, H,
                       threads);
      s.y.resize(static_cast<size_t>(S));
      s.xhat.resize(static_cast<size_t>(S));
      s.invstd.resize(static_cast<size_t>(S));
      for (int64_t st = 0; st < S; ++st) {
        if (st) {
          const std::vector<T> wt = transposed(w.weights[st - 1], H, H);
          rows_times(s.y[st - 1].data(), M, H, wt.data(), H, work_.data(), threads);
        }
        s.y[st].resize(static_cast<size_t>(M * H));
        s.xhat[st].resize(static_cast<size_t>(M * H));
        s.invstd[st].resize(static_cast<size_t>(H));
        BatchNormParams<T> p{w.gammas[st], w.betas[st], w.running_means[st], w.running_vars[st],
                             w.momenta[st], w.bn_eps[st], training};
        batch_norm_relu_forward<T>(work_.data(), M, H, p, s.y[st].data(), s.xhat[st].data(), s.invstd[st].data(),
                                   threads);
      }
      // pooled[r, b, offset : offset + H]
      readout_.resize(static_cast<size_t>(R * g.B * H));
      segment_sum<T>(s.y.back().data(), g.ptr, R, N, g.B, H, readout_.data(), threads);
      for (int64_t rb = 0; rb < R * g.B; ++rb)
        std::copy(readout_.begin() + rb * H, readout_.begin() + (rb + 1) * H, pooled + rb * pooled_width + offset);
      offset += H;
    }
  }

  // grad [R, B, L H] -> parameter gradients (and grad_x [x_replicas, N, F0] unless nullptr).
  void backward(const T* grad, const GINGraph& g, const std::vector<GINLayerWeights<T>>& layers, bool training,
                std::vector<GINLayerGrads<T>>& grads, T* grad_x, int threads) {
    if (!saved_) throw std::logic_error("GINNetwork.backward: no training forward was saved");
    if (layers.size() != layers_.size() || grads.size() != layers.size())
      throw std::invalid_argument("GINNetwork.backward: layer count differs from the forward");
    const int64_t R = R_, N = g.N, M = R * N, L = static_cast<int64_t>(layers.size());
    int64_t pooled_width = 0;
    for (const auto& w : layers) pooled_width += width(w);
    int64_t offset = pooled_width;
    std::vector<T>& g_h = g_h_;  // gradient reaching layer l's output from layer l + 1
    g_h.clear();
    for (int64_t l = L - 1; l >= 0; --l) {
      const GINLayerWeights<T>& w = layers[l];
      GINLayerGrads<T>& out = grads[l];
      Saved& s = layers_[l];
      const int64_t H = width(w), S = w.stages();
      if (static_cast<int64_t>(s.z.size()) != M * H || static_cast<int64_t>(s.y.size()) != S)
        throw std::invalid_argument("GINNetwork.backward: layer shapes differ from the saved forward");
      offset -= H;
      // g = broadcast of the readout gradient (+ g_h)
      readout_.resize(static_cast<size_t>(R * g.B * H));
      for (int64_t rb = 0; rb < R * g.B; ++rb)
        std::copy(grad + rb * pooled_width + offset, grad + rb * pooled_width + offset + H,
                  readout_.begin() + rb * H);
      std::vector<T>& cur = grad_;
      cur.resize(static_cast<size_t>(M * H));
      segment_broadcast<T>(readout_.data(), g.ptr, R, N, g.B, H, cur.data(), threads);
      if (!g_h.empty()) {
        T* __restrict__ c = cur.data();
        const T* __restrict__ a = g_h.data();
#pragma omp simd
        for (int64_t k = 0; k < M * H; ++k) c[k] += a[k];
      }
      work_.resize(static_cast<size_t>(M * H));
      for (int64_t st = S - 1; st >= 0; --st) {
        batch_norm_relu_backward<T>(cur.data(), s.y[st].data(), s.xhat[st].data(), w.gammas[st],
                                    s.invstd[st].data(), training, M, H, work_.data(), out.gammas[st],
                                    out.betas[st], threads);
        if (st) {
          if (out.weights[st - 1] != nullptr)
            matmul_tn<T>(work_.data(), s.y[st - 1].data(), M, H, H, out.weights[st - 1], threads);
          rows_times(work_.data(), M, H, w.weights[st - 1], H, cur.data(), threads);  // g W
        } else {
          cur.swap(work_);  // cur = gradient of the aggregate a
        }
      }
      // g_z = (1 + eps) g_a + A^T g_a; grad_eps = sum(g_a * z)
      gin_aggregate<T>(cur.data(), g.out_rowptr, g.out_col, static_cast<T>(1 + w.eps), work_.data(), R, N, H,
                       threads);
      out.eps = sum_product<T>(cur.data(), s.z.data(), M * H, threads);
      const T* g_z = work_.data();
      if (w.id_weight != nullptr && out.id_weight != nullptr)
        scatter_rows_sum<T>(ids_, g_z, M, w.id_rows, H, out.id_weight, threads);
      if (w.first == nullptr) {
        g_h.clear();
        continue;
      }
      const int64_t F = w.in_dim;
      const T* h = l == 0 ? x_ : layers_[l - 1].y.back().data();
      const int64_t h_replicas = l == 0 ? x_replicas_ : R;
      std::vector<T>& summed = summed_;
      if (h_replicas != R) {  // one input shared by the replicas collects all their gradients
        summed.assign(static_cast<size_t>(N * H), T(0));
        T* __restrict__ acc = summed.data();
        for (int64_t r = 0; r < R; ++r) {
          const T* __restrict__ src = g_z + r * N * H;
#pragma omp simd
          for (int64_t k = 0; k < N * H; ++k) acc[k] += src[k];
        }
        g_z = summed.data();
      }
      const int64_t rows = h_replicas * N;
      if (out.first != nullptr) matmul_tn<T>(g_z, h, rows, H, F, out.first, threads);
      if (l > 0) {
        g_h.resize(static_cast<size_t>(rows * F));
        rows_times(g_z, rows, H, w.first, F, g_h.data(), threads);
      } else if (grad_x != nullptr) {
        rows_times(g_z, rows, H, w.first, F, grad_x, threads);
      }
    }
  }

 private:
  struct Saved {
    std::vector<T> z;
    std::vector<std::vector<T>> y, xhat, invstd;
  };
  static int64_t width(const GINLayerWeights<T>& w) { return w.hidden; }

  int64_t R_ = 0, x_replicas_ = 0;
  const T* x_ = nullptr;
  const int64_t* ids_ = nullptr;
  bool saved_ = false;
  std::vector<Saved> layers_;
  std::vector<T> work_, readout_, grad_, g_h_, summed_;
};

}  // namespace rpfast
