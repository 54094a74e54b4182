// The one array type that crosses into C++ (rpfast_bindings::Array), for both devices, and its
// checked access for the bindings.
//
// rpfast/_backend.py hands every tensor over as a DLPack capsule (torch.utils.dlpack.to_dlpack:
// a pointer, a shape, strides, a dtype and a device; ~0.2 us, a third of Tensor.numpy()). NumPy
// arrays are taken too (tests and the testing hooks pass them). Nothing is ever copied: a silent
// conversion would drop writes to outputs, so dtype, layout and device must already match, and
// every mismatch is refused here, in C++, with the argument's name.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "bindings/dlpack.hpp"

namespace rpfast_bindings {
namespace py = pybind11;

enum class DType : int8_t { unknown, float32, float64, int64, uint64, int32, uint8, bool_ };
enum class DeviceType : int8_t { cpu, cuda, other };

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::int64; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::uint64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::int32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::uint8; }
template <> constexpr DType dtype_of<bool>() { return DType::bool_; }

const char* dtype_name(DType d);

// A tensor's memory as the bindings see it: at most kMaxDims dimensions, C-contiguous or not,
// on one device. `owner` keeps the capsule or NumPy array (and through it the tensor) alive.
class Array {
 public:
  static constexpr int kMaxDims = 8;

  Array() = default;
  int64_t ndim() const { return ndim_; }
  int64_t shape(int64_t axis) const { return shape_[axis]; }
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d = 0; d < ndim_; ++d) n *= shape_[d];
    return n;
  }
  DType dtype() const { return dtype_; }
  DeviceType device_type() const { return device_type_; }
  int device_index() const { return device_index_; }
  bool contiguous() const { return contiguous_; }
  bool writeable() const { return writeable_; }
  bool empty_handle() const { return owner_.is_none(); }
  const void* data() const { return data_; }
  void* mutable_data() const { return data_; }
  std::string device_name() const;

  // false when `src` is neither a DLPack capsule nor a NumPy array (pybind11 then reports the
  // call's argument types); throws for a capsule or array it cannot describe
  bool load(py::handle src);

 private:
  bool load_capsule(py::handle src);
  void load_numpy(const py::array& a);

  void* data_ = nullptr;
  int64_t ndim_ = 0;
  int64_t shape_[kMaxDims] = {};
  DType dtype_ = DType::unknown;
  DeviceType device_type_ = DeviceType::cpu;
  int device_index_ = 0;
  bool contiguous_ = true;
  bool writeable_ = true;
  py::object owner_ = py::none();
};

// The device whose memory this module's kernels read: rpfast._C's the CPU's, rpfast._C_cuda's
// (built with RPFAST_CUDA_BINDINGS) a CUDA device's. in_ptr and out_ptr refuse any other array
// with its name, so a kernel never dereferences memory of another device.
#ifdef RPFAST_CUDA_BINDINGS
constexpr DeviceType kKernelDevice = DeviceType::cuda;
#else
constexpr DeviceType kKernelDevice = DeviceType::cpu;
#endif

[[noreturn]] void wrong_device(const Array& a, const char* name);

template <class T>
const T* in_ptr(const Array& a, const char* name, int64_t ndim) {
  if (a.device_type() != kKernelDevice) wrong_device(a, name);
  if (a.dtype() != dtype_of<T>())
    throw py::type_error(std::string(name) + ": expected dtype " + dtype_name(dtype_of<T>()) + ", got " +
                         dtype_name(a.dtype()));
  if (a.ndim() != ndim)
    throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(ndim) + " dimensions, got " +
                                std::to_string(a.ndim()));
  if (!a.contiguous()) throw std::invalid_argument(std::string(name) + ": array must be C-contiguous");
  return static_cast<const T*>(a.data());
}

template <class T>
T* out_ptr(const Array& a, const char* name, int64_t ndim) {
  in_ptr<T>(a, name, ndim);
  if (!a.writeable()) throw std::invalid_argument(std::string(name) + ": array is read-only");
  return static_cast<T*>(a.mutable_data());
}

inline void expect_dim(const Array& a, const char* name, int64_t axis, int64_t value) {
  if (axis >= a.ndim() || a.shape(axis) != value)
    throw std::invalid_argument(std::string(name) + ": dimension " + std::to_string(axis) + " is " +
                                (axis < a.ndim() ? std::to_string(a.shape(axis)) : std::string("missing")) +
                                ", expected " + std::to_string(value));
}

// Checks the leading dimensions of a against `dims`.
inline void expect_leading(const Array& a, const char* name, std::initializer_list<int64_t> dims) {
  int64_t axis = 0;
  for (int64_t value : dims) expect_dim(a, name, axis++, value);
}

inline bool is_float64(const Array& a) { return a.dtype() == DType::float64; }

// run(double{}) for a float64 array, else run(float{}): the one float/double dispatch of the
// bindings (each kernel's in_ptr / out_ptr calls then check every array against that type).
template <class Run>
decltype(auto) dispatch_float(const Array& a, Run&& run) {
  return is_float64(a) ? run(double{}) : run(float{});
}

}  // namespace rpfast_bindings

namespace pybind11 {
namespace detail {
template <>
struct type_caster<rpfast_bindings::Array> {
  PYBIND11_TYPE_CASTER(rpfast_bindings::Array, const_name("Array"));
  bool load(handle src, bool) { return value.load(src); }
};
}  // namespace detail
}  // namespace pybind11
