// Fused BatchNorm + ReLU on the device (csrc/rpfast/norm.hpp's math and its order of operations):
// two launches each way instead of the dozen a composed batch norm, ReLU and their backward take.
//
// Column statistics: a block covers kCols consecutive columns with kLanes row lanes; lane l of
// column h sums rows l, l + kLanes, ... in double, and the lanes are added in lane order in shared
// memory. Reads are coalesced (a warp reads 32 consecutive columns of one row) and the order of
// every sum is fixed by the launch shape alone: the same bits on every run (no atomics). The CPU
// sums in another fixed order, so the two agree to rounding, not bitwise.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/launch.hpp"

namespace rpfast_cuda {
namespace {

constexpr int kCols = 32, kLanes = 8;

// The column sums of a block's tile: sum_m f(m, h) for the block's columns, left in
// sums[0][threadIdx.x] after the lane reduction (f returns a double).
template <class F>
__device__ double column_sum(int64_t M, int64_t h, bool inside, double (*sums)[kCols], F f) {
  double acc = 0;
  if (inside)
    for (int64_t m = threadIdx.y; m < M; m += kLanes) acc += f(m);
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  double total = 0;
  if (threadIdx.y == 0)
    for (int lane = 0; lane < kLanes; ++lane) total += sums[lane][threadIdx.x];
  __syncthreads();  // the tile is reused by the next sum
  return total;
}

// Training statistics: shift[h] = T(mean), invstd[h], the running averages (PyTorch's rule).
template <class T>
__global__ void statistics_kernel(const T* x, int64_t M, int64_t H, double momentum, double eps, T* running_mean,
                                  T* running_var, T* shift, T* invstd) {
  __shared__ double sums[kLanes][kCols];
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  const bool inside = h < H;
  const double total = column_sum(M, h, inside, sums, [&](int64_t m) { return double(x[m * H + h]); });
  __shared__ T centre[kCols];
  if (threadIdx.y == 0) centre[threadIdx.x] = T(total / double(M));
  __syncthreads();
  const T c = centre[threadIdx.x];
  // the variance from the centred values in T, as the CPU (its xhat holds x - mu in T)
  const double squares = column_sum(M, h, inside, sums, [&](int64_t m) {
    const T d = x[m * H + h] - c;
    return double(d) * double(d);
  });
  if (threadIdx.y == 0 && inside) {
    const double mean = total / double(M), var = squares / double(M);
    const double unbiased = M > 1 ? var * double(M) / double(M - 1) : var;
    running_mean[h] = T((1 - momentum) * double(running_mean[h]) + momentum * mean);
    running_var[h] = T((1 - momentum) * double(running_var[h]) + momentum * unbiased);
    shift[h] = c;
    invstd[h] = T(1.0 / sqrt(var + eps));
  }
}

// Evaluation statistics: the running ones.
template <class T>
__global__ void running_statistics_kernel(const T* running_mean, const T* running_var, int64_t H, double eps, T* shift,
                                          T* invstd) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h >= H) return;
  shift[h] = running_mean[h];
  invstd[h] = T(1.0 / sqrt(double(running_var[h]) + eps));
}

// y = relu(x * alpha + (beta - shift * alpha)), alpha = gamma * invstd (torch's transform);
// xhat = (x - shift) * invstd. One thread per element.
template <class T>
__global__ void normalise_kernel(const T* x, const T* gamma, const T* beta, const T* shift, const T* invstd,
                                 int64_t M, int64_t H, T* y, T* xhat) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= M * H) return;
  const int64_t h = e % H;
  const T alpha = gamma[h] * invstd[h], offset = beta[h] - shift[h] * alpha;
  const T v = x[e] * alpha + offset;
  xhat[e] = (x[e] - shift[h]) * invstd[h];
  y[e] = v < T(0) ? T(0) : v;  // NaN passes, as torch.relu
}

// grad_beta = sum gy, grad_gamma = sum gy * xhat (gy: g where y > 0 or y is NaN); means[h] and
// means[H + h] keep their means over the M rows for the elementwise pass.
template <class T>
__global__ void gradient_sums_kernel(const T* g, const T* y, const T* xhat, int64_t M, int64_t H, T* grad_gamma,
                                     T* grad_beta, T* means) {
  __shared__ double sums[kLanes][kCols];
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  const bool inside = h < H;
  auto gated = [&](int64_t m) { return y[m * H + h] <= T(0) ? T(0) : g[m * H + h]; };
  const double sum_g = column_sum(M, h, inside, sums, [&](int64_t m) { return double(gated(m)); });
  const double sum_gx = column_sum(M, h, inside, sums, [&](int64_t m) {
    return double(gated(m)) * double(xhat[m * H + h]);
  });
  if (threadIdx.y == 0 && inside) {
    grad_beta[h] = T(sum_g);
    grad_gamma[h] = T(sum_gx);
    means[h] = T(sum_g / double(M));
    means[H + h] = T(sum_gx / double(M));
  }
}

// grad_x = (gy - mean gy - xhat mean(gy xhat)) invstd gamma in training, gy invstd gamma in eval.
template <class T>
__global__ void input_gradient_kernel(const T* g, const T* y, const T* xhat, const T* gamma, const T* invstd,
                                      const T* means, bool training, int64_t M, int64_t H, T* grad_x) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= M * H) return;
  const int64_t h = e % H;
  const T gy = y[e] <= T(0) ? T(0) : g[e];
  grad_x[e] = training ? (gy - means[h] - xhat[e] * means[H + h]) * invstd[h] * gamma[h] : gy * invstd[h] * gamma[h];
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

template <class T>
void batch_norm_relu_forward(const T* x, const T* gamma, const T* beta, T* running_mean, T* running_var,
                             bool training, double momentum, double eps, T* y, T* xhat, T* invstd, T* shift,
                             int64_t M, int64_t H, uintptr_t stream) {
  if (H == 0) return;
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (training) {
    statistics_kernel<T><<<blocks_for(H, kCols), dim3(kCols, kLanes), 0, s>>>(x, M, H, momentum, eps, running_mean,
                                                                               running_var, shift, invstd);
  } else {
    running_statistics_kernel<T><<<blocks_for(H, 256), 256, 0, s>>>(running_mean, running_var, H, eps, shift, invstd);
  }
  check_launch("batch_norm_relu statistics");
  if (M == 0) return;
  normalise_kernel<T><<<blocks_for(M * H, 256), 256, 0, s>>>(x, gamma, beta, shift, invstd, M, H, y, xhat);
  check_launch("batch_norm_relu");
}

template <class T>
void batch_norm_relu_backward(const T* g, const T* y, const T* xhat, const T* gamma, const T* invstd, bool training,
                              T* grad_x, T* grad_gamma, T* grad_beta, T* means, int64_t M, int64_t H,
                              uintptr_t stream) {
  if (H == 0) return;
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  gradient_sums_kernel<T><<<blocks_for(H, kCols), dim3(kCols, kLanes), 0, s>>>(g, y, xhat, M, H, grad_gamma,
                                                                                grad_beta, means);
  check_launch("batch_norm_relu backward sums");
  if (M == 0) return;
  input_gradient_kernel<T><<<blocks_for(M * H, 256), 256, 0, s>>>(g, y, xhat, gamma, invstd, means, training, M, H,
                                                                   grad_x);
  check_launch("batch_norm_relu backward");
}

template void batch_norm_relu_forward<float>(const float*, const float*, const float*, float*, float*, bool, double,
                                             double, float*, float*, float*, float*, int64_t, int64_t, uintptr_t);
template void batch_norm_relu_forward<double>(const double*, const double*, const double*, double*, double*, bool,
                                              double, double, double*, double*, double*, double*, int64_t, int64_t,
                                              uintptr_t);
template void batch_norm_relu_backward<float>(const float*, const float*, const float*, const float*, const float*,
                                              bool, float*, float*, float*, float*, int64_t, int64_t, uintptr_t);
template void batch_norm_relu_backward<double>(const double*, const double*, const double*, const double*,
                                               const double*, bool, double*, double*, double*, double*, int64_t,
                                               int64_t, uintptr_t);

}  // namespace rpfast_cuda
