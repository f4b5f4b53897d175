/*
 * A stand-in for the NVIDIA driver library (soname libcuda.so.1), for machines WITHOUT a driver.
 *
 * TVM's CUDA runtime, tvm/lib/libtvm_runtime_cuda.so, links against libcuda.so.1, so on a machine
 * with no driver it cannot be loaded, and TVM then cannot turn generated CUDA C into a device
 * binary. sparsetir.target builds this file with gcc on first use and loads it (ctypes,
 * RTLD_GLOBAL) before that library, so that CUDA kernels can be compiled to fatbins and exported
 * on CPU-only machines. It is only ever loaded when no real libcuda.so.1 can be loaded; a machine
 * with a driver never sees it.
 *
 * It defines exactly the driver entry points libtvm_runtime_cuda.so imports
 * (`nm -D --undefined-only libtvm_runtime_cuda.so | grep ' cu[A-Z]'`). Each reports
 * CUDA_ERROR_NO_DEVICE, except the two error-description calls, which fill in a message and
 * succeed as the real driver does, so that TVM can say what went wrong. It deliberately has no
 * cuInit: sparsetir.target tells this stub from a real driver by that symbol.
 */
#include <stddef.h>

typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 };

static const char kErrorName[] = "CUDA_ERROR_NO_DEVICE";
static const char kErrorString[] = "no CUDA driver on this machine (sparsetir libcuda stub)";

CUresult cuGetErrorName(CUresult error, const char **name) {
  *name = kErrorName;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  *text = kErrorString;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, int device) {
  if (len > 0) name[0] = '\0';
  return CUDA_ERROR_NO_DEVICE;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  *module = NULL;
  return CUDA_ERROR_NO_DEVICE;
}

CUresult cuModuleUnload(void *module) {
  return CUDA_ERROR_NO_DEVICE;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  *function = NULL;
  return CUDA_ERROR_NO_DEVICE;
}

CUresult cuFuncSetAttribute(void *function, int attribute, int value) {
  return CUDA_ERROR_NO_DEVICE;
}

CUresult cuLaunchKernelEx(const void *config, void *function, void **params, void **extra) {
  return CUDA_ERROR_NO_DEVICE;
}

CUresult cuTensorMapEncodeTiled(void *tensor_map, int data_type, unsigned rank, void *global_address,
                                const void *global_dim, const void *global_strides,
                                const void *box_dim, const void *element_strides, int interleave,
                                int swizzle, int l2_promotion, int oob_fill) {
  return CUDA_ERROR_NO_DEVICE;
}
