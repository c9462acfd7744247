/*
 * A stand-in libcuda.so.1 for running the PyPI (CUDA) build of SGLang on a
 * machine with no NVIDIA driver.
 *
 * sgl-kernel's common_ops extension is linked against libcuda.so.1 (its one
 * undefined driver symbol is cuPointerGetAttribute), so without a driver the
 * import fails and SGLang cannot start even with --device cpu. This library
 * satisfies the dynamic linker and answers every call with
 * CUDA_ERROR_NO_DEVICE, so anything that asks the "driver" learns there is
 * no GPU. torch loads its own CUDA runtime lazily and still reports
 * torch.cuda.is_available() == False.
 *
 * Built by scripts/real-sglang-env.sh:
 *   gcc -shared -fPIC -O2 -Wl,-soname,libcuda.so.1 -o libcuda.so.1 libcuda_stub.c
 * Never install this where a real driver lives.
 */
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long cuuint64_t;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100

static const char no_device_name[] = "CUDA_ERROR_NO_DEVICE";
static const char no_device_text[] =
    "no CUDA-capable device is detected (sglbench libcuda stand-in)";

CUresult cuInit(unsigned int flags) {
    (void)flags;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuDriverGetVersion(int *version) {
    if (version) *version = 0;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuDeviceGetCount(int *count) {
    if (count) *count = 0;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    (void)ordinal;
    if (device) *device = -1;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                          cuuint64_t flags) {
    (void)symbol; (void)version; (void)flags;
    if (pfn) *pfn = NULL;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                             cuuint64_t flags, int *status) {
    (void)symbol; (void)version; (void)flags;
    if (pfn) *pfn = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr) {
    (void)data; (void)attribute; (void)ptr;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
    if (text) *text = (error == CUDA_ERROR_NO_DEVICE) ? no_device_text : NULL;
    return error == CUDA_ERROR_NO_DEVICE ? CUDA_SUCCESS : 1; /* INVALID_VALUE */
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    if (name) *name = (error == CUDA_ERROR_NO_DEVICE) ? no_device_name : NULL;
    return error == CUDA_ERROR_NO_DEVICE ? CUDA_SUCCESS : 1;
}
