// Fused BatchNorm + ReLU over the rows of x [M, H] (one normalisation per column h).
//
// Forward (training): mu_h = mean_m x[m,h], var_h = mean_m (x[m,h] - mu_h)^2,
//   xhat = (x - mu) / sqrt(var + bn_eps), y = max(0, gamma * xhat + beta),
//   running_mean <- (1 - momentum) running_mean + momentum mu,
//   running_var  <- (1 - momentum) running_var + momentum var * M / (M - 1)   (PyTorch's rule).
// Forward (eval): mu, var are the running statistics.
// (ReLU keeps NaN, like torch.relu.) Backward, with gy = g * [not y <= 0]:
//   grad_beta = sum_m gy, grad_gamma = sum_m gy * xhat,
//   grad_x = gamma * invstd * (gy - grad_beta / M - xhat * grad_gamma / M)   (training)
//   grad_x = gamma * invstd * gy                                              (eval)
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "rpfast/parallel.hpp"
#include "rpfast/reduce.hpp"

namespace rpfast {

template <class T>
struct BatchNormParams {
  const T* gamma;
  const T* beta;
  T* running_mean;
  T* running_var;
  double momentum;
  double eps;
  bool training;
};

// Writes y and xhat [M, H] and invstd [H].
template <class T>
void batch_norm_relu_forward(const T* x, int64_t M, int64_t H, BatchNormParams<T> p, T* y, T* xhat,
                             T* invstd, int threads) {
  std::vector<double> mean(H), var(H);
  if (p.training) {
    column_sums(M, H, threads, mean.data(), [&](int64_t m, int64_t h) { return double(x[m * H + h]); });
    for (int64_t h = 0; h < H; ++h) mean[h] /= double(M);
    column_sums(M, H, threads, var.data(), [&](int64_t m, int64_t h) {
      const double d = double(x[m * H + h]) - mean[h];
      return d * d;
    });
    for (int64_t h = 0; h < H; ++h) {
      var[h] /= double(M);
      const double unbiased = M > 1 ? var[h] * double(M) / double(M - 1) : var[h];
      p.running_mean[h] = T((1 - p.momentum) * p.running_mean[h] + p.momentum * mean[h]);
      p.running_var[h] = T((1 - p.momentum) * p.running_var[h] + p.momentum * unbiased);
    }
  } else {
    for (int64_t h = 0; h < H; ++h) {
      mean[h] = p.running_mean[h];
      var[h] = p.running_var[h];
    }
  }
  std::vector<T> shift(H), scale(H);
  for (int64_t h = 0; h < H; ++h) {
    invstd[h] = T(1.0 / std::sqrt(var[h] + p.eps));
    shift[h] = T(mean[h]);
    scale[h] = invstd[h];
  }
  const T* gamma = p.gamma;
  const T* beta = p.beta;
  parallel_for(M, threads, H, [&](int64_t m) {
    // restrict: rows never alias, which lets the compiler vectorise the loop.
    const T* __restrict__ xr = x + m * H;
    T* __restrict__ nr = xhat + m * H;
    T* __restrict__ yr = y + m * H;
    const T* __restrict__ sh = shift.data();
    const T* __restrict__ sc = scale.data();
    for (int64_t h = 0; h < H; ++h) {
      const T n = (xr[h] - sh[h]) * sc[h];
      const T v = gamma[h] * n + beta[h];
      nr[h] = n;
      yr[h] = v > T(0) || v != v ? v : T(0);  // NaN propagates, as in torch.relu
    }
  });
}

// grad_x [M, H], grad_gamma [H], grad_beta [H] from g [M, H]. grad_x first holds the
// ReLU-gated gradient gy, computed branch-free (a data-dependent branch per element
// mispredicts about half the time after a ReLU).
template <class T>
void batch_norm_relu_backward(const T* g, const T* y, const T* xhat, const T* gamma, const T* invstd,
                              bool training, int64_t M, int64_t H, T* grad_x, T* grad_gamma,
                              T* grad_beta, int threads) {
  parallel_for(M, threads, H, [&](int64_t m) {
    const T* __restrict__ gr = g + m * H;
    const T* __restrict__ yr = y + m * H;
    T* __restrict__ out = grad_x + m * H;
    for (int64_t h = 0; h < H; ++h) out[h] = yr[h] <= T(0) ? T(0) : gr[h];  // as torch's threshold_backward
  });
  std::vector<double> sum_g(H), sum_gx(H);
  column_sums(M, H, threads, sum_g.data(), [&](int64_t m, int64_t h) { return double(grad_x[m * H + h]); });
  column_sums(M, H, threads, sum_gx.data(),
              [&](int64_t m, int64_t h) { return double(grad_x[m * H + h]) * double(xhat[m * H + h]); });
  std::vector<T> a(H), b(H), c(H);
  for (int64_t h = 0; h < H; ++h) {
    grad_beta[h] = T(sum_g[h]);
    grad_gamma[h] = T(sum_gx[h]);
    a[h] = gamma[h] * invstd[h];
    b[h] = training ? T(sum_g[h] / double(M)) : T(0);
    c[h] = training ? T(sum_gx[h] / double(M)) : T(0);
  }
  parallel_for(M, threads, H, [&](int64_t m) {
    T* __restrict__ gx = grad_x + m * H;
    const T* __restrict__ n = xhat + m * H;
    const T* __restrict__ ap = a.data();
    const T* __restrict__ bp = b.data();
    const T* __restrict__ cp = c.data();
    for (int64_t h = 0; h < H; ++h) gx[h] = ap[h] * (gx[h] - bp[h] - n[h] * cp[h]);
  });
}

}  // namespace rpfast
