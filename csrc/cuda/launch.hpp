// The CUDA kernels' host entry points: plain C++ (no pybind11, no torch), compiled by nvcc in
// the .cu files and called from module.cpp. Pointers are device pointers; every launch goes to
// `stream` (a cudaStream_t as an integer: torch's current stream) and returns at once. Shapes
// and the gather convention are csrc/rpfast/permute.hpp's, segment.hpp's, gin.hpp's and norm.hpp's.
#pragma once
#include <cstdint>
#include <string>

namespace rpfast_cuda {

// The number of CUDA devices; 0 with `error` set when the runtime finds none (or no driver).
int device_count(std::string& error);

// Throws std::runtime_error naming `what` if the last launch on the stream failed.
void check_launch(const char* what);

// out[b, p, :] (int64 [B, P, K]): row b * P + p of rpfast::random_permutations for `seed` (the
// CPU's streams); `workspace` int64 [B * P, n_max] holds every row's Fisher-Yates pool.
void random_permutations(const int64_t* num_nodes, int64_t B, int64_t P, int64_t K, int64_t n_max, uint64_t seed,
                         int64_t* workspace, int64_t* out, uintptr_t stream);

// out[p, ptr[b] + i] (int64 [P, N]) = row b * P + p of random_permutations (n_b positions) at i,
// mod modulus: rpfast::random_positions on the device; `workspace` int64 [B * P, n_max]. `seed_at`
// (null, or one int64 in device memory) replaces `seed` when given: a captured graph's seed.
void random_positions(const int64_t* ptr, int64_t B, int64_t P, int64_t N, int64_t n_max, int64_t modulus,
                      uint64_t seed, const int64_t* seed_at, int64_t* workspace, int64_t* out, uintptr_t stream);

// out[b, p, i, j, c] = adj[b, perms[b,p,i], perms[b,p,j], c] (0 where either is -1); T = float or double.
template <class T>
void permute_adjacency_forward(const T* adj, const int64_t* perms, T* out, int64_t B, int64_t N, int64_t C,
                               int64_t P, int64_t K, uintptr_t stream);

// grad_adj[b, u, v, c] = sum over p (increasing) of g[b, p, inv[b,p,u], inv[b,p,v], c] where both
// are placed: one thread per output element, a gather by the inverse permutation, no atomics.
template <class T>
void permute_adjacency_backward(const T* grad, const int64_t* inv, T* grad_adj, int64_t B, int64_t N, int64_t C,
                                int64_t P, int64_t K, uintptr_t stream);

// out[b, p, i, f] = x[b, perms[b,p,i], f] (0 where -1).
template <class T>
void permute_nodes_forward(const T* x, const int64_t* perms, T* out, int64_t B, int64_t N, int64_t F, int64_t P,
                           int64_t K, uintptr_t stream);

// grad_x[b, u, f] = sum over p (increasing) of g[b, p, inv[b,p,u], f] where u is placed.
template <class T>
void permute_nodes_backward(const T* grad, const int64_t* inv, T* grad_x, int64_t B, int64_t N, int64_t F,
                            int64_t P, int64_t K, uintptr_t stream);

// inv[b, p, u] = i where perms[b, p, i] = u, else -1 (int64 [B, P, N]).
void invert_permutations(const int64_t* perms, int64_t rows, int64_t K, int64_t N, int64_t* inv, uintptr_t stream);

// out[r, b, f] = sum_{i = ptr[b]}^{ptr[b+1]-1} x[r, i, f], in increasing i (one thread per output).
template <class T>
void segment_sum(const T* x, const int64_t* ptr, T* out, int64_t R, int64_t N, int64_t B, int64_t F,
                 uintptr_t stream);

// out[b, f] = max over the rows of graph b of x[i, f] and ties[b, f] how many attain it
// (rpfast::meet, as the CPU: a NaN wins; an empty graph gives 0 and 0); x [N, F].
template <class T>
void segment_max(const T* x, const int64_t* ptr, T* out, T* ties, int64_t B, int64_t F, uintptr_t stream);

// grad_x[i, f] = g[b, f] / ties[b, f] where x[i, f] attains out[b, f], else 0 (i in graph b).
template <class T>
void segment_max_backward(const T* x, const int64_t* ptr, const T* out, const T* ties, const T* g, T* grad_x,
                          int64_t B, int64_t F, uintptr_t stream);

// out[r, i, f] = (1 + eps) x[r, i, f] + sum over the CSR row i (increasing) of x[r, col, f]:
// GIN's aggregation, row-parallel (the backward is the same kernel on the transpose CSR).
template <class T>
void gin_aggregate(const T* x, const int64_t* rowptr, const int64_t* col, const T* eps, T* out, int64_t R, int64_t N,
                   int64_t F, uintptr_t stream);

// Fused BatchNorm + ReLU over the rows of x [M, H] (rpfast/norm.hpp's math): y, xhat [M, H] and
// invstd [H]; in training the batch statistics update running_mean and running_var (PyTorch's
// rule), in eval they are read. `shift` [H] is scratch (the mean in T).
template <class T>
void batch_norm_relu_forward(const T* x, const T* gamma, const T* beta, T* running_mean, T* running_var,
                             bool training, double momentum, double eps, T* y, T* xhat, T* invstd, T* shift,
                             int64_t M, int64_t H, uintptr_t stream);

// Its backward: grad_x [M, H], grad_gamma and grad_beta [H] from g [M, H]; `means` [2H] is scratch.
template <class T>
void batch_norm_relu_backward(const T* g, const T* y, const T* xhat, const T* gamma, const T* invstd, bool training,
                              T* grad_x, T* grad_gamma, T* grad_beta, T* means, int64_t M, int64_t H,
                              uintptr_t stream);

}  // namespace rpfast_cuda
