// Every validation rule for volumes (5-D views): the call fails with its code
// and a message naming the tensor and the rule, in the words of the 2-D
// rules with 5-D shapes, and no output byte changes. A valid call fills the
// Problem with the volume's sizes and strides.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/validate.hpp"
#include "gridsampler/gridsampler.hpp"
#include "reference/reference.hpp"

namespace gridsampler {
namespace {

using detail::Problem;

// Storage for one contiguous float32 tensor, filled with a recognisable
// pattern so that a write shows up.
struct Buffer {
  std::vector<float> data;
  Shape5 shape{};
  explicit Buffer(const Shape5& s) : shape(s) {
    data.resize(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[3] * s[4]));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  }
  VolumeView view() const { return VolumeView::contiguous(data.data(), DType::kFloat32, shape); }
  MutableVolumeView mutable_view() { return MutableVolumeView::contiguous(data.data(), DType::kFloat32, shape); }
};

struct Views {
  VolumeView grad, input, grid;
  MutableVolumeView dx, dgrid, out;
  Options options;
  OutputMask mask;
};

// Which calls a case applies to: the backward always (it checks every
// tensor); the forward too when the broken tensor is one it shares.
enum class Calls { kBoth, kBackward, kForward };

struct Case {
  const char* name;
  Calls calls;
  std::function<void(Views&)> breaks;
  StatusCode code;
  const char* message;  // expected substring
};

constexpr int64_t kN = 2, kC = 3, kDin = 4, kHin = 5, kWin = 7, kDout = 3, kHout = 4, kWout = 6;

class VolumeValidation : public ::testing::Test {
 protected:
  Buffer input_{{kN, kC, kDin, kHin, kWin}};
  Buffer grid_{{kN, kDout, kHout, kWout, 3}};
  Buffer grad_{{kN, kC, kDout, kHout, kWout}};
  Buffer dx_{{kN, kC, kDin, kHin, kWin}};
  Buffer dgrid_{{kN, kDout, kHout, kWout, 3}};
  Buffer out_{{kN, kC, kDout, kHout, kWout}};

  Views views() {
    return {grad_.view(), input_.view(), grid_.view(), dx_.mutable_view(), dgrid_.mutable_view(),
            out_.mutable_view(), {}, {}};
  }

  // Runs the validators, the reference and the library on the broken views;
  // each must fail with the case's code and message and leave the outputs
  // untouched.
  void check(const Case& c) {
    Views v = views();
    c.breaks(v);
    const auto dx_before = dx_.data, dgrid_before = dgrid_.data, out_before = out_.data;
    const auto expect = [&](const Status& s, const char* what) {
      EXPECT_EQ(s.code(), c.code) << c.name << " (" << what << "): " << s.message();
      EXPECT_NE(s.message().find(c.message), std::string::npos)
          << c.name << " (" << what << "): message was '" << s.message() << "', expected to contain '"
          << c.message << "'";
    };
    if (c.calls != Calls::kForward) {
      Problem p;
      expect(detail::validate_backward_3d(v.grad, v.input, v.grid, v.dx, v.dgrid, v.options, v.mask, &p),
             "validate_backward_3d");
      expect(reference::grid_sampler_3d_backward(v.grad, v.input, v.grid, v.dx, v.dgrid, v.options, v.mask),
             "reference backward");
      expect(grid_sampler_3d_backward(v.grad, v.input, v.grid, v.dx, v.dgrid, v.options, v.mask),
             "grid_sampler_3d_backward");
    }
    if (c.calls != Calls::kBackward) {
      Problem p;
      expect(detail::validate_forward_3d(v.input, v.grid, v.out, v.options, &p), "validate_forward_3d");
      expect(reference::grid_sampler_3d(v.input, v.grid, v.out, v.options), "reference forward");
      expect(grid_sampler_3d(v.input, v.grid, v.out, v.options), "grid_sampler_3d");
    }
    EXPECT_EQ(dx_.data, dx_before) << c.name;
    EXPECT_EQ(dgrid_.data, dgrid_before) << c.name;
    EXPECT_EQ(out_.data, out_before) << c.name;
  }
};

TEST_F(VolumeValidation, ValidCallFillsTheProblem) {
  Views v = views();
  v.options.interpolation = Interpolation::kBicubic;
  v.options.padding = Padding::kReflection;
  v.options.align_corners = true;
  // dx in NDHWC, to see its strides come through.
  v.dx.strides = channels_last_strides_5d(v.dx.shape);
  Problem p;
  ASSERT_TRUE(detail::validate_backward_3d(v.grad, v.input, v.grid, v.dx, v.dgrid, v.options, {true, false}, &p)
                  .ok());
  EXPECT_TRUE(p.volume);
  EXPECT_EQ(p.n, kN);
  EXPECT_EQ(p.c, kC);
  EXPECT_EQ(p.in_d, kDin);
  EXPECT_EQ(p.in_h, kHin);
  EXPECT_EQ(p.in_w, kWin);
  EXPECT_EQ(p.out_d, kDout);
  EXPECT_EQ(p.out_h, kHout);
  EXPECT_EQ(p.out_w, kWout);
  EXPECT_EQ(p.input_strides_5d, (Shape5{kC * kDin * kHin * kWin, kDin * kHin * kWin, kHin * kWin, kWin, 1}));
  EXPECT_EQ(p.dx_strides_5d, channels_last_strides_5d({kN, kC, kDin, kHin, kWin}));
  EXPECT_EQ(p.input_strides, Shape4{});  // a volume leaves the 4-D strides alone
  EXPECT_EQ(p.dtype, DType::kFloat32);
  EXPECT_EQ(p.options.interpolation, Interpolation::kBicubic);
  EXPECT_EQ(p.options.padding, Padding::kReflection);
  EXPECT_TRUE(p.options.align_corners);
  EXPECT_TRUE(p.mask.input);
  EXPECT_FALSE(p.mask.grid);
  EXPECT_FALSE(p.empty());

  Problem f;
  ASSERT_TRUE(detail::validate_forward_3d(v.input, v.grid, v.out, {}, &f).ok());
  EXPECT_TRUE(f.volume);
  EXPECT_EQ(f.out_d, kDout);
  EXPECT_EQ(f.in_d, kDin);

  // The same Problem object reused for an image call becomes an image again.
  const float px = 0;
  float out = 0;
  const TensorView in2 = TensorView::contiguous(&px, DType::kFloat32, {1, 1, 1, 1});
  const float g2[2] = {0, 0};
  const TensorView grid2 = TensorView::contiguous(g2, DType::kFloat32, {1, 1, 1, 2});
  ASSERT_TRUE(detail::validate_forward(in2, grid2, MutableTensorView::contiguous(&out, DType::kFloat32, {1, 1, 1, 1}),
                                       {}, &f)
                  .ok());
  EXPECT_FALSE(f.volume);
  EXPECT_EQ(f.in_d, 1);
  EXPECT_EQ(f.out_d, 1);
  EXPECT_EQ(f.input_strides_5d, Shape5{});
}

// Empty problems are valid: N, C or an output dimension of 0.
TEST_F(VolumeValidation, EmptyProblemsAreValid) {
  for (int dim : {0, 1, 2, 3}) {
    Views v = views();
    // dim 0: N = 0 everywhere; 1: C = 0; 2, 3: Dout or Hout = 0.
    if (dim == 0) {
      v.input.shape[0] = v.grid.shape[0] = v.grad.shape[0] = v.dx.shape[0] = v.dgrid.shape[0] = v.out.shape[0] = 0;
    } else if (dim == 1) {
      v.input.shape[1] = v.grad.shape[1] = v.dx.shape[1] = v.out.shape[1] = 0;
    } else {
      v.grid.shape[dim - 1] = v.grad.shape[dim] = v.dgrid.shape[dim - 1] = v.out.shape[dim] = 0;
    }
    Problem p;
    const Status b = detail::validate_backward_3d(v.grad, v.input, v.grid, v.dx, v.dgrid, {}, {}, &p);
    EXPECT_TRUE(b.ok()) << dim << ": " << b.message();
    EXPECT_TRUE(p.empty()) << dim;
    const Status f = detail::validate_forward_3d(v.input, v.grid, v.out, {}, &p);
    EXPECT_TRUE(f.ok()) << dim << ": " << f.message();
    EXPECT_TRUE(p.empty()) << dim;
  }
}

// An output that is not wanted is not checked: its view may be empty or broken.
TEST_F(VolumeValidation, UnwantedOutputsAreNotChecked) {
  Views v = views();
  v.dx = {};
  v.dgrid.data = const_cast<void*>(v.input.data);  // would overlap input
  Problem p;
  EXPECT_TRUE(detail::validate_backward_3d(v.grad, v.input, v.grid, v.dx, v.dgrid, {}, {false, false}, &p).ok());
  v.dgrid = {};
  EXPECT_FALSE(detail::validate_backward_3d(v.grad, v.input, v.grid, v.dx, v.dgrid, {}, {true, false}, &p).ok());
}

TEST_F(VolumeValidation, EveryRuleFailsCleanly) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  const StatusCode kNull = StatusCode::kNullPointer;
  const Calls kBoth = Calls::kBoth, kBwd = Calls::kBackward, kFwd = Calls::kForward;
  const int64_t k2_40 = int64_t{1} << 40;
  const Case cases[] = {
      {"grid last dim 2", kBoth, [](Views& v) { v.grid.shape[4] = 2; }, kInvalid,
       "grid: last dimension must be 3, got 2"},
      {"zero Din", kBoth, [](Views& v) { v.input.shape[2] = 0; }, kInvalid,
       "input: depth, height and width must be positive, got D=0, H=5, W=7"},
      {"zero Hin", kBoth, [](Views& v) { v.input.shape[3] = 0; }, kInvalid,
       "input: depth, height and width must be positive, got D=4, H=0, W=7"},
      {"zero Win", kBoth, [](Views& v) { v.input.shape[4] = 0; }, kInvalid,
       "input: depth, height and width must be positive, got D=4, H=5, W=0"},
      {"batch mismatch", kBoth, [](Views& v) { v.grid.shape[0] = 3; }, kInvalid,
       "grid: batch size 3 does not match input's 2"},
      {"mixed dtypes", kBoth, [](Views& v) { v.grid.dtype = DType::kFloat64; }, kInvalid,
       "grid: dtype float64 differs from input's float32"},
      {"unknown mode", kBoth, [](Views& v) { v.options.interpolation = static_cast<Interpolation>(3); },
       kInvalid, "interpolation_mode: unknown value 3 (expected 0 bilinear, 1 nearest or 2 bicubic)"},
      {"unknown padding", kBoth, [](Views& v) { v.options.padding = static_cast<Padding>(-1); }, kInvalid,
       "padding_mode: unknown value -1"},
      {"negative threads", kBoth, [](Views& v) { v.options.num_threads = -2; }, kInvalid,
       "num_threads: must be 0 (all) or positive, got -2"},
      {"too many threads", kBoth, [](Views& v) { v.options.num_threads = max_threads() + 1; }, kInvalid,
       "num_threads: at most"},
      {"unknown dtype", kBoth, [](Views& v) { v.input.dtype = static_cast<DType>(9); }, kInvalid,
       "input: unknown dtype value 9"},
      {"null input", kBoth, [](Views& v) { v.input.data = nullptr; }, kNull,
       "input: data is null but the tensor has 840 elements"},
      {"null grid", kBoth, [](Views& v) { v.grid.data = nullptr; }, kNull, "grid: data is null"},
      {"negative dim", kBoth, [](Views& v) { v.input.shape[4] = -3; }, kInvalid,
       "input: dimension 4 is negative (-3)"},
      {"huge dim", kBoth, [=](Views& v) { v.grid.shape[2] = 2 * k2_40; }, kInvalid,
       "grid: dimension 2 is 2199023255552, more than the supported 2^40"},
      {"element count overflow", kBoth, [=](Views& v) { v.input.shape = {k2_40, k2_40, 4, 5, 7}; }, kInvalid,
       "input: element count overflows 64 bits"},
      {"stride span overflow", kBoth, [](Views& v) { v.input.strides[2] = INT64_MAX / 2; }, kInvalid,
       "input: strides address more than 2^63 bytes"},
      {"stride INT64_MIN", kBoth, [](Views& v) { v.grid.strides[3] = INT64_MIN; }, kInvalid,
       "grid: strides address more than 2^63 bytes"},
      {"misaligned input", kBoth,
       [](Views& v) { v.input.data = static_cast<const char*>(v.input.data) + 2; }, kInvalid,
       "input: data is not aligned to its element size (4 bytes)"},
      // D * H * W past 2^62 while N = 0 keeps the element count at zero.
      {"input volume overflow", kBoth,
       [](Views& v) {
         v.input.shape = {0, 1, 6, int64_t{1} << 30, int64_t{1} << 30};
         v.grid.shape[0] = 0;
       },
       kInvalid, "input: D * H * W overflows 2^62"},
      {"grid volume overflow", kBoth,
       [](Views& v) {
         v.input.shape[0] = 0;
         v.grid.shape = {0, 6, int64_t{1} << 30, int64_t{1} << 30, 3};
       },
       kInvalid, "grid: Dout * Hout * Wout overflows 2^62"},
      {"grad shape", kBwd, [](Views& v) { v.grad.shape[2] = 4; }, kInvalid,
       "grad: shape (2, 3, 4, 4, 6) must be (2, 3, 3, 4, 6), (N, C) of input and (Dout, Hout, Wout) of grid"},
      {"grad dtype", kBwd, [](Views& v) { v.grad.dtype = DType::kFloat16; }, kInvalid,
       "grad: dtype float16 differs from input's float32"},
      {"null grad", kBwd, [](Views& v) { v.grad.data = nullptr; }, kNull, "grad: data is null"},
      {"dx shape", kBwd, [](Views& v) { v.dx.shape[2] = 5; }, kInvalid,
       "dx: shape (2, 3, 5, 5, 7) must be (2, 3, 4, 5, 7), the shape of input"},
      {"dgrid shape", kBwd, [](Views& v) { v.dgrid.shape[4] = 2; }, kInvalid,
       "dgrid: shape (2, 3, 4, 6, 2) must be (2, 3, 4, 6, 3), the shape of grid"},
      {"dx dtype", kBwd, [](Views& v) { v.dx.dtype = DType::kFloat64; }, kInvalid,
       "dx: dtype float64 differs from input's float32"},
      {"null dx", kBwd, [](Views& v) { v.dx.data = nullptr; }, kNull, "dx: data is null"},
      {"null dgrid", kBwd, [](Views& v) { v.dgrid.data = nullptr; }, kNull, "dgrid: data is null"},
      {"dx self overlap", kBwd, [](Views& v) { v.dx.strides[2] = 0; }, kInvalid,
       "dx: strides make two elements share memory"},
      {"dgrid self overlap (depth onto height)", kBwd, [](Views& v) { v.dgrid.strides[1] = v.dgrid.strides[2]; },
       kInvalid, "dgrid: strides make two elements share memory"},
      {"dx overlaps input", kBwd, [](Views& v) { v.dx.data = const_cast<void*>(v.input.data); }, kInvalid,
       "dx: memory overlaps input"},
      {"dgrid overlaps dx", kBwd, [](Views& v) { v.dgrid.data = static_cast<float*>(v.dx.data) + 3; },
       kInvalid, "dgrid: memory overlaps dx"},
      {"dgrid overlaps grad", kBwd, [](Views& v) { v.dgrid.data = const_cast<void*>(v.grad.data); }, kInvalid,
       "dgrid: memory overlaps grad"},
      {"output shape", kFwd, [](Views& v) { v.out.shape[2] = 2; }, kInvalid,
       "output: shape (2, 3, 2, 4, 6) must be (2, 3, 3, 4, 6), (N, C) of input and (Dout, Hout, Wout) of grid"},
      {"output dtype", kFwd, [](Views& v) { v.out.dtype = DType::kBFloat16; }, kInvalid,
       "output: dtype bfloat16 differs from input's float32"},
      {"null output", kFwd, [](Views& v) { v.out.data = nullptr; }, kNull, "output: data is null"},
      {"output overlaps grid", kFwd,
       [](Views& v) { v.out.data = const_cast<float*>(static_cast<const float*>(v.grid.data)) + 1; }, kInvalid,
       "output: memory overlaps grid"},
      {"output self overlap", kFwd, [](Views& v) { v.out.strides[4] = -1; v.out.strides[3] = 2; }, kInvalid,
       "output: strides make two elements share memory"},
  };
  for (const Case& c : cases) check(c);
}

}  // namespace
}  // namespace gridsampler
