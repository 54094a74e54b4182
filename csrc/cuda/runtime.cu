// The CUDA runtime questions the module asks: how many devices, did a launch fail.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/launch.hpp"

namespace rpfast_cuda {

int device_count(std::string& error) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    error = cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error: a later call may succeed
    return 0;
  }
  if (count == 0) error = "no CUDA device";
  return count;
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

}  // namespace rpfast_cuda
