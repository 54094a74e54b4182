// Checked access to NumPy buffers for the bindings. The Python wrappers pass
// zero-copy views of torch tensors, so a silent conversion (which would copy and drop
// writes to outputs) is never acceptable: dtype and layout must already match.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace rpfast_bindings {
namespace py = pybind11;

template <class T>
const T* in_ptr(const py::array& a, const char* name, py::ssize_t ndim) {
  if (!a.dtype().equal(py::dtype::of<T>()))  // by value: an unpickled array has its own dtype object
    throw py::type_error(std::string(name) + ": expected dtype " +
                         std::string(py::str(py::dtype::of<T>())) + ", got " +
                         std::string(py::str(a.dtype())));
  if (a.ndim() != ndim)
    throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(ndim) +
                                " dimensions, got " + std::to_string(a.ndim()));
  if (!(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(name) + ": array must be C-contiguous");
  return static_cast<const T*>(a.data());
}

template <class T>
T* out_ptr(py::array& a, const char* name, py::ssize_t ndim) {
  in_ptr<T>(a, name, ndim);
  if (!a.writeable()) throw std::invalid_argument(std::string(name) + ": array is read-only");
  return static_cast<T*>(a.mutable_data());
}

inline void expect_dim(const py::array& a, const char* name, py::ssize_t axis, int64_t value) {
  if (a.shape(axis) != value)
    throw std::invalid_argument(std::string(name) + ": dimension " + std::to_string(axis) +
                                " is " + std::to_string(a.shape(axis)) + ", expected " +
                                std::to_string(value));
}

// Checks the leading dimensions of a against `dims`.
inline void expect_leading(const py::array& a, const char* name, std::initializer_list<int64_t> dims) {
  py::ssize_t axis = 0;
  for (int64_t value : dims) expect_dim(a, name, axis++, value);
}

inline bool is_float64(const py::array& a) { return a.dtype().equal(py::dtype::of<double>()); }

// run(double{}) for a float64 array, else run(float{}): the one float/double dispatch of the
// bindings (each kernel's in_ptr / out_ptr calls then check every array against that type).
template <class Run>
decltype(auto) dispatch_float(const py::array& a, Run&& run) {
  return is_float64(a) ? run(double{}) : run(float{});
}

}  // namespace rpfast_bindings
