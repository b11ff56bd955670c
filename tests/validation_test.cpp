// Every validation rule: the call fails with its code and a message naming
// the tensor and the rule, and no output byte changes.
#include <gtest/gtest.h>

#include <functional>

#include "common/problem.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::MutableTensorView;
using gridsampler::Options;
using gridsampler::StatusCode;
using gridsampler::TensorView;

struct Views {
  TensorView grad, input, grid;
  MutableTensorView dx, dgrid, out;
  Options options;
};

struct Case {
  const char* name;
  std::function<void(Views&)> breaks;
  StatusCode code;
  const char* message;  // expected substring
};

class Validation : public ::testing::Test {
 protected:
  void SetUp() override {
    p_ = Problem::random({2, 3, 5, 7, 4, 6}, DType::kFloat32, {}, 1);
    dx_ = Tensor(DType::kFloat32, p_.input.shape());
    dgrid_ = Tensor(DType::kFloat32, p_.grid.shape());
    out_ = Tensor(DType::kFloat32, p_.grad.shape());
  }
  Views views() {
    return {p_.grad.view(),         p_.input.view(),         p_.grid.view(),
            dx_.mutable_view(),     dgrid_.mutable_view(),   out_.mutable_view(), {}};
  }
  void check(const Case& c) {
    for (bool reference : {false, true}) {
      Views v = views();
      c.breaks(v);
      const auto dx_before = dx_.storage();
      const auto dgrid_before = dgrid_.storage();
      const auto out_before = out_.storage();
      auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                           : &gridsampler::grid_sampler_2d_backward;
      const auto s = bwd(v.grad, v.input, v.grid, v.dx, v.dgrid, v.options, {});
      EXPECT_EQ(s.code(), c.code) << c.name << ": " << s.message();
      EXPECT_NE(s.message().find(c.message), std::string::npos)
          << c.name << ": message was '" << s.message() << "', expected to contain '" << c.message
          << "'";
      EXPECT_EQ(dx_.storage(), dx_before) << c.name;
      EXPECT_EQ(dgrid_.storage(), dgrid_before) << c.name;
      // The forward applies the same rules to the tensors it shares.
      if (std::string(c.name).rfind("both:", 0) == 0) {
        auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
        const auto f = fwd(v.input, v.grid, v.out, v.options);
        EXPECT_EQ(f.code(), c.code) << c.name << " (forward): " << f.message();
        EXPECT_NE(f.message().find(c.message), std::string::npos) << c.name << ": " << f.message();
        EXPECT_EQ(out_.storage(), out_before) << c.name;
      }
    }
  }
  Problem p_;
  Tensor dx_, dgrid_, out_;
};

TEST_F(Validation, EveryRuleFailsCleanly) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  const Case cases[] = {
      {"both: grid last dim", [](Views& v) { v.grid.shape[3] = 3; }, kInvalid,
       "grid: last dimension must be 2, got 3"},
      {"both: zero Hin", [](Views& v) { v.input.shape[2] = 0; }, kInvalid,
       "input: height and width must be positive, got H=0, W=7"},
      {"both: zero Win", [](Views& v) { v.input.shape[3] = 0; }, kInvalid,
       "input: height and width must be positive"},
      {"both: batch mismatch", [](Views& v) { v.grid.shape[0] = 3; }, kInvalid,
       "grid: batch size 3 does not match input's 2"},
      {"both: mixed dtypes", [](Views& v) { v.grid.dtype = DType::kFloat64; }, kInvalid,
       "grid: dtype float64 differs from input's float32"},
      {"both: unknown mode",
       [](Views& v) { v.options.interpolation = static_cast<gridsampler::Interpolation>(7); },
       kInvalid, "interpolation_mode: unknown value 7"},
      {"both: unknown padding",
       [](Views& v) { v.options.padding = static_cast<gridsampler::Padding>(-1); }, kInvalid,
       "padding_mode: unknown value -1"},
      {"both: unknown dtype", [](Views& v) { v.input.dtype = static_cast<DType>(9); }, kInvalid,
       "input: unknown dtype value 9"},
      {"both: null input", [](Views& v) { v.input.data = nullptr; }, StatusCode::kNullPointer,
       "input: data is null"},
      {"both: null grid", [](Views& v) { v.grid.data = nullptr; }, StatusCode::kNullPointer,
       "grid: data is null"},
      {"both: negative dim", [](Views& v) { v.input.shape[1] = -3; }, kInvalid,
       "input: dimension 1 is negative (-3)"},
      {"both: huge dim", [](Views& v) { v.input.shape[3] = int64_t{1} << 41; }, kInvalid,
       "input: dimension 3 is 2199023255552, more than the supported 2^40"},
      {"both: element count overflow",
       [](Views& v) { v.input.shape = {int64_t{1} << 40, int64_t{1} << 40, 5, 7}; }, kInvalid,
       "input: element count overflows 64 bits"},
      {"both: stride span overflow", [](Views& v) { v.input.strides[0] = INT64_MAX / 2; }, kInvalid,
       "input: strides address more than 2^63 bytes"},
      {"grad shape", [](Views& v) { v.grad.shape[1] = 4; }, kInvalid,
       "grad: shape (2, 4, 4, 6) must be (2, 3, 4, 6)"},
      {"grad dtype", [](Views& v) { v.grad.dtype = DType::kFloat16; }, kInvalid,
       "grad: dtype float16 differs from input's float32"},
      {"null grad", [](Views& v) { v.grad.data = nullptr; }, StatusCode::kNullPointer,
       "grad: data is null"},
      {"dx shape", [](Views& v) { v.dx.shape[3] = 6; }, kInvalid,
       "dx: shape (2, 3, 5, 6) must be (2, 3, 5, 7)"},
      {"dgrid shape", [](Views& v) { v.dgrid.shape[1] = 5; }, kInvalid, "dgrid: shape"},
      {"dx dtype", [](Views& v) { v.dx.dtype = DType::kFloat64; }, kInvalid,
       "dx: dtype float64 differs"},
      {"null dx", [](Views& v) { v.dx.data = nullptr; }, StatusCode::kNullPointer,
       "dx: data is null"},
      {"null dgrid", [](Views& v) { v.dgrid.data = nullptr; }, StatusCode::kNullPointer,
       "dgrid: data is null"},
      {"dx self overlap", [](Views& v) { v.dx.strides[1] = 0; }, kInvalid,
       "dx: strides make two elements share memory"},
      {"dx overlaps input", [](Views& v) { v.dx.data = const_cast<void*>(v.input.data); }, kInvalid,
       "dx: memory overlaps input"},
      {"dgrid overlaps dx",
       [](Views& v) { v.dgrid.data = static_cast<float*>(v.dx.data) + 3; }, kInvalid,
       "dgrid: memory overlaps dx"},
      {"dgrid overlaps grad", [](Views& v) { v.dgrid.data = const_cast<void*>(v.grad.data); },
       kInvalid, "dgrid: memory overlaps grad"},
  };
  for (const Case& c : cases) check(c);
}

}  // namespace
}  // namespace gstest
