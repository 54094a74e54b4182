// A block of kBlock consecutive values held in registers, for the inner loops of the small
// dense kernels (products, reductions, aggregation).
//
// The kernels stream over rows and accumulate a block of output columns; written as plain
// loops over a T[16] array, the compiler either keeps the array in memory (every add then
// waits on a store and a reload) or splits it into odd scalar and vector pieces. GCC/Clang
// vector extensions say exactly what is meant: kBlock / kLanes vector registers (32-byte AVX
// registers in the AVX2 build, 64-byte ones in the AVX-512 build, 16-byte SSE registers in the
// baseline build).
#pragma once
#include <cstdint>
#include <cstring>

namespace rpfast {

constexpr int64_t kBlock = 16;
#ifdef __AVX512F__
constexpr int kVectorBytes = 64;  // rpfast._C_avx512 (x86-64-v4)
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

template <class T>
struct Block {
  typedef T Vec __attribute__((vector_size(kVectorBytes)));
  static constexpr int64_t kLanes = kVectorBytes / sizeof(T);
  static constexpr int64_t kVecs = kBlock / kLanes;
  Vec v[kVecs];

  static Vec load(const T* p) {
    Vec x;
    std::memcpy(&x, p, sizeof x);
    return x;
  }
  static Block zero() {
    Block b;
    for (int64_t i = 0; i < kVecs; ++i) b.v[i] = Vec{};
    return b;
  }
  // b = a * p[0 .. kBlock)
  static Block scaled(T a, const T* p) {
    Block b;
    for (int64_t i = 0; i < kVecs; ++i) b.v[i] = a * load(p + i * kLanes);
    return b;
  }
  void add(const T* p) {
    for (int64_t i = 0; i < kVecs; ++i) v[i] += load(p + i * kLanes);
  }
  // this += a * p[0 .. kBlock)
  void fma(T a, const T* p) {
    for (int64_t i = 0; i < kVecs; ++i) v[i] += a * load(p + i * kLanes);
  }
  // this += p * q, elementwise
  void fma(const T* p, const T* q) {
    for (int64_t i = 0; i < kVecs; ++i) v[i] += load(p + i * kLanes) * load(q + i * kLanes);
  }
  void store(T* p) const { std::memcpy(p, v, sizeof v); }
};

}  // namespace rpfast
