// Per-graph readouts on the device, one thread per output element: sums (rows in increasing
// order, the CPU's), and maxima with their tie counts (rpfast/running_max.hpp's step, as the
// CPU) and the maxima's adjoint (each graph's gradient shared among the rows attaining it).
#include <cuda_runtime.h>

#include "cuda/launch.hpp"
#include "rpfast/running_max.hpp"

namespace rpfast_cuda {
namespace {

template <class T>
__global__ void segment_sum_kernel(const T* x, const int64_t* ptr, T* out, int64_t R, int64_t N, int64_t B,
                                   int64_t F) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [R, B, F]
  if (e >= R * B * F) return;
  const int64_t f = e % F, b = (e / F) % B, r = e / (F * B);
  T total = T(0);
  for (int64_t i = ptr[b]; i < ptr[b + 1]; ++i) total += x[(r * N + i) * F + f];
  out[e] = total;
}

template <class T>
__global__ void segment_max_kernel(const T* x, const int64_t* ptr, T* out, T* ties, int64_t B, int64_t F) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [B, F]
  if (e >= B * F) return;
  const int64_t f = e % F, b = e / F, begin = ptr[b], end = ptr[b + 1];
  if (begin == end) {
    out[e] = ties[e] = T(0);
    return;
  }
  T best = x[begin * F + f], count = T(1);
  for (int64_t i = begin + 1; i < end; ++i) rpfast::meet(x[i * F + f], best, count, T(1));
  out[e] = best;
  ties[e] = rpfast::ties_of(best, count);
}

template <class T>
__global__ void segment_max_backward_kernel(const T* x, const int64_t* ptr, const T* out, const T* ties, const T* g,
                                            T* grad_x, int64_t B, int64_t F) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [B, F]
  if (e >= B * F) return;
  const int64_t f = e % F, b = e / F;
  const T share = ptr[b] < ptr[b + 1] ? g[e] / ties[e] : T(0);
  for (int64_t i = ptr[b]; i < ptr[b + 1]; ++i) grad_x[i * F + f] = x[i * F + f] == out[e] ? share : T(0);
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

template <class T>
void segment_max(const T* x, const int64_t* ptr, T* out, T* ties, int64_t B, int64_t F, uintptr_t stream) {
  if (B * F == 0) return;
  segment_max_kernel<T><<<blocks_for(B * F, 256), 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(x, ptr, out,
                                                                                                    ties, B, F);
  check_launch("segment_max");
}

template <class T>
void segment_max_backward(const T* x, const int64_t* ptr, const T* out, const T* ties, const T* g, T* grad_x,
                          int64_t B, int64_t F, uintptr_t stream) {
  if (B * F == 0) return;
  segment_max_backward_kernel<T><<<blocks_for(B * F, 256), 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      x, ptr, out, ties, g, grad_x, B, F);
  check_launch("segment_max backward");
}

template void segment_max<float>(const float*, const int64_t*, float*, float*, int64_t, int64_t, uintptr_t);
template void segment_max<double>(const double*, const int64_t*, double*, double*, int64_t, int64_t, uintptr_t);
template void segment_max_backward<float>(const float*, const int64_t*, const float*, const float*, const float*,
                                          float*, int64_t, int64_t, uintptr_t);
template void segment_max_backward<double>(const double*, const int64_t*, const double*, const double*,
                                           const double*, double*, int64_t, int64_t, uintptr_t);

template <class T>
void segment_sum(const T* x, const int64_t* ptr, T* out, int64_t R, int64_t N, int64_t B, int64_t F,
                 uintptr_t stream) {
  const int64_t n = R * B * F;
  if (n == 0) return;
  const int threads = 256;
  segment_sum_kernel<T><<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0,
                          reinterpret_cast<cudaStream_t>(stream)>>>(x, ptr, out, R, N, B, F);
  check_launch("segment_sum");
}

template void segment_sum<float>(const float*, const int64_t*, float*, int64_t, int64_t, int64_t, int64_t, uintptr_t);
template void segment_sum<double>(const double*, const int64_t*, double*, int64_t, int64_t, int64_t, int64_t,
                                  uintptr_t);

}  // namespace rpfast_cuda
