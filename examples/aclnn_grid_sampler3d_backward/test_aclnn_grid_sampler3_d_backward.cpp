// GridSampler3DGrad through aclnnGridSampler3DBackward, in the style of the
// operator's own sample: a 1x1x3x4x5 volume sampled by a 2x2x2 grid,
// bilinear (trilinear), zeros padding, align_corners=false. Only calls of the
// original interface.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler3d_backward.h"

#define CHECK_RET(cond, return_expr) \
  do {                               \
    if (!(cond)) {                   \
      return_expr;                   \
    }                                \
  } while (0)

#define LOG_PRINT(message, ...)     \
  do {                              \
    printf(message, ##__VA_ARGS__); \
  } while (0)

int64_t GetShapeSize(const std::vector<int64_t>& shape) {
  int64_t shapeSize = 1;
  for (auto i : shape) shapeSize *= i;
  return shapeSize;
}

int Init(int32_t deviceId, aclrtStream* stream) {
  auto ret = aclInit(nullptr);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclInit failed. ERROR: %d\n", ret); return ret);
  ret = aclrtSetDevice(deviceId);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSetDevice failed. ERROR: %d\n", ret); return ret);
  ret = aclrtCreateStream(stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtCreateStream failed. ERROR: %d\n", ret); return ret);
  return 0;
}

template <typename T>
int CreateAclTensor(const std::vector<T>& hostData, const std::vector<int64_t>& shape,
                    void** deviceAddr, aclDataType dataType, aclTensor** tensor) {
  auto size = GetShapeSize(shape) * sizeof(T);
  auto ret = aclrtMalloc(deviceAddr, size, ACL_MEM_MALLOC_HUGE_FIRST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMalloc failed. ERROR: %d\n", ret); return ret);
  ret = aclrtMemcpy(*deviceAddr, size, hostData.data(), size, ACL_MEMCPY_HOST_TO_DEVICE);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMemcpy failed. ERROR: %d\n", ret); return ret);
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; i--) {
    strides[i] = shape[i + 1] * strides[i + 1];
  }
  *tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0,
                            aclFormat::ACL_FORMAT_ND, shape.data(), shape.size(), *deviceAddr);
  return 0;
}

int main() {
  int32_t deviceId = 0;
  aclrtStream stream;
  auto ret = Init(deviceId, &stream);
  CHECK_RET(ret == 0, LOG_PRINT("Init acl failed. ERROR: %d\n", ret); return ret);

  std::vector<int64_t> gradOutputShape = {1, 1, 2, 2, 2};
  std::vector<int64_t> inputShape = {1, 1, 3, 4, 5};
  std::vector<int64_t> gridShape = {1, 2, 2, 2, 3};
  std::vector<int64_t> inputGradShape = {1, 1, 3, 4, 5};
  std::vector<int64_t> gridGradShape = {1, 2, 2, 2, 3};
  void* gradOutputDeviceAddr = nullptr;
  void* inputDeviceAddr = nullptr;
  void* gridDeviceAddr = nullptr;
  void* inputGradDeviceAddr = nullptr;
  void* gridGradDeviceAddr = nullptr;
  aclTensor* gradOutput = nullptr;
  aclTensor* input = nullptr;
  aclTensor* grid = nullptr;
  aclTensor* inputGrad = nullptr;
  aclTensor* gridGrad = nullptr;
  std::vector<float> gradOutputHostData = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> inputHostData(60);
  for (int i = 0; i < 60; ++i) inputHostData[i] = static_cast<float>(i % 7) - 0.5f * (i / 20);
  // (x, y, z) per output voxel; x indexes W, y H, z D.
  std::vector<float> gridHostData = {-1.0f, -1.0f, -1.0f, -0.5f, -0.75f, 0.2f,  0.0f,  -0.5f,
                                     0.4f,  -0.3f, 0.0f,  -0.6f, 0.25f,  0.1f,  0.7f,  0.6f,
                                     0.2f,  0.0f,  0.9f,  0.8f,  -0.3f,  -0.8f, 0.95f, 1.05f};
  std::vector<float> inputGradHostData(60, 0);
  std::vector<float> gridGradHostData(24, 0);
  int64_t interpolationMode = 0;
  int64_t paddingMode = 0;
  bool alignCorners = false;
  bool outputMaskData[2] = {true, true};
  aclBoolArray* outputMask = aclCreateBoolArray(outputMaskData, 2);

  ret = CreateAclTensor(gradOutputHostData, gradOutputShape, &gradOutputDeviceAddr, aclDataType::ACL_FLOAT, &gradOutput);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(inputHostData, inputShape, &inputDeviceAddr, aclDataType::ACL_FLOAT, &input);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(gridHostData, gridShape, &gridDeviceAddr, aclDataType::ACL_FLOAT, &grid);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(inputGradHostData, inputGradShape, &inputGradDeviceAddr, aclDataType::ACL_FLOAT, &inputGrad);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(gridGradHostData, gridGradShape, &gridGradDeviceAddr, aclDataType::ACL_FLOAT, &gridGrad);
  CHECK_RET(ret == ACL_SUCCESS, return ret);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor;
  ret = aclnnGridSampler3DBackwardGetWorkspaceSize(gradOutput, input, grid, interpolationMode,
                                                   paddingMode, alignCorners, outputMask, inputGrad,
                                                   gridGrad, &workspaceSize, &executor);
  CHECK_RET(ret == ACL_SUCCESS,
            LOG_PRINT("aclnnGridSampler3DBackwardGetWorkspaceSize failed. ERROR: %d (%s)\n", ret,
                      aclGetRecentErrMsg());
            return ret);
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) {
    ret = aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret); return ret);
  }
  ret = aclnnGridSampler3DBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnGridSampler3DBackward failed. ERROR: %d\n", ret); return ret);
  ret = aclrtSynchronizeStream(stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret); return ret);

  auto size = GetShapeSize(inputGradShape);
  std::vector<float> resultData(size, 0);
  ret = aclrtMemcpy(resultData.data(), resultData.size() * sizeof(resultData[0]), inputGradDeviceAddr,
                    size * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy result from device to host failed. ERROR: %d\n", ret); return ret);
  for (int64_t i = 0; i < size; i++) LOG_PRINT("inputGrad[%ld] is: %.7g\n", static_cast<long>(i), resultData[i]);

  size = GetShapeSize(gridGradShape);
  std::vector<float> gridResult(size, 0);
  ret = aclrtMemcpy(gridResult.data(), gridResult.size() * sizeof(gridResult[0]), gridGradDeviceAddr,
                    size * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy result from device to host failed. ERROR: %d\n", ret); return ret);
  for (int64_t i = 0; i < size; i++) LOG_PRINT("gridGrad[%ld] is: %.7g\n", static_cast<long>(i), gridResult[i]);

  aclDestroyTensor(gradOutput);
  aclDestroyTensor(input);
  aclDestroyTensor(grid);
  aclDestroyTensor(inputGrad);
  aclDestroyTensor(gridGrad);
  aclDestroyBoolArray(outputMask);
  aclrtFree(gradOutputDeviceAddr);
  aclrtFree(inputDeviceAddr);
  aclrtFree(gridDeviceAddr);
  aclrtFree(inputGradDeviceAddr);
  aclrtFree(gridGradDeviceAddr);
  if (workspaceSize > 0) aclrtFree(workspaceAddr);
  aclrtDestroyStream(stream);
  aclrtResetDevice(deviceId);
  aclFinalize();
  return 0;
}
