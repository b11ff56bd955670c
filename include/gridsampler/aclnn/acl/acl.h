/*
 * gridsampler's host implementation of the Ascend CL calls that a program
 * around an aclnn operator makes: tensors and bool arrays, the runtime
 * (init, device, streams, memory) and the error message of the last failure.
 * "Device" memory is host memory and streams run synchronously on the
 * calling thread, so code written for the original platform runs on any CPU.
 * Include as <acl/acl.h>; the CMake target gridsampler::aclnn adds the path.
 */
#ifndef GRIDSAMPLER_ACL_ACL_H_
#define GRIDSAMPLER_ACL_ACL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ACL_FUNC_VISIBILITY
#else
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ the enums hold any int (a fixed underlying type), so a value
 * outside the named ones is a defined value that the library rejects. */
#ifdef __cplusplus
#define ACL_ENUM_BASE : int
#else
#define ACL_ENUM_BASE
#endif

typedef int aclError;
typedef int32_t aclnnStatus;
typedef void *aclrtStream;

typedef struct aclTensor aclTensor;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclOpExecutor aclOpExecutor;

/* Status codes. */
#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_INTERNAL_ERROR 500000

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000

/* Values as on the original platform. gridsampler computes with ACL_FLOAT,
 * ACL_FLOAT16, ACL_DOUBLE and ACL_BF16; the others are named so that code
 * using them compiles, and are rejected with ACLNN_ERR_PARAM_INVALID. */
typedef enum aclDataType ACL_ENUM_BASE {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_STRING = 13,
  ACL_COMPLEX64 = 16,
  ACL_COMPLEX128 = 17,
  ACL_BF16 = 27
} aclDataType;

typedef enum aclFormat ACL_ENUM_BASE {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_NCDHW = 30
} aclFormat;

typedef enum aclrtMemcpyKind ACL_ENUM_BASE {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy ACL_ENUM_BASE {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2
} aclrtMemMallocPolicy;

/* ---- Tensors --------------------------------------------------------------
 * viewDims are logical: (N, C, H, W) for images, (N, H, W, 2) for grids,
 * (N, C, D, H, W) for volumes and (N, D, H, W, 3) for their grids, whatever
 * the format tag; strides (in elements; NULL means row-major) carry the
 * memory layout, so channels-last is an NCHW (NCDHW) view with NHWC (NDHWC)
 * strides. The 2-D operators take the formats NCHW, NHWC and ND, the 3-D
 * ones NCDHW, NDHWC and ND.
 * `offset` (elements) is where the view starts in the storage, whose extent
 * is the product of storageDims; a view that reaches outside its storage is
 * rejected when an operator is planned. The tensor does not own tensorData.
 * Returns NULL (and sets aclGetRecentErrMsg) on bad arguments. */
ACL_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                               aclDataType dataType, const int64_t *stride,
                                               int64_t offset, aclFormat format,
                                               const int64_t *storageDims, uint64_t storageDimsNum,
                                               void *tensorData);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);

ACL_FUNC_VISIBILITY aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyBoolArray(const aclBoolArray *array);

/* The message of the last failed call in the calling thread ("" if none). */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

/* ---- Runtime (host memory, synchronous streams) -------------------------- */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
/* aclFinalize and aclrtResetDevice also free the memory the library keeps
   between calls (gridsampler::release_cached_memory). */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);   /* device 0 only */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* GRIDSAMPLER_ACL_ACL_H_ */
