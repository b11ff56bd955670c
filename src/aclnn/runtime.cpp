// Tensors, bool arrays, errors and the host runtime of the aclnn interface.
#include <cstdlib>
#include <cstring>
#include <new>

#include "aclnn/handles.hpp"
#include "core/memory.hpp"

namespace gridsampler::aclnn {

Registry<aclTensor>& tensors() {
  static Registry<aclTensor> r;
  return r;
}
Registry<aclBoolArray>& bool_arrays() {
  static Registry<aclBoolArray> r;
  return r;
}
Registry<aclOpExecutor>& executors() {
  static Registry<aclOpExecutor> r;
  return r;
}
Registry<void>& streams() {
  static Registry<void> r;
  return r;
}

namespace {
thread_local std::string last_error;
}  // namespace

int fail(int code, const std::string& message) {
  last_error = message;
  return code;
}

void clear_error() { last_error.clear(); }

aclnnStatus to_aclnn(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return ACLNN_SUCCESS;
    case StatusCode::kNullPointer: return fail(ACLNN_ERR_PARAM_NULLPTR, status.message());
    case StatusCode::kInvalidArgument: return fail(ACLNN_ERR_PARAM_INVALID, status.message());
    case StatusCode::kInternal: break;
  }
  return fail(ACLNN_ERR_INNER, status.message());
}

}  // namespace gridsampler::aclnn

using gridsampler::aclnn::fail;

extern "C" {

const char* aclGetRecentErrMsg(void) { return gridsampler::aclnn::last_error.c_str(); }

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t* stride, int64_t offset, aclFormat format,
                           const int64_t* storageDims, uint64_t storageDimsNum, void* tensorData) {
  constexpr uint64_t kMaxDims = 8;
  if ((viewDims == nullptr && viewDimsNum > 0) || (storageDims == nullptr && storageDimsNum > 0)) {
    fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensor: viewDims or storageDims is null");
    return nullptr;
  }
  if (viewDimsNum > kMaxDims || storageDimsNum > kMaxDims) {
    fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: more than 8 dimensions");
    return nullptr;
  }
  auto* t = new (std::nothrow) aclTensor;
  if (t == nullptr) {
    fail(ACLNN_ERR_INNER, "aclCreateTensor: out of memory");
    return nullptr;
  }
  t->dims.assign(viewDims, viewDims + viewDimsNum);
  if (stride != nullptr) {
    t->strides.assign(stride, stride + viewDimsNum);
  } else {  // row-major
    t->strides.assign(viewDimsNum, 1);
    for (uint64_t i = viewDimsNum; i-- > 1;) {
      if (__builtin_mul_overflow(t->strides[i], viewDims[i], &t->strides[i - 1])) {
        delete t;
        fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: row-major strides of these dims overflow 64 bits");
        return nullptr;
      }
    }
  }
  t->storage_dims.assign(storageDims, storageDims + storageDimsNum);
  t->dtype = dataType;
  t->format = format;
  t->offset = offset;
  t->data = tensorData;
  gridsampler::aclnn::tensors().add(t);
  return t;
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  if (tensor == nullptr) return ACLNN_SUCCESS;
  if (!gridsampler::aclnn::tensors().remove(tensor)) {
    return fail(ACLNN_ERR_PARAM_INVALID, "aclDestroyTensor: not a live tensor");
  }
  delete tensor;
  return ACLNN_SUCCESS;
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  if (value == nullptr && size > 0) {
    fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateBoolArray: value is null");
    return nullptr;
  }
  auto* a = new (std::nothrow) aclBoolArray;
  if (a == nullptr) {
    fail(ACLNN_ERR_INNER, "aclCreateBoolArray: out of memory");
    return nullptr;
  }
  a->values.assign(value, value + size);
  gridsampler::aclnn::bool_arrays().add(a);
  return a;
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  if (array == nullptr) return ACLNN_SUCCESS;
  if (!gridsampler::aclnn::bool_arrays().remove(array)) {
    return fail(ACLNN_ERR_PARAM_INVALID, "aclDestroyBoolArray: not a live bool array");
  }
  delete array;
  return ACLNN_SUCCESS;
}

aclError aclInit(const char* /*configPath*/) { return ACL_SUCCESS; }
// Finalizing the runtime or resetting the device frees what the platform
// holds for them; here that is the memory the library keeps between calls.
aclError aclFinalize(void) {
  gridsampler::detail::release_cached_buffers();
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
  if (deviceId != 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtSetDevice: device " + std::to_string(deviceId) +
                                             " does not exist (the host is device 0)");
  }
  return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
  if (aclError e = aclrtSetDevice(deviceId); e != ACL_SUCCESS) return e;
  gridsampler::detail::release_cached_buffers();
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  if (stream == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
  void* s = std::malloc(1);  // a unique address; streams carry no state
  if (s == nullptr) return fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream: out of memory");
  gridsampler::aclnn::streams().add(s);
  *stream = s;
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  if (!gridsampler::aclnn::streams().remove(stream)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: not a live stream");
  }
  std::free(stream);
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  if (stream != nullptr && !gridsampler::aclnn::streams().contains(stream)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStream: not a live stream");
  }
  return ACL_SUCCESS;  // work on a stream runs synchronously
}

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is null");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0");
  if (policy != ACL_MEM_MALLOC_HUGE_FIRST && policy != ACL_MEM_MALLOC_HUGE_ONLY &&
      policy != ACL_MEM_MALLOC_NORMAL_ONLY) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: unknown policy");
  }
  // 64-byte aligned, like device allocations, rounded up to whole lines;
  // the huge-page policies ask for transparent huge pages from 2 MiB on.
  void* p = gridsampler::detail::allocate_workspace(size, policy != ACL_MEM_MALLOC_NORMAL_ONLY);
  if (p == nullptr) return fail(ACL_ERROR_BAD_ALLOC, "aclrtMalloc: cannot allocate " + std::to_string(size) + " bytes");
  *devPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFree(void* devPtr) {
  std::free(devPtr);
  return ACL_SUCCESS;
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  return aclrtMalloc(hostPtr, size, ACL_MEM_MALLOC_NORMAL_ONLY);
}

aclError aclrtFreeHost(void* hostPtr) { return aclrtFree(hostPtr); }

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind) {
  if (kind != ACL_MEMCPY_HOST_TO_HOST && kind != ACL_MEMCPY_HOST_TO_DEVICE &&
      kind != ACL_MEMCPY_DEVICE_TO_HOST && kind != ACL_MEMCPY_DEVICE_TO_DEVICE) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: unknown kind");
  }
  if (count > destMax) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: count " + std::to_string(count) +
                                             " is larger than destMax " + std::to_string(destMax));
  }
  if (count == 0) return ACL_SUCCESS;
  if (dst == nullptr || src == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: null pointer");
  std::memmove(dst, src, count);
  return ACL_SUCCESS;
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (count > maxCount) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: count is larger than maxCount");
  if (count == 0) return ACL_SUCCESS;
  if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: devPtr is null");
  std::memset(devPtr, value, count);
  return ACL_SUCCESS;
}

}  // extern "C"
