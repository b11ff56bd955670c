// Checks grid_sampler_2d and grid_sampler_2d_backward against golden data
// made by PyTorch (tests/data/make_golden.py; the torch version is recorded
// in tests/data/golden/cases.txt).
//
// Each manifest line "id mode padding align_corners dtype" becomes one test,
// Golden/GoldenCase.MatchesTorch/<id>, which loads <id>_{input,grid,grad}.npy,
// runs the forward and the backward and compares out, dx and dgrid with
// <id>_{out,dx,dgrid}.npy:
//   max |ours - torch| <= tol * max(1, max |torch|),
//   tol = 1e-10 (float64), 1e-4 (float32).
// GoldenManifest.* guard against data silently going missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/element_access.hpp"
#include "io/npy.hpp"

namespace gridsampler {
namespace {

const std::string kGoldenDir = std::string(GS_TEST_DATA_DIR) + "/golden";

struct GoldenCase {
  std::string id;
  std::string mode;     // bilinear | nearest | bicubic
  std::string padding;  // zeros | border | reflection
  int align = 0;        // 0 | 1
  std::string dtype;    // f32 | f64
  int line = 0;         // line number in cases.txt
};

std::ostream& operator<<(std::ostream& os, const GoldenCase& c) {
  return os << c.id << " (mode=" << c.mode << " padding=" << c.padding
            << " align_corners=" << c.align << " dtype=" << c.dtype << ")";
}

struct Manifest {
  std::vector<GoldenCase> cases;
  std::vector<std::string> errors;  // unreadable file, malformed lines
};

Manifest ReadManifest() {
  Manifest m;
  const std::string path = kGoldenDir + "/cases.txt";
  std::ifstream in(path);
  if (!in) {
    m.errors.push_back(path + ": cannot open");
    return m;
  }
  std::string text;
  int lineno = 0;
  while (std::getline(in, text)) {
    ++lineno;
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    std::istringstream ls(text);
    GoldenCase c;
    c.line = lineno;
    std::string extra;
    if (!(ls >> c.id >> c.mode >> c.padding >> c.align >> c.dtype) || (ls >> extra)) {
      m.errors.push_back(path + ":" + std::to_string(lineno) + ": malformed line: " + text);
      continue;
    }
    m.cases.push_back(c);
  }
  return m;
}

const Manifest& GetManifest() {
  static const Manifest m = ReadManifest();
  return m;
}

std::vector<GoldenCase> ManifestCases() { return GetManifest().cases; }

std::string TestName(const testing::TestParamInfo<GoldenCase>& info) {
  std::string name = info.param.id;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name.empty() ? "case_line" + std::to_string(info.param.line) : name;
}

double ElementAt(const npy::Array& a, int64_t i) {
  return gridsampler::host::load_element(a.data.data() + i * static_cast<int64_t>(gridsampler::dtype_size(a.dtype)),
                                         a.dtype);
}

Shape4 AsShape4(const npy::Array& a) { return {a.shape[0], a.shape[1], a.shape[2], a.shape[3]}; }

std::string IndexString(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + ")";
}

// Loads <id>_<what>.npy; checks rank 4 and the case's dtype.
testing::AssertionResult Load(const GoldenCase& c, const std::string& what, DType dtype,
                              npy::Array* out) {
  const std::string path = kGoldenDir + "/" + c.id + "_" + what + ".npy";
  const Status st = npy::read(path, out);
  if (!st.ok()) return testing::AssertionFailure() << "cannot read " << path << ": " << st.message();
  if (out->dtype != dtype)
    return testing::AssertionFailure()
           << path << ": dtype " << to_string(out->dtype) << ", manifest says " << c.dtype;
  if (out->shape.size() != 4)
    return testing::AssertionFailure() << path << ": rank " << out->shape.size() << ", expected 4";
  return testing::AssertionSuccess();
}

// A freshly allocated output filled with NaN, so that anything the library
// fails to write shows up as a mismatch.
npy::Array NanLike(const npy::Array& like) {
  npy::Array a;
  a.dtype = like.dtype;
  a.shape = like.shape;
  a.data.resize(like.data.size());
  const int64_t n = like.numel();
  const auto size = static_cast<int64_t>(gridsampler::dtype_size(a.dtype));
  for (int64_t i = 0; i < n; ++i) {
    gridsampler::host::store_element(a.data.data() + i * size, a.dtype, std::numeric_limits<double>::quiet_NaN());
  }
  return a;
}

// max |ours - torch| <= tol * max(1, max |torch|); NaN in ours fails.
testing::AssertionResult Matches(const GoldenCase& c, const std::string& what,
                                 const npy::Array& ours, const npy::Array& torch) {
  if (ours.shape != torch.shape)
    return testing::AssertionFailure() << c << " " << what << ": shape " << ShapeString(ours.shape)
                                       << " vs torch " << ShapeString(torch.shape);
  const double tol = (torch.dtype == DType::kFloat64) ? 1e-10 : 1e-4;
  const int64_t n = torch.numel();
  double max_ref = 0.0;
  for (int64_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(ElementAt(torch, i)));
  const double bound = tol * std::max(1.0, max_ref);
  double worst = 0.0;
  int64_t worst_i = -1;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double o = ElementAt(ours, i);
    const double t = ElementAt(torch, i);
    double err = std::fabs(o - t);
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    if (err > bound) ++bad;
    if (worst_i < 0 || err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  if (n == 0 || worst <= bound) return testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(17);
  os << c << " " << what << " " << ShapeString(torch.shape) << ": max abs error " << worst
     << " > bound " << bound << " (tol " << tol << " x max(1, max|torch| = " << max_ref << "))"
     << "; worst index " << IndexString(worst_i, torch.shape) << ": ours "
     << ElementAt(ours, worst_i) << ", torch " << ElementAt(torch, worst_i) << "; " << bad
     << " of " << n << " elements out of tolerance";
  // A few more offenders help tell a systematic error from an isolated one.
  int shown = 0;
  for (int64_t i = 0; i < n && shown < 8; ++i) {
    const double o = ElementAt(ours, i);
    const double t = ElementAt(torch, i);
    const double err = std::fabs(o - t);
    if (!(err <= bound) && i != worst_i) {
      os << "\n    also " << IndexString(i, torch.shape) << ": ours " << o << ", torch " << t;
      ++shown;
    }
  }
  return testing::AssertionFailure() << os.str();
}

class GoldenCaseTest : public testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenCaseTest, MatchesTorch) {
  const GoldenCase& c = GetParam();
  SCOPED_TRACE(testing::Message() << "case " << c << ", cases.txt line " << c.line);

  const auto mode = parse_interpolation(c.mode);
  const auto padding = parse_padding(c.padding);
  const auto dtype = parse_dtype(c.dtype);
  ASSERT_TRUE(mode.has_value()) << "unknown mode " << c.mode;
  ASSERT_TRUE(padding.has_value()) << "unknown padding " << c.padding;
  ASSERT_TRUE(dtype.has_value()) << "unknown dtype " << c.dtype;
  ASSERT_TRUE(*dtype == DType::kFloat32 || *dtype == DType::kFloat64) << c.dtype;
  ASSERT_TRUE(c.align == 0 || c.align == 1) << "align_corners " << c.align;

  npy::Array input, grid, grad, out_ref, dx_ref, dgrid_ref;
  ASSERT_TRUE(Load(c, "input", *dtype, &input));
  ASSERT_TRUE(Load(c, "grid", *dtype, &grid));
  ASSERT_TRUE(Load(c, "grad", *dtype, &grad));
  ASSERT_TRUE(Load(c, "out", *dtype, &out_ref));
  ASSERT_TRUE(Load(c, "dx", *dtype, &dx_ref));
  ASSERT_TRUE(Load(c, "dgrid", *dtype, &dgrid_ref));

  Options opt;
  opt.interpolation = *mode;
  opt.padding = *padding;
  opt.align_corners = c.align != 0;

  const TensorView in_v = TensorView::contiguous(input.data.data(), *dtype, AsShape4(input));
  const TensorView grid_v = TensorView::contiguous(grid.data.data(), *dtype, AsShape4(grid));
  const TensorView grad_v = TensorView::contiguous(grad.data.data(), *dtype, AsShape4(grad));

  // Forward.
  npy::Array out = NanLike(out_ref);
  {
    const Status st = grid_sampler_2d(
        in_v, grid_v, MutableTensorView::contiguous(out.data.data(), *dtype, AsShape4(out)), opt);
    ASSERT_TRUE(st.ok()) << "grid_sampler_2d failed: " << st.message();
  }
  EXPECT_TRUE(Matches(c, "forward out", out, out_ref));

  // Backward, both gradients.
  npy::Array dx = NanLike(dx_ref);
  npy::Array dgrid = NanLike(dgrid_ref);
  {
    const Status st = grid_sampler_2d_backward(
        grad_v, in_v, grid_v, MutableTensorView::contiguous(dx.data.data(), *dtype, AsShape4(dx)),
        MutableTensorView::contiguous(dgrid.data.data(), *dtype, AsShape4(dgrid)), opt,
        OutputMask{true, true});
    ASSERT_TRUE(st.ok()) << "grid_sampler_2d_backward failed: " << st.message();
  }
  EXPECT_TRUE(Matches(c, "backward dx", dx, dx_ref));
  EXPECT_TRUE(Matches(c, "backward dgrid", dgrid, dgrid_ref));

  // Backward with one output masked off must give the same other output.
  npy::Array dx_only = NanLike(dx_ref);
  {
    const Status st = grid_sampler_2d_backward(
        grad_v, in_v, grid_v,
        MutableTensorView::contiguous(dx_only.data.data(), *dtype, AsShape4(dx_only)),
        MutableTensorView{}, opt, OutputMask{true, false});
    ASSERT_TRUE(st.ok()) << "grid_sampler_2d_backward (mask dx only) failed: " << st.message();
  }
  EXPECT_TRUE(Matches(c, "backward dx (mask {dx})", dx_only, dx_ref));

  npy::Array dgrid_only = NanLike(dgrid_ref);
  {
    const Status st = grid_sampler_2d_backward(
        grad_v, in_v, grid_v, MutableTensorView{},
        MutableTensorView::contiguous(dgrid_only.data.data(), *dtype, AsShape4(dgrid_only)), opt,
        OutputMask{false, true});
    ASSERT_TRUE(st.ok()) << "grid_sampler_2d_backward (mask dgrid only) failed: " << st.message();
  }
  EXPECT_TRUE(Matches(c, "backward dgrid (mask {dgrid})", dgrid_only, dgrid_ref));
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenCaseTest, testing::ValuesIn(ManifestCases()), TestName);

// The manifest must be well formed and cover every mode x padding x
// align_corners x dtype combination, plus Hin = 1 and Win = 1 inputs, with
// all six files of every case present.
TEST(GoldenManifest, CoversAllCombinationsAndSizeOne) {
  const Manifest& m = GetManifest();
  for (const std::string& e : m.errors) ADD_FAILURE() << e;
  ASSERT_FALSE(m.cases.empty()) << "no cases in " << kGoldenDir << "/cases.txt";

  const std::vector<std::string> modes = {"bilinear", "nearest", "bicubic"};
  const std::vector<std::string> paddings = {"zeros", "border", "reflection"};
  const std::vector<std::string> dtypes = {"f32", "f64"};

  std::set<std::tuple<std::string, std::string, int, std::string>> seen;
  std::set<std::string> ids;
  bool has_hin1 = false, has_win1 = false, has_both1 = false;
  for (const GoldenCase& c : m.cases) {
    EXPECT_TRUE(ids.insert(c.id).second) << "duplicate id " << c.id << " (line " << c.line << ")";
    EXPECT_NE(std::find(modes.begin(), modes.end(), c.mode), modes.end()) << c;
    EXPECT_NE(std::find(paddings.begin(), paddings.end(), c.padding), paddings.end()) << c;
    EXPECT_TRUE(c.align == 0 || c.align == 1) << c;
    EXPECT_NE(std::find(dtypes.begin(), dtypes.end(), c.dtype), dtypes.end()) << c;
    seen.insert({c.mode, c.padding, c.align, c.dtype});

    const DType dtype = c.dtype == "f64" ? DType::kFloat64 : DType::kFloat32;
    npy::Array input;
    for (const char* what : {"input", "grid", "grad", "out", "dx", "dgrid"}) {
      npy::Array a;
      EXPECT_TRUE(Load(c, what, dtype, &a)) << c;
      if (std::string(what) == "input") input = a;
    }
    if (input.shape.size() == 4) {
      has_hin1 = has_hin1 || input.shape[2] == 1;
      has_win1 = has_win1 || input.shape[3] == 1;
      has_both1 = has_both1 || (input.shape[2] == 1 && input.shape[3] == 1);
    }
  }
  for (const auto& mode : modes)
    for (const auto& pad : paddings)
      for (int align : {0, 1})
        for (const auto& dt : dtypes)
          EXPECT_TRUE(seen.count({mode, pad, align, dt}))
              << "no golden case for mode=" << mode << " padding=" << pad
              << " align_corners=" << align << " dtype=" << dt;
  EXPECT_EQ(seen.size(), 36u);
  EXPECT_TRUE(has_hin1) << "no case with Hin = 1";
  EXPECT_TRUE(has_win1) << "no case with Win = 1";
  EXPECT_TRUE(has_both1) << "no case with Hin = Win = 1";
}

}  // namespace
}  // namespace gridsampler
