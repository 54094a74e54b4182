// Per-graph sums (the GNN sum readout) on the device: one thread per output element, rows
// summed in increasing order (deterministic, the CPU's order).
#include <cuda_runtime.h>

#include "cuda/launch.hpp"

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

}  // namespace

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
