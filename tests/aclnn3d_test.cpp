// The aclnn 3-D interface (aclnnGridSampler3D[Backward]) on 5-D tensors:
// results equal the C++ API's bit for bit and the float64 reference's within
// rounding, for every dtype, format tag and layout; every error path returns
// its code, sets aclGetRecentErrMsg and writes nothing; executors are
// single-use and refused by the other operators; views past 2^31 elements.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler2d.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_grid_sampler3d.h"
#include "aclnnop/aclnn_grid_sampler3d_backward.h"
#include "core/validate.hpp"
#include "host/element_access.hpp"
#include "reference/reference.hpp"

namespace {

namespace gs = gridsampler;
using gs::DType;
using gs::Interpolation;
using gs::Options;
using gs::OutputMask;
using gs::Padding;
using gs::Shape5;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

aclDataType acl_dtype(DType d) {
  switch (d) {
    case DType::kFloat16: return ACL_FLOAT16;
    case DType::kBFloat16: return ACL_BF16;
    case DType::kFloat32: return ACL_FLOAT;
    case DType::kFloat64: return ACL_DOUBLE;
  }
  return ACL_DT_UNDEFINED;
}

// Memory layouts of the sweep. kChannelsLast is NDHWC for data tensors (the
// grid stays row-major); kPadded leaves a gap after every dimension;
// kNegative walks W backwards.
enum class Layout { kContiguous, kChannelsLast, kPadded, kNegative };
const char* to_string(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "ncdhw";
    case Layout::kChannelsLast: return "ndhwc";
    case Layout::kPadded: return "padded";
    case Layout::kNegative: return "negative-w";
  }
  return "?";
}

// A 5-D tensor over a storage of its own: exactly the elements its view
// reaches, first filled with the byte 0xA5 so that writes outside the view
// show.
struct Vol {
  DType dtype = DType::kFloat32;
  Shape5 shape{}, strides{};
  int64_t offset = 0;  // elements, of element (0, 0, 0, 0, 0)
  int64_t storage = 0;  // elements
  std::vector<unsigned char> mem;
  aclTensor* t = nullptr;

  Vol() = default;
  Vol(DType d, const Shape5& s, Layout layout, bool grid_like = false) : dtype(d), shape(s) {
    Shape5 alloc = s;
    if (layout == Layout::kPadded) {
      for (auto& x : alloc) x += 1;
    }
    strides = layout == Layout::kChannelsLast && !grid_like ? gs::channels_last_strides_5d(alloc)
                                                             : gs::contiguous_strides_5d(alloc);
    if (layout == Layout::kNegative) strides[4] = -strides[4];
    bool empty = false;
    for (int64_t x : s) empty = empty || x == 0;
    int64_t lo = 0, hi = -1;
    if (!empty) {
      EXPECT_TRUE(gs::detail::stride_reach(shape, strides, 0, &lo, &hi));
    }
    offset = -lo;
    storage = hi - lo + 1;
    mem.assign(static_cast<std::size_t>(storage) * gs::dtype_size(d), 0xA5);
  }
  Vol(const Vol&) = delete;
  Vol& operator=(const Vol&) = delete;
  ~Vol() { aclDestroyTensor(t); }

  int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3] * shape[4]; }
  // The storage offset of the element at logical (row-major) index i.
  int64_t at(int64_t i) const {
    int64_t off = offset;
    for (int d = 4; d >= 0; --d) {
      off += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return off;
  }
  unsigned char* element(int64_t i) { return mem.data() + at(i) * static_cast<int64_t>(gs::dtype_size(dtype)); }
  double get(int64_t i) const {
    return gs::host::load_element(mem.data() + at(i) * static_cast<int64_t>(gs::dtype_size(dtype)), dtype);
  }
  void set(int64_t i, double v) { gs::host::store_element(element(i), dtype, v); }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<std::size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) v[static_cast<std::size_t>(i)] = get(i);
    return v;
  }
  void fill_uniform(std::mt19937_64& rng, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < numel(); ++i) set(i, dist(rng));
  }
  void fill(double v) {
    for (int64_t i = 0; i < numel(); ++i) set(i, v);
  }
  gs::MutableVolumeView view() {
    return {numel() == 0 ? static_cast<void*>(mem.data()) : element(0), dtype, shape, strides};
  }
  // The aclTensor over this memory (made once).
  aclTensor* acl(aclFormat format = ACL_FORMAT_ND) {
    if (t == nullptr) {
      t = aclCreateTensor(shape.data(), 5, acl_dtype(dtype), strides.data(), offset, format, &storage, 1,
                          mem.data());
    }
    return t;
  }
};

// A random problem: input and grad uniform in [-1, 1], grid in [-1.2, 1.2].
struct Problem3 {
  int64_t n, c, din, hin, win, dout, hout, wout;
  Shape5 input() const { return {n, c, din, hin, win}; }
  Shape5 grid() const { return {n, dout, hout, wout, 3}; }
  Shape5 out() const { return {n, c, dout, hout, wout}; }
};

struct Operands {
  Vol input, grid, grad;
  Operands(const Problem3& p, DType d, Layout layout, uint64_t seed)
      : input(d, p.input(), layout), grid(d, p.grid(), layout, true), grad(d, p.out(), layout) {
    std::mt19937_64 rng(seed);
    input.fill_uniform(rng, -1, 1);
    grid.fill_uniform(rng, -1.2, 1.2);
    grad.fill_uniform(rng, -1, 1);
  }
};

// Both phases of the backward; the status of the first that fails.
aclnnStatus backward(aclTensor* grad, aclTensor* input, aclTensor* grid, const Options& o, const bool* mask,
                     aclTensor* dx, aclTensor* dgrid, aclrtStream stream = nullptr) {
  aclBoolArray* m = mask ? aclCreateBoolArray(mask, 2) : nullptr;
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  aclnnStatus s = aclnnGridSampler3DBackwardGetWorkspaceSize(
      grad, input, grid, static_cast<int64_t>(o.interpolation), static_cast<int64_t>(o.padding), o.align_corners, m,
      dx, dgrid, &ws, &exec);
  aclDestroyBoolArray(m);
  if (s != ACLNN_SUCCESS) return s;
  void* w = nullptr;
  if (ws > 0) {
    EXPECT_EQ(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  }
  s = aclnnGridSampler3DBackward(w, ws, exec, stream);
  aclrtFree(w);
  return s;
}

aclnnStatus forward(aclTensor* input, aclTensor* grid, const Options& o, aclTensor* out) {
  uint64_t ws = 1;
  aclOpExecutor* exec = nullptr;
  aclnnStatus s = aclnnGridSampler3DGetWorkspaceSize(input, grid, static_cast<int64_t>(o.interpolation),
                                                     static_cast<int64_t>(o.padding), o.align_corners, out, &ws,
                                                     &exec);
  if (s != ACLNN_SUCCESS) return s;
  EXPECT_EQ(ws, 0u);  // the forward takes its copies from the library's own cache
  return aclnnGridSampler3D(nullptr, 0, exec, nullptr);
}

std::string describe(const Options& o) {
  return std::string(gs::to_string(o.interpolation)) + "/" + std::string(gs::to_string(o.padding)) +
         (o.align_corners ? "/align" : "");
}

// Same values, NaN equal to NaN, bit-exact otherwise.
void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]";
    } else {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
      if (got[i] != want[i]) return;
    }
  }
}

// |got - want| <= k * eps(dtype) * max(1, max |want|) element by element.
void expect_near_reference(const std::vector<double>& got, const std::vector<double>& want, DType d, double k,
                           const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double eps = d == DType::kFloat16 ? 0x1p-11 : d == DType::kBFloat16 ? 0x1p-8 : d == DType::kFloat32 ? 0x1p-24 : 0x1p-53;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], k * eps * scale) << what << " [" << i << "]";
  }
}

// ---------------------------------------------------------------------------

TEST(Aclnn3d, MatchesTheCppApiBitForBitAndTheReference) {
  const Problem3 p{2, 3, 4, 5, 6, 3, 2, 4};
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (Layout layout : {Layout::kContiguous, Layout::kChannelsLast, Layout::kPadded, Layout::kNegative}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
        const Padding pad = static_cast<Padding>((static_cast<int>(layout) + static_cast<int>(mode)) % 3);
        const Options opt{mode, pad, layout == Layout::kPadded || layout == Layout::kNegative};
        const std::string what = std::string(gs::to_string(dt)) + " " + to_string(layout) + " " + describe(opt);
        Operands x(p, dt, layout, 11);
        Vol dx(dt, p.input(), layout), dgrid(dt, p.grid(), layout, true), out(dt, p.out(), layout);
        const aclFormat tag = layout == Layout::kChannelsLast ? ACL_FORMAT_NDHWC : ACL_FORMAT_NCDHW;
        ASSERT_EQ(backward(x.grad.acl(tag), x.input.acl(tag), x.grid.acl(), opt, nullptr, dx.acl(tag), dgrid.acl(),
                           stream),
                  ACLNN_SUCCESS)
            << what << ": " << aclGetRecentErrMsg();
        ASSERT_EQ(forward(x.input.acl(tag), x.grid.acl(), opt, out.acl(tag)), ACLNN_SUCCESS)
            << what << ": " << aclGetRecentErrMsg();

        // The C++ API on the same memory layout.
        Vol api_dx(dt, p.input(), layout), api_dgrid(dt, p.grid(), layout, true), api_out(dt, p.out(), layout);
        gs::Status s = gs::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), api_dx.view(),
                                                    api_dgrid.view(), opt);
        ASSERT_TRUE(s.ok()) << s.message();
        s = gs::grid_sampler_3d(x.input.view(), x.grid.view(), api_out.view(), opt);
        ASSERT_TRUE(s.ok()) << s.message();
        expect_same(dx.values(), api_dx.values(), what + " inputGrad");
        expect_same(dgrid.values(), api_dgrid.values(), what + " gridGrad");
        expect_same(out.values(), api_out.values(), what + " out");
        // Nothing outside the views was written.
        EXPECT_EQ(dx.mem, api_dx.mem) << what;
        EXPECT_EQ(out.mem, api_out.mem) << what;

        // The reference (coordinates in the same compute dtype, sums in
        // double, rounded once to the dtype).
        Vol ref_dx(dt, p.input(), Layout::kContiguous);
        Vol ref_dgrid(dt, p.grid(), Layout::kContiguous, true);
        Vol ref_out(dt, p.out(), Layout::kContiguous);
        s = gs::reference::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), ref_dx.view(),
                                                    ref_dgrid.view(), opt);
        ASSERT_TRUE(s.ok()) << s.message();
        s = gs::reference::grid_sampler_3d(x.input.view(), x.grid.view(), ref_out.view(), opt);
        ASSERT_TRUE(s.ok()) << s.message();
        // Bounds as multiples of the dtype's epsilon times the largest value:
        // 16-bit results are rounded once; float32 sums 64 taps or a few
        // hundred dx terms; dgrid is scaled by up to W/2 per component.
        const double k = dt == DType::kFloat16 || dt == DType::kBFloat16 ? 4 : 512;
        expect_near_reference(out.values(), ref_out.values(), dt, k, what + " out vs reference");
        expect_near_reference(dx.values(), ref_dx.values(), dt, k, what + " inputGrad vs reference");
        expect_near_reference(dgrid.values(), ref_dgrid.values(), dt, 4 * k, what + " gridGrad vs reference");
      }
    }
  }
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

// A masked-out output may be a null tensor, and is never written.
TEST(Aclnn3d, OutputMask) {
  const Problem3 p{1, 2, 3, 4, 5, 2, 3, 2};
  Operands x(p, DType::kFloat32, Layout::kContiguous, 5);
  const Options opt{Interpolation::kBilinear, Padding::kBorder, false};
  Vol want_dx(DType::kFloat32, p.input(), Layout::kContiguous), want_dg(DType::kFloat32, p.grid(), Layout::kContiguous, true);
  ASSERT_TRUE(gs::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), want_dx.view(),
                                           want_dg.view(), opt)
                  .ok());
  {
    Vol dx(DType::kFloat32, p.input(), Layout::kContiguous);
    const bool mask[2] = {true, false};
    ASSERT_EQ(backward(x.grad.acl(), x.input.acl(), x.grid.acl(), opt, mask, dx.acl(), nullptr), ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    EXPECT_EQ(dx.values(), want_dx.values());
  }
  {
    Vol dx(DType::kFloat32, p.input(), Layout::kContiguous), dg(DType::kFloat32, p.grid(), Layout::kContiguous, true);
    const auto dx_before = dx.mem;
    const bool mask[2] = {false, true};
    ASSERT_EQ(backward(x.grad.acl(), x.input.acl(), x.grid.acl(), opt, mask, dx.acl(), dg.acl()), ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    EXPECT_EQ(dg.values(), want_dg.values());
    EXPECT_EQ(dx.mem, dx_before);  // not wanted: not touched
  }
  {
    // A masked-out output is not even validated: a rank-4 tensor is fine.
    Vol dg(DType::kFloat32, p.grid(), Layout::kContiguous, true);
    const int64_t dims4[4] = {1, 1, 2, 2};
    float junk[4] = {};
    aclTensor* rank4 = aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, dims4, 4, junk);
    const bool mask[2] = {false, true};
    EXPECT_EQ(backward(x.grad.acl(), x.input.acl(), x.grid.acl(), opt, mask, rank4, dg.acl()), ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    EXPECT_EQ(junk[0], 0.0f);
    aclDestroyTensor(rank4);
  }
}

// Empty problems succeed: dx is zeroed, dgrid (no output voxels) untouched.
TEST(Aclnn3d, EmptyProblems) {
  for (const Problem3& p : {Problem3{0, 2, 3, 3, 3, 2, 2, 2}, Problem3{1, 0, 3, 3, 3, 2, 2, 2},
                            Problem3{1, 2, 3, 3, 3, 0, 2, 2}, Problem3{1, 2, 3, 3, 3, 2, 2, 0}}) {
    Operands x(p, DType::kFloat32, Layout::kContiguous, 3);
    Vol dx(DType::kFloat32, p.input(), Layout::kContiguous), dg(DType::kFloat32, p.grid(), Layout::kContiguous, true),
        out(DType::kFloat32, p.out(), Layout::kContiguous);
    dx.fill(kNaN);
    ASSERT_EQ(backward(x.grad.acl(), x.input.acl(), x.grid.acl(), {}, nullptr, dx.acl(), dg.acl()), ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    for (double v : dx.values()) EXPECT_EQ(v, 0.0);
    ASSERT_EQ(forward(x.input.acl(), x.grid.acl(), {}, out.acl()), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  }
}

// Every format tag of the 3-D operators is accepted, whatever the strides;
// the 2-D ones are refused on a 5-D tensor, and the 3-D ones by the 2-D
// operators.
TEST(Aclnn3d, FormatTags) {
  const Problem3 p{1, 2, 2, 3, 4, 2, 2, 3};
  Operands x(p, DType::kFloat64, Layout::kChannelsLast, 9);
  Vol want(DType::kFloat64, p.out(), Layout::kContiguous);
  ASSERT_TRUE(gs::grid_sampler_3d(x.input.view(), x.grid.view(), want.view(), {}).ok());
  for (aclFormat f : {ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC, ACL_FORMAT_ND}) {
    Vol out(DType::kFloat64, p.out(), Layout::kContiguous);
    aclTensor* in = aclCreateTensor(x.input.shape.data(), 5, ACL_DOUBLE, x.input.strides.data(), x.input.offset, f,
                                    &x.input.storage, 1, x.input.mem.data());
    ASSERT_EQ(forward(in, x.grid.acl(), {}, out.acl(f)), ACLNN_SUCCESS) << f << ": " << aclGetRecentErrMsg();
    EXPECT_EQ(out.values(), want.values()) << f;
    aclDestroyTensor(in);
  }
  for (int f : {0, 1, 3, 29, 31, -1}) {
    Vol out(DType::kFloat64, p.out(), Layout::kContiguous);
    EXPECT_EQ(forward(x.input.acl(), x.grid.acl(), {}, out.acl(static_cast<aclFormat>(f))), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()),
              "out: unsupported format " + std::to_string(f) +
                  " (expected ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC or ACL_FORMAT_ND)");
  }
  // The 2-D forward refuses the 3-D tags (on 4-D tensors).
  float img[4] = {1, 2, 3, 4}, grid[2] = {0, 0}, y[1] = {0};
  const int64_t idims[4] = {1, 1, 2, 2}, gdims[4] = {1, 1, 1, 2}, ydims[4] = {1, 1, 1, 1};
  aclTensor* i4 = aclCreateTensor(idims, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCDHW, idims, 4, img);
  aclTensor* g4 = aclCreateTensor(gdims, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, gdims, 4, grid);
  aclTensor* y4 = aclCreateTensor(ydims, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, ydims, 4, y);
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  EXPECT_EQ(aclnnGridSampler2DGetWorkspaceSize(i4, g4, 0, 0, false, y4, &ws, &exec), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()),
            "input: unsupported format 30 (expected ACL_FORMAT_NCHW, ACL_FORMAT_NHWC or ACL_FORMAT_ND)");
  for (aclTensor* t : {i4, g4, y4}) aclDestroyTensor(t);
  EXPECT_EQ(static_cast<int>(ACL_FORMAT_NCDHW), 30);
  EXPECT_EQ(static_cast<int>(aclFormat::ACL_FORMAT_NDHWC), 27);
}

// Each planning error: its code, its exact message, and no byte written.
TEST(Aclnn3d, PlanningErrors) {
  const Problem3 p{2, 3, 4, 5, 6, 2, 3, 4};
  Operands x(p, DType::kFloat32, Layout::kContiguous, 7);
  Vol dx(DType::kFloat32, p.input(), Layout::kContiguous), dg(DType::kFloat32, p.grid(), Layout::kContiguous, true);
  Vol grid2(DType::kFloat32, {2, 2, 3, 4, 2}, Layout::kContiguous, true);
  Vol grid64(DType::kFloat64, p.grid(), Layout::kContiguous, true);
  Vol grad64(DType::kFloat64, p.out(), Layout::kContiguous);
  Vol grad_bad(DType::kFloat32, {2, 3, 2, 3, 5}, Layout::kContiguous);
  Vol grid_batch(DType::kFloat32, {1, 2, 3, 4, 3}, Layout::kContiguous, true);
  Vol dx_bad(DType::kFloat32, {2, 3, 4, 5, 7}, Layout::kContiguous);
  const auto dx_before = dx.mem, dg_before = dg.mem;
  float scratch[144] = {};
  const int64_t dims4[4] = {2, 3, 4, 3}, dims5[5] = {2, 2, 3, 4, 3}, neg[5] = {2, -2, 3, 4, 3};
  aclTensor* rank4 = aclCreateTensor(dims4, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims4, 4, scratch);
  int32_t ints[144] = {};
  aclTensor* int_grid = aclCreateTensor(dims5, 5, ACL_INT32, nullptr, 0, ACL_FORMAT_ND, dims5, 5, ints);
  aclTensor* nchw_grid = aclCreateTensor(dims5, 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, dims5, 5, scratch);
  const int64_t small_storage = 10;
  aclTensor* outside = aclCreateTensor(dims5, 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, &small_storage, 1, scratch);
  aclTensor* null_data = aclCreateTensor(dims5, 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims5, 5, nullptr);
  const int64_t s5[5] = {1, 1, 1, 1, 1};
  aclTensor* negative = aclCreateTensor(neg, 5, ACL_FLOAT, s5, 0, ACL_FORMAT_ND, dims5, 5, scratch);
  const int64_t huge_strides[5] = {std::numeric_limits<int64_t>::max(), 1, 1, 1, 1};
  aclTensor* overflowing = aclCreateTensor(dims5, 5, ACL_FLOAT, huge_strides, 0, ACL_FORMAT_ND, dims5, 5, scratch);
  aclTensor* dead = aclCreateTensor(dims5, 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims5, 5, scratch);
  // inputGrad over the input's memory; gridGrad inside inputGrad's.
  aclTensor* alias = aclCreateTensor(x.input.shape.data(), 5, ACL_FLOAT, x.input.strides.data(), 0, ACL_FORMAT_NCDHW,
                                     &x.input.storage, 1, x.input.mem.data());
  aclTensor* dg_in_dx = aclCreateTensor(p.grid().data(), 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, &dx.storage, 1,
                                        dx.mem.data());
  // An output of out's shape over the input's memory.
  aclTensor* out_alias = aclCreateTensor(p.out().data(), 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCDHW, &x.input.storage,
                                         1, x.input.mem.data());
  for (Vol* v : {&grid2, &grid64, &grad64, &grad_bad, &grid_batch, &dx_bad}) v->acl();
  aclTensor *g = x.grad.acl(), *in = x.input.acl(), *gr = x.grid.acl(), *d = dx.acl(), *dgr = dg.acl();
  ASSERT_EQ(aclDestroyTensor(dead), ACLNN_SUCCESS);  // after every other handle is made
  const Options ok{};
  struct Case {
    const char* name;
    aclTensor *grad, *input, *grid, *dx, *dgrid;
    Options opt;
    const bool* mask;
    aclnnStatus code;
    std::string message;
  };
  const bool both[2] = {true, true};
  const std::vector<Case> cases = {
      {"null grad", nullptr, in, gr, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "gradOutput: tensor is null"},
      {"null input", g, nullptr, gr, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "input: tensor is null"},
      {"null dx wanted", g, in, gr, nullptr, dgr, ok, both, ACLNN_ERR_PARAM_NULLPTR, "inputGrad: tensor is null"},
      {"null dgrid", g, in, gr, d, nullptr, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "gridGrad: tensor is null"},
      {"rank 4 grid", g, in, rank4, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "grid: expected 5 dimensions, got 4"},
      {"int grid", g, in, int_grid, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: unsupported dtype 3 (expected ACL_FLOAT16, ACL_BF16, ACL_FLOAT or ACL_DOUBLE)"},
      {"2-D format", g, in, nchw_grid, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: unsupported format 0 (expected ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC or ACL_FORMAT_ND)"},
      {"outside storage", g, in, outside, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: view reaches elements 0..143 outside its storage of 10 elements"},
      {"null data", g, in, null_data, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_NULLPTR, "grid: data is null"},
      {"negative dim", g, in, negative, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: dimension 1 is negative (-2)"},
      {"strides overflow", g, in, overflowing, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: strides overflow 64 bits"},
      {"destroyed tensor", g, in, dead, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: not a live tensor (destroyed or foreign)"},
      {"mode", g, in, gr, d, dgr, {static_cast<Interpolation>(3), Padding::kZeros, false}, nullptr,
       ACLNN_ERR_PARAM_INVALID, "interpolationMode: unknown value 3 (expected 0 bilinear, 1 nearest or 2 bicubic)"},
      {"padding", g, in, gr, d, dgr, {Interpolation::kBilinear, static_cast<Padding>(-1), false}, nullptr,
       ACLNN_ERR_PARAM_INVALID, "paddingMode: unknown value -1 (expected 0 zeros, 1 border or 2 reflection)"},
      // The core's rules, with aclnn's tensor names.
      {"grid last dim", g, in, grid2.acl(), d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: last dimension must be 3, got 2"},
      {"mixed dtypes", g, in, grid64.acl(), d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: dtype float64 differs from input's float32"},
      {"grad dtype", grad64.acl(), in, gr, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "gradOutput: dtype float64 differs from input's float32"},
      {"grad shape", grad_bad.acl(), in, gr, d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID, "gradOutput: "},
      {"grid batch", g, in, grid_batch.acl(), d, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "grid: batch size 1 does not match input's 2"},
      {"dx shape", g, in, gr, dx_bad.acl(), dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "inputGrad: shape (2, 3, 4, 5, 7) must be (2, 3, 4, 5, 6)"},
      {"dx aliases input", g, in, gr, alias, dgr, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "inputGrad: memory overlaps input"},
      {"dgrid in dx", g, in, gr, d, dg_in_dx, ok, nullptr, ACLNN_ERR_PARAM_INVALID,
       "gridGrad: memory overlaps inputGrad"},
  };
  for (const Case& c : cases) {
    const aclnnStatus s = backward(c.grad, c.input, c.grid, c.opt, c.mask, c.dx, c.dgrid);
    EXPECT_EQ(s, c.code) << c.name << ": " << aclGetRecentErrMsg();
    EXPECT_EQ(std::string(aclGetRecentErrMsg()).rfind(c.message, 0), 0u)
        << c.name << ": message was '" << aclGetRecentErrMsg() << "', expected '" << c.message << "'";
    EXPECT_EQ(dx.mem, dx_before) << c.name;
    EXPECT_EQ(dg.mem, dg_before) << c.name;
  }
  // The forward names its output `out`, and refuses rank 4 too.
  EXPECT_EQ(forward(in, gr, ok, rank4), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "out: expected 5 dimensions, got 4");
  EXPECT_EQ(forward(in, gr, ok, out_alias), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()).rfind("out: memory overlaps input", 0), 0u) << aclGetRecentErrMsg();
  // A valid input that reaches 4 floats through zero strides, but whose depth
  // and height do not merge: its packed copy (2^54 bytes) could never be
  // allocated, so planning refuses it.
  {
    const int64_t vast[5] = {1, 1, int64_t{1} << 40, 4, 1024}, along_h[5] = {0, 0, 0, 1, 0};
    const int64_t four = 4, gdims[5] = {1, 1, 1, 2, 3}, odims[5] = {1, 1, 1, 1, 2};
    float values[4] = {}, points[6] = {}, outputs[2] = {};
    aclTensor* vast_in = aclCreateTensor(vast, 5, ACL_FLOAT, along_h, 0, ACL_FORMAT_ND, &four, 1, values);
    aclTensor* few = aclCreateTensor(gdims, 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, gdims, 5, points);
    aclTensor* small_out = aclCreateTensor(odims, 5, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, odims, 5, outputs);
    uint64_t size = 1;
    aclOpExecutor* plan = nullptr;
    EXPECT_EQ(aclnnGridSampler3DGetWorkspaceSize(vast_in, few, 0, 0, false, small_out, &size, &plan), ACLNN_ERR_INNER);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()), "workspace: cannot allocate a packed copy of input");
    EXPECT_EQ(plan, nullptr);
    for (aclTensor* t : {vast_in, few, small_out}) aclDestroyTensor(t);
  }
  // The 2-D operators refuse 5-D tensors.
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  EXPECT_EQ(aclnnGridSampler2DBackwardGetWorkspaceSize(g, in, gr, 0, 0, false, nullptr, d, dgr, &ws, &exec),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "gradOutput: expected 4 dimensions, got 5");
  // Bad output pointers, mask size, dead mask.
  EXPECT_EQ(aclnnGridSampler3DBackwardGetWorkspaceSize(g, in, gr, 0, 0, false, nullptr, d, dgr, nullptr, &exec),
            ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "workspaceSize: pointer is null");
  EXPECT_EQ(aclnnGridSampler3DBackwardGetWorkspaceSize(g, in, gr, 0, 0, false, nullptr, d, dgr, &ws, nullptr),
            ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "executor: pointer is null");
  EXPECT_EQ(aclnnGridSampler3DGetWorkspaceSize(in, gr, 0, 0, false, nullptr, &ws, &exec), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "out: tensor is null");
  const bool mask3[3] = {true, true, true};
  aclBoolArray* m3 = aclCreateBoolArray(mask3, 3);
  EXPECT_EQ(aclnnGridSampler3DBackwardGetWorkspaceSize(g, in, gr, 0, 0, false, m3, d, dgr, &ws, &exec),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "outputMask: expected 2 values, got 3");
  aclDestroyBoolArray(m3);
  EXPECT_EQ(aclnnGridSampler3DBackwardGetWorkspaceSize(g, in, gr, 0, 0, false, m3, d, dgr, &ws, &exec),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "outputMask: not a live bool array");
  for (aclTensor* t : {rank4, int_grid, nchw_grid, outside, null_data, negative, overflowing, alias, dg_in_dx, out_alias}) {
    aclDestroyTensor(t);
  }
  EXPECT_EQ(dx.mem, dx_before);
  EXPECT_EQ(dg.mem, dg_before);
}

TEST(Aclnn3d, ExecutionErrors) {
  const Problem3 p{1, 2, 3, 4, 5, 2, 3, 3};
  Operands x(p, DType::kFloat16, Layout::kContiguous, 9);
  Vol dx(DType::kFloat16, p.input(), Layout::kContiguous), dg(DType::kFloat16, p.grid(), Layout::kContiguous, true);
  const auto dx_before = dx.mem;
  auto plan = [&](uint64_t* ws) {
    aclOpExecutor* exec = nullptr;
    EXPECT_EQ(aclnnGridSampler3DBackwardGetWorkspaceSize(x.grad.acl(), x.input.acl(), x.grid.acl(), 2, 1, false,
                                                         nullptr, dx.acl(), dg.acl(), ws, &exec),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    return exec;
  };
  uint64_t ws = 0;
  EXPECT_EQ(aclnnGridSampler3DBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "aclnnGridSampler3DBackward: executor is null");

  aclOpExecutor* exec = plan(&ws);
  // Room for the run below whatever the plan asks (0 included).
  std::vector<unsigned char> space(ws + 64);
  if (ws > 0) {
    // Missing workspace: an error, and the executor is consumed.
    EXPECT_EQ(aclnnGridSampler3DBackward(nullptr, ws, exec, nullptr), ACLNN_ERR_PARAM_NULLPTR);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()),
              "workspace: null but " + std::to_string(ws) + " bytes are needed");
    EXPECT_EQ(aclnnGridSampler3DBackward(nullptr, ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()),
              "aclnnGridSampler3DBackward: executor is not live (already executed, or not from this library)");
    // Too short a workspace.
    exec = plan(&ws);
    EXPECT_EQ(aclnnGridSampler3DBackward(space.data(), ws - 1, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()),
              "workspace: " + std::to_string(ws - 1) + " bytes given, " + std::to_string(ws) + " needed");
  } else {
    EXPECT_EQ(aclnnGridSampler3DBackward(nullptr, 0, exec, nullptr), ACLNN_SUCCESS);
    dx.mem = dx_before;
  }
  // A stream that is not from aclrtCreateStream.
  int not_a_stream = 0;
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler3DBackward(space.data(), ws, exec, &not_a_stream), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "aclnnGridSampler3DBackward: stream is not from aclrtCreateStream");
  // Foreign handles are rejected untouched; every other operator refuses a
  // 3-D backward plan, and the 3-D backward refuses a 2-D one.
  alignas(64) unsigned char junk[256];
  std::memset(junk, 0x5a, sizeof junk);
  EXPECT_EQ(aclnnGridSampler3DBackward(nullptr, 0, reinterpret_cast<aclOpExecutor*>(junk), nullptr),
            ACLNN_ERR_PARAM_INVALID);
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler3D(space.data(), ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()),
            "aclnnGridSampler3D: executor was planned for another grid sampler operator (aclnnGridSampler3DBackward)");
  exec = plan(&ws);
  EXPECT_EQ(aclnnGridSampler2DBackward(space.data(), ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()),
            "aclnnGridSampler2DBackward: executor was planned for another grid sampler operator "
            "(aclnnGridSampler3DBackward)");
  {
    float img[4] = {1, 2, 3, 4}, grid[2] = {0, 0}, y[1] = {0};
    const int64_t idims[4] = {1, 1, 2, 2}, gdims[4] = {1, 1, 1, 2}, ydims[4] = {1, 1, 1, 1};
    aclTensor* i4 = aclCreateTensor(idims, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, idims, 4, img);
    aclTensor* g4 = aclCreateTensor(gdims, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, gdims, 4, grid);
    aclTensor* y4 = aclCreateTensor(ydims, 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, ydims, 4, y);
    uint64_t ws2 = 0;
    ASSERT_EQ(aclnnGridSampler2DGetWorkspaceSize(i4, g4, 0, 0, false, y4, &ws2, &exec), ACLNN_SUCCESS);
    EXPECT_EQ(aclnnGridSampler3D(nullptr, 0, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()),
              "aclnnGridSampler3D: executor was planned for another grid sampler operator (aclnnGridSampler2D)");
    EXPECT_EQ(y[0], 0.0f);
    for (aclTensor* t : {i4, g4, y4}) aclDestroyTensor(t);
  }
  EXPECT_EQ(dx.mem, dx_before);

  // A correct run after all that (tensors may be destroyed once planned),
  // and the executor is then spent.
  exec = plan(&ws);
  aclDestroyTensor(x.grad.t);
  x.grad.t = nullptr;
  EXPECT_EQ(aclnnGridSampler3DBackward(space.data() + 3, ws, exec, nullptr), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_NE(dx.mem, dx_before);
  Vol want(DType::kFloat16, p.input(), Layout::kContiguous), want_dg(DType::kFloat16, p.grid(), Layout::kContiguous, true);
  const Options opt{Interpolation::kBicubic, Padding::kBorder, false};
  ASSERT_TRUE(gs::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), want.view(), want_dg.view(), opt)
                  .ok());
  EXPECT_EQ(dx.values(), want.values());
  EXPECT_EQ(dg.values(), want_dg.values());
  EXPECT_EQ(aclnnGridSampler3DBackward(space.data(), ws, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
}

// NaN, infinities and huge coordinates through aclnn: the C++ API's bits,
// and the reference's values (NaN where it has NaN).
TEST(Aclnn3d, HostileGridValues) {
  const Problem3 p{1, 2, 3, 4, 5, 3, 3, 3};
  const double hostile[] = {kNaN, kInf, -kInf, 1e30, -1e30, 0x1p48, -0x1p60, 1.0, -1.0, 0.5, 3.0, -2.5};
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
      const Options opt{mode, pad, pad == Padding::kReflection};
      Operands x(p, DType::kFloat32, Layout::kContiguous, 13);
      for (int64_t i = 0; i < x.grid.numel(); ++i) {
        if (i % 2 == 0) x.grid.set(i, hostile[(i / 2) % (sizeof hostile / sizeof hostile[0])]);
      }
      Vol dx(DType::kFloat32, p.input(), Layout::kContiguous), dg(DType::kFloat32, p.grid(), Layout::kContiguous, true),
          out(DType::kFloat32, p.out(), Layout::kContiguous);
      ASSERT_EQ(backward(x.grad.acl(), x.input.acl(), x.grid.acl(), opt, nullptr, dx.acl(), dg.acl()), ACLNN_SUCCESS)
          << aclGetRecentErrMsg();
      ASSERT_EQ(forward(x.input.acl(), x.grid.acl(), opt, out.acl()), ACLNN_SUCCESS) << aclGetRecentErrMsg();
      Vol api_dx(DType::kFloat32, p.input(), Layout::kContiguous), api_dg(DType::kFloat32, p.grid(), Layout::kContiguous, true),
          api_out(DType::kFloat32, p.out(), Layout::kContiguous);
      ASSERT_TRUE(gs::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), api_dx.view(),
                                               api_dg.view(), opt)
                      .ok());
      ASSERT_TRUE(gs::grid_sampler_3d(x.input.view(), x.grid.view(), api_out.view(), opt).ok());
      const std::string what = describe(opt);
      expect_same(dx.values(), api_dx.values(), what + " inputGrad");
      expect_same(dg.values(), api_dg.values(), what + " gridGrad");
      expect_same(out.values(), api_out.values(), what + " out");
      // The reference, coordinates in float32 as the kernels' (design.md §2).
      Vol ref_dx(DType::kFloat32, p.input(), Layout::kContiguous), ref_dg(DType::kFloat32, p.grid(), Layout::kContiguous, true),
          ref_out(DType::kFloat32, p.out(), Layout::kContiguous);
      ASSERT_TRUE(gs::reference::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), ref_dx.view(),
                                                          ref_dg.view(), opt)
                      .ok());
      ASSERT_TRUE(gs::reference::grid_sampler_3d(x.input.view(), x.grid.view(), ref_out.view(), opt).ok());
      for (auto [got, want, name] : {std::tuple{out.values(), ref_out.values(), "out"},
                                     std::tuple{dx.values(), ref_dx.values(), "inputGrad"},
                                     std::tuple{dg.values(), ref_dg.values(), "gridGrad"}}) {
        for (std::size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << what << " " << name << "[" << i << "]";
          if (!std::isnan(want[i])) {
            EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i]))) << what << " " << name << "[" << i << "]";
          }
        }
      }
    }
  }
}

// Views whose elements lie past 2^31 (and 2^32) elements of their storage: a
// sparse mapping never committed (MAP_NORESERVE), reached through aclnn's
// offset and strides; the results are those of the same problem, compact.
TEST(Aclnn3d, OffsetsPast2To31Elements) {
  const Problem3 p{1, 2, 2, 3, 3, 2, 2, 3};
  // input and inputGrad (no two elements share memory) from an offset of
  // 2^31 + 5: strides (0, 2^33 + 1, 2^31 + 3, 2^29 + 1, 2^28), whose depth and
  // height do not merge into rows (the kernels read a packed copy), and the
  // same with a depth stride of 3 (2^29 + 1), which merge (read in place).
  const int64_t h_stride = (int64_t{1} << 29) + 1;
  for (const Shape5& strides : {Shape5{0, (int64_t{1} << 33) + 1, (int64_t{1} << 31) + 3, h_stride, int64_t{1} << 28},
                                Shape5{0, (int64_t{1} << 33) + 1, 3 * h_stride, h_stride, int64_t{1} << 28}}) {
    const int64_t offset = (int64_t{1} << 31) + 5;
    const int64_t last = offset + strides[1] + strides[2] + 2 * strides[3] + 2 * strides[4];
    const std::size_t bytes = static_cast<std::size_t>(last + 1) * 2;
    void* in_map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* dx_map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (in_map == MAP_FAILED || dx_map == MAP_FAILED) {
      if (in_map != MAP_FAILED) ::munmap(in_map, bytes);
      if (dx_map != MAP_FAILED) ::munmap(dx_map, bytes);
      GTEST_SKIP() << "cannot map " << (bytes >> 30) << " GiB of address space";
    }
    auto* in_mem = static_cast<unsigned char*>(in_map);
    auto* dx_mem = static_cast<unsigned char*>(dx_map);
    auto at = [&](int64_t i) {  // logical index of the input's shape -> element offset
      const Shape5 s = p.input();
      int64_t off = offset;
      for (int d = 4; d >= 0; --d) {
        off += (i % s[d]) * strides[d];
        i /= s[d];
      }
      return off;
    };
    const int64_t storage = last + 1;
    aclTensor* in = aclCreateTensor(p.input().data(), 5, ACL_FLOAT16, strides.data(), offset, ACL_FORMAT_NCDHW,
                                    &storage, 1, in_mem);
    aclTensor* dxt = aclCreateTensor(p.input().data(), 5, ACL_FLOAT16, strides.data(), offset, ACL_FORMAT_NCDHW,
                                     &storage, 1, dx_mem);
    for (const Options& opt : {Options{Interpolation::kBilinear, Padding::kZeros, false},
                               Options{Interpolation::kBicubic, Padding::kReflection, true},
                               Options{Interpolation::kNearest, Padding::kBorder, false}}) {
      Operands x(p, DType::kFloat16, Layout::kContiguous, 21);
      for (int64_t i = 0; i < x.input.numel(); ++i) gs::host::store_element(in_mem + at(i) * 2, DType::kFloat16, x.input.get(i));
      Vol dg(DType::kFloat16, p.grid(), Layout::kContiguous, true);
      ASSERT_EQ(backward(x.grad.acl(), in, x.grid.acl(), opt, nullptr, dxt, dg.acl()), ACLNN_SUCCESS)
          << aclGetRecentErrMsg();
      Vol want_dx(DType::kFloat16, p.input(), Layout::kContiguous), want_dg(DType::kFloat16, p.grid(), Layout::kContiguous, true);
      ASSERT_TRUE(gs::grid_sampler_3d_backward(x.grad.view(), x.input.view(), x.grid.view(), want_dx.view(),
                                               want_dg.view(), opt)
                      .ok());
      for (int64_t i = 0; i < x.input.numel(); ++i) {
        EXPECT_EQ(gs::host::load_element(dx_mem + at(i) * 2, DType::kFloat16), want_dx.get(i)) << describe(opt) << " " << i;
      }
      EXPECT_EQ(dg.values(), want_dg.values()) << describe(opt);
    }
    // The storage bound is checked against the far end too.
    const int64_t short_storage = last;
    aclTensor* too_short = aclCreateTensor(p.input().data(), 5, ACL_FLOAT16, strides.data(), offset, ACL_FORMAT_NCDHW,
                                           &short_storage, 1, dx_mem);
    Operands x(p, DType::kFloat16, Layout::kContiguous, 21);
    Vol dg(DType::kFloat16, p.grid(), Layout::kContiguous, true);
    EXPECT_EQ(backward(x.grad.acl(), in, x.grid.acl(), {}, nullptr, too_short, dg.acl()), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(std::string(aclGetRecentErrMsg()), "inputGrad: view reaches elements " + std::to_string(offset) + ".." +
                                                     std::to_string(last) + " outside its storage of " +
                                                     std::to_string(last) + " elements");
    for (aclTensor* t : {in, dxt, too_short}) aclDestroyTensor(t);
    ::munmap(in_map, bytes);
    ::munmap(dx_map, bytes);
  }
}

}  // namespace
