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
//
// A GINHead extends the output to a whole GIN model (rpfast.nn.GIN): the embedding
//   e[r, b] = [sum_{i in b} x[r, i],  histogram of ids[r, i] over i in b,  pooled layers]
// (the first two blocks only with input_readouts) and, with a classifier, the logits
//   out[r, b] = e[r, b] W_cls^T + b_cls.
// Weights are read through pointers at every call (eps too), so a GINWeights bound once
// follows the optimizer's in-place updates. The caller counts BatchNorm steps and sets each
// training call's momenta.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "rpfast/dense.hpp"
#include "rpfast/gin.hpp"
#include "rpfast/norm.hpp"
#include "cpu/parallel.hpp"
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
  const T* eps = nullptr;          // [1], read at every call
  std::vector<const T*> weights;   // S - 1 maps [H, H]
  std::vector<const T*> gammas, betas;
  std::vector<T*> running_means, running_vars;
  std::vector<double> momenta, bn_eps;  // this training call's momenta (set per call), variance epsilons
  int64_t stages() const { return static_cast<int64_t>(gammas.size()); }
  T scale() const { return static_cast<T>(1 + static_cast<double>(*eps)); }
};

// What a whole model adds around the layers (see the top of this file).
template <class T>
struct GINHead {
  bool input_readouts = false;  // e starts with the input's sum readout and the ID histogram
  int64_t in_dim = 0;           // F0 (x's width; 0 without x)
  int64_t id_dim = 0;           // m (histogram width; 0 without ids)
  const T* cls_weight = nullptr;  // [C, D] or nullptr: the output is the embedding itself
  const T* cls_bias = nullptr;    // [C] or nullptr
  int64_t classes = 0;
  int64_t prefix() const { return input_readouts ? in_dim + id_dim : 0; }
};

template <class T>
struct GINLayerGrads {
  T* first = nullptr;  // [H, F] or nullptr (not wanted)
  T* id_weight = nullptr;
  T* eps = nullptr;
  std::vector<T*> weights, gammas, betas;
};

template <class T>
struct GINHeadGrads {
  T* cls_weight = nullptr;  // [C, D] or nullptr (not wanted)
  T* cls_bias = nullptr;
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
  // x [R or 1, N, F0] or nullptr, ids [R, N] or nullptr; writes out [R, B, D_out]: the logits
  // with a classifier, else the embedding. With save, keeps what backward needs (a later
  // forward overwrites it).
  void forward(const T* x, int64_t x_replicas, const int64_t* ids, int64_t R, const GINGraph& g,
               const std::vector<GINLayerWeights<T>>& layers, const GINHead<T>& head, bool training, bool save,
               T* out, int threads) {
    const int64_t N = g.N, M = R * N, L = static_cast<int64_t>(layers.size());
    R_ = R;
    x_ = x;
    x_replicas_ = x_replicas;
    ids_ = ids;
    saved_ = save;  // without save the buffers are still used (and kept for the next call)
    layers_.resize(static_cast<size_t>(L));
    const int64_t D = embedding_width(layers, head);
    T* embedding = out;
    if (head.cls_weight != nullptr) {
      embedding_.resize(static_cast<size_t>(R * g.B * D));
      embedding = embedding_.data();
    }
    if (head.input_readouts) input_readouts(x, x_replicas, ids, R, g, head, D, embedding, threads);
    int64_t offset = head.prefix();
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
      gin_aggregate<T>(s.z.data(), g.in_rowptr, g.in_col, w.scale(), work_.data(), R, N, H, threads);
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
                             momentum(w, st, training), w.bn_eps[st], training};
        batch_norm_relu_forward<T>(work_.data(), M, H, p, s.y[st].data(), s.xhat[st].data(), s.invstd[st].data(),
                                   threads);
      }
      // embedding[r, b, offset : offset + H]
      readout_.resize(static_cast<size_t>(R * g.B * H));
      segment_sum<T>(s.y.back().data(), g.ptr, R, N, g.B, H, readout_.data(), threads);
      for (int64_t rb = 0; rb < R * g.B; ++rb)
        std::copy(readout_.begin() + rb * H, readout_.begin() + (rb + 1) * H, embedding + rb * D + offset);
      offset += H;
    }
    if (head.cls_weight != nullptr) classify(head, R * g.B, D, out, threads);
  }

  // grad [R, B, D_out] -> parameter gradients (and grad_x [x_replicas, N, F0] unless nullptr).
  void backward(const T* grad, const GINGraph& g, const std::vector<GINLayerWeights<T>>& layers,
                const GINHead<T>& head, bool training, std::vector<GINLayerGrads<T>>& grads,
                const GINHeadGrads<T>& head_grads, T* grad_x, int threads) {
    if (!saved_) throw std::logic_error("GINNetwork.backward: no training forward was saved");
    if (layers.size() != layers_.size() || grads.size() != layers.size())
      throw std::invalid_argument("GINNetwork.backward: layer count differs from the forward");
    const int64_t R = R_, N = g.N, M = R * N, L = static_cast<int64_t>(layers.size());
    const int64_t D = embedding_width(layers, head);
    if (head.cls_weight != nullptr) {
      if (static_cast<int64_t>(embedding_.size()) != R * g.B * D)
        throw std::invalid_argument("GINNetwork.backward: the head differs from the saved forward");
      grad = classifier_backward(grad, head, head_grads, R * g.B, D, threads);
    }
    bool grad_x_written = false;
    if (grad_x != nullptr && head.input_readouts && head.in_dim > 0) {
      readout_backward(grad, g, head, D, grad_x, threads);
      grad_x_written = true;
    }
    int64_t offset = D;
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
        std::copy(grad + rb * D + offset, grad + rb * D + offset + H, readout_.begin() + rb * H);
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
      if (out.eps != nullptr)
        *out.eps = static_cast<T>(gin_aggregate_adjoint<T>(cur.data(), g.out_rowptr, g.out_col, w.scale(),
                                                           s.z.data(), work_.data(), R, N, H, threads));
      else
        gin_aggregate<T>(cur.data(), g.out_rowptr, g.out_col, w.scale(), work_.data(), R, N, H, threads);
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
        if (!grad_x_written) {
          rows_times(g_z, rows, H, w.first, F, grad_x, threads);
        } else {  // add to the readout's gradient
          g_h.resize(static_cast<size_t>(rows * F));
          rows_times(g_z, rows, H, w.first, F, g_h.data(), threads);
          for (int64_t k = 0; k < rows * F; ++k) grad_x[k] += g_h[k];
        }
      }
    }
  }

  static int64_t embedding_width(const std::vector<GINLayerWeights<T>>& layers, const GINHead<T>& head) {
    int64_t D = head.prefix();
    for (const auto& w : layers) D += width(w);
    return D;
  }

 private:
  struct Saved {
    std::vector<T> z;
    std::vector<std::vector<T>> y, xhat, invstd;
  };
  static int64_t width(const GINLayerWeights<T>& w) { return w.hidden; }

  // The BatchNorm momentum of a stage in this call (the caller counted the step).
  static double momentum(const GINLayerWeights<T>& w, int64_t st, bool training) {
    return training ? w.momenta[st] : 0.0;
  }

  // embedding[r, b, :F0] = sum of x over graph b, embedding[r, b, F0 + k] = nodes with id k
  static void input_readouts(const T* x, int64_t x_replicas, const int64_t* ids, int64_t R, const GINGraph& g,
                             const GINHead<T>& head, int64_t D, T* embedding, int threads) {
    const int64_t F0 = head.in_dim, m = head.id_dim, B = g.B, N = g.N;
    for (int64_t rb = 0; rb < R * B; ++rb) std::fill(embedding + rb * D, embedding + rb * D + F0 + m, T(0));
    if (F0 > 0) {
      std::vector<T> sums(static_cast<size_t>(x_replicas * B * F0));
      segment_sum<T>(x, g.ptr, x_replicas, N, B, F0, sums.data(), threads);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t b = 0; b < B; ++b) {
          const T* src = sums.data() + ((x_replicas == 1 ? 0 : r) * B + b) * F0;
          std::copy(src, src + F0, embedding + (r * B + b) * D);
        }
    }
    if (m > 0)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t b = 0; b < B; ++b) {
          T* row = embedding + (r * B + b) * D + F0;
          for (int64_t i = g.ptr[b]; i < g.ptr[b + 1]; ++i) row[ids[r * N + i]] += T(1);
        }
  }

  // grad_x[r', i] = sum over the replicas r sharing x[r'] of grad[r, graph of i, :F0]
  void readout_backward(const T* grad, const GINGraph& g, const GINHead<T>& head, int64_t D, T* grad_x,
                        int threads) {
    const int64_t F0 = head.in_dim, B = g.B, R = R_;
    readout_.assign(static_cast<size_t>(x_replicas_ * B * F0), T(0));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t b = 0; b < B; ++b) {
        T* dst = readout_.data() + ((x_replicas_ == 1 ? 0 : r) * B + b) * F0;
        const T* src = grad + (r * B + b) * D;
        for (int64_t f = 0; f < F0; ++f) dst[f] += src[f];
      }
    segment_broadcast<T>(readout_.data(), g.ptr, x_replicas_, g.N, B, F0, grad_x, threads);
  }

  // out [RB, C] = embedding W^T + bias (the product by rows, then the bias added: the
  // same operations as rpfast.ops.linear)
  void classify(const GINHead<T>& head, int64_t rows, int64_t D, T* out, int threads) {
    const int64_t C = head.classes;
    const std::vector<T> wt = transposed(head.cls_weight, C, D);  // [D, C]
    rows_times(embedding_.data(), rows, D, wt.data(), C, out, threads);
    if (head.cls_bias != nullptr)
      for (int64_t k = 0; k < rows; ++k)
        for (int64_t c = 0; c < C; ++c) out[k * C + c] += head.cls_bias[c];
  }

  // The classifier's gradients from grad [RB, C]; returns the embedding's gradient [RB, D].
  const T* classifier_backward(const T* grad, const GINHead<T>& head, const GINHeadGrads<T>& out, int64_t rows,
                               int64_t D, int threads) {
    const int64_t C = head.classes;
    if (out.cls_weight != nullptr) matmul_tn<T>(grad, embedding_.data(), rows, C, D, out.cls_weight, threads);
    if (out.cls_bias != nullptr) {
      ones_.assign(static_cast<size_t>(rows), T(1));
      matmul_tn<T>(ones_.data(), grad, rows, 1, C, out.cls_bias, threads);
    }
    grad_embedding_.resize(static_cast<size_t>(rows * D));
    rows_times(grad, rows, C, head.cls_weight, D, grad_embedding_.data(), threads);
    return grad_embedding_.data();
  }

  int64_t R_ = 0, x_replicas_ = 0;
  const T* x_ = nullptr;
  const int64_t* ids_ = nullptr;
  bool saved_ = false;
  std::vector<Saved> layers_;
  std::vector<T> work_, readout_, grad_, g_h_, summed_, embedding_, grad_embedding_, ones_;
};

}  // namespace rpfast
