// End-to-end tests of the `gridsampler` command-line tool: runs the built
// binary (GS_CLI_PATH) on .npy files and checks the files it writes against
// values computed independently here.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

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
#include <vector>

#include "core/half.hpp"
#include "host/tensor.hpp"
#include "reference/reference.hpp"
#include "common/run_cli.hpp"
#include "common/temp_dir.hpp"
#include "host/element_access.hpp"
#include "io/npy.hpp"

namespace gridsampler {
namespace {

namespace fs = std::filesystem;
namespace gs = gridsampler;

using gstest::TempDir;

using Result = gstest::CliResult;
using gstest::expect_error;
using gstest::run;

void save(const std::string& path, DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  npy::Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  ASSERT_EQ(static_cast<std::size_t>(a.numel()), values.size());
  const std::size_t size = gridsampler::dtype_size(dtype);
  a.data.resize(values.size() * size);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::byte* p = a.data.data() + i * size;
    gridsampler::host::store_element(p, dtype, values[i]);
    const double stored = gridsampler::host::load_element(p, dtype);
    ASSERT_TRUE(stored == values[i] || (std::isnan(stored) && std::isnan(values[i])))
        << "test value not exact in " << gridsampler::to_string(dtype);
  }
  const Status s = npy::write(path, a);
  ASSERT_TRUE(s.ok()) << s.message();
}

struct Loaded {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

Loaded load(const std::string& path) {
  npy::Array a;
  const Status s = npy::read(path, &a);
  EXPECT_TRUE(s.ok()) << s.message();
  Loaded l;
  l.dtype = a.dtype;
  l.shape = a.shape;
  const int64_t n = s.ok() ? a.numel() : 0;
  const std::size_t size = gridsampler::dtype_size(a.dtype);
  for (int64_t i = 0; i < n; ++i) {
    l.values.push_back(gridsampler::host::load_element(a.data.data() + static_cast<std::size_t>(i) * size, a.dtype));
  }
  return l;
}

// An align_corners identity grid (N, H, W, 2): sample point (h, w) is the
// centre of pixel (h, w). With H-1 and W-1 powers of two every coordinate is
// exact in every dtype.
std::vector<double> identity_grid(int64_t n, int64_t h, int64_t w) {
  std::vector<double> g;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        g.push_back(-1.0 + 2.0 * static_cast<double>(j) / static_cast<double>(w - 1));
        g.push_back(-1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(h - 1));
      }
    }
  }
  return g;
}

std::vector<double> ramp_values(std::size_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<double>(i % 37) + offset;
  return v;
}

// ---------------------------------------------------------------------------
// Forward.

class cliForwardIdentity : public ::testing::TestWithParam<DType> {};

TEST_P(cliForwardIdentity, AlignCornersIdentityGridReturnsInput) {
  TempDir dir;
  const DType dtype = GetParam();
  const std::vector<double> x = ramp_values(2 * 3 * 3 * 5, 0.25, -2.0);
  save(dir.file("x.npy"), dtype, {2, 3, 3, 5}, x);
  save(dir.file("g.npy"), dtype, {2, 3, 5, 2}, identity_grid(2, 3, 5));
  const Result r = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                        dir.file("y.npy"), "--align-corners"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const Loaded y = load(dir.file("y.npy"));
  EXPECT_EQ(y.dtype, dtype);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 3, 3, 5}));
  EXPECT_EQ(y.values, x);
}

INSTANTIATE_TEST_SUITE_P(dtypes, cliForwardIdentity,
                         ::testing::Values(DType::kFloat16, DType::kFloat32, DType::kFloat64),
                         [](const ::testing::TestParamInfo<DType>& param_info) {
                           return param_info.param == DType::kFloat16   ? std::string("float16")
                                  : param_info.param == DType::kFloat32 ? std::string("float32")
                                                                  : std::string("float64");
                         });

// A 2x2 image [[1, 2], [3, 4]] sampled at four points (align_corners off:
// x = -0.5 is the centre of column 0, x = 0.5 of column 1, x = 0 the middle,
// x = 2 is 2.5 pixels in, past the right edge).
struct SampleCase {
  std::vector<std::string> flags;
  std::vector<double> expected;
};

TEST(cliForward, KnownValuesForEveryMode) {
  TempDir dir;
  save(dir.file("x.npy"), DType::kFloat64, {1, 1, 2, 2}, {1, 2, 3, 4});
  save(dir.file("g.npy"), DType::kFloat64, {1, 1, 4, 2}, {0, 0, -0.5, -0.5, 0.5, -0.5, 2.0, -0.5});
  // Bicubic at the middle of a 2x2 image with zero padding: the taps at -1
  // and 2 read zeros, and the inner taps weigh ((A+2)t - (A+3))t^2 + 1 at
  // t = 0.5, A = -0.75, i.e. 0.59375 in each direction.
  const double bicubic_mid = 0.59375 * 0.59375 * (1 + 2 + 3 + 4);
  const std::vector<SampleCase> cases = {
      {{}, {2.5, 1, 2, 0}},
      {{"--mode", "bilinear", "--padding", "zeros"}, {2.5, 1, 2, 0}},
      {{"--padding", "border"}, {2.5, 1, 2, 2}},
      // 2.5 reflects about 1.5 (the outer edge) to 0.5: between 1 and 2.
      {{"--padding", "reflection"}, {2.5, 1, 2, 1.5}},
      // Ties round to even: 0.5 -> 0.
      {{"--mode", "nearest"}, {1, 1, 2, 0}},
      // At x = 2 (ix = 2.5) only the tap at column 1 is inside, weight
      // ((A t - 5A) t + 8A) t - 4A at t = 1.5, i.e. -0.09375.
      {{"--mode", "bicubic"}, {bicubic_mid, 1, 2, -0.09375 * 2}},
  };
  for (const SampleCase& c : cases) {
    std::vector<std::string> args = {"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"),
                                     "--out", dir.file("y.npy")};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const Result r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    const Loaded y = load(dir.file("y.npy"));
    EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 1, 1, 4}));
    ASSERT_EQ(y.values.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(y.values[i], c.expected[i], 1e-12) << "point " << i << " flags " << ::testing::PrintToString(c.flags);
    }
  }
}

// --dtype converts every input with a single rounding from its file dtype.
// 1 + 2^-8 + 2^-30 rounds to bfloat16 1 + 2^-7 directly, but to 1 through
// float32 (which drops 2^-30 and leaves a tie that rounds to even).
TEST(cliForward, DtypeConversionRoundsOnce) {
  TempDir dir;
  const double bf_case = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  const double f16_case = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const std::vector<double> x = {bf_case, f16_case, -bf_case, 0.1, 3.0, -7.75};
  save(dir.file("x.npy"), DType::kFloat64, {1, 1, 2, 3}, x);
  save(dir.file("g.npy"), DType::kFloat64, {1, 2, 3, 2}, identity_grid(1, 2, 3));

  const Result bf = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                         dir.file("bf.npy"), "--align-corners", "--dtype", "bf16"});
  ASSERT_EQ(bf.status, 0) << bf.err;
  const Loaded ybf = load(dir.file("bf.npy"));
  EXPECT_EQ(ybf.dtype, DType::kFloat32);  // bfloat16 widened to float32 in the file
  ASSERT_EQ(ybf.values.size(), x.size());
  EXPECT_EQ(ybf.values[0], 1.0078125);
  EXPECT_EQ(ybf.values[2], -1.0078125);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(ybf.values[i], bfloat16_to_double(bfloat16_from_double(x[i]))) << i;
  }

  const Result h = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                        dir.file("h.npy"), "--align-corners", "--dtype", "float16"});
  ASSERT_EQ(h.status, 0) << h.err;
  const Loaded yh = load(dir.file("h.npy"));
  EXPECT_EQ(yh.dtype, DType::kFloat16);
  ASSERT_EQ(yh.values.size(), x.size());
  EXPECT_EQ(yh.values[1], 1.0 + std::ldexp(1.0, -10));
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(yh.values[i], half_to_double(half_from_double(x[i]))) << i;
  }

  const Result f = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                        dir.file("f.npy"), "--align-corners", "--dtype", "f32"});
  ASSERT_EQ(f.status, 0) << f.err;
  const Loaded yf = load(dir.file("f.npy"));
  EXPECT_EQ(yf.dtype, DType::kFloat32);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(yf.values[i], static_cast<double>(static_cast<float>(x[i])));
}

TEST(cliForward, MixedDtypesNeedDtypeFlag) {
  TempDir dir;
  save(dir.file("x.npy"), DType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
  save(dir.file("g.npy"), DType::kFloat64, {1, 1, 1, 2}, {0, 0});
  const std::vector<std::string> base = {"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"),
                                         "--out", dir.file("y.npy")};
  expect_error(run(base), "mixed dtypes: input is float32, grid is float64");
  EXPECT_EQ(dir.files(), (std::set<std::string>{"x.npy", "g.npy"}));
  std::vector<std::string> with = base;
  with.insert(with.end(), {"--dtype", "f64"});
  const Result r = run(with);
  ASSERT_EQ(r.status, 0) << r.err;
  const Loaded y = load(dir.file("y.npy"));
  EXPECT_EQ(y.dtype, DType::kFloat64);
  EXPECT_EQ(y.values, (std::vector<double>{2.5}));
}

// ---------------------------------------------------------------------------
// Backward.

TEST(cliBackward, IdentityGridDxEqualsGrad) {
  TempDir dir;
  const std::vector<double> x = ramp_values(2 * 3 * 3 * 5, 0.5, 1.0);
  const std::vector<double> go = ramp_values(2 * 3 * 3 * 5, -0.125, 2.0);
  save(dir.file("x.npy"), DType::kFloat32, {2, 3, 3, 5}, x);
  save(dir.file("go.npy"), DType::kFloat32, {2, 3, 3, 5}, go);
  save(dir.file("g.npy"), DType::kFloat32, {2, 3, 5, 2}, identity_grid(2, 3, 5));
  const Result r = run({"backward", "--grad", dir.file("go.npy"), "--input", dir.file("x.npy"), "--grid",
                        dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy"),
                        "--align-corners"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Loaded dx = load(dir.file("dx.npy"));
  EXPECT_EQ(dx.dtype, DType::kFloat32);
  EXPECT_EQ(dx.shape, (std::vector<int64_t>{2, 3, 3, 5}));
  EXPECT_EQ(dx.values, go);
  const Loaded dg = load(dir.file("dg.npy"));
  EXPECT_EQ(dg.dtype, DType::kFloat32);
  EXPECT_EQ(dg.shape, (std::vector<int64_t>{2, 3, 5, 2}));
}

// Image v[c](h, w) = a_c w + b_c h + k_c: bilinear interpolation of a linear
// function is exact, so inside the image the output is a_c ix + b_c iy + k_c
// and d out / d ix = a_c, d out / d iy = b_c. With align_corners off,
// ix = ((x + 1) W - 1) / 2, so dgrid = (W/2 sum_c g a_c, H/2 sum_c g b_c).
class cliRampBackward : public ::testing::Test {
 protected:
  static constexpr int64_t kC = 2, kH = 4, kW = 6, kHo = 2, kWo = 3;
  const std::vector<double> a_ = {0.5, -1.25};
  const std::vector<double> b_ = {2.0, 0.75};
  const std::vector<double> k_ = {0.25, -3.0};
  const std::vector<double> gx_ = {-0.55, 0.05, 0.6};  // ix = 0.85, 2.65, 4.3
  const std::vector<double> gy_ = {-0.4, 0.35};        // iy = 0.7, 2.2
  std::vector<double> x_, grid_, go_;
  TempDir dir_;

  void SetUp() override {
    for (int64_t c = 0; c < kC; ++c) {
      for (int64_t h = 0; h < kH; ++h) {
        for (int64_t w = 0; w < kW; ++w) {
          x_.push_back(a_[c] * static_cast<double>(w) + b_[c] * static_cast<double>(h) + k_[c]);
        }
      }
    }
    for (int64_t h = 0; h < kHo; ++h) {
      for (int64_t w = 0; w < kWo; ++w) {
        grid_.push_back(gx_[w]);
        grid_.push_back(gy_[h]);
      }
    }
    for (int64_t i = 0; i < kC * kHo * kWo; ++i) go_.push_back(0.5 + 0.25 * static_cast<double>(i) * (i % 2 ? -1 : 1));
    save(dir_.file("x.npy"), DType::kFloat64, {1, kC, kH, kW}, x_);
    save(dir_.file("g.npy"), DType::kFloat64, {1, kHo, kWo, 2}, grid_);
    save(dir_.file("go.npy"), DType::kFloat64, {1, kC, kHo, kWo}, go_);
  }

  double ix(int64_t w) const { return ((gx_[w] + 1) * kW - 1) / 2; }
  double iy(int64_t h) const { return ((gy_[h] + 1) * kH - 1) / 2; }

  std::vector<double> expected_dgrid() const {
    std::vector<double> dg;
    for (int64_t h = 0; h < kHo; ++h) {
      for (int64_t w = 0; w < kWo; ++w) {
        double sx = 0, sy = 0;
        for (int64_t c = 0; c < kC; ++c) {
          const double g = go_[(c * kHo + h) * kWo + w];
          sx += g * a_[c];
          sy += g * b_[c];
        }
        dg.push_back(sx * kW / 2.0);
        dg.push_back(sy * kH / 2.0);
      }
    }
    return dg;
  }

  // dx by scattering each gradient to the four neighbours with the
  // bilinear weights (all neighbours are inside the image here).
  std::vector<double> expected_dx() const {
    std::vector<double> dx(static_cast<std::size_t>(kC * kH * kW), 0.0);
    for (int64_t c = 0; c < kC; ++c) {
      for (int64_t h = 0; h < kHo; ++h) {
        for (int64_t w = 0; w < kWo; ++w) {
          const double g = go_[(c * kHo + h) * kWo + w];
          const auto x0 = static_cast<int64_t>(std::floor(ix(w)));
          const auto y0 = static_cast<int64_t>(std::floor(iy(h)));
          const double tx = ix(w) - static_cast<double>(x0), ty = iy(h) - static_cast<double>(y0);
          const auto at = [&](int64_t yy, int64_t xx) -> double& { return dx[(c * kH + yy) * kW + xx]; };
          at(y0, x0) += g * (1 - tx) * (1 - ty);
          at(y0, x0 + 1) += g * tx * (1 - ty);
          at(y0 + 1, x0) += g * (1 - tx) * ty;
          at(y0 + 1, x0 + 1) += g * tx * ty;
        }
      }
    }
    return dx;
  }

  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"backward", "--grad", dir_.file("go.npy"), "--input", dir_.file("x.npy"),
                                  "--grid", dir_.file("g.npy")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

void expect_all_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST_F(cliRampBackward, ForwardIsTheRamp) {
  const Result r = run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--out",
                        dir_.file("y.npy")});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<double> want;
  for (int64_t c = 0; c < kC; ++c) {
    for (int64_t h = 0; h < kHo; ++h) {
      for (int64_t w = 0; w < kWo; ++w) want.push_back(a_[c] * ix(w) + b_[c] * iy(h) + k_[c]);
    }
  }
  expect_all_near(load(dir_.file("y.npy")).values, want, 1e-12);
}

TEST_F(cliRampBackward, DgridIsTheRampSlope) {
  const Result r = run(args({"--dx", dir_.file("dx.npy"), "--dgrid", dir_.file("dg.npy")}));
  ASSERT_EQ(r.status, 0) << r.err;
  const Loaded dg = load(dir_.file("dg.npy"));
  EXPECT_EQ(dg.dtype, DType::kFloat64);
  EXPECT_EQ(dg.shape, (std::vector<int64_t>{1, kHo, kWo, 2}));
  expect_all_near(dg.values, expected_dgrid(), 1e-12);
  const Loaded dx = load(dir_.file("dx.npy"));
  EXPECT_EQ(dx.shape, (std::vector<int64_t>{1, kC, kH, kW}));
  expect_all_near(dx.values, expected_dx(), 1e-12);
}

TEST_F(cliRampBackward, NoDxWritesOnlyDgrid) {
  // --dx may be given with --no-dx; it is then ignored.
  const Result r = run(args({"--no-dx", "--dx", dir_.file("dx.npy"), "--dgrid", dir_.file("dg.npy")}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir_.file("dx.npy")));
  expect_all_near(load(dir_.file("dg.npy")).values, expected_dgrid(), 1e-12);
  // Without --dx at all.
  fs::remove(dir_.file("dg.npy"));
  const Result r2 = run(args({"--no-dx", "--dgrid", dir_.file("dg.npy")}));
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_EQ(dir_.files(), (std::set<std::string>{"x.npy", "g.npy", "go.npy", "dg.npy"}));
  expect_all_near(load(dir_.file("dg.npy")).values, expected_dgrid(), 1e-12);
}

TEST_F(cliRampBackward, NoDgridWritesOnlyDx) {
  const Result r = run(args({"--no-dgrid", "--dx", dir_.file("dx.npy")}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(dir_.files(), (std::set<std::string>{"x.npy", "g.npy", "go.npy", "dx.npy"}));
  expect_all_near(load(dir_.file("dx.npy")).values, expected_dx(), 1e-12);
}

TEST_F(cliRampBackward, ErrorsWriteNothing) {
  const std::set<std::string> inputs = {"x.npy", "g.npy", "go.npy"};
  const std::string dx = dir_.file("dx.npy"), dg = dir_.file("dg.npy");
  expect_error(run(args({"--no-dx", "--no-dgrid"})), "--no-dx and --no-dgrid");
  expect_error(run(args({"--dgrid", dg})), "--dx is required");
  expect_error(run(args({"--dx", dx})), "--dgrid is required");
  expect_error(run(args({"--dx", dx, "--dgrid", dx})), "same file");
  expect_error(run(args({"--dx", dx, "--dgrid", dg, "--padding", "mirror"})), "--padding: unknown padding 'mirror'");
  // The second output cannot be written: the first is removed again.
  expect_error(run(args({"--dx", dx, "--dgrid", dir_.file("no/such/folder/dg.npy")})), "no/such/folder/dg.npy: ");
  EXPECT_EQ(dir_.files(), inputs);
  // grad of the wrong shape: the library's message.
  save(dir_.file("bad_go.npy"), DType::kFloat64, {1, kC, kHo, kWo + 1},
       std::vector<double>(static_cast<std::size_t>(kC * kHo * (kWo + 1)), 1.0));
  const Result r = run({"backward", "--grad", dir_.file("bad_go.npy"), "--input", dir_.file("x.npy"), "--grid",
                        dir_.file("g.npy"), "--dx", dx, "--dgrid", dg});
  expect_error(r, "grad: ");
  EXPECT_EQ(dir_.files(), (std::set<std::string>{"x.npy", "g.npy", "go.npy", "bad_go.npy"}));
}

// ---------------------------------------------------------------------------
// Errors of forward and of argument parsing.

class cliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    save(dir_.file("x.npy"), DType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
    save(dir_.file("g.npy"), DType::kFloat32, {1, 1, 1, 2}, {0, 0});
  }
  std::vector<std::string> forward(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--out",
                                  dir_.file("y.npy")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  void expect_nothing_written() const { EXPECT_EQ(dir_.files(), files_); }
  TempDir dir_;
  std::set<std::string> files_ = {"x.npy", "g.npy"};
};

TEST_F(cliErrors, UnknownFlag) {
  expect_error(run(forward({"--bogus"})), "--bogus");
  expect_error(run({"forward", "--bogus"}), "--bogus");  // reported before missing required options
  expect_error(run({"--bogus"}), "--bogus");
  expect_error(run(forward({"extra-positional"})), "extra-positional");
  expect_nothing_written();
}

TEST_F(cliErrors, BadArguments) {
  expect_error(run({}), "subcommand");
  expect_error(run({"transform"}), "transform");
  expect_error(run({"forward", "--input", dir_.file("x.npy"), "--out", dir_.file("y.npy")}), "--grid");
  expect_error(run(forward({"--mode", "linear"})), "--mode: unknown interpolation 'linear'");
  expect_error(run(forward({"--padding", "wrap"})), "--padding: unknown padding 'wrap'");
  expect_error(run(forward({"--dtype", "f8"})), "--dtype: unknown dtype 'f8'");
  expect_error(run(forward({"--mode"})), "--mode");
  expect_nothing_written();
}

TEST_F(cliErrors, MissingFile) {
  const std::string missing = dir_.file("missing.npy");
  expect_error(run({"forward", "--input", missing, "--grid", dir_.file("g.npy"), "--out", dir_.file("y.npy")}),
               missing + ": cannot open: " + std::strerror(ENOENT));
  expect_nothing_written();
}

TEST_F(cliErrors, UnsupportedFileDtype) {
  const std::string path = dir_.file("big.npy");
  std::string bytes("\x93NUMPY\x01\x00", 8);
  std::string header = "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1, 2, 2), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  bytes += static_cast<char>(header.size());
  bytes += '\0';
  bytes += header + std::string(16, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  files_.insert("big.npy");
  expect_error(run({"forward", "--input", path, "--grid", dir_.file("g.npy"), "--out", dir_.file("y.npy")}),
               path + ": unsupported dtype '>f4' (big-endian)");
  expect_nothing_written();
}

TEST_F(cliErrors, GridLastDimensionThree) {
  save(dir_.file("g3.npy"), DType::kFloat32, {1, 1, 1, 3}, {0, 0, 0});
  files_.insert("g3.npy");
  expect_error(run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g3.npy"), "--out",
                    dir_.file("y.npy")}),
               "grid: last dimension must be 2, got 3");
  expect_nothing_written();
}

TEST_F(cliErrors, WrongRank) {
  save(dir_.file("g_rank3.npy"), DType::kFloat32, {1, 1, 2}, {0, 0});
  save(dir_.file("x_rank5.npy"), DType::kFloat32, {1, 1, 1, 2, 2}, {1, 2, 3, 4});
  save(dir_.file("x_rank3.npy"), DType::kFloat32, {1, 2, 2}, {1, 2, 3, 4});
  save(dir_.file("x_rank6.npy"), DType::kFloat32, {1, 1, 1, 1, 2, 2}, {1, 2, 3, 4});
  files_.insert({"g_rank3.npy", "x_rank5.npy", "x_rank3.npy", "x_rank6.npy"});
  expect_error(run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g_rank3.npy"), "--out",
                    dir_.file("y.npy")}),
               "grid: expected 4 dimensions, got 3 (the call samples an image; " + dir_.file("g_rank3.npy") +
                   " has shape (1, 1, 2))");
  // The input decides the rank: a volume's grid is 5-D.
  expect_error(run({"forward", "--input", dir_.file("x_rank5.npy"), "--grid", dir_.file("g.npy"), "--out",
                    dir_.file("y.npy")}),
               "grid: expected 5 dimensions, got 4 (the call samples a volume; ");
  for (const char* x : {"x_rank3.npy", "x_rank6.npy"}) {
    expect_error(run({"forward", "--input", dir_.file(x), "--grid", dir_.file("g.npy"), "--out", dir_.file("y.npy")}),
                 "input: expected 4 dimensions (an image) or 5 (a volume), got " +
                     std::string(1, x[6]));
  }
  expect_nothing_written();
}

TEST_F(cliErrors, MismatchedBatch) {
  save(dir_.file("g2.npy"), DType::kFloat32, {2, 1, 1, 2}, {0, 0, 0, 0});
  files_.insert("g2.npy");
  expect_error(run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g2.npy"), "--out",
                    dir_.file("y.npy")}),
               "grid: batch size 2 does not match input's 1");
  expect_nothing_written();
}

TEST_F(cliErrors, UnwritableOutput) {
  const std::string out = dir_.file("missing_dir/y.npy");
  expect_error(run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--out", out}),
               out + ": ");
  expect_nothing_written();
}

// ---------------------------------------------------------------------------
// bench on data from files.

// The number after "key": in bench's one-line JSON, or NaN when missing.
double json_number(const std::string& json, const std::string& key) {
  const std::size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

class cliBenchFiles : public ::testing::Test {
 protected:
  // input (1, 2, 4, 5), grid (1, 3, 2, 2), grad (1, 2, 3, 2), all float64.
  void SetUp() override {
    save(dir_.file("x.npy"), DType::kFloat64, {1, 2, 4, 5}, ramp_values(40, 0.25, -4));
    save(dir_.file("g.npy"), DType::kFloat64, {1, 3, 2, 2}, {-1, -1, 0.5, 0, 0, 0.25, 1, 1, -0.5, 0.75, 0, -1});
    save(dir_.file("go.npy"), DType::kFloat64, {1, 2, 3, 2}, ramp_values(12, 0.5, -2));
  }
  std::vector<std::string> bench(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"bench", "--reps", "3", "--threads", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  TempDir dir_;
};

TEST_F(cliBenchFiles, ShapeAndDtypeComeFromTheFiles) {
  const Result r = run(bench({"--op", "forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy")}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("\"op\": \"forward\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"shape\": [1, 2, 4, 5, 3, 2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"dtype\": \"float64\""), std::string::npos) << r.out;
  EXPECT_EQ(json_number(r.out, "threads"), 1);
  EXPECT_EQ(json_number(r.out, "reps"), 3);
  // gbps counts input, grid and output once each: (40 + 12 + 12) doubles.
  const double ms = json_number(r.out, "median_ms");
  ASSERT_GT(ms, 0);
  EXPECT_NEAR(json_number(r.out, "gbps"), 64 * 8 / (ms * 1e6), 1e-3 * json_number(r.out, "gbps"));
}

TEST_F(cliBenchFiles, BackwardWithGradConvertedAndChannelsLast) {
  const Result r = run(bench({"--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--grad",
                              dir_.file("go.npy"), "--dtype", "bf16", "--layout", "nhwc", "--mode", "bicubic",
                              "--padding", "reflection", "--align-corners"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"op\": \"backward\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"shape\": [1, 2, 4, 5, 3, 2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"dtype\": \"bfloat16\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"layout\": \"nhwc\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"mode\": \"bicubic\", \"padding\": \"reflection\", \"align_corners\": true"),
            std::string::npos)
      << r.out;
  // Backward bytes: grad, input and grid read, dx and dgrid written, 2 bytes each.
  const double ms = json_number(r.out, "median_ms");
  ASSERT_GT(ms, 0);
  EXPECT_NEAR(json_number(r.out, "gbps"), (12 + 2 * 40 + 2 * 12) * 2 / (ms * 1e6), 1e-3 * json_number(r.out, "gbps"));
}

TEST_F(cliBenchFiles, GridWithAMatchingShape) {
  const Result r = run(bench({"--shape", "1,7,9,9,3,2", "--grid", dir_.file("g.npy"), "--dtype", "f32"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"shape\": [1, 7, 9, 9, 3, 2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"dtype\": \"float32\""), std::string::npos) << r.out;
}

TEST_F(cliBenchFiles, MismatchesAreErrors) {
  expect_error(run(bench({"--shape", "2,7,9,9,3,2", "--grid", dir_.file("g.npy")})),
               "grid: shape (1, 3, 2, 2) does not match the bench shape, which needs (2, 3, 2, 2)");
  expect_error(run(bench({"--shape", "1,7,9,9,2,3", "--grid", dir_.file("g.npy")})),
               "grid: shape (1, 3, 2, 2) does not match the bench shape, which needs (1, 2, 3, 2)");
  expect_error(run(bench({"--shape", "1,3,4,5,3,2", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy")})),
               "input: shape (1, 2, 4, 5) does not match the bench shape, which needs (1, 3, 4, 5)");
  // grad of the input's shape instead of the output's.
  expect_error(run(bench({"--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--grad", dir_.file("x.npy")})),
               "grad: shape (1, 2, 4, 5) does not match the bench shape, which needs (1, 2, 3, 2)");
  expect_error(run(bench({"--grid", dir_.file("g.npy")})), "with only one of them, give --shape too");
  expect_error(run(bench({"--op", "forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--grad",
                          dir_.file("go.npy")})),
               "--grad: only --op backward takes one");
  save(dir_.file("g32.npy"), DType::kFloat32, {1, 3, 2, 2}, std::vector<double>(12, 0.5));
  expect_error(run(bench({"--input", dir_.file("x.npy"), "--grid", dir_.file("g32.npy")})),
               "mixed dtypes: input is float64, grid is float32");
  expect_error(run(bench({"--grid", dir_.file("missing.npy"), "--shape", "1,1,2,2,3,2"})),
               dir_.file("missing.npy") + ": cannot open");
}

// ---------------------------------------------------------------------------
// Thread counts: none takes the process down.

TEST(cliThreads, AboveTheBoundIsAnError) {
  // This one used to ask for a 320 GB workspace.
  const std::string n = std::to_string(gridsampler::max_threads());
  expect_error(run({"bench", "--threads", "100000", "--shape", "1,1,8,8,8,8"}),
               "--threads: at most " + n + " on this machine, got 100000");
  expect_error(run({"bench", "--threads", std::to_string(gridsampler::max_threads() + 1)}),
               "--threads: at most " + n + " on this machine");
  // OpenMP's thread limit lowers the bound.
  expect_error(run({"bench", "--threads", "4", "--shape", "1,1,8,8,8,8"}, {"OMP_THREAD_LIMIT=3"}),
               "--threads: at most 3 on this machine, got 4");
  const Result r = run({"bench", "--threads", "3", "--shape", "1,2,8,8,8,8", "--reps", "1"}, {"OMP_THREAD_LIMIT=3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json_number(r.out, "threads"), 3) << r.out;
}

TEST(cliThreads, AtTheBound) {
  const Result r = run({"bench", "--threads", std::to_string(gridsampler::max_threads()), "--shape",
                        "2,3,8,8,8,8", "--reps", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json_number(r.out, "threads"), gridsampler::max_threads()) << r.out;
}

// OMP_NUM_THREADS above the bound (10^5 made libgomp crash inside
// GOMP_parallel) is capped: the calls run and give the right values.
TEST(cliThreads, HugeOmpNumThreadsIsCapped) {
  const std::vector<std::string> env = {"OMP_NUM_THREADS=100000"};
  const Result r = run({"bench", "--shape", "1,1,8,8,8,8", "--reps", "1"}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json_number(r.out, "threads"), gridsampler::max_threads()) << r.out;
  const Result fwd = run({"bench", "--op", "forward", "--shape", "2,20,16,16,64,64", "--reps", "1"}, env);
  ASSERT_EQ(fwd.status, 0) << fwd.err;

  TempDir dir;
  save(dir.file("x.npy"), DType::kFloat64, {1, 1, 2, 2}, {1, 2, 3, 4});
  save(dir.file("g.npy"), DType::kFloat64, {1, 1, 4, 2}, {0, 0, -0.5, -0.5, 0.5, -0.5, 2.0, -0.5});
  const Result y = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                        dir.file("y.npy")}, env);
  ASSERT_EQ(y.status, 0) << y.err;
  EXPECT_EQ(load(dir.file("y.npy")).values, (std::vector<double>{2.5, 1, 2, 0}));
  save(dir.file("go.npy"), DType::kFloat64, {1, 1, 1, 4}, {1, 1, 1, 1});
  const Result b = run({"backward", "--grad", dir.file("go.npy"), "--input", dir.file("x.npy"), "--grid",
                        dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy")}, env);
  ASSERT_EQ(b.status, 0) << b.err;
  // dx: the bilinear weights of the three points inside (the middle, and the
  // centres of pixels (0, 0) and (0, 1)), summed per pixel.
  EXPECT_EQ(load(dir.file("dx.npy")).values, (std::vector<double>{1.25, 1.25, 0.25, 0.25}));
}

// ---------------------------------------------------------------------------
// Volumes: 5-D files in, 5-D files out.

// An align_corners identity grid (N, D, H, W, 3) of (x, y, z): sample point
// (d, h, w) is the centre of voxel (d, h, w); with D-1, H-1 and W-1 powers of
// two every coordinate is exact in every dtype.
std::vector<double> identity_grid_3d(int64_t n, int64_t d, int64_t h, int64_t w) {
  std::vector<double> g;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < d; ++k)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          g.push_back(-1.0 + 2.0 * static_cast<double>(j) / static_cast<double>(w - 1));
          g.push_back(-1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(h - 1));
          g.push_back(-1.0 + 2.0 * static_cast<double>(k) / static_cast<double>(d - 1));
        }
  return g;
}

class cliVolumeIdentity : public ::testing::TestWithParam<DType> {};

TEST_P(cliVolumeIdentity, AlignCornersIdentityGridReturnsInputAndGrad) {
  TempDir dir;
  const DType dtype = GetParam();
  const std::vector<int64_t> shape = {2, 3, 3, 5, 2};
  const std::vector<double> x = ramp_values(2 * 3 * 3 * 5 * 2, 0.25, -2.0);
  const std::vector<double> go = ramp_values(2 * 3 * 3 * 5 * 2, -0.125, 1.0);
  save(dir.file("x.npy"), dtype, shape, x);
  save(dir.file("go.npy"), dtype, shape, go);
  save(dir.file("g.npy"), dtype, {2, 3, 5, 2, 3}, identity_grid_3d(2, 3, 5, 2));
  const Result r = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                        dir.file("y.npy"), "--align-corners"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const Loaded y = load(dir.file("y.npy"));
  EXPECT_EQ(y.dtype, dtype);
  EXPECT_EQ(y.shape, shape);
  EXPECT_EQ(y.values, x);
  // The backward of the identity: dx is grad (every voxel is hit once, with
  // weight 1).
  const Result b = run({"backward", "--grad", dir.file("go.npy"), "--input", dir.file("x.npy"), "--grid",
                        dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy"),
                        "--align-corners"});
  ASSERT_EQ(b.status, 0) << b.err;
  const Loaded dx = load(dir.file("dx.npy"));
  EXPECT_EQ(dx.shape, shape);
  EXPECT_EQ(dx.values, go);
  EXPECT_EQ(load(dir.file("dg.npy")).shape, (std::vector<int64_t>{2, 3, 5, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(dtypes, cliVolumeIdentity,
                         ::testing::Values(DType::kFloat16, DType::kFloat32, DType::kFloat64),
                         [](const ::testing::TestParamInfo<DType>& param_info) {
                           return std::string(gridsampler::to_string(param_info.param));
                         });

// Volume v[c](d, h, w) = a_c w + b_c h + e_c d + k_c: trilinear interpolation
// of a linear function is exact, so inside the volume the output is
// a_c ix + b_c iy + e_c iz + k_c, and dgrid = (W/2 sum_c g a_c, H/2 sum_c g
// b_c, D/2 sum_c g e_c) (align_corners off). dx is the 8-tap scatter of grad,
// computed here.
class cliVolumeRamp : public ::testing::Test {
 protected:
  static constexpr int64_t kC = 2, kD = 3, kH = 4, kW = 5, kDo = 2, kHo = 2, kWo = 3;
  const std::vector<double> a_ = {0.5, -1.25}, b_ = {2.0, 0.75}, e_ = {-1.5, 0.25}, k_ = {0.25, -3.0};
  const std::vector<double> gx_ = {-0.55, 0.05, 0.6};  // ix = 0.625, 2.125, 3.5
  const std::vector<double> gy_ = {-0.4, 0.35};        // iy = 0.7, 2.2
  const std::vector<double> gz_ = {-0.3, 0.45};        // iz = 0.55, 1.675
  std::vector<double> x_, grid_, go_;
  TempDir dir_;

  void SetUp() override {
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t d = 0; d < kD; ++d)
        for (int64_t h = 0; h < kH; ++h)
          for (int64_t w = 0; w < kW; ++w) {
            x_.push_back(a_[c] * static_cast<double>(w) + b_[c] * static_cast<double>(h) +
                         e_[c] * static_cast<double>(d) + k_[c]);
          }
    for (int64_t d = 0; d < kDo; ++d)
      for (int64_t h = 0; h < kHo; ++h)
        for (int64_t w = 0; w < kWo; ++w) {
          grid_.push_back(gx_[w]);
          grid_.push_back(gy_[h]);
          grid_.push_back(gz_[d]);
        }
    for (int64_t i = 0; i < kC * kDo * kHo * kWo; ++i) go_.push_back(0.5 + 0.25 * static_cast<double>(i) * (i % 2 ? -1 : 1));
    save(dir_.file("x.npy"), DType::kFloat64, {1, kC, kD, kH, kW}, x_);
    save(dir_.file("g.npy"), DType::kFloat64, {1, kDo, kHo, kWo, 3}, grid_);
    save(dir_.file("go.npy"), DType::kFloat64, {1, kC, kDo, kHo, kWo}, go_);
  }

  double ix(int64_t w) const { return ((gx_[w] + 1) * kW - 1) / 2; }
  double iy(int64_t h) const { return ((gy_[h] + 1) * kH - 1) / 2; }
  double iz(int64_t d) const { return ((gz_[d] + 1) * kD - 1) / 2; }
  double g(int64_t c, int64_t d, int64_t h, int64_t w) const { return go_[((c * kDo + d) * kHo + h) * kWo + w]; }

  std::vector<double> expected_out() const {
    std::vector<double> y;
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t d = 0; d < kDo; ++d)
        for (int64_t h = 0; h < kHo; ++h)
          for (int64_t w = 0; w < kWo; ++w) y.push_back(a_[c] * ix(w) + b_[c] * iy(h) + e_[c] * iz(d) + k_[c]);
    return y;
  }

  std::vector<double> expected_dgrid() const {
    std::vector<double> dg;
    for (int64_t d = 0; d < kDo; ++d)
      for (int64_t h = 0; h < kHo; ++h)
        for (int64_t w = 0; w < kWo; ++w) {
          double sx = 0, sy = 0, sz = 0;
          for (int64_t c = 0; c < kC; ++c) {
            sx += g(c, d, h, w) * a_[c];
            sy += g(c, d, h, w) * b_[c];
            sz += g(c, d, h, w) * e_[c];
          }
          dg.push_back(sx * kW / 2.0);
          dg.push_back(sy * kH / 2.0);
          dg.push_back(sz * kD / 2.0);
        }
    return dg;
  }

  // dx by scattering each gradient to the eight neighbours with the
  // trilinear weights (all inside the volume here).
  std::vector<double> expected_dx() const {
    std::vector<double> dx(static_cast<std::size_t>(kC * kD * kH * kW), 0.0);
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t d = 0; d < kDo; ++d)
        for (int64_t h = 0; h < kHo; ++h)
          for (int64_t w = 0; w < kWo; ++w) {
            const double fx = std::floor(ix(w)), fy = std::floor(iy(h)), fz = std::floor(iz(d));
            const double t[3] = {ix(w) - fx, iy(h) - fy, iz(d) - fz};
            for (int corner = 0; corner < 8; ++corner) {
              const int bx = corner & 1, by = (corner >> 1) & 1, bz = corner >> 2;
              const double weight = (bx ? t[0] : 1 - t[0]) * (by ? t[1] : 1 - t[1]) * (bz ? t[2] : 1 - t[2]);
              const auto xx = static_cast<int64_t>(fx) + bx, yy = static_cast<int64_t>(fy) + by,
                         zz = static_cast<int64_t>(fz) + bz;
              dx[static_cast<std::size_t>(((c * kD + zz) * kH + yy) * kW + xx)] += g(c, d, h, w) * weight;
            }
          }
    return dx;
  }

  std::vector<std::string> backward(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"backward", "--grad", dir_.file("go.npy"), "--input", dir_.file("x.npy"),
                                  "--grid", dir_.file("g.npy")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

TEST_F(cliVolumeRamp, ForwardIsTheRamp) {
  const Result r = run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--out",
                        dir_.file("y.npy")});
  ASSERT_EQ(r.status, 0) << r.err;
  const Loaded y = load(dir_.file("y.npy"));
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, kC, kDo, kHo, kWo}));
  expect_all_near(y.values, expected_out(), 1e-12);
}

TEST_F(cliVolumeRamp, DgridIsTheRampSlopeAndDxTheScatter) {
  const Result r = run(backward({"--dx", dir_.file("dx.npy"), "--dgrid", dir_.file("dg.npy")}));
  ASSERT_EQ(r.status, 0) << r.err;
  const Loaded dg = load(dir_.file("dg.npy"));
  EXPECT_EQ(dg.dtype, DType::kFloat64);
  EXPECT_EQ(dg.shape, (std::vector<int64_t>{1, kDo, kHo, kWo, 3}));
  expect_all_near(dg.values, expected_dgrid(), 1e-12);
  const Loaded dx = load(dir_.file("dx.npy"));
  EXPECT_EQ(dx.shape, (std::vector<int64_t>{1, kC, kD, kH, kW}));
  expect_all_near(dx.values, expected_dx(), 1e-12);
}

TEST_F(cliVolumeRamp, MaskAndBfloat16) {
  const Result r = run(backward({"--no-dx", "--dgrid", dir_.file("dg.npy")}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(dir_.files(), (std::set<std::string>{"x.npy", "g.npy", "go.npy", "dg.npy"}));
  expect_all_near(load(dir_.file("dg.npy")).values, expected_dgrid(), 1e-12);
  // bf16: computed in float32 from the bf16-rounded inputs, rounded once,
  // written widened to float32.
  const Result bf = run({"forward", "--input", dir_.file("x.npy"), "--grid", dir_.file("g.npy"), "--out",
                         dir_.file("ybf.npy"), "--dtype", "bf16"});
  ASSERT_EQ(bf.status, 0) << bf.err;
  const Loaded y = load(dir_.file("ybf.npy"));
  EXPECT_EQ(y.dtype, DType::kFloat32);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, kC, kDo, kHo, kWo}));
  const std::vector<double> want = expected_out();
  ASSERT_EQ(y.values.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(y.values[i], bfloat16_to_double(bfloat16_from_double(y.values[i]))) << i;  // a bf16 value
    EXPECT_NEAR(y.values[i], want[i], 0.05 * std::max(1.0, std::fabs(want[i]))) << i;
  }
}

// Every mode and padding on random data with points outside the volume:
// the files the tool writes equal the float64 reference's values.
TEST(cliVolume, EveryModeAndPaddingMatchesTheReference) {
  TempDir dir;
  const gs::Shape5 in_shape{2, 3, 3, 4, 5}, grid_shape{2, 2, 3, 2, 3}, out_shape{2, 3, 2, 3, 2};
  std::mt19937_64 rng(17);
  auto random = [&](const gs::Shape5& s, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    gs::host::VolumeTensor t(DType::kFloat64, s);
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    for (double& x : v) x = dist(rng);
    t.assign(v);
    return t;
  };
  const gs::host::VolumeTensor x = random(in_shape, -1, 1), grid = random(grid_shape, -1.3, 1.3),
                               go = random(out_shape, -1, 1);
  save(dir.file("x.npy"), DType::kFloat64, {2, 3, 3, 4, 5}, x.values());
  save(dir.file("g.npy"), DType::kFloat64, {2, 2, 3, 2, 3}, grid.values());
  save(dir.file("go.npy"), DType::kFloat64, {2, 3, 2, 3, 2}, go.values());
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (bool align : {false, true}) {
        gs::Options opt;
        opt.interpolation = *gs::parse_interpolation(mode);
        opt.padding = *gs::parse_padding(padding);
        opt.align_corners = align;
        std::vector<std::string> flags = {"--mode", mode, "--padding", padding};
        if (align) flags.push_back("--align-corners");
        const std::string what = std::string(mode) + "/" + padding + (align ? "/align" : "");
        std::vector<std::string> fwd = {"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"),
                                        "--out", dir.file("y.npy")};
        fwd.insert(fwd.end(), flags.begin(), flags.end());
        const Result r = run(fwd);
        ASSERT_EQ(r.status, 0) << what << ": " << r.err;
        std::vector<std::string> bwd = {"backward", "--grad", dir.file("go.npy"), "--input", dir.file("x.npy"),
                                        "--grid", dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid",
                                        dir.file("dg.npy")};
        bwd.insert(bwd.end(), flags.begin(), flags.end());
        const Result b = run(bwd);
        ASSERT_EQ(b.status, 0) << what << ": " << b.err;

        gs::host::VolumeTensor y(DType::kFloat64, out_shape), dx(DType::kFloat64, in_shape),
            dg(DType::kFloat64, grid_shape);
        ASSERT_TRUE(gs::reference::grid_sampler_3d(x.view(), grid.view(), y.mutable_view(), opt).ok());
        ASSERT_TRUE(gs::reference::grid_sampler_3d_backward(go.view(), x.view(), grid.view(), dx.mutable_view(),
                                                            dg.mutable_view(), opt)
                        .ok());
        SCOPED_TRACE(what);
        expect_all_near(load(dir.file("y.npy")).values, y.values(), 1e-12);
        expect_all_near(load(dir.file("dx.npy")).values, dx.values(), 1e-12);
        expect_all_near(load(dir.file("dg.npy")).values, dg.values(), 1e-10);
      }
    }
  }
}

// NaN, infinities and huge coordinates in a volume's grid through the tool:
// the reference's values (NaN where it has NaN), coordinates in float32 on
// both sides.
TEST(cliVolume, HostileGridValues) {
  TempDir dir;
  const gs::Shape5 in_shape{1, 2, 3, 4, 5}, grid_shape{1, 2, 3, 4, 3}, out_shape{1, 2, 2, 3, 4};
  const double inf = std::numeric_limits<double>::infinity();
  const double hostile[] = {std::nan(""), inf, -inf, 1e30, -1e30, 0x1p48, -0x1p60, 1.0, -1.0, 0.5, 3.0, -2.5};
  gs::host::VolumeTensor x(DType::kFloat32, in_shape), grid(DType::kFloat32, grid_shape), go(DType::kFloat32, out_shape);
  std::vector<double> gv(static_cast<std::size_t>(grid.numel()));
  for (std::size_t i = 0; i < gv.size(); ++i) gv[i] = i % 2 ? 0.3 * std::sin(static_cast<double>(i)) : hostile[(i / 2) % 12];
  grid.assign(gv);
  x.assign(ramp_values(static_cast<std::size_t>(x.numel()), 0.125, -2));
  go.assign(ramp_values(static_cast<std::size_t>(go.numel()), -0.25, 3));
  save(dir.file("x.npy"), DType::kFloat32, {1, 2, 3, 4, 5}, x.values());
  save(dir.file("g.npy"), DType::kFloat32, {1, 2, 3, 4, 3}, grid.values());
  save(dir.file("go.npy"), DType::kFloat32, {1, 2, 2, 3, 4}, go.values());
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      gs::Options opt;
      opt.interpolation = *gs::parse_interpolation(mode);
      opt.padding = *gs::parse_padding(padding);
      const Result r = run({"backward", "--grad", dir.file("go.npy"), "--input", dir.file("x.npy"), "--grid",
                            dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy"), "--mode",
                            mode, "--padding", padding});
      ASSERT_EQ(r.status, 0) << r.err;
      const Result f = run({"forward", "--input", dir.file("x.npy"), "--grid", dir.file("g.npy"), "--out",
                            dir.file("y.npy"), "--mode", mode, "--padding", padding});
      ASSERT_EQ(f.status, 0) << f.err;
      gs::host::VolumeTensor y(DType::kFloat32, out_shape), dx(DType::kFloat32, in_shape),
          dg(DType::kFloat32, grid_shape);
      ASSERT_TRUE(gs::reference::grid_sampler_3d(x.view(), grid.view(), y.mutable_view(), opt).ok());
      ASSERT_TRUE(gs::reference::grid_sampler_3d_backward(go.view(), x.view(), grid.view(), dx.mutable_view(),
                                                          dg.mutable_view(), opt)
                      .ok());
      for (auto [file, want] : {std::pair{"y.npy", y.values()}, std::pair{"dx.npy", dx.values()},
                                std::pair{"dg.npy", dg.values()}}) {
        const std::vector<double> got = load(dir.file(file)).values;
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << mode << "/" << padding << " " << file << "[" << i << "]";
          if (!std::isnan(want[i])) {
            EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i])))
                << mode << "/" << padding << " " << file << "[" << i << "]";
          }
        }
      }
    }
  }
}

TEST(cliVolume, Errors) {
  TempDir dir;
  save(dir.file("x.npy"), DType::kFloat32, {1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  save(dir.file("g.npy"), DType::kFloat32, {1, 1, 1, 1, 3}, {0, 0, 0});
  save(dir.file("g2.npy"), DType::kFloat32, {1, 1, 1, 1, 2}, {0, 0});
  save(dir.file("g4d.npy"), DType::kFloat32, {1, 1, 1, 3}, {0, 0, 0});
  save(dir.file("go4d.npy"), DType::kFloat32, {1, 1, 1, 1}, {1});
  save(dir.file("go.npy"), DType::kFloat32, {1, 1, 1, 1, 1}, {1});
  auto forward = [&](const std::string& x, const std::string& g) {
    return run({"forward", "--input", dir.file(x), "--grid", dir.file(g), "--out", dir.file("y.npy")});
  };
  // A volume's grid holds (x, y, z): the library's message.
  expect_error(forward("x.npy", "g2.npy"), "grid: last dimension must be 3, got 2");
  expect_error(forward("x.npy", "g4d.npy"), "grid: expected 5 dimensions, got 4 (the call samples a volume; " +
                                                dir.file("g4d.npy") + " has shape (1, 1, 1, 3))");
  expect_error(run({"backward", "--grad", dir.file("go4d.npy"), "--input", dir.file("x.npy"), "--grid",
                    dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy")}),
               "grad: expected 5 dimensions, got 4 (the call samples a volume; ");
  // An image's call refuses a 5-D grad.
  save(dir.file("img.npy"), DType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
  save(dir.file("gimg.npy"), DType::kFloat32, {1, 1, 1, 2}, {0, 0});
  expect_error(run({"backward", "--grad", dir.file("go.npy"), "--input", dir.file("img.npy"), "--grid",
                    dir.file("gimg.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy")}),
               "grad: expected 4 dimensions, got 5 (the call samples an image; ");
  EXPECT_EQ(dir.files().count("y.npy") + dir.files().count("dx.npy") + dir.files().count("dg.npy"), 0u);
  // A correct call after all that.
  const Result r = run({"backward", "--grad", dir.file("go.npy"), "--input", dir.file("x.npy"), "--grid",
                        dir.file("g.npy"), "--dx", dir.file("dx.npy"), "--dgrid", dir.file("dg.npy")});
  ASSERT_EQ(r.status, 0) << r.err;
  // The centre of a 2x2x2 volume: every voxel gets 1/8 of the gradient.
  EXPECT_EQ(load(dir.file("dx.npy")).values, std::vector<double>(8, 0.125));
}

// bench --shape with eight numbers times the 3-D operator.
TEST(cliVolume, Bench) {
  const Result r = run({"bench", "--shape", "1,2,4,5,6,3,2,4", "--reps", "3", "--threads", "1", "--dtype", "f64"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("\"op\": \"backward\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"shape\": [1, 2, 4, 5, 6, 3, 2, 4]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"layout\": \"ncdhw\""), std::string::npos) << r.out;
  EXPECT_EQ(json_number(r.out, "threads"), 1);
  EXPECT_FALSE(std::isnan(json_number(r.out, "peak_extra_mib"))) << r.out;
  // Backward bytes: grad (48), input (240) and grid (72) read, dx and dgrid
  // written, 8 bytes each.
  const double ms = json_number(r.out, "median_ms");
  ASSERT_GT(ms, 0);
  EXPECT_NEAR(json_number(r.out, "gbps"), (48 + 2 * 240 + 2 * 72) * 8 / (ms * 1e6), 1e-3 * json_number(r.out, "gbps"));

  const Result f = run({"bench", "--op", "forward", "--shape", "2,3,4,4,4,2,2,2", "--layout", "ndhwc", "--mode",
                        "bicubic", "--reps", "2", "--threads", "1"});
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_NE(f.out.find("\"shape\": [2, 3, 4, 4, 4, 2, 2, 2]"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("\"layout\": \"ndhwc\""), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("\"mode\": \"bicubic\""), std::string::npos) << f.out;

  expect_error(run({"bench", "--shape", "1,2,4,5,6,3,2"}),
               "--shape: expected N,C,Hin,Win,Hout,Wout (six non-negative integers) or N,C,Din,Hin,Win,Dout,Hout,Wout");
}

TEST(cliVolume, BenchOnFiles) {
  TempDir dir;
  save(dir.file("x.npy"), DType::kFloat32, {1, 2, 3, 4, 5}, ramp_values(120, 0.25, -4));
  save(dir.file("g.npy"), DType::kFloat32, {1, 2, 2, 1, 3}, {-1, -1, -1, 0.5, 0, 0.25, 0, 0.25, 1, 1, -0.5, 0.75});
  const Result r = run({"bench", "--reps", "2", "--threads", "1", "--input", dir.file("x.npy"), "--grid",
                        dir.file("g.npy"), "--op", "forward"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"shape\": [1, 2, 3, 4, 5, 2, 2, 1]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"dtype\": \"float32\""), std::string::npos) << r.out;
  // --shape decides the rank; a file of the other rank is refused.
  expect_error(run({"bench", "--shape", "1,2,4,5,2,1", "--grid", dir.file("g.npy")}),
               "grid: expected 4 dimensions, got 5 (the call samples an image; ");
  expect_error(run({"bench", "--shape", "1,2,3,4,5,2,2,2", "--grid", dir.file("g.npy")}),
               "grid: shape (1, 2, 2, 1, 3) does not match the bench shape, which needs (1, 2, 2, 2, 3)");
}

// ---------------------------------------------------------------------------
// Help and version.

TEST(cliHelp, HelpAndVersionExitZero) {
  const Result top = run({"--help"});
  EXPECT_EQ(top.status, 0);
  EXPECT_TRUE(top.err.empty()) << top.err;
  EXPECT_NE(top.out.find("forward"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("backward"), std::string::npos) << top.out;

  const Result fwd = run({"forward", "--help"});
  EXPECT_EQ(fwd.status, 0);
  EXPECT_TRUE(fwd.err.empty()) << fwd.err;
  EXPECT_NE(fwd.out.find("--align-corners"), std::string::npos) << fwd.out;
  EXPECT_NE(fwd.out.find("widened (exactly) to float32"), std::string::npos) << fwd.out;

  const Result bwd = run({"backward", "-h"});
  EXPECT_EQ(bwd.status, 0);
  EXPECT_NE(bwd.out.find("--no-dgrid"), std::string::npos) << bwd.out;

  const Result version = run({"--version"});
  EXPECT_EQ(version.status, 0);
  EXPECT_TRUE(version.err.empty());
  EXPECT_EQ(version.out.rfind("gridsampler ", 0), 0u) << version.out;
  EXPECT_EQ(std::count(version.out.begin(), version.out.end(), '\n'), 1);
}

}  // namespace
}  // namespace gridsampler
