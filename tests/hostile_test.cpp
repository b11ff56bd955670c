// Hostile input that the other suites do not cover: every rejection
// returns its code and a message naming the tensor and the rule and leaves
// every output byte untouched; hard values that are valid input give the
// values docs/design.md §2 defines (asserted analytically, against the float64
// reference, and by the adjoint identity); offsets beyond 2^31 elements work.
// Meant to run under ASan/UBSan too (scripts/ci-sanitize.sh), where a wrong
// access or an undefined conversion fails the test.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler2d.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "common/problem.hpp"
#include "common/temp_dir.hpp"
#include "core/half.hpp"
#include "host/element_access.hpp"
#include "io/npy.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::MutableTensorView;
using gridsampler::Options;
using gridsampler::OutputMask;
using gridsampler::Padding;
using gridsampler::Shape4;
using gridsampler::Status;
using gridsampler::StatusCode;
using gridsampler::TensorView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const StatusCode kInvalid = StatusCode::kInvalidArgument;

// A pointer that is never dereferenced: validation must refuse before using it.
void* fake_pointer() {
  alignas(64) static unsigned char byte[64];
  return byte;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// ---------------------------------------------------------------------------
// C++ API: rules the validation suite does not exercise.

class Rejections : public ::testing::Test {
 protected:
  void SetUp() override {
    p_ = Problem::random({2, 3, 5, 7, 4, 6}, DType::kFloat32, {}, 11);
    dx_ = Tensor(DType::kFloat32, p_.input.shape());
    dgrid_ = Tensor(DType::kFloat32, p_.grid.shape());
    out_ = Tensor(DType::kFloat32, p_.grad.shape());
  }
  // Runs the backward (kernels and reference) and checks the status and that
  // dx, dgrid and out are untouched.
  void backward_fails(const std::string& name, TensorView grad, TensorView input, TensorView grid,
                      MutableTensorView dx, MutableTensorView dgrid, const Options& opt, StatusCode code,
                      const std::string& message, OutputMask mask = {}) {
    for (bool reference : {false, true}) {
      const auto before = snapshot();
      auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                           : &gridsampler::grid_sampler_2d_backward;
      const Status s = bwd(grad, input, grid, dx, dgrid, opt, mask);
      EXPECT_EQ(s.code(), code) << name << ": " << s.message();
      EXPECT_TRUE(contains(s.message(), message))
          << name << ": message '" << s.message() << "' lacks '" << message << "'";
      EXPECT_EQ(snapshot(), before) << name << ": an output changed";
    }
  }
  void forward_fails(const std::string& name, TensorView input, TensorView grid, MutableTensorView out,
                     const Options& opt, StatusCode code, const std::string& message) {
    for (bool reference : {false, true}) {
      const auto before = snapshot();
      auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
      const Status s = fwd(input, grid, out, opt);
      EXPECT_EQ(s.code(), code) << name << ": " << s.message();
      EXPECT_TRUE(contains(s.message(), message))
          << name << ": message '" << s.message() << "' lacks '" << message << "'";
      EXPECT_EQ(snapshot(), before) << name << ": an output changed";
    }
  }
  std::vector<gridsampler::host::Bytes> snapshot() const {
    return {dx_.storage(), dgrid_.storage(), out_.storage(), p_.input.storage(), p_.grid.storage(),
            p_.grad.storage()};
  }
  Problem p_;
  Tensor dx_, dgrid_, out_;
};

TEST_F(Rejections, ForwardOutputShapeDtypeAndOverlap) {
  const TensorView in = p_.input.view(), gr = p_.grid.view();
  for (int d = 0; d < 4; ++d) {
    MutableTensorView o = out_.mutable_view();
    o.shape[d] += 1;
    forward_fails("out dim " + std::to_string(d), in, gr, o, {}, kInvalid,
                  "output: shape (" + std::to_string(o.shape[0]) + ", ");
  }
  MutableTensorView o = out_.mutable_view();
  o.dtype = DType::kFloat64;
  forward_fails("out dtype", in, gr, o, {}, kInvalid, "output: dtype float64 differs from input's float32");
  o = out_.mutable_view();
  o.strides[3] = 0;
  forward_fails("out self overlap", in, gr, o, {}, kInvalid, "output: strides make two elements share memory");
  o = out_.mutable_view();
  o.data = const_cast<void*>(in.data);
  forward_fails("out over input", in, gr, o, {}, kInvalid, "output: memory overlaps input");
  o = out_.mutable_view();
  o.data = static_cast<float*>(const_cast<void*>(gr.data)) + 5;
  forward_fails("out over grid", in, gr, o, {}, kInvalid, "output: memory overlaps grid");
  o = out_.mutable_view();
  o.data = nullptr;
  forward_fails("out null", in, gr, o, {}, StatusCode::kNullPointer, "output: data is null");
  Options bad_threads;
  bad_threads.num_threads = -1;
  forward_fails("num_threads", in, gr, out_.mutable_view(), bad_threads, kInvalid,
                "num_threads: must be 0 (all) or positive, got -1");
}

// A thread count above the bound is refused, not handed to OpenMP (10^9
// threads made libgomp abort the process, out of memory for the team).
TEST_F(Rejections, ThreadCountAboveTheBound) {
  const int bound = gridsampler::max_threads();
  ASSERT_GE(bound, 64);
  for (int threads : {bound + 1, 1000000000, std::numeric_limits<int>::max()}) {
    Options opt;
    opt.num_threads = threads;
    const std::string message =
        "num_threads: at most " + std::to_string(bound) + " on this machine, got " + std::to_string(threads);
    forward_fails("forward " + std::to_string(threads), p_.input.view(), p_.grid.view(), out_.mutable_view(),
                  opt, kInvalid, message);
    backward_fails("backward " + std::to_string(threads), p_.grad.view(), p_.input.view(), p_.grid.view(),
                   dx_.mutable_view(), dgrid_.mutable_view(), opt, kInvalid, message);
  }
}

// Outputs against every input and each other, including views that
// interleave (disjoint elements, overlapping address ranges: refused).
TEST_F(Rejections, OutputsOverlapEveryOtherTensor) {
  const TensorView g = p_.grad.view(), in = p_.input.view(), gr = p_.grid.view();
  MutableTensorView dx = dx_.mutable_view(), dg = dgrid_.mutable_view();
  auto shifted = [](MutableTensorView v, const void* at, int64_t elems) {
    v.data = static_cast<float*>(const_cast<void*>(at)) + elems;
    return v;
  };
  // (dx is larger than grad and grid, so it may reach a neighbouring
  // buffer too: only the tensor is named here.)
  backward_fails("dx over grad", g, in, gr, shifted(dx, g.data, 1), dg, {}, kInvalid, "dx: memory overlaps ");
  backward_fails("dx over grid tail", g, in, gr, shifted(dx, gr.data, 40), dg, {}, kInvalid,
                 "dx: memory overlaps ");
  backward_fails("dgrid over input", g, in, gr, dx, shifted(dg, in.data, 100), {}, kInvalid,
                 "dgrid: memory overlaps input");
  backward_fails("dgrid over grid", g, in, gr, dx, shifted(dg, gr.data, 0), {}, kInvalid,
                 "dgrid: memory overlaps grid");
  // dx and dgrid interleaved in one buffer: dx on even elements, dgrid on odd.
  std::vector<float> both(2 * static_cast<size_t>(p_.input.numel()) + 16, 7.0f);
  MutableTensorView dxi = dx, dgi = dg;
  dxi.data = both.data();
  dxi.strides = {2 * 3 * 5 * 7, 2 * 5 * 7, 2 * 7, 2};
  dgi.data = both.data() + 1;
  dgi.strides = {2 * 4 * 6 * 2, 2 * 6 * 2, 2 * 2, 2};
  const auto both_before = both;
  backward_fails("interleaved dx and dgrid", g, in, gr, dxi, dgi, {}, kInvalid, "dgrid: memory overlaps dx");
  EXPECT_EQ(both, both_before);
  // An output not asked for is not checked: the same call without dgrid runs.
  ASSERT_TRUE(gridsampler::grid_sampler_2d_backward(g, in, gr, dxi, dgi, {}, {true, false}).ok());
  for (size_t i = 1; i < both.size(); i += 2) ASSERT_EQ(both[i], 7.0f) << "dgrid written while masked";
  // dgrid self-overlap.
  MutableTensorView dgs = dg;
  dgs.strides[3] = 0;
  backward_fails("dgrid self overlap", g, in, gr, dx, dgs, {}, kInvalid,
                 "dgrid: strides make two elements share memory");
}

// Byte counts that overflow 64 bits although the element counts do not, and
// strides whose reach overflows: refused before any pointer arithmetic.
TEST_F(Rejections, ByteAndStrideOverflow) {
  const TensorView g = p_.grad.view(), in = p_.input.view(), gr = p_.grid.view();
  // 2^62 float64 elements (within int64) are 2^65 bytes.
  TensorView big{fake_pointer(), DType::kFloat64, {1, 1, int64_t{1} << 31, int64_t{1} << 31}, {}};
  big.strides = gridsampler::contiguous_strides(big.shape);
  Tensor g64(DType::kFloat64, g.shape), grid64(DType::kFloat64, gr.shape), dg64(DType::kFloat64, gr.shape);
  const Shape4 g64_shape{1, 1, 4, 6};
  TensorView gv{g64.view().data, DType::kFloat64, g64_shape, gridsampler::contiguous_strides(g64_shape)};
  TensorView grv{grid64.view().data, DType::kFloat64, {1, 4, 6, 2}, gridsampler::contiguous_strides({1, 4, 6, 2})};
  MutableTensorView dgv{dg64.mutable_view().data, DType::kFloat64, {1, 4, 6, 2},
                        gridsampler::contiguous_strides({1, 4, 6, 2})};
  MutableTensorView dxv{fake_pointer(), DType::kFloat64, big.shape, big.strides};
  backward_fails("2^65 bytes", gv, big, grv, dxv, dgv, {}, kInvalid, "input: strides address more than 2^63 bytes");
  // Negative strides: INT64_MIN, and a reach below -2^63.
  TensorView neg = in;
  neg.strides[3] = std::numeric_limits<int64_t>::min();
  backward_fails("stride INT64_MIN", g, neg, gr, dx_.mutable_view(), dgrid_.mutable_view(), {}, kInvalid,
                 "input: strides address more than 2^63 bytes");
  neg = in;
  neg.strides[2] = -(int64_t{1} << 62);  // (5 - 1) * 2^62 overflows
  backward_fails("stride -2^62", g, neg, gr, dx_.mutable_view(), dgrid_.mutable_view(), {}, kInvalid,
                 "input: strides address more than 2^63 bytes");
  // Positive and negative reaches that each fit but whose span does not.
  neg = in;
  neg.strides = {-(int64_t{1} << 61), int64_t{1} << 60, 1, 1};  // lo = -2^61, hi = 2^61 + ..., times 4 bytes
  backward_fails("span over 2^63 bytes", g, neg, gr, dx_.mutable_view(), dgrid_.mutable_view(), {}, kInvalid,
                 "input: strides address more than 2^63 bytes");
}

// A dimension of 0 makes a tensor empty whatever the others are; the problem
// is then empty and succeeds, dx (empty) is not written, and dgrid (a sum
// over no channels) is 0. The image is as large as a plane may be: 2^31 x
// 2^31 = 2^62 pixels, so anything sized by the plane must not be allocated,
// cleared or even computed without overflow checks.
TEST(HardShapes, ZeroChannelsWithHugeImage) {
  const int64_t kSide = int64_t{1} << 31;
  for (bool reference : {false, true}) {
    for (bool want_dx : {true, false}) {
      Tensor grid(DType::kFloat32, {1, 3, 3, 2}), dgrid(DType::kFloat32, {1, 3, 3, 2});
      std::mt19937_64 rng(3);
      grid.fill_uniform(rng, -1, 1);
      dgrid.fill(kNaN);
      const Shape4 image{1, 0, kSide, kSide}, out{1, 0, 3, 3};
      TensorView input{fake_pointer(), DType::kFloat32, image, {0, 0, 0, 0}};
      TensorView grad{fake_pointer(), DType::kFloat32, out, {0, 0, 0, 0}};
      MutableTensorView dx{fake_pointer(), DType::kFloat32, image, {0, 0, 0, 0}};
      auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                           : &gridsampler::grid_sampler_2d_backward;
      const Status s = bwd(grad, input, grid.view(), dx, dgrid.mutable_view(), {}, {want_dx, true});
      const std::string what = std::string(reference ? "reference" : "kernels") + (want_dx ? " with dx" : "");
      ASSERT_TRUE(s.ok()) << what << ": " << s.message();
      for (double v : dgrid.values()) EXPECT_EQ(v, 0.0) << what;
      MutableTensorView o{fake_pointer(), DType::kFloat32, out, {0, 0, 0, 0}};
      auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
      EXPECT_TRUE(fwd(input, grid.view(), o, {}).ok()) << what;
    }
  }
}

// ---------------------------------------------------------------------------
// Hard values with results known in closed form.

// A 1 x 1 x 1 x 4 image v = (1, 2, 4, 8) (one row: y plays no part) sampled at
// one grid x; returns (forward, d out / d x, dx) from the kernels, after
// checking they equal the reference's and satisfy the adjoint identity.
struct Sampled {
  double out = 0, dgrid_x = 0, dgrid_y = 0;
  std::vector<double> dx;
};

Sampled sample_row(DType dtype, const Options& opt, double x, double grad = 1.0) {
  Problem p;
  p.dims = {1, 1, 1, 4, 1, 1};
  p.options = opt;
  p.input = Tensor(dtype, {1, 1, 1, 4});
  const double v[4] = {1, 2, 4, 8};
  for (int i = 0; i < 4; ++i) p.input.set(0, 0, 0, i, v[i]);
  p.grid = Tensor(dtype, {1, 1, 1, 2});
  p.grid.set(0, 0, 0, 0, x);
  p.grid.set(0, 0, 0, 1, 0.0);
  p.grad = Tensor(dtype, {1, 1, 1, 1});
  p.grad.set(0, 0, 0, 0, grad);
  const Outputs k = run(p, false), r = run(p, true);
  const std::string what = describe(opt) + " x=" + std::to_string(x);
  EXPECT_EQ(k.out.values(), r.out.values()) << what;
  EXPECT_EQ(k.dx.values(), r.dx.values()) << what;
  EXPECT_EQ(k.dgrid.values(), r.dgrid.values()) << what;
  // Adjoint: <dx, u> = <grad, forward(u)> for u = e_i, i.e. dx_i = grad * w_i.
  for (int i = 0; i < 4; ++i) {
    Problem q = p;
    q.input = Tensor(dtype, {1, 1, 1, 4});
    q.input.fill(0);
    q.input.set(0, 0, 0, i, 1);
    const Outputs e = run(q, false);
    EXPECT_EQ(k.dx.get(0, 0, 0, i), grad * e.out.get(0, 0, 0, 0)) << what << " adjoint, pixel " << i;
  }
  return {k.out.get(0, 0, 0, 0), k.dgrid.get(0, 0, 0, 0), k.dgrid.get(0, 0, 0, 1), k.dx.values()};
}

// align_corners=false, W = 4: ix = 2x + 1.5. Pixel centres at ix = 0..3; the
// image's outer edges at ix = -0.5 and 3.5 (x = -1, 1); half a pixel further
// at ix = -1 and 4 (x = -1.25, 1.25), where zeros padding stops reaching the
// image. Every value below is exact in float16 and up.
TEST(BorderValues, ZerosJustInsideAndOutside) {
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    const Options opt{Interpolation::kBilinear, Padding::kZeros, false};
    const std::string what = std::string(gridsampler::to_string(dt));
    // On the edge: half of pixel 0, and d/dx = 2 * (v0 - 0).
    Sampled s = sample_row(dt, opt, -1.0);
    EXPECT_EQ(s.out, 0.5) << what;
    EXPECT_EQ(s.dgrid_x, 2.0) << what;
    s = sample_row(dt, opt, 1.0);
    EXPECT_EQ(s.out, 4.0) << what;  // half of pixel 3 (8)
    EXPECT_EQ(s.dgrid_x, -16.0) << what;
    // Exactly half a pixel out: the only in-image tap has weight 0, but the
    // gradient still sees it (PyTorch: the tap is in bounds).
    s = sample_row(dt, opt, -1.25);
    EXPECT_EQ(s.out, 0.0) << what;
    EXPECT_EQ(s.dgrid_x, 2.0) << what;
    EXPECT_EQ(s.dx, (std::vector<double>{0, 0, 0, 0})) << what;
    // Just inside: ix = -1 + 2^-9 puts weight 2^-9 on pixel 0.
    s = sample_row(dt, opt, -1.25 + 0x1p-10);
    EXPECT_EQ(s.out, 0x1p-9) << what;
    EXPECT_EQ(s.dx, (std::vector<double>{0x1p-9, 0, 0, 0})) << what;
    EXPECT_EQ(s.dgrid_x, 2.0) << what;
    s = sample_row(dt, opt, 1.25 - 0x1p-10);
    EXPECT_EQ(s.out, 8 * 0x1p-9) << what;
    EXPECT_EQ(s.dx, (std::vector<double>{0, 0, 0, 0x1p-9})) << what;
    EXPECT_EQ(s.dgrid_x, -16.0) << what;
    // Just outside: nothing at all.
    for (double x : {-1.25 - 0x1p-10, 1.25 + 0x1p-10, -1.5, 1.5}) {
      s = sample_row(dt, opt, x);
      EXPECT_EQ(s.out, 0.0) << what << " x=" << x;
      EXPECT_EQ(s.dgrid_x, 0.0) << what << " x=" << x;
      EXPECT_EQ(s.dx, (std::vector<double>{0, 0, 0, 0})) << what << " x=" << x;
    }
  }
}

// Border: clamps to [0, 3]; the gradient is 0 on and beyond the border.
TEST(BorderValues, BorderJustInsideAndOutside) {
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    const Options opt{Interpolation::kBilinear, Padding::kBorder, false};
    const std::string what = std::string(gridsampler::to_string(dt));
    Sampled s = sample_row(dt, opt, -0.75);  // ix = 0 exactly
    EXPECT_EQ(s.out, 1.0) << what;
    EXPECT_EQ(s.dgrid_x, 0.0) << what;
    s = sample_row(dt, opt, -0.75 + 0x1p-10);  // ix = 2^-9
    EXPECT_EQ(s.out, 1.0 + 0x1p-9) << what;
    EXPECT_EQ(s.dgrid_x, 2.0) << what;  // 2 * (v1 - v0)
    s = sample_row(dt, opt, -0.75 - 0x1p-10);  // clamped
    EXPECT_EQ(s.out, 1.0) << what;
    EXPECT_EQ(s.dgrid_x, 0.0) << what;
    s = sample_row(dt, opt, 0.75);  // ix = 3 exactly
    EXPECT_EQ(s.out, 8.0) << what;
    EXPECT_EQ(s.dgrid_x, 0.0) << what;
    s = sample_row(dt, opt, 0.75 - 0x1p-10);  // ix = 3 - 2^-9
    EXPECT_EQ(s.out, 8.0 - 4 * 0x1p-9) << what;
    EXPECT_EQ(s.dgrid_x, 8.0) << what;  // 2 * (v3 - v2)
    for (double x : {0.75 + 0x1p-10, 1e30, kInf, 3e38}) {
      s = sample_row(dt, opt, x);
      EXPECT_EQ(s.out, 8.0) << what << " x=" << x;
      EXPECT_EQ(s.dgrid_x, 0.0) << what << " x=" << x;
      EXPECT_EQ(s.dx, (std::vector<double>{0, 0, 0, 1})) << what << " x=" << x;
    }
  }
}

// Reflection (align_corners=false reflects about ix = -0.5 and 3.5).
TEST(BorderValues, ReflectionAroundTheEdges) {
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    const Options opt{Interpolation::kBilinear, Padding::kReflection, false};
    const std::string what = std::string(gridsampler::to_string(dt));
    Sampled s = sample_row(dt, opt, 1.5);  // ix = 4.5 -> 2.5
    EXPECT_EQ(s.out, 6.0) << what;
    EXPECT_EQ(s.dgrid_x, -8.0) << what;  // reflected: -2 * (v3 - v2)
    s = sample_row(dt, opt, -1.5);  // ix = -1.5 -> 0.5
    EXPECT_EQ(s.out, 1.5) << what;
    EXPECT_EQ(s.dgrid_x, -2.0) << what;
    s = sample_row(dt, opt, -1.125);  // ix = -0.75 -> -0.25 -> clipped to 0
    EXPECT_EQ(s.out, 1.0) << what;
    EXPECT_EQ(s.dgrid_x, 0.0) << what;
    s = sample_row(dt, opt, 3.5);  // ix = 8.5 -> -1.5 -> 0.5 (two reflections)
    EXPECT_EQ(s.out, 1.5) << what;
    EXPECT_EQ(s.dgrid_x, 2.0) << what;
  }
}

// Coordinates whose pixel index would overflow 32-bit or 64-bit integers (or
// that exceed every integer): never wrapped into the image.
TEST(HugeCoordinates, PixelIndexBeyondInt32AndInt64) {
  // ix = 2x + 1.5 (W = 4, align_corners=false). In float64 the first values
  // put the floor at 2^31, 2^32 + 2 (int32 would wrap it to pixel 2) and
  // 2^63 - 1024; the rest exceed every int64.
  const double xs[] = {0x1p30 - 0.75, 0x1p31 + 0.25, 0x1p62 - 512.75, 0x1p62, 0x1p63, 0x1p64, 1e19, 1e300,
                       -(0x1p31 + 0.25), -0x1p63, -1e300};
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (double x : xs) {
        const std::string what =
            std::string(gridsampler::to_string(dt)) + " " + gridsampler::to_string(mode).data() + " x=" + std::to_string(x);
        Sampled z = sample_row(dt, {mode, Padding::kZeros, false}, x);
        EXPECT_EQ(z.out, 0.0) << what;
        EXPECT_EQ(z.dgrid_x, 0.0) << what;
        EXPECT_EQ(z.dx, (std::vector<double>{0, 0, 0, 0})) << what;
        Sampled b = sample_row(dt, {mode, Padding::kBorder, false}, x);
        EXPECT_EQ(b.out, x > 0 ? 8.0 : 1.0) << what;
        EXPECT_EQ(b.dgrid_x, 0.0) << what;
        // Reflection: well defined (checked against the reference inside
        // sample_row), a value of the image's range, finite gradient.
        Sampled r = sample_row(dt, {mode, Padding::kReflection, false}, x);
        EXPECT_GE(r.out, mode == Interpolation::kBicubic ? -1.0 : 1.0) << what;
        EXPECT_LE(r.out, mode == Interpolation::kBicubic ? 10.0 : 8.0) << what;
        EXPECT_TRUE(std::isfinite(r.dgrid_x)) << what;
      }
    }
  }
}

// Axes longer than 2^24 pixels, where float32 cannot hold fx + 1 for every
// pixel fx: a constant image (zero strides, 2^52 virtual pixels) samples to
// its value wherever the taps are inside, as in PyTorch. (The weights were
// once formed as (fx + 1) - ix, which is 0 there.)
TEST(HugeCoordinates, BilinearOnAxesLongerThan2To24) {
  const float value = 3.0f;
  const Shape4 shape{1, 2, int64_t{1} << 26, int64_t{1} << 26};
  const TensorView input{&value, DType::kFloat32, shape, {0, 0, 0, 0}};
  // (x, y) well inside, and x on the first pixel's outer half (ix = -0.5,
  // exact in float32: border clamps it to the pixel).
  const float xy[4][2] = {{0.25f, -0.5f}, {-0.75f, 0.5f}, {0.999f, 0.0f}, {-1.0f, 0.125f}};
  Tensor grid(DType::kFloat32, {1, 1, 4, 2});
  for (int i = 0; i < 4; ++i) {
    grid.set(0, 0, i, 0, xy[i][0]);
    grid.set(0, 0, i, 1, xy[i][1]);
  }
  for (Padding padding : {Padding::kZeros, Padding::kBorder}) {
    for (bool reference : {false, true}) {
      auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
      Tensor out(DType::kFloat32, {1, 2, 1, 4});
      out.fill(kNaN);
      ASSERT_TRUE(fwd(input, grid.view(), out.mutable_view(), {Interpolation::kBilinear, padding, false}).ok());
      for (int c = 0; c < 2; ++c) {
        for (int i = 0; i < 3; ++i) EXPECT_EQ(out.get(0, c, 0, i), 3.0) << reference << " point " << i;
        // x = -1: half a pixel before the first centre (zeros: weight 1/2).
        EXPECT_EQ(out.get(0, c, 0, 3), padding == Padding::kZeros ? 1.5 : 3.0) << reference;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Offsets beyond 2^31 (and 2^32) elements: float16 tensors whose strides
// spread a few elements over a sparse mapping of 12 GiB that is never
// committed (MAP_NORESERVE; only the touched pages become memory).

class Sparse {
 public:
  explicit Sparse(size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~Sparse() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  Sparse(const Sparse&) = delete;
  Sparse& operator=(const Sparse&) = delete;
  unsigned char* data() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  unsigned char* base_;
};

void put_half(unsigned char* base, int64_t elem, double v) {
  gridsampler::host::store_element(base + elem * 2, DType::kFloat16, v);
}
double get_half(const unsigned char* base, int64_t elem) {
  return gridsampler::host::load_element(base + elem * 2, DType::kFloat16);
}

TEST(LargeOffsets, StridesBeyond2To32Elements) {
  // Input and dx: 1 x 2 x 3 x 3 with strides (0, 2^33 + 1, 2^31 + 1, 2^30)
  // (no two elements share memory, so dx may use them too): the last element
  // sits past 1.75 * 2^33 elements. The output: 1 x 2 x 4 x 5 with strides
  // (0, 2^32 + 5, 2^30 + 1, 2^28), its last element past 2^33.
  const Shape4 shape{1, 2, 3, 3};
  const Shape4 strides{0, (int64_t{1} << 33) + 1, (int64_t{1} << 31) + 1, int64_t{1} << 30};
  const Shape4 out_shape{1, 2, 4, 5};
  const Shape4 out_strides{0, (int64_t{1} << 32) + 5, (int64_t{1} << 30) + 1, int64_t{1} << 28};
  const int64_t last = strides[1] + 2 * strides[2] + 2 * strides[3];
  const int64_t out_last = out_strides[1] + 3 * out_strides[2] + 4 * out_strides[3];
  ASSERT_GT(last, int64_t{1} << 33);
  ASSERT_GT(out_last, int64_t{1} << 33);
  Sparse in_mem(static_cast<size_t>(last + 1) * 2), dx_mem(static_cast<size_t>(last + 1) * 2),
      out_mem(static_cast<size_t>(out_last + 1) * 2);
  if (in_mem.data() == nullptr || dx_mem.data() == nullptr || out_mem.data() == nullptr) {
    GTEST_SKIP() << "cannot map 80 GiB of address space";
  }
  auto at = [](const Shape4& st, int64_t c, int64_t y, int64_t x) { return c * st[1] + y * st[2] + x * st[3]; };
  for (const Options& opt : {Options{Interpolation::kBilinear, Padding::kZeros, false},
                             Options{Interpolation::kBicubic, Padding::kReflection, true},
                             Options{Interpolation::kNearest, Padding::kBorder, false}}) {
    // The same problem, compact: the results must be the same bits.
    Problem p = Problem::random({1, 2, 3, 3, 4, 5}, DType::kFloat16, opt, 21, 1.2);
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t y = 0; y < 3; ++y)
        for (int64_t x = 0; x < 3; ++x) {
          put_half(in_mem.data(), at(strides, c, y, x), p.input.get(0, c, y, x));
          put_half(dx_mem.data(), at(strides, c, y, x), kNaN);
        }
    const Outputs want = run(p, false), ref = run(p, true);
    const TensorView input{in_mem.data(), DType::kFloat16, shape, strides};
    MutableTensorView dx{dx_mem.data(), DType::kFloat16, shape, strides};
    MutableTensorView out{out_mem.data(), DType::kFloat16, out_shape, out_strides};
    for (bool reference : {false, true}) {
      Tensor dgrid(DType::kFloat16, p.grid.shape());
      auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                           : &gridsampler::grid_sampler_2d_backward;
      auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
      const Outputs& expect = reference ? ref : want;
      const std::string what = describe(opt) + (reference ? " reference" : " kernels");
      Status s = bwd(p.grad.view(), input, p.grid.view(), dx, dgrid.mutable_view(), opt, {});
      ASSERT_TRUE(s.ok()) << what << ": " << s.message();
      s = fwd(input, p.grid.view(), out, opt);
      ASSERT_TRUE(s.ok()) << what << ": " << s.message();
      for (int64_t c = 0; c < 2; ++c) {
        for (int64_t y = 0; y < 3; ++y)
          for (int64_t x = 0; x < 3; ++x)
            EXPECT_EQ(get_half(dx_mem.data(), at(strides, c, y, x)), expect.dx.get(0, c, y, x)) << what;
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t w = 0; w < 5; ++w)
            EXPECT_EQ(get_half(out_mem.data(), at(out_strides, c, h, w)), expect.out.get(0, c, h, w)) << what;
      }
      EXPECT_EQ(dgrid.values(), expect.dgrid.values()) << what;
    }
    // And the kernels agree with the reference.
    EXPECT_LE(compare(want.out.values(), ref.out.values()).max_abs, tolerance(DType::kFloat16, 1, 4));
    EXPECT_LE(compare(want.dx.values(), ref.dx.values()).max_abs, tolerance(DType::kFloat16, 4, 4));
  }
}

// A real image of 46341 x 46341 float16 pixels (2^31 + 92681 elements: 4 GiB,
// sparse, only a few pixels set): row-major offsets past 2^31. Samples at
// pixel centres are exact; dgrid (dx would be the whole image) is checked in
// closed form.
TEST(LargeOffsets, ImageWithMoreThan2To31Pixels) {
  const int64_t kSide = 46341;
  const int64_t plane = kSide * kSide;
  ASSERT_GT(plane, int64_t{1} << 31);
  Sparse mem(static_cast<size_t>(plane) * 2);
  if (mem.data() == nullptr) GTEST_SKIP() << "cannot map 4 GiB of address space";
  const Shape4 shape{1, 1, kSide, kSide};
  const TensorView input{mem.data(), DType::kFloat16, shape, gridsampler::contiguous_strides(shape)};
  put_half(mem.data(), plane - 1, 3.0);                             // (kSide-1, kSide-1), past 2^31
  put_half(mem.data(), (kSide / 2) * kSide + kSide / 2, -2.0);      // the middle
  // align_corners=true: x = 1, 0, -1 are the centres of pixels kSide-1,
  // kSide/2 and 0 (exactly, in float32 arithmetic).
  Tensor grid(DType::kFloat16, {1, 1, 3, 2});
  const double xy[3] = {1.0, 0.0, -1.0};
  for (int i = 0; i < 3; ++i) {
    grid.set(0, 0, i, 0, xy[i]);
    grid.set(0, 0, i, 1, xy[i]);
  }
  auto half = [](double v) { return gridsampler::half_to_double(gridsampler::half_from_double(v)); };
  for (bool reference : {false, true}) {
    const std::string what = reference ? "reference" : "kernels";
    auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
    auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                         : &gridsampler::grid_sampler_2d_backward;
    for (Interpolation mode : {Interpolation::kNearest, Interpolation::kBilinear, Interpolation::kBicubic}) {
      Tensor out(DType::kFloat16, {1, 1, 1, 3});
      out.fill(kNaN);
      ASSERT_TRUE(fwd(input, grid.view(), out.mutable_view(), {mode, Padding::kZeros, true}).ok()) << what;
      EXPECT_EQ(out.get(0, 0, 0, 0), 3.0) << what;
      EXPECT_EQ(out.get(0, 0, 0, 1), -2.0) << what;
      EXPECT_EQ(out.get(0, 0, 0, 2), 0.0) << what;  // pixel (0, 0): never written
    }
    // dgrid only. Bilinear at a pixel centre differentiates one-sidedly
    // towards +x and +y: d out / d ix = v[y][x+1] - v[y][x], times
    // (kSide - 1) / 2 and the grad 0.5.
    Tensor grad(DType::kFloat16, {1, 1, 1, 3});
    grad.fill(0.5);
    Tensor dgrid(DType::kFloat16, {1, 1, 3, 2});
    dgrid.fill(kNaN);
    // One thread: the kernels' planner currently sets aside (Hin * Win + 1)
    // floats of scratch per thread even when dx is not wanted (see
    // AclnnHostile.DgridOnlyWorkspaceDoesNotGrowWithTheImage).
    Options opt{Interpolation::kBilinear, Padding::kZeros, true};
    opt.num_threads = 1;
    const Status s = bwd(grad.view(), input, grid.view(), MutableTensorView{}, dgrid.mutable_view(), opt,
                         {false, true});
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    const double slope = static_cast<double>(kSide - 1) / 2 * 0.5;
    EXPECT_EQ(dgrid.get(0, 0, 0, 0), half(-3.0 * slope)) << what;  // right neighbour outside: 0 - 3
    EXPECT_EQ(dgrid.get(0, 0, 0, 1), half(-3.0 * slope)) << what;
    EXPECT_EQ(dgrid.get(0, 0, 1, 0), half(2.0 * slope)) << what;  // 0 - (-2)
    EXPECT_EQ(dgrid.get(0, 0, 1, 1), half(2.0 * slope)) << what;
    EXPECT_EQ(dgrid.get(0, 0, 2, 0), 0.0) << what;
    EXPECT_EQ(dgrid.get(0, 0, 2, 1), 0.0) << what;
  }
}

// ---------------------------------------------------------------------------
// The aclnn interface: storage bounds with negative strides and offsets,
// sizes that overflow, and the rules of its own handles.

aclTensor* make(const std::vector<int64_t>& dims, aclDataType dt, const std::vector<int64_t>* strides,
                int64_t offset, const std::vector<int64_t>& storage, void* data) {
  return aclCreateTensor(dims.data(), dims.size(), dt, strides ? strides->data() : nullptr, offset, ACL_FORMAT_ND,
                         storage.data(), storage.size(), data);
}

// A valid float32 backward: grad (1, 2, 2, 3), input (1, 2, 3, 4), grid
// (1, 2, 3, 2), dx and dgrid pre-filled with 9.
struct Acl {
  std::vector<float> grad, input, grid, dx, dgrid;
  aclTensor *g = nullptr, *x = nullptr, *gr = nullptr, *d = nullptr, *dg = nullptr;
  Acl() : grad(12, 0.5f), input(24), grid(12), dx(24, 9.0f), dgrid(12, 9.0f) {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 7) - 3;
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<float>(i % 5) * 0.4f - 0.8f;
    g = make({1, 2, 2, 3}, ACL_FLOAT, nullptr, 0, {12}, grad.data());
    x = make({1, 2, 3, 4}, ACL_FLOAT, nullptr, 0, {24}, input.data());
    gr = make({1, 2, 3, 2}, ACL_FLOAT, nullptr, 0, {12}, grid.data());
    d = make({1, 2, 3, 4}, ACL_FLOAT, nullptr, 0, {24}, dx.data());
    dg = make({1, 2, 3, 2}, ACL_FLOAT, nullptr, 0, {12}, dgrid.data());
  }
  ~Acl() {
    for (aclTensor* t : {g, x, gr, d, dg}) aclDestroyTensor(t);
  }
  Acl(const Acl&) = delete;
  Acl& operator=(const Acl&) = delete;
  bool outputs_untouched() const {
    return dx == std::vector<float>(24, 9.0f) && dgrid == std::vector<float>(12, 9.0f);
  }
};

// Plans and, if that succeeds, runs a backward (bilinear, zeros); returns the
// first failure.
aclnnStatus acl_backward(aclTensor* g, aclTensor* x, aclTensor* gr, aclTensor* d, aclTensor* dg,
                         const aclBoolArray* mask = nullptr) {
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  const aclnnStatus s = aclnnGridSampler2DBackwardGetWorkspaceSize(g, x, gr, 0, 0, false, mask, d, dg, &ws, &exec);
  if (s != ACLNN_SUCCESS) return s;
  void* w = nullptr;
  if (ws > 0 && aclrtMalloc(&w, ws, ACL_MEM_MALLOC_NORMAL_ONLY) != ACL_SUCCESS) return ACLNN_ERR_INNER;
  const aclnnStatus r = aclnnGridSampler2DBackward(w, ws, exec, nullptr);
  aclrtFree(w);
  return r;
}

TEST(AclnnHostile, StorageBoundsWithNegativeStridesAndOffsets) {
  struct Case {
    const char* name;
    std::vector<int64_t> strides;  // empty: NULL (row-major)
    int64_t offset;
    std::vector<int64_t> storage;
    aclnnStatus code;
    std::string message;
  };
  const std::vector<int64_t> reversed_w{12, 12, 4, -1};
  const Case cases[] = {
      {"W backwards from element 0", reversed_w, 0, {24}, ACLNN_ERR_PARAM_INVALID,
       "input: view reaches elements -3..20 outside its storage of 24 elements"},
      {"W backwards, one too far", reversed_w, 4, {24}, ACLNN_ERR_PARAM_INVALID,
       "input: view reaches elements 1..24 outside its storage of 24 elements"},
      {"H backwards from element 0", {12, 12, -4, 1}, 0, {24}, ACLNN_ERR_PARAM_INVALID,
       "input: view reaches elements -8..15 outside"},
      {"negative offset", {}, -1, {24}, ACLNN_ERR_PARAM_INVALID, "input: view reaches elements -1..22 outside"},
      {"offset INT64_MIN", {}, std::numeric_limits<int64_t>::min(), {24}, ACLNN_ERR_PARAM_INVALID, "input: "},
      {"offset past the end", {}, std::numeric_limits<int64_t>::max() - 10, {24}, ACLNN_ERR_PARAM_INVALID,
       "input: strides overflow 64 bits"},
      {"empty storage", {}, 0, {0}, ACLNN_ERR_PARAM_INVALID, "outside its storage of 0 elements"},
      {"negative storage", {}, 0, {-24}, ACLNN_ERR_PARAM_INVALID, "input: negative storage dimension"},
      {"storage overflows", {}, 0, {int64_t{1} << 62, 4}, ACLNN_ERR_PARAM_INVALID,
       "input: storage size overflows 64 bits"},
      {"stride INT64_MIN", {12, 12, std::numeric_limits<int64_t>::min(), 1}, 0, {24}, ACLNN_ERR_PARAM_INVALID,
       "input: strides overflow 64 bits"},
      {"stride reach overflows", {12, 12, int64_t{1} << 62, 1}, 0, {24}, ACLNN_ERR_PARAM_INVALID,
       "input: strides overflow 64 bits"},
      {"negative stride reach overflows", {12, 12, -(int64_t{1} << 62), 1}, int64_t{1} << 62, {24},
       ACLNN_ERR_PARAM_INVALID, "input: "},
  };
  for (const Case& c : cases) {
    Acl a;
    aclTensor* bad = make({1, 2, 3, 4}, ACL_FLOAT, c.strides.empty() ? nullptr : &c.strides, c.offset, c.storage,
                          a.input.data());
    ASSERT_NE(bad, nullptr) << c.name << ": " << aclGetRecentErrMsg();
    EXPECT_EQ(acl_backward(a.g, bad, a.gr, a.d, a.dg), c.code) << c.name << ": " << aclGetRecentErrMsg();
    EXPECT_TRUE(contains(aclGetRecentErrMsg(), c.message))
        << c.name << ": message '" << aclGetRecentErrMsg() << "' lacks '" << c.message << "'";
    EXPECT_TRUE(a.outputs_untouched()) << c.name;
    aclDestroyTensor(bad);
  }
  // In bounds with W backwards (offset 3): the same results as the C++ API
  // on the mirrored copy.
  Acl a;
  aclTensor* rev = make({1, 2, 3, 4}, ACL_FLOAT, &reversed_w, 3, {24}, a.input.data());
  ASSERT_EQ(acl_backward(a.g, rev, a.gr, a.d, a.dg), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  std::vector<float> mirrored(24), dx(24), dgrid(12);
  for (int row = 0; row < 6; ++row)
    for (int w = 0; w < 4; ++w) mirrored[static_cast<size_t>(row * 4 + w)] = a.input[static_cast<size_t>(row * 4 + 3 - w)];
  ASSERT_TRUE(gridsampler::grid_sampler_2d_backward(
                  TensorView::contiguous(a.grad.data(), DType::kFloat32, {1, 2, 2, 3}),
                  TensorView::contiguous(mirrored.data(), DType::kFloat32, {1, 2, 3, 4}),
                  TensorView::contiguous(a.grid.data(), DType::kFloat32, {1, 2, 3, 2}),
                  MutableTensorView::contiguous(dx.data(), DType::kFloat32, {1, 2, 3, 4}),
                  MutableTensorView::contiguous(dgrid.data(), DType::kFloat32, {1, 2, 3, 2}))
                  .ok());
  EXPECT_EQ(a.dx, dx);
  EXPECT_EQ(a.dgrid, dgrid);
  aclDestroyTensor(rev);
}

// A storage that claims more than 2^63 bytes (2^62 float32 elements, view at
// offset 2^62 - 24): every element offset fits in int64, the byte offset does
// not. It must be refused before any pointer arithmetic.
TEST(AclnnHostile, StorageBeyond2To63Bytes) {
  Acl a;
  const int64_t elems = int64_t{1} << 62;
  aclTensor* big = make({1, 2, 3, 4}, ACL_FLOAT, nullptr, elems - 24, {elems}, a.input.data());
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(acl_backward(a.g, big, a.gr, a.d, a.dg), ACLNN_ERR_PARAM_INVALID) << aclGetRecentErrMsg();
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "input: ")) << aclGetRecentErrMsg();
  EXPECT_TRUE(a.outputs_untouched());
  aclDestroyTensor(big);
}

// NULL strides mean row-major; dims whose row-major strides overflow int64
// must be refused (by aclCreateTensor or when planning), not wrapped.
TEST(AclnnHostile, RowMajorStridesThatOverflow) {
  Acl a;
  const int64_t k = int64_t{1} << 40;
  const std::vector<int64_t> dims{k, k, k, 2}, storage{1};
  aclTensor* t = make(dims, ACL_FLOAT, nullptr, 0, storage, a.grid.data());
  if (t == nullptr) {
    EXPECT_TRUE(contains(aclGetRecentErrMsg(), "aclCreateTensor")) << aclGetRecentErrMsg();
    return;
  }
  EXPECT_EQ(acl_backward(a.g, a.x, t, a.d, a.dg), ACLNN_ERR_PARAM_INVALID);
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "grid: ")) << aclGetRecentErrMsg();
  EXPECT_TRUE(a.outputs_untouched());
  aclDestroyTensor(t);
}

TEST(AclnnHostile, ForwardErrorsNameOut) {
  Acl a;
  std::vector<float> out(12, 9.0f), out18(18, 9.0f);
  std::vector<double> out64(12, 9.0);
  aclTensor* o = make({1, 2, 2, 3}, ACL_FLOAT, nullptr, 0, {12}, out.data());
  aclTensor* o_shape = make({1, 2, 3, 3}, ACL_FLOAT, nullptr, 0, {18}, out18.data());
  aclTensor* o_over = make({1, 2, 2, 3}, ACL_FLOAT, nullptr, 0, {24}, a.input.data());
  aclTensor* o_f64 = make({1, 2, 2, 3}, ACL_DOUBLE, nullptr, 0, {12}, out64.data());
  struct Case {
    const char* name;
    aclTensor *input, *grid, *out;
    aclnnStatus code;
    const char* message;
  };
  const Case cases[] = {
      {"null out", a.x, a.gr, nullptr, ACLNN_ERR_PARAM_NULLPTR, "out: tensor is null"},
      {"null grid", a.x, nullptr, o, ACLNN_ERR_PARAM_NULLPTR, "grid: tensor is null"},
      {"out shape", a.x, a.gr, o_shape, ACLNN_ERR_PARAM_INVALID, "out: shape (1, 2, 3, 3) must be (1, 2, 2, 3)"},
      {"out over input", a.x, a.gr, o_over, ACLNN_ERR_PARAM_INVALID, "out: memory overlaps input"},
      {"out dtype", a.x, a.gr, o_f64, ACLNN_ERR_PARAM_INVALID, "out: dtype float64 differs from input's float32"},
  };
  const std::vector<float> input_before = a.input;
  for (const Case& c : cases) {
    uint64_t ws = 7;
    aclOpExecutor* exec = nullptr;
    EXPECT_EQ(aclnnGridSampler2DGetWorkspaceSize(c.input, c.grid, 0, 0, false, c.out, &ws, &exec), c.code)
        << c.name << ": " << aclGetRecentErrMsg();
    EXPECT_TRUE(contains(aclGetRecentErrMsg(), c.message)) << c.name << ": " << aclGetRecentErrMsg();
    EXPECT_EQ(out, std::vector<float>(12, 9.0f)) << c.name;
    EXPECT_EQ(out18, std::vector<float>(18, 9.0f)) << c.name;
    EXPECT_EQ(out64, std::vector<double>(12, 9.0)) << c.name;
    EXPECT_EQ(a.input, input_before) << c.name;
  }
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  EXPECT_EQ(aclnnGridSampler2DGetWorkspaceSize(a.x, a.gr, 0, 0, false, o, nullptr, &exec), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclnnGridSampler2DGetWorkspaceSize(a.x, a.gr, 0, 0, false, o, &ws, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  // A forward plan is refused by the backward's phase two, and consumed.
  ASSERT_EQ(aclnnGridSampler2DGetWorkspaceSize(a.x, a.gr, 0, 0, false, o, &ws, &exec), ACLNN_SUCCESS);
  EXPECT_EQ(aclnnGridSampler2DBackward(nullptr, 0, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "other grid sampler operator")) << aclGetRecentErrMsg();
  EXPECT_EQ(aclnnGridSampler2D(nullptr, 0, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(out, std::vector<float>(12, 9.0f));
  for (aclTensor* t : {o, o_shape, o_over, o_f64}) aclDestroyTensor(t);
}

TEST(AclnnHostile, MasksAndHandles) {
  Acl a;
  // A mask of no values, a destroyed mask.
  aclBoolArray* empty = aclCreateBoolArray(nullptr, 0);
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(acl_backward(a.g, a.x, a.gr, a.d, a.dg, empty), ACLNN_ERR_PARAM_INVALID);
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "outputMask: expected 2 values, got 0")) << aclGetRecentErrMsg();
  EXPECT_EQ(aclDestroyBoolArray(empty), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyBoolArray(empty), ACLNN_ERR_PARAM_INVALID);  // twice
  const bool both[2] = {true, true};
  aclBoolArray* dead = aclCreateBoolArray(both, 2);
  ASSERT_EQ(aclDestroyBoolArray(dead), ACLNN_SUCCESS);
  aclBoolArray* live = aclCreateBoolArray(both, 2);  // keeps `dead`'s address from being reused below
  if (dead != live) {
    EXPECT_EQ(acl_backward(a.g, a.x, a.gr, a.d, a.dg, dead), ACLNN_ERR_PARAM_INVALID);
    EXPECT_TRUE(contains(aclGetRecentErrMsg(), "outputMask: not a live bool array")) << aclGetRecentErrMsg();
  }
  aclDestroyBoolArray(live);
  EXPECT_EQ(aclCreateBoolArray(nullptr, 2), nullptr);
  // The wanted output missing: gridGrad.
  EXPECT_EQ(acl_backward(a.g, a.x, a.gr, a.d, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "gridGrad: tensor is null")) << aclGetRecentErrMsg();
  // A wanted output of rank 5.
  std::vector<float> five(24, 9.0f);
  aclTensor* rank5 = make({1, 1, 2, 3, 4}, ACL_FLOAT, nullptr, 0, {24}, five.data());
  EXPECT_EQ(acl_backward(a.g, a.x, a.gr, rank5, a.dg), ACLNN_ERR_PARAM_INVALID);
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "inputGrad: expected 4 dimensions, got 5")) << aclGetRecentErrMsg();
  EXPECT_EQ(five, std::vector<float>(24, 9.0f));
  aclDestroyTensor(rank5);
  EXPECT_TRUE(a.outputs_untouched());
  // Nothing wanted: both outputs may be NULL; the call succeeds and writes nothing.
  const bool none[2] = {false, false};
  aclBoolArray* m = aclCreateBoolArray(none, 2);
  EXPECT_EQ(acl_backward(a.g, a.x, a.gr, nullptr, nullptr, m), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_EQ(acl_backward(a.g, a.x, a.gr, a.d, a.dg, m), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_TRUE(a.outputs_untouched());
  aclDestroyBoolArray(m);
  // Tensors: more than 8 dimensions, NULL dims, destroyed twice.
  const std::vector<int64_t> nine(9, 1);
  EXPECT_EQ(aclCreateTensor(nine.data(), 9, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nine.data(), 1, a.dx.data()),
            nullptr);
  EXPECT_TRUE(contains(aclGetRecentErrMsg(), "more than 8 dimensions")) << aclGetRecentErrMsg();
  EXPECT_EQ(aclCreateTensor(nullptr, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nine.data(), 1, a.dx.data()), nullptr);
  aclTensor* t = make({1, 1, 1, 1}, ACL_FLOAT, nullptr, 0, {1}, a.dx.data());
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_ERR_PARAM_INVALID);
}

// The workspace of a 16-bit backward at odd alignments: 64, 4 and 2 bytes.
// Each is either refused (a "workspace: " message, the executor consumed,
// nothing written) or accepted with the same bits as the 64-byte aligned run.
TEST(AclnnHostile, WorkspaceAlignment) {
  std::vector<uint16_t> grad(12), input(24), grid(12);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = gridsampler::half_from_double(0.25 * (i % 5)).bits;
  for (size_t i = 0; i < input.size(); ++i) input[i] = gridsampler::half_from_double(0.5 * (i % 7) - 1).bits;
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = gridsampler::half_from_double(0.375 * (i % 6) - 1).bits;
  aclTensor* g = make({1, 2, 2, 3}, ACL_FLOAT16, nullptr, 0, {12}, grad.data());
  aclTensor* x = make({1, 2, 3, 4}, ACL_FLOAT16, nullptr, 0, {24}, input.data());
  aclTensor* gr = make({1, 2, 3, 2}, ACL_FLOAT16, nullptr, 0, {12}, grid.data());
  std::vector<uint16_t> dx64, dg64;
  for (int shift : {0, 4, 2}) {
    std::vector<uint16_t> dx(24, 0x7e00), dg(12, 0x7e00);
    aclTensor* d = make({1, 2, 3, 4}, ACL_FLOAT16, nullptr, 0, {24}, dx.data());
    aclTensor* dgt = make({1, 2, 3, 2}, ACL_FLOAT16, nullptr, 0, {12}, dg.data());
    uint64_t ws = 0;
    aclOpExecutor* exec = nullptr;
    ASSERT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g, x, gr, 2, 1, true, nullptr, d, dgt, &ws, &exec),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    ASSERT_GT(ws, 0u);
    std::vector<unsigned char> buf(ws + 128);
    unsigned char* w = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64 + shift;
    const aclnnStatus s = aclnnGridSampler2DBackward(w, ws, exec, nullptr);
    if (shift == 0) {
      ASSERT_EQ(s, ACLNN_SUCCESS) << aclGetRecentErrMsg();
      dx64 = dx;
      dg64 = dg;
    } else if (s == ACLNN_SUCCESS) {
      EXPECT_EQ(dx, dx64) << "workspace at +" << shift;
      EXPECT_EQ(dg, dg64) << "workspace at +" << shift;
    } else {
      EXPECT_EQ(s, ACLNN_ERR_PARAM_INVALID);
      EXPECT_TRUE(contains(aclGetRecentErrMsg(), "workspace: ")) << aclGetRecentErrMsg();
      EXPECT_EQ(dx, std::vector<uint16_t>(24, 0x7e00));
      EXPECT_EQ(aclnnGridSampler2DBackward(w, ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);  // consumed
    }
    aclDestroyTensor(d);
    aclDestroyTensor(dgt);
  }
  for (aclTensor* t : {g, x, gr}) aclDestroyTensor(t);
}

// Without dx, the backward needs no accumulators the size of the image: its
// workspace must not grow with Hin * Win (a 2^20 x 2^20 image, one pixel
// repeated through zero strides; a few output pixels).
TEST(AclnnHostile, DgridOnlyWorkspaceDoesNotGrowWithTheImage) {
  std::vector<float> pixel(1, 1.0f), grad(4, 1.0f), grid(8, 0.25f), dgrid(8, 9.0f);
  const std::vector<int64_t> zero{0, 0, 0, 0};
  const int64_t side = int64_t{1} << 20;
  aclTensor* x = make({1, 1, side, side}, ACL_FLOAT, &zero, 0, {1}, pixel.data());
  aclTensor* g = make({1, 1, 2, 2}, ACL_FLOAT, nullptr, 0, {4}, grad.data());
  aclTensor* gr = make({1, 2, 2, 2}, ACL_FLOAT, nullptr, 0, {8}, grid.data());
  aclTensor* dg = make({1, 2, 2, 2}, ACL_FLOAT, nullptr, 0, {8}, dgrid.data());
  const bool dgrid_only[2] = {false, true};
  aclBoolArray* mask = aclCreateBoolArray(dgrid_only, 2);
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  ASSERT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g, x, gr, 0, 0, false, mask, nullptr, dg, &ws, &exec),
            ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  EXPECT_LT(ws, uint64_t{64} << 20) << "workspace of " << ws << " bytes for 4 output pixels";
  void* w = nullptr;
  if (ws <= (uint64_t{64} << 20) && ws > 0) {
    ASSERT_EQ(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
  }
  // Run it when the workspace is reasonable; otherwise consume the executor.
  int junk = 0;
  const aclnnStatus s = aclnnGridSampler2DBackward(w, ws, exec, w != nullptr || ws == 0 ? nullptr : &junk);
  if (w != nullptr || ws == 0) {
    EXPECT_EQ(s, ACLNN_SUCCESS) << aclGetRecentErrMsg();
    // A constant image: every dgrid value is 0.
    EXPECT_EQ(dgrid, std::vector<float>(8, 0.0f));
  }
  aclrtFree(w);
  aclDestroyBoolArray(mask);
  for (aclTensor* t : {x, g, gr, dg}) aclDestroyTensor(t);
}

// float64: a workspace aligned to 4 bytes but not 8 is accepted (the
// contract asks for 4), so the kernels must not assume more.
TEST(AclnnHostile, Float64WorkspaceAlignedTo4Only) {
  std::vector<double> grad(12), input(24), grid(12), dx1(24, 9), dg1(12, 9), dx2(24, 9), dg2(12, 9);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.25 * static_cast<double>(i % 5);
  for (size_t i = 0; i < input.size(); ++i) input[i] = 0.5 * static_cast<double>(i % 7) - 1;
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = 0.375 * static_cast<double>(i % 6) - 1;
  aclTensor* g = make({1, 2, 2, 3}, ACL_DOUBLE, nullptr, 0, {12}, grad.data());
  aclTensor* x = make({1, 2, 3, 4}, ACL_DOUBLE, nullptr, 0, {24}, input.data());
  aclTensor* gr = make({1, 2, 3, 2}, ACL_DOUBLE, nullptr, 0, {12}, grid.data());
  aclTensor* d1 = make({1, 2, 3, 4}, ACL_DOUBLE, nullptr, 0, {24}, dx1.data());
  aclTensor* g1 = make({1, 2, 3, 2}, ACL_DOUBLE, nullptr, 0, {12}, dg1.data());
  aclTensor* d2 = make({1, 2, 3, 4}, ACL_DOUBLE, nullptr, 0, {24}, dx2.data());
  aclTensor* g2 = make({1, 2, 3, 2}, ACL_DOUBLE, nullptr, 0, {12}, dg2.data());
  uint64_t ws = 0;
  std::vector<unsigned char> buf(1 << 16);
  unsigned char* aligned64 = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
  for (auto [d, dg, w] : {std::tuple{d1, g1, aligned64}, std::tuple{d2, g2, aligned64 + 4}}) {
    aclOpExecutor* exec = nullptr;
    ASSERT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g, x, gr, 0, 2, false, nullptr, d, dg, &ws, &exec),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    ASSERT_LE(ws + 68, buf.size());
    EXPECT_EQ(aclnnGridSampler2DBackward(ws ? w : nullptr, ws, exec, nullptr), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  }
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dg1, dg2);
  for (aclTensor* t : {g, x, gr, d1, g1, d2, g2}) aclDestroyTensor(t);
}

// Data pointers that are not aligned to the element size are refused (the
// kernels load whole elements), naming the tensor; nothing is written.
TEST(HostileValues, MisalignedData) {
  Problem p = Problem::random({1, 2, 3, 4, 2, 3}, DType::kFloat32, {}, 5);
  alignas(64) unsigned char raw[4 * 24 + 8] = {};
  unsigned char* in = raw + 2;  // 2 bytes off
  Tensor out(DType::kFloat32, p.grad.shape());
  out.fill(kNaN);
  const auto before = out.storage();
  Status s = gridsampler::grid_sampler_2d(TensorView::contiguous(in, DType::kFloat32, {1, 2, 3, 4}),
                                          p.grid.view(), out.mutable_view(), {});
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_EQ(s.message(), "input: data is not aligned to its element size (4 bytes)");
  EXPECT_EQ(out.storage(), before);
  // An output, float64, 4 bytes off.
  alignas(64) unsigned char raw_dgrid[8 * 12 + 8];
  std::memset(raw_dgrid, 0x7f, sizeof raw_dgrid);
  Problem q = Problem::random({1, 2, 3, 4, 2, 3}, DType::kFloat64, {}, 5);
  Tensor dx(DType::kFloat64, q.input.shape());
  dx.fill(kNaN);
  const auto dx_before = dx.storage();
  s = gridsampler::grid_sampler_2d_backward(
      q.grad.view(), q.input.view(), q.grid.view(), dx.mutable_view(),
      MutableTensorView::contiguous(raw_dgrid + 4, DType::kFloat64, {1, 2, 3, 2}), {}, {true, true});
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_EQ(s.message(), "dgrid: data is not aligned to its element size (8 bytes)");
  for (unsigned char b : raw_dgrid) ASSERT_EQ(b, 0x7f);
  EXPECT_EQ(dx.storage(), dx_before);
}

// ---------------------------------------------------------------------------
// The command-line tool on files that are not regular .npy files.

struct CliResult {
  int status = -1;
  std::string err;
};

CliResult cli(const std::vector<std::string>& args, const TempDir& capture) {
  std::string cmd = "timeout 60 '" GS_CLI_PATH "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  const std::string err_path = capture.file("stderr.txt");
  cmd += " >/dev/null 2>'" + err_path + "' </dev/null";
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream f(err_path);
  r.err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return r;
}

void save_f32(const std::string& path, std::vector<int64_t> shape, const std::vector<float>& v) {
  gridsampler::npy::Array a;
  a.dtype = DType::kFloat32;
  a.shape = std::move(shape);
  a.data.resize(v.size() * 4);
  std::memcpy(a.data.data(), v.data(), a.data.size());
  ASSERT_TRUE(gridsampler::npy::write(path, a).ok());
}

TEST(CliHostile, NotRegularFilesAndTruncatedData) {
  TempDir dir, capture;
  const std::string x = dir.file("x.npy"), g = dir.file("g.npy"), y = dir.file("y.npy");
  save_f32(x, {1, 1, 2, 2}, {1, 2, 3, 4});
  save_f32(g, {1, 1, 1, 2}, {0, 0});
  const std::string folder = dir.file("folder.npy");
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  const std::string fifo = dir.file("fifo.npy");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // A truncated copy of x.npy (the last 4 bytes missing).
  const std::string cut = dir.file("cut.npy");
  {
    std::ifstream in(x, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  }
  const std::set<std::string> before = dir.files();
  struct Case {
    std::string input, grid, out, message;
  };
  const Case cases[] = {
      {folder, g, y, folder + ": is a directory"},
      {fifo, g, y, fifo + ": not a regular file"},
      {cut, g, y, cut + ": truncated data"},
      {x, "/dev/null", y, "/dev/null: "},
      {x, g, folder, folder},  // the output names a folder
  };
  for (const Case& c : cases) {
    const CliResult r = cli({"forward", "--input", c.input, "--grid", c.grid, "--out", c.out}, capture);
    EXPECT_EQ(r.status, 2) << c.message << ": " << r.err;
    EXPECT_EQ(r.err.rfind("gridsampler: error: ", 0), 0u) << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << "stderr '" << r.err << "' lacks '" << c.message << "'";
    EXPECT_EQ(dir.files(), before) << c.message << ": a file was created or removed";
  }
  EXPECT_TRUE(std::filesystem::is_empty(folder));
}

// Non-finite grids through the tool give the values docs/design.md §2 defines:
// border maps NaN and -Inf to the first pixel and +Inf to the last.
TEST(CliHostile, NonFiniteGridValues) {
  TempDir dir, capture;
  const std::string x = dir.file("x.npy"), g = dir.file("g.npy"), y = dir.file("y.npy");
  save_f32(x, {1, 1, 2, 2}, {1, 2, 3, 4});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  save_f32(g, {1, 1, 4, 2}, {nan, nan, -inf, -inf, inf, inf, nan, inf});
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    const CliResult r = cli({"forward", "--input", x, "--grid", g, "--out", y, "--padding", "border", "--mode", mode,
                             "--align-corners"},
                            capture);
    ASSERT_EQ(r.status, 0) << mode << ": " << r.err;
    gridsampler::npy::Array out;
    ASSERT_TRUE(gridsampler::npy::read(y, &out).ok());
    ASSERT_EQ(out.shape, (std::vector<int64_t>{1, 1, 1, 4}));
    std::vector<float> v(4);
    std::memcpy(v.data(), out.data.data(), 16);
    EXPECT_EQ(v, (std::vector<float>{1, 1, 4, 3})) << mode;  // (0,0), (0,0), (1,1), (x=0, y=1)
  }
}

}  // namespace
}  // namespace gstest
