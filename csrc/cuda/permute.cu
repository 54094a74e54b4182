// Batched permutation gathers (csrc/rpfast/permute.hpp's math) on the device. Forward: one
// thread per output element. Backward: a gather by the inverse permutation, one thread per
// gradient element summing the samples in increasing p (no atomics: deterministic).
#include <cuda_runtime.h>

#include "cuda/launch.hpp"

namespace rpfast_cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

cudaStream_t as_stream(uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

template <class T>
__global__ void adjacency_forward(const T* adj, const int64_t* perms, T* out, int64_t B, int64_t N, int64_t C,
                                  int64_t P, int64_t K) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [B, P, K, K, C]
  if (e >= B * P * K * K * C) return;
  const int64_t c = e % C, j = (e / C) % K, i = (e / (C * K)) % K, bp = e / (C * K * K), b = bp / P;
  const int64_t u = perms[bp * K + i], v = perms[bp * K + j];
  out[e] = (u < 0 || v < 0) ? T(0) : adj[((b * N + u) * N + v) * C + c];
}

template <class T>
__global__ void adjacency_backward(const T* grad, const int64_t* inv, T* grad_adj, int64_t B, int64_t N, int64_t C,
                                   int64_t P, int64_t K) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [B, N, N, C]
  if (e >= B * N * N * C) return;
  const int64_t c = e % C, v = (e / C) % N, u = (e / (C * N)) % N, b = e / (C * N * N);
  T total = T(0);
  for (int64_t p = 0; p < P; ++p) {
    const int64_t row = b * P + p;
    const int64_t iu = inv[row * N + u], iv = inv[row * N + v];
    if (iu >= 0 && iv >= 0) total += grad[((row * K + iu) * K + iv) * C + c];
  }
  grad_adj[e] = total;
}

template <class T>
__global__ void nodes_forward(const T* x, const int64_t* perms, T* out, int64_t B, int64_t N, int64_t F, int64_t P,
                              int64_t K) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [B, P, K, F]
  if (e >= B * P * K * F) return;
  const int64_t f = e % F, r = e / F, b = r / (P * K);
  const int64_t u = perms[r];
  out[e] = u < 0 ? T(0) : x[(b * N + u) * F + f];
}

template <class T>
__global__ void nodes_backward(const T* grad, const int64_t* inv, T* grad_x, int64_t B, int64_t N, int64_t F,
                               int64_t P, int64_t K) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [B, N, F]
  if (e >= B * N * F) return;
  const int64_t f = e % F, u = (e / F) % N, b = e / (F * N);
  T total = T(0);
  for (int64_t p = 0; p < P; ++p) {
    const int64_t iu = inv[(b * P + p) * N + u];
    if (iu >= 0) total += grad[((b * P + p) * K + iu) * F + f];
  }
  grad_x[e] = total;
}

__global__ void invert_rows(const int64_t* perms, int64_t rows, int64_t K, int64_t N, int64_t* inv) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  for (int64_t u = 0; u < N; ++u) inv[r * N + u] = -1;
  for (int64_t i = 0; i < K; ++i) {
    const int64_t u = perms[r * K + i];
    if (u >= 0) inv[r * N + u] = i;
  }
}

}  // namespace

template <class T>
void permute_adjacency_forward(const T* adj, const int64_t* perms, T* out, int64_t B, int64_t N, int64_t C,
                               int64_t P, int64_t K, uintptr_t stream) {
  const int64_t n = B * P * K * K * C;
  if (n == 0) return;
  adjacency_forward<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(adj, perms, out, B, N, C, P, K);
  check_launch("permute_adjacency");
}

template <class T>
void permute_adjacency_backward(const T* grad, const int64_t* inv, T* grad_adj, int64_t B, int64_t N, int64_t C,
                                int64_t P, int64_t K, uintptr_t stream) {
  const int64_t n = B * N * N * C;
  if (n == 0) return;
  adjacency_backward<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(grad, inv, grad_adj, B, N, C, P, K);
  check_launch("permute_adjacency backward");
}

template <class T>
void permute_nodes_forward(const T* x, const int64_t* perms, T* out, int64_t B, int64_t N, int64_t F, int64_t P,
                           int64_t K, uintptr_t stream) {
  const int64_t n = B * P * K * F;
  if (n == 0) return;
  nodes_forward<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, perms, out, B, N, F, P, K);
  check_launch("permute_nodes");
}

template <class T>
void permute_nodes_backward(const T* grad, const int64_t* inv, T* grad_x, int64_t B, int64_t N, int64_t F,
                            int64_t P, int64_t K, uintptr_t stream) {
  const int64_t n = B * N * F;
  if (n == 0) return;
  nodes_backward<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(grad, inv, grad_x, B, N, F, P, K);
  check_launch("permute_nodes backward");
}

void invert_permutations(const int64_t* perms, int64_t rows, int64_t K, int64_t N, int64_t* inv, uintptr_t stream) {
  if (rows == 0) return;
  invert_rows<<<blocks_for(rows), kThreads, 0, as_stream(stream)>>>(perms, rows, K, N, inv);
  check_launch("invert_permutations");
}

#define RPFAST_PERMUTE_INSTANCES(T)                                                                              \
  template void permute_adjacency_forward<T>(const T*, const int64_t*, T*, int64_t, int64_t, int64_t, int64_t,    \
                                             int64_t, uintptr_t);                                                 \
  template void permute_adjacency_backward<T>(const T*, const int64_t*, T*, int64_t, int64_t, int64_t, int64_t,   \
                                              int64_t, uintptr_t);                                                \
  template void permute_nodes_forward<T>(const T*, const int64_t*, T*, int64_t, int64_t, int64_t, int64_t,        \
                                         int64_t, uintptr_t);                                                     \
  template void permute_nodes_backward<T>(const T*, const int64_t*, T*, int64_t, int64_t, int64_t, int64_t,       \
                                          int64_t, uintptr_t);
RPFAST_PERMUTE_INSTANCES(float)
RPFAST_PERMUTE_INSTANCES(double)

}  // namespace rpfast_cuda
