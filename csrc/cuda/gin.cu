// GIN's aggregation on the device, row-parallel over the CSR: one thread per output element,
// neighbours summed in CSR order (deterministic). Its backward is the same kernel over the
// transpose CSR (csrc/rpfast/gin.hpp's math).
#include <cuda_runtime.h>

#include "cuda/launch.hpp"

namespace rpfast_cuda {
namespace {

template <class T>
__global__ void aggregate_kernel(const T* x, const int64_t* rowptr, const int64_t* col, const T* eps, T* out, int64_t R,
                                 int64_t N, int64_t F) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [R, N, F]
  if (e >= R * N * F) return;
  const int64_t f = e % F, i = (e / F) % N, r = e / (F * N);
  const T scale = static_cast<T>(1.0 + static_cast<double>(*eps));  // the CPU's rounding of 1 + eps
  const T* xr = x + r * N * F;
  T total = scale * xr[i * F + f];
  for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) total += xr[col[k] * F + f];
  out[e] = total;
}

}  // namespace

template <class T>
void gin_aggregate(const T* x, const int64_t* rowptr, const int64_t* col, const T* eps, T* out, int64_t R, int64_t N,
                   int64_t F, uintptr_t stream) {
  const int64_t n = R * N * F;
  if (n == 0) return;
  const int threads = 256;
  aggregate_kernel<T><<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0,
                        reinterpret_cast<cudaStream_t>(stream)>>>(x, rowptr, col, eps, out, R, N, F);
  check_launch("gin_aggregate");
}

template void gin_aggregate<float>(const float*, const int64_t*, const int64_t*, const float*, float*, int64_t,
                                   int64_t, int64_t, uintptr_t);
template void gin_aggregate<double>(const double*, const int64_t*, const int64_t*, const double*, double*, int64_t,
                                    int64_t, int64_t, uintptr_t);

}  // namespace rpfast_cuda
