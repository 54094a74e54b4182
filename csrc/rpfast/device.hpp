// What a function needs to run on the CPU and on a CUDA device alike: RPFAST_HD marks the
// device-neutral inline functions of csrc/rpfast/ (plain C++ to the host compiler,
// __host__ __device__ to nvcc), so the CPU loops and the CUDA kernels share their per-item math.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define RPFAST_HD __host__ __device__
#else
#define RPFAST_HD
#endif

namespace rpfast {

// The high 64 bits of the 128-bit product a * b.
RPFAST_HD inline uint64_t mul_high(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<__uint128_t>(a) * b) >> 64);
#endif
}

}  // namespace rpfast
