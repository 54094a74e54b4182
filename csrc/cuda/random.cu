// Uniform random (partial) permutations and node positions on the device: one row per thread,
// the CPU's streams (rpfast/stream_rng.hpp), so a seed gives the same results on both.
#include <cuda_runtime.h>

#include "cuda/launch.hpp"
#include "rpfast/stream_rng.hpp"

namespace rpfast_cuda {
namespace {

__global__ void permutation_rows(const int64_t* num_nodes, int64_t rows, int64_t P, int64_t K, int64_t n_max,
                                 uint64_t seed, int64_t* workspace, int64_t* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int64_t n = num_nodes[row / P];
  const int64_t take = n < K ? n : K;
  int64_t* pool = workspace + row * n_max;
  int64_t* dst = out + row * K;
  for (int64_t v = 0; v < n; ++v) pool[v] = v;
  rpfast::StreamRng rng(seed, static_cast<uint64_t>(row));
  rpfast::shuffle_prefix(rng, n, take, pool, dst);
  for (int64_t i = take; i < K; ++i) dst[i] = -1;
}

// `seed_at` (device memory, may be null): the seed to use instead of `seed`, so a captured CUDA
// graph draws fresh relabelings at every replay once the caller refills it.
__global__ void position_rows(const int64_t* ptr, int64_t rows, int64_t P, int64_t N, int64_t n_max, int64_t modulus,
                              uint64_t seed, const int64_t* seed_at, int64_t* workspace, int64_t* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  if (seed_at != nullptr) seed = static_cast<uint64_t>(*seed_at);
  const int64_t b = row / P, p = row % P, n = ptr[b + 1] - ptr[b];
  int64_t* pool = workspace + row * n_max;
  int64_t* dst = out + p * N + ptr[b];
  for (int64_t v = 0; v < n; ++v) pool[v] = v;
  rpfast::StreamRng rng(seed, static_cast<uint64_t>(row));
  rpfast::shuffle_prefix(rng, n, n, pool, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] %= modulus;
}

}  // namespace

void random_positions(const int64_t* ptr, int64_t B, int64_t P, int64_t N, int64_t n_max, int64_t modulus,
                      uint64_t seed, const int64_t* seed_at, int64_t* workspace, int64_t* out, uintptr_t stream) {
  const int64_t rows = B * P;
  if (rows == 0 || N == 0) return;
  const int threads = 128;
  position_rows<<<static_cast<unsigned>((rows + threads - 1) / threads), threads, 0,
                  reinterpret_cast<cudaStream_t>(stream)>>>(ptr, rows, P, N, n_max, modulus, seed, seed_at,
                                                                workspace, out);
  check_launch("random_positions");
}

void random_permutations(const int64_t* num_nodes, int64_t B, int64_t P, int64_t K, int64_t n_max, uint64_t seed,
                         int64_t* workspace, int64_t* out, uintptr_t stream) {
  const int64_t rows = B * P;
  if (rows == 0 || K == 0) return;
  const int threads = 128;
  const unsigned blocks = static_cast<unsigned>((rows + threads - 1) / threads);
  permutation_rows<<<blocks, threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(num_nodes, rows, P, K, n_max,
                                                                                   seed, workspace, out);
  check_launch("random_permutations");
}

}  // namespace rpfast_cuda
