// The DLPack exchange structs (the C ABI of https://github.com/dmlc/dlpack, unversioned
// "dltensor" capsules as torch.utils.dlpack.to_dlpack makes them), declared here from the
// specification so the bindings stay free of torch and third-party headers.
#pragma once
#include <cstdint>

namespace rpfast_bindings {
namespace dlpack {

enum DeviceType : int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBool = 6 };

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null for a C-contiguous tensor
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

}  // namespace dlpack
}  // namespace rpfast_bindings
