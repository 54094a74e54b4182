// Fused BatchNorm + ReLU over the rows of x [M, H] (one normalisation per column h).
//
// Forward (training): mu_h = mean_m x[m,h], var_h = mean_m (x[m,h] - mu_h)^2,
//   xhat = (x - mu) / sqrt(var + bn_eps), y = max(0, gamma * xhat + beta)
//   (computed as torch does, x * alpha + (beta - mu * alpha) with alpha = gamma / sqrt(var + bn_eps)),
//   running_mean <- (1 - momentum) running_mean + momentum mu,
//   running_var  <- (1 - momentum) running_var + momentum var * M / (M - 1)   (PyTorch's rule).
// Forward (eval): mu, var are the running statistics.
// (ReLU keeps NaN, like torch.relu.) Backward, with gy = g * [not y <= 0]:
//   grad_beta = sum_m gy, grad_gamma = sum_m gy * xhat,
//   grad_x = (gy - grad_beta / M - xhat * grad_gamma / M) * invstd * gamma   (training)
//   grad_x = gy * invstd * gamma                                              (eval)
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/parallel.hpp"
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

// Writes y and xhat [M, H] and invstd [H]. In training xhat first holds x - mu, whose
// column sums of squares give the variance (two passes, as stable as the textbook form).
template <class T>
void batch_norm_relu_forward(const T* x, int64_t M, int64_t H, BatchNormParams<T> p, T* y, T* xhat,
                             T* invstd, int threads) {
  std::vector<double> mean(H), var(H);
  std::vector<T> shift(H), scale(H), gamma(p.gamma, p.gamma + H), beta(p.beta, p.beta + H);
  if (p.training) {
    column_sums<T>(x, nullptr, M, H, threads, mean.data());
    for (int64_t h = 0; h < H; ++h) {
      mean[h] /= double(M);
      shift[h] = T(mean[h]);
    }
    // The centred values in T: the variance of float data is summed from float differences,
    // like torch's CPU kernel, and every later pass reuses them.
    const T* __restrict__ sh = shift.data();
    parallel_for(M, threads, H, [&](int64_t m) {
      const T* __restrict__ xr = x + m * H;
      T* __restrict__ nr = xhat + m * H;
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) nr[h] = xr[h] - sh[h];
    });
    column_sums<T>(xhat, xhat, M, H, threads, var.data());
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
      shift[h] = T(mean[h]);
    }
  }
  std::vector<T> alpha(H), offset(H);
  for (int64_t h = 0; h < H; ++h) {
    invstd[h] = T(1.0 / std::sqrt(var[h] + p.eps));
    scale[h] = invstd[h];
    // torch's transform, y = x * alpha + (beta - mu * alpha), so that non-finite weights and
    // inputs give NaN and infinities where torch.nn.functional.batch_norm gives them
    alpha[h] = gamma[h] * scale[h];
    offset[h] = beta[h] - shift[h] * alpha[h];
  }
  // In training xhat holds x - mu already; in eval the centring happens here.
  const T* __restrict__ source = p.training ? xhat : x;
  const T* __restrict__ sh = shift.data();
  const T* __restrict__ sc = scale.data();
  const T* __restrict__ al = alpha.data();
  const T* __restrict__ of = offset.data();
  const bool centred = p.training;
  parallel_for(M, threads, H, [&](int64_t m) {
    const T* __restrict__ cr = source + m * H;
    const T* __restrict__ xr = x + m * H;
    T* __restrict__ nr = xhat + m * H;
    T* __restrict__ yr = y + m * H;
    if (centred) {
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) {
        const T v = xr[h] * al[h] + of[h];
        nr[h] = cr[h] * sc[h];
        yr[h] = v < T(0) ? T(0) : v;  // a max, branch-free; NaN propagates as in torch.relu
      }
    } else {
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) {
        const T v = xr[h] * al[h] + of[h];
        nr[h] = (cr[h] - sh[h]) * sc[h];
        yr[h] = v < T(0) ? T(0) : v;
      }
    }
  });
}

// grad_x [M, H], grad_gamma [H], grad_beta [H] from g [M, H]. grad_x first holds the
// ReLU-gated gradient gy (a select, vectorised: a data-dependent branch per element would
// mispredict about half the time after a ReLU).
template <class T>
void batch_norm_relu_backward(const T* g, const T* y, const T* xhat, const T* gamma, const T* invstd,
                              bool training, int64_t M, int64_t H, T* grad_x, T* grad_gamma,
                              T* grad_beta, int threads) {
  parallel_for(M, threads, H, [&](int64_t m) {
    const T* __restrict__ gr = g + m * H;
    const T* __restrict__ yr = y + m * H;
    T* __restrict__ out = grad_x + m * H;
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) {
      const T gv = gr[h], yv = yr[h];  // both loaded unconditionally, so the select vectorises
      out[h] = yv <= T(0) ? T(0) : gv;  // as torch's threshold_backward
    }
  });
  std::vector<double> sum_g(H), sum_gx(H);
  column_sums<T>(grad_x, nullptr, M, H, threads, sum_g.data());
  column_sums<T>(grad_x, xhat, M, H, threads, sum_gx.data());
  std::vector<T> a(H), b(H), c(H);
  for (int64_t h = 0; h < H; ++h) {
    grad_beta[h] = T(sum_g[h]);
    grad_gamma[h] = T(sum_gx[h]);
    a[h] = invstd[h];
    b[h] = T(sum_g[h] / double(M));
    c[h] = T(sum_gx[h] / double(M));
  }
  const T* __restrict__ ap = a.data();
  const T* __restrict__ bp = b.data();
  const T* __restrict__ cp = c.data();
  const T* __restrict__ ga = gamma;
  // torch's order, (gy - mean gy - xhat mean(gy xhat)) * invstd * gamma, so NaN and infinities
  // land where autograd through relu(batch_norm(x)) puts them. In eval the statistics do not
  // depend on x: gy * invstd * gamma, without xhat (an infinite x must not turn 0 into NaN).
  parallel_for(M, threads, H, [&](int64_t m) {
    T* __restrict__ gx = grad_x + m * H;
    const T* __restrict__ n = xhat + m * H;
    if (training) {
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) gx[h] = (gx[h] - bp[h] - n[h] * cp[h]) * ap[h] * ga[h];
    } else {
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) gx[h] = gx[h] * ap[h] * ga[h];
    }
  });
}

}  // namespace rpfast
