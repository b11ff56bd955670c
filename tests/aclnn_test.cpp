// The aclnn-style C interface: results equal the C++ API's, every error path
// returns its code, sets aclGetRecentErrMsg and writes nothing, and executors
// are single-use and checked.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler2d.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "common/problem.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

aclDataType acl_dtype(DType d) {
  switch (d) {
    case DType::kFloat16: return ACL_FLOAT16;
    case DType::kBFloat16: return ACL_BF16;
    case DType::kFloat32: return ACL_FLOAT;
    case DType::kFloat64: return ACL_DOUBLE;
  }
  return ACL_DT_UNDEFINED;
}

// An aclTensor over a test Tensor's memory (its view's data and strides;
// storage = the whole buffer, with the view's offset inside it).
struct AclView {
  aclTensor* t = nullptr;
  AclView() = default;
  explicit AclView(Tensor& x) {
    auto v = x.mutable_view();
    const auto es = static_cast<int64_t>(gridsampler::dtype_size(x.dtype()));
    const auto* base = reinterpret_cast<const unsigned char*>(x.storage().data());
    const int64_t offset = (static_cast<const unsigned char*>(v.data) - base) / es;
    const int64_t storage = static_cast<int64_t>(x.storage().size()) / es;
    t = aclCreateTensor(v.shape.data(), 4, acl_dtype(x.dtype()), v.strides.data(), offset,
                        ACL_FORMAT_ND, &storage, 1, const_cast<unsigned char*>(base));
  }
  AclView(const AclView&) = delete;
  AclView& operator=(const AclView&) = delete;
  ~AclView() { aclDestroyTensor(t); }
};

// Backward through aclnn, returning the status of the first failing phase.
aclnnStatus aclnn_backward(aclTensor* grad, aclTensor* input, aclTensor* grid, const Options& o,
                           const bool* mask, aclTensor* dx, aclTensor* dgrid) {
  aclBoolArray* m = mask ? aclCreateBoolArray(mask, 2) : nullptr;
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  aclnnStatus s = aclnnGridSampler2DBackwardGetWorkspaceSize(
      grad, input, grid, static_cast<int64_t>(o.interpolation), static_cast<int64_t>(o.padding),
      o.align_corners, m, dx, dgrid, &ws, &exec);
  aclDestroyBoolArray(m);
  if (s != ACLNN_SUCCESS) return s;
  void* w = nullptr;
  if (ws > 0) {
    EXPECT_EQ(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  }
  s = aclnnGridSampler2DBackward(w, ws, exec, nullptr);
  aclrtFree(w);
  return s;
}

TEST(Aclnn, BackwardAndForwardMatchTheCppApi) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (Layout layout : {Layout::kContiguous, Layout::kChannelsLast, Layout::kPadded}) {
      const Options opt{Interpolation::kBicubic, Padding::kReflection, false};
      Problem p = Problem::random({2, 3, 5, 6, 4, 3}, dt, opt, 3).relayout(layout);
      const Outputs want = run(p, /*reference=*/false);
      Tensor dx(dt, p.input.shape(), layout), dgrid(dt, p.grid.shape(), layout),
          out(dt, p.grad.shape(), layout);
      {
        AclView g(p.grad), x(p.input), gr(p.grid), d(dx), dg(dgrid), o(out);
        uint64_t ws = 1;
        aclOpExecutor* exec = nullptr;
        ASSERT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g.t, x.t, gr.t, 2, 2, false, nullptr,
                                                             d.t, dg.t, &ws, &exec),
                  ACLNN_SUCCESS)
            << aclGetRecentErrMsg();
        // dx is accumulated in per-thread scratch planes the workspace holds.
        EXPECT_GT(ws, 0u);
        void* w = nullptr;
        if (ws > 0) {
          ASSERT_EQ(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        }
        ASSERT_EQ(aclnnGridSampler2DBackward(w, ws, exec, stream), ACLNN_SUCCESS) << aclGetRecentErrMsg();
        ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        aclrtFree(w);
        ASSERT_EQ(aclnnGridSampler2DGetWorkspaceSize(x.t, gr.t, 2, 2, false, o.t, &ws, &exec),
                  ACLNN_SUCCESS)
            << aclGetRecentErrMsg();
        EXPECT_EQ(ws, 0u);
        ASSERT_EQ(aclnnGridSampler2D(nullptr, 0, exec, stream), ACLNN_SUCCESS);
      }
      const std::string what = std::string(gridsampler::to_string(dt)) + " " + to_string(layout);
      EXPECT_EQ(dx.values(), want.dx.values()) << what;
      EXPECT_EQ(dgrid.values(), want.dgrid.values()) << what;
      EXPECT_EQ(out.values(), want.out.values()) << what;
    }
  }
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
}

// A masked-out output may be a null tensor and is not touched.
TEST(Aclnn, OutputMaskAllowsNullOutputs) {
  Problem p = Problem::random({1, 2, 4, 4, 3, 3}, DType::kFloat32, {}, 5);
  const Outputs want = run(p, false);
  Tensor dx(DType::kFloat32, p.input.shape());
  AclView g(p.grad), x(p.input), gr(p.grid), d(dx);
  const bool mask[2] = {true, false};
  ASSERT_EQ(aclnn_backward(g.t, x.t, gr.t, {}, mask, d.t, nullptr), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_EQ(dx.values(), want.dx.values());
}

// Each error: its code, its message, and no output byte written.
TEST(Aclnn, PlanningErrors) {
  Problem p = Problem::random({2, 3, 5, 6, 4, 3}, DType::kFloat32, {}, 7);
  Tensor dx(DType::kFloat32, p.input.shape()), dgrid(DType::kFloat32, p.grid.shape());
  Tensor grid3(DType::kFloat32, {2, 4, 3, 3});
  Tensor grid64(DType::kFloat64, p.grid.shape());
  AclView g(p.grad), x(p.input), gr(p.grid), d(dx), dg(dgrid), g3(grid3), g64(grid64);
  const auto dx_before = dx.storage(), dgrid_before = dgrid.storage();
  const int64_t dims3[3] = {2, 4, 3}, dims4[4] = {2, 4, 3, 2};
  float scratch[24] = {};
  aclTensor* rank3 = aclCreateTensor(dims3, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims3, 3, scratch);
  int32_t ints[24] = {};
  aclTensor* int_grid = aclCreateTensor(dims4, 4, ACL_INT32, nullptr, 0, ACL_FORMAT_ND, dims4, 4, ints);
  aclTensor* bad_format =
      aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, static_cast<aclFormat>(29), dims4, 4, scratch);
  const int64_t small_storage = 10;
  aclTensor* outside = aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, &small_storage, 1, scratch);
  aclTensor* null_data = aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims4, 4, nullptr);
  aclTensor* dead = aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims4, 4, scratch);
  // A dx that aliases the input.
  AclView alias(p.input);
  // A gridGrad inside inputGrad's memory, and a gradOutput of another dtype:
  // the messages name both tensors as aclnn callers know them.
  aclTensor* dg_in_dx = aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims4, 4,
                                        dx.mutable_view().data);
  Tensor grad64(DType::kFloat64, p.grad.shape());
  AclView g64_grad(grad64);
  // Destroyed after every other handle is made, so no new one reuses its address.
  ASSERT_EQ(aclDestroyTensor(dead), ACLNN_SUCCESS);
  const Options ok{};
  struct Case {
    const char* name;
    aclTensor *grad, *input, *grid, *dx, *dgrid;
    Options opt;
    const bool* mask;
    aclnnStatus code;
    const char* message;
  };
  const bool three[2] = {true, true};
  const Case cases[] = {
      {"null grad", nullptr, x.t, gr.t, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "gradOutput: tensor is null"},
      {"null input", g.t, nullptr, gr.t, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "input: tensor is null"},
      {"null dx wanted", g.t, x.t, gr.t, nullptr, dg.t, ok, three, ACLNN_ERR_PARAM_NULLPTR, "inputGrad: tensor is null"},
      {"rank 3 grid", g.t, x.t, rank3, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: expected 4 dimensions, got 3"},
      {"int grid", g.t, x.t, int_grid, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: unsupported dtype 3"},
      {"bad format", g.t, x.t, bad_format, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: unsupported format 29"},
      {"outside storage", g.t, x.t, outside, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "outside its storage of 10 elements"},
      {"null data", g.t, x.t, null_data, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "grid: data is null"},
      {"destroyed tensor", g.t, x.t, dead, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: not a live tensor"},
      {"grid last dim", g.t, x.t, g3.t, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: last dimension must be 2, got 3"},
      {"mixed dtypes", g.t, x.t, g64.t, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: dtype float64 differs from input's float32"},
      {"grad shape", g.t, x.t, gr.t, dg.t, d.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "inputGrad: shape (2, 4, 3, 2) must be (2, 3, 5, 6)"},
      {"mode", g.t, x.t, gr.t, d.t, dg.t, {static_cast<Interpolation>(5), Padding::kZeros, false}, nullptr,
       ACLNN_ERR_PARAM_INVALID, "interpolationMode: unknown value 5"},
      {"padding", g.t, x.t, gr.t, d.t, dg.t, {Interpolation::kBilinear, static_cast<Padding>(-1), false}, nullptr,
       ACLNN_ERR_PARAM_INVALID, "paddingMode: unknown value -1"},
      {"dx aliases input", g.t, x.t, gr.t, alias.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "inputGrad: memory overlaps input"},
      {"dgrid in dx", g.t, x.t, gr.t, d.t, dg_in_dx, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "gridGrad: memory overlaps inputGrad"},
      {"grad dtype", g64_grad.t, x.t, gr.t, d.t, dg.t, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "gradOutput: dtype float64 differs from input's float32"},
  };
  for (const Case& c : cases) {
    const aclnnStatus s = aclnn_backward(c.grad, c.input, c.grid, c.opt, c.mask, c.dx, c.dgrid);
    EXPECT_EQ(s, c.code) << c.name << ": " << aclGetRecentErrMsg();
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find(c.message), std::string::npos)
        << c.name << ": message was '" << aclGetRecentErrMsg() << "'";
    EXPECT_EQ(dx.storage(), dx_before) << c.name;
    EXPECT_EQ(dgrid.storage(), dgrid_before) << c.name;
  }
  // Bad output pointers and mask size.
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  EXPECT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g.t, x.t, gr.t, 0, 0, false, nullptr, d.t, dg.t, nullptr, &exec),
            ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g.t, x.t, gr.t, 0, 0, false, nullptr, d.t, dg.t, &ws, nullptr),
            ACLNN_ERR_PARAM_NULLPTR);
  const bool mask3[3] = {true, true, true};
  aclBoolArray* m3 = aclCreateBoolArray(mask3, 3);
  EXPECT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g.t, x.t, gr.t, 0, 0, false, m3, d.t, dg.t, &ws, &exec),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("outputMask: expected 2 values, got 3"), std::string::npos);
  aclDestroyBoolArray(m3);
  for (aclTensor* t : {rank3, int_grid, bad_format, outside, null_data, dg_in_dx}) aclDestroyTensor(t);
  EXPECT_EQ(dx.storage(), dx_before);
}

TEST(Aclnn, ExecutionErrors) {
  Problem p = Problem::random({1, 2, 4, 5, 3, 3}, DType::kFloat16, {}, 9);
  Tensor dx(DType::kFloat16, p.input.shape()), dgrid(DType::kFloat16, p.grid.shape());
  AclView g(p.grad), x(p.input), gr(p.grid), d(dx), dg(dgrid);
  const auto dx_before = dx.storage();
  auto plan = [&](uint64_t* ws) {
    aclOpExecutor* exec = nullptr;
    EXPECT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g.t, x.t, gr.t, 0, 0, false, nullptr, d.t,
                                                         dg.t, ws, &exec),
              ACLNN_SUCCESS);
    return exec;
  };
  uint64_t ws = 0;
  EXPECT_EQ(aclnnGridSampler2DBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("executor is null"), std::string::npos);

  // Missing workspace: an error, and the executor is consumed.
  aclOpExecutor* exec = plan(&ws);
  ASSERT_GT(ws, 0u);
  EXPECT_EQ(aclnnGridSampler2DBackward(nullptr, ws, exec, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("workspace: null but"), std::string::npos);
  EXPECT_EQ(aclnnGridSampler2DBackward(nullptr, ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("executor is not live"), std::string::npos);

  // Too small a workspace.
  std::vector<float> small(ws / sizeof(float));
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler2DBackward(small.data(), ws - 4, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("bytes given"), std::string::npos);

  // A stream that is not from aclrtCreateStream.
  int not_a_stream = 0;
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler2DBackward(small.data(), ws, exec, &not_a_stream), ACLNN_ERR_PARAM_INVALID);

  // A foreign handle is rejected without being touched; the forward refuses a
  // backward plan.
  alignas(64) unsigned char junk[256];
  std::memset(junk, 0x5a, sizeof junk);
  EXPECT_EQ(aclnnGridSampler2DBackward(nullptr, 0, reinterpret_cast<aclOpExecutor*>(junk), nullptr),
            ACLNN_ERR_PARAM_INVALID);
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler2D(small.data(), ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("other grid sampler operator"), std::string::npos);
  EXPECT_EQ(dx.storage(), dx_before);

  // A correct run after all that, and the executor is then spent.
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler2DBackward(small.data(), ws, exec, nullptr), ACLNN_SUCCESS);
  EXPECT_NE(dx.storage(), dx_before);
  EXPECT_EQ(aclnnGridSampler2DBackward(small.data(), ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
}

TEST(Aclnn, Runtime) {
  EXPECT_EQ(aclrtSetDevice(1), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("device 1 does not exist"), std::string::npos);
  void* p = nullptr;
  ASSERT_EQ(aclrtMalloc(&p, 100, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  char src[100];
  std::memset(src, 7, sizeof src);
  EXPECT_EQ(aclrtMemcpy(p, 100, src, 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  EXPECT_EQ(static_cast<char*>(p)[99], 7);
  EXPECT_EQ(aclrtMemcpy(p, 50, src, 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemset(p, 100, 0, 100), ACL_SUCCESS);
  EXPECT_EQ(static_cast<char*>(p)[99], 0);
  EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_ERROR_INVALID_PARAM);
  // The enums are named types, usable qualified or not.
  EXPECT_EQ(aclDataType::ACL_BF16, ACL_BF16);
  EXPECT_EQ(static_cast<int>(ACL_BF16), 27);
  EXPECT_EQ(static_cast<int>(aclFormat::ACL_FORMAT_NHWC), 1);
  EXPECT_EQ(static_cast<int>(aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_DEVICE), 3);
  EXPECT_EQ(static_cast<int>(aclrtMemMallocPolicy::ACL_MEM_MALLOC_NORMAL_ONLY), 2);
  // Handles are checked on destruction too.
  int junk = 0;
  EXPECT_EQ(aclDestroyTensor(reinterpret_cast<aclTensor*>(&junk)), ACLNN_ERR_PARAM_INVALID);
}

}  // namespace
}  // namespace gstest
