#include "bindings/arrays.hpp"

namespace rpfast_bindings {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int64: return "int64";
    case DType::uint64: return "uint64";
    case DType::int32: return "int32";
    case DType::uint8: return "uint8";
    case DType::bool_: return "bool";
    default: return "another dtype";
  }
}

namespace {

alignas(16) double empty_storage[2];  // what an empty tensor's data points to (never read)

DType from_dlpack(dlpack::DataType t) {
  if (t.lanes != 1) return DType::unknown;
  switch (t.code) {
    case dlpack::kFloat: return t.bits == 32 ? DType::float32 : t.bits == 64 ? DType::float64 : DType::unknown;
    case dlpack::kInt: return t.bits == 64 ? DType::int64 : t.bits == 32 ? DType::int32 : DType::unknown;
    case dlpack::kUInt: return t.bits == 64 ? DType::uint64 : t.bits == 8 ? DType::uint8 : DType::unknown;
    case dlpack::kBool: return t.bits == 8 ? DType::bool_ : DType::unknown;
    default: return DType::unknown;
  }
}

DType from_numpy(const py::array& a) {
  const py::dtype d = a.dtype();  // compared by value: an unpickled array has its own dtype object
  if (d.equal(py::dtype::of<float>())) return DType::float32;
  if (d.equal(py::dtype::of<double>())) return DType::float64;
  if (d.equal(py::dtype::of<int64_t>())) return DType::int64;
  if (d.equal(py::dtype::of<uint64_t>())) return DType::uint64;
  if (d.equal(py::dtype::of<int32_t>())) return DType::int32;
  if (d.equal(py::dtype::of<uint8_t>())) return DType::uint8;
  if (d.equal(py::dtype::of<bool>())) return DType::bool_;
  return DType::unknown;
}

// Whether `strides` (in elements; null: compact) describe a C-contiguous layout. Dimensions of
// size 1 may carry any stride (torch leaves them so), and an empty array is contiguous.
bool c_contiguous(int64_t ndim, const int64_t* shape, const int64_t* strides) {
  if (strides == nullptr) return true;
  for (int64_t d = 0; d < ndim; ++d)
    if (shape[d] == 0) return true;
  int64_t expected = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

}  // namespace

std::string Array::device_name() const {
  switch (device_type_) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda:" + std::to_string(device_index_);
    default: return "a device without rpfast kernels";
  }
}

bool Array::load(py::handle src) {
  if (PyCapsule_CheckExact(src.ptr())) return load_capsule(src);
  if (py::isinstance<py::array>(src)) {
    load_numpy(py::reinterpret_borrow<py::array>(src));
    return true;
  }
  return false;
}

bool Array::load_capsule(py::handle src) {
  if (!PyCapsule_IsValid(src.ptr(), "dltensor"))
    throw std::invalid_argument("a DLPack capsule was consumed already (or is versioned); pass a fresh one");
  const auto* managed = static_cast<const dlpack::ManagedTensor*>(PyCapsule_GetPointer(src.ptr(), "dltensor"));
  const dlpack::Tensor& t = managed->dl_tensor;
  if (t.ndim < 0 || t.ndim > kMaxDims)
    throw std::invalid_argument("rpfast's kernels take tensors of at most 8 dimensions, got " +
                                std::to_string(t.ndim));
  ndim_ = t.ndim;
  for (int64_t d = 0; d < ndim_; ++d) shape_[d] = t.shape[d];
  data_ = static_cast<char*>(t.data) + t.byte_offset;
  if (data_ == nullptr) data_ = &empty_storage;  // an empty tensor's null: kernels test pointers for presence
  dtype_ = from_dlpack(t.dtype);
  device_type_ = t.device.device_type == dlpack::kCPU    ? DeviceType::cpu
                 : t.device.device_type == dlpack::kCUDA ? DeviceType::cuda
                                                          : DeviceType::other;
  device_index_ = t.device.device_id;
  contiguous_ = c_contiguous(ndim_, shape_, t.strides);
  writeable_ = true;  // torch tensors have no read-only flag
  owner_ = py::reinterpret_borrow<py::object>(src);
  return true;
}

void Array::load_numpy(const py::array& a) {
  if (a.ndim() > kMaxDims)
    throw std::invalid_argument("rpfast's kernels take arrays of at most 8 dimensions, got " +
                                std::to_string(a.ndim()));
  ndim_ = a.ndim();
  for (int64_t d = 0; d < ndim_; ++d) shape_[d] = a.shape(d);
  data_ = const_cast<void*>(a.data());
  dtype_ = from_numpy(a);
  device_type_ = DeviceType::cpu;
  device_index_ = 0;
  contiguous_ = (a.flags() & py::array::c_style) != 0;
  writeable_ = a.writeable();
  owner_ = a;
}

void wrong_device(const Array& a, const char* name) {
  throw std::invalid_argument(std::string(name) + ": the tensor is on " + a.device_name() + ", but this kernel reads " +
                              (kKernelDevice == DeviceType::cpu ? "CPU memory" : "CUDA memory"));
}

}  // namespace rpfast_bindings
