// One kernel, built four ways by tests/hardware/run.sh (nvcc -gencode): does this build run on
// this card? Exit 0 and "ran" when the kernel ran and wrote its value, else the CUDA error.
#include <cstdio>

__global__ void Write42(int* out) { *out = 42; }

int main() {
  int* device_value = nullptr;
  cudaError_t err = cudaMalloc(&device_value, sizeof(int));
  if (err != cudaSuccess) {
    std::printf("cudaMalloc: %s\n", cudaGetErrorString(err));
    return 1;
  }
  Write42<<<1, 1>>>(device_value);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  int value = 0;
  if (err == cudaSuccess) err = cudaMemcpy(&value, device_value, sizeof(int), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess || value != 42) {
    std::printf("%s\n", err != cudaSuccess ? cudaGetErrorString(err) : "the kernel did not write its value");
    return 1;
  }
  std::printf("ran\n");
  return 0;
}
