// Volumes against golden data made by PyTorch's grid_sampler_3d and its
// backward (tests/data/make_golden_3d.py; the torch version is recorded in
// tests/data/golden3d/cases.txt).
//
// The cases of one shape and dtype (a "set") share <set>_{input,grid,grad}.npy
// and stack their results in <set>_{out,dx,dgrid}.npy along a leading axis;
// each manifest line "set index mode padding align_corners dtype" is one test,
// VolumeGolden/...MatchesTorch/<set>_<index>, comparing result [index] with
//   max |ours - torch| <= tol * max(1, max |torch|),
//   tol = 1e-10 (float64), 1e-4 (float32),
// for the reference and the library (kImplementations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/element_access.hpp"
#include "io/npy.hpp"
#include "reference/reference.hpp"

namespace gridsampler {
namespace {

const std::string kGoldenDir = std::string(GS_TEST_DATA_DIR) + "/golden3d";

// The implementations checked against torch.
struct Implementation {
  const char* name;
  Status (*forward)(VolumeView, VolumeView, MutableVolumeView, const Options&);
  Status (*backward)(VolumeView, VolumeView, VolumeView, MutableVolumeView, MutableVolumeView, const Options&,
                     OutputMask);
};
const Implementation kImplementations[] = {
    {"reference", &reference::grid_sampler_3d, &reference::grid_sampler_3d_backward},
    {"library", &grid_sampler_3d, &grid_sampler_3d_backward},
};

struct GoldenCase {
  std::string set;
  int index = 0;
  std::string mode, padding;
  int align = 0;
  std::string dtype;
  int line = 0;
};

std::ostream& operator<<(std::ostream& os, const GoldenCase& c) {
  return os << c.set << "[" << c.index << "] (mode=" << c.mode << " padding=" << c.padding
            << " align_corners=" << c.align << " dtype=" << c.dtype << ")";
}

struct Manifest {
  std::vector<GoldenCase> cases;
  std::vector<std::string> errors;
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
    if (!(ls >> c.set >> c.index >> c.mode >> c.padding >> c.align >> c.dtype) || (ls >> extra)) {
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

std::string TestName(const testing::TestParamInfo<GoldenCase>& info) {
  return info.param.set + "_" + std::to_string(info.param.index);
}

DType ParseDType(const std::string& s) { return s == "f64" ? DType::kFloat64 : DType::kFloat32; }

Shape5 AsShape5(const std::vector<int64_t>& s) { return {s[0], s[1], s[2], s[3], s[4]}; }

// One array of a set; `stacked` arrays have a leading case axis (rank 6).
testing::AssertionResult Load(const GoldenCase& c, const std::string& what, bool stacked, npy::Array* out) {
  const std::string path = kGoldenDir + "/" + c.set + "_" + what + ".npy";
  const Status st = npy::read(path, out);
  if (!st.ok()) return testing::AssertionFailure() << "cannot read " << path << ": " << st.message();
  if (out->dtype != ParseDType(c.dtype))
    return testing::AssertionFailure() << path << ": dtype " << to_string(out->dtype) << ", manifest says "
                                       << c.dtype;
  const std::size_t rank = stacked ? 6 : 5;
  if (out->shape.size() != rank)
    return testing::AssertionFailure() << path << ": rank " << out->shape.size() << ", expected " << rank;
  if (stacked && c.index >= out->shape[0])
    return testing::AssertionFailure() << path << ": " << out->shape[0] << " cases, manifest asks for "
                                       << c.index;
  return testing::AssertionSuccess();
}

// Case `index` of a stacked array, as a 5-D array of its own.
npy::Array Slice(const npy::Array& stacked, int index) {
  npy::Array a;
  a.dtype = stacked.dtype;
  a.shape.assign(stacked.shape.begin() + 1, stacked.shape.end());
  const std::size_t bytes = static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype);
  a.data.resize(bytes);
  if (bytes > 0) std::memcpy(a.data.data(), stacked.data.data() + bytes * static_cast<std::size_t>(index), bytes);
  return a;
}

double ElementAt(const npy::Array& a, int64_t i) {
  return host::load_element(a.data.data() + i * static_cast<int64_t>(dtype_size(a.dtype)), a.dtype);
}

// A result array shaped like `like`, filled with NaN so that anything left
// unwritten shows up.
npy::Array NanLike(const npy::Array& like) {
  npy::Array a;
  a.dtype = like.dtype;
  a.shape = like.shape;
  a.data.resize(like.data.size());
  const auto size = static_cast<int64_t>(dtype_size(a.dtype));
  for (int64_t i = 0; i < like.numel(); ++i)
    host::store_element(a.data.data() + i * size, a.dtype, std::numeric_limits<double>::quiet_NaN());
  return a;
}

MutableVolumeView Mutable(npy::Array& a) { return MutableVolumeView::contiguous(a.data.data(), a.dtype, AsShape5(a.shape)); }
VolumeView Const(const npy::Array& a) { return VolumeView::contiguous(a.data.data(), a.dtype, AsShape5(a.shape)); }

testing::AssertionResult Matches(const std::string& what, const npy::Array& ours, const npy::Array& torch) {
  if (ours.shape != torch.shape) return testing::AssertionFailure() << what << ": shapes differ";
  const double tol = torch.dtype == DType::kFloat64 ? 1e-10 : 1e-4;
  double max_ref = 0;
  for (int64_t i = 0; i < torch.numel(); ++i) max_ref = std::max(max_ref, std::fabs(ElementAt(torch, i)));
  const double bound = tol * std::max(1.0, max_ref);
  int64_t bad = 0, worst_i = -1;
  double worst = 0;
  for (int64_t i = 0; i < torch.numel(); ++i) {
    double err = std::fabs(ElementAt(ours, i) - ElementAt(torch, i));
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    if (err > bound) ++bad;
    if (worst_i < 0 || err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  if (bad == 0) return testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(17);
  os << what << ": " << bad << " of " << torch.numel() << " elements beyond " << bound << "; worst flat index "
     << worst_i << ": ours " << ElementAt(ours, worst_i) << ", torch " << ElementAt(torch, worst_i);
  return testing::AssertionFailure() << os.str();
}

class VolumeGoldenTest : public testing::TestWithParam<GoldenCase> {};

TEST_P(VolumeGoldenTest, MatchesTorch) {
  const GoldenCase& c = GetParam();
  SCOPED_TRACE(testing::Message() << "case " << c << ", cases.txt line " << c.line);
  const auto mode = parse_interpolation(c.mode);
  const auto padding = parse_padding(c.padding);
  ASSERT_TRUE(mode.has_value()) << c.mode;
  ASSERT_TRUE(padding.has_value()) << c.padding;
  ASSERT_TRUE(c.align == 0 || c.align == 1);

  npy::Array input, grid, grad, outs, dxs, dgrids;
  ASSERT_TRUE(Load(c, "input", false, &input));
  ASSERT_TRUE(Load(c, "grid", false, &grid));
  ASSERT_TRUE(Load(c, "grad", false, &grad));
  ASSERT_TRUE(Load(c, "out", true, &outs));
  ASSERT_TRUE(Load(c, "dx", true, &dxs));
  ASSERT_TRUE(Load(c, "dgrid", true, &dgrids));
  const npy::Array out_ref = Slice(outs, c.index), dx_ref = Slice(dxs, c.index), dgrid_ref = Slice(dgrids, c.index);
  ASSERT_EQ(out_ref.shape, grad.shape);
  ASSERT_EQ(dx_ref.shape, input.shape);
  ASSERT_EQ(dgrid_ref.shape, grid.shape);

  Options opt;
  opt.interpolation = *mode;
  opt.padding = *padding;
  opt.align_corners = c.align != 0;
  for (const Implementation& impl : kImplementations) {
    SCOPED_TRACE(impl.name);
    npy::Array out = NanLike(out_ref);
    Status st = impl.forward(Const(input), Const(grid), Mutable(out), opt);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(Matches("forward out", out, out_ref));

    npy::Array dx = NanLike(dx_ref), dgrid = NanLike(dgrid_ref);
    st = impl.backward(Const(grad), Const(input), Const(grid), Mutable(dx), Mutable(dgrid), opt, {true, true});
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(Matches("backward dx", dx, dx_ref));
    EXPECT_TRUE(Matches("backward dgrid", dgrid, dgrid_ref));

    // One output masked off: the other is the same, the masked one untouched.
    npy::Array dx_only = NanLike(dx_ref), dgrid_only = NanLike(dgrid_ref);
    const npy::Array dgrid_untouched = dgrid_only;
    st = impl.backward(Const(grad), Const(input), Const(grid), Mutable(dx_only), Mutable(dgrid_only), opt,
                       {true, false});
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(Matches("backward dx (mask {dx})", dx_only, dx_ref));
    EXPECT_EQ(dgrid_only.data, dgrid_untouched.data) << "dgrid written although not wanted";
    st = impl.backward(Const(grad), Const(input), Const(grid), MutableVolumeView{}, Mutable(dgrid_only), opt,
                       {false, true});
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(Matches("backward dgrid (mask {dgrid})", dgrid_only, dgrid_ref));
  }
}

INSTANTIATE_TEST_SUITE_P(VolumeGolden, VolumeGoldenTest, testing::ValuesIn(GetManifest().cases), TestName);

// The manifest covers every mode x padding x align_corners x dtype, and
// inputs with Din = 1, Hin = 1, Win = 1 and all three, with readable files.
TEST(VolumeGoldenManifest, CoversAllCombinationsAndSizeOne) {
  const Manifest& m = GetManifest();
  for (const std::string& e : m.errors) ADD_FAILURE() << e;
  ASSERT_FALSE(m.cases.empty()) << "no cases in " << kGoldenDir << "/cases.txt";
  std::set<std::tuple<std::string, std::string, int, std::string>> seen;
  std::set<std::pair<std::string, int>> ids;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  for (const GoldenCase& c : m.cases) {
    EXPECT_TRUE(ids.insert({c.set, c.index}).second) << "duplicate " << c;
    EXPECT_TRUE(parse_interpolation(c.mode).has_value()) << c;
    EXPECT_TRUE(parse_padding(c.padding).has_value()) << c;
    EXPECT_TRUE(c.dtype == "f32" || c.dtype == "f64") << c;
    seen.insert({c.mode, c.padding, c.align, c.dtype});
    if (!input_shapes.count(c.set)) {
      npy::Array a;
      for (const char* what : {"grid", "grad"}) EXPECT_TRUE(Load(c, what, false, &a)) << c;
      for (const char* what : {"out", "dx", "dgrid"}) EXPECT_TRUE(Load(c, what, true, &a)) << c;
      EXPECT_TRUE(Load(c, "input", false, &a)) << c;
      input_shapes[c.set] = a.shape;
    }
  }
  EXPECT_EQ(seen.size(), 3u * 3 * 2 * 2);
  bool d1 = false, h1 = false, w1 = false, all1 = false;
  for (const auto& [set, s] : input_shapes) {
    if (s.size() != 5) continue;
    d1 = d1 || (s[2] == 1 && s[3] > 1 && s[4] > 1);
    h1 = h1 || (s[3] == 1 && s[2] > 1 && s[4] > 1);
    w1 = w1 || (s[4] == 1 && s[2] > 1 && s[3] > 1);
    all1 = all1 || (s[2] == 1 && s[3] == 1 && s[4] == 1);
  }
  EXPECT_TRUE(d1 && h1 && w1 && all1) << "size-1 cases missing: D " << d1 << " H " << h1 << " W " << w1 << " all "
                                      << all1;
}

}  // namespace
}  // namespace gridsampler
