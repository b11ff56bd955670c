// ab_bits: a deterministic sweep over the public API that prints one line per
// output, "<label> <hash>", where the hash is the 64-bit FNV-1a of the output's
// elements in logical (n, c, h, w) order. Two builds of the library are
// bit-for-bit equal on the sweep when their outputs of this program are equal
// (bench/ab.py bits compiles it against each build and diffs them).
//
// Only include/gridsampler/gridsampler.hpp is used, so the program compiles
// against any build that keeps the public API, whatever the kernels inside.
// Data come from an own PRNG and own conversions (the standard
// distributions are implementation-defined), so the lines do not depend on
// the standard library either.
//
//   g++ -O2 -std=c++20 bench/ab_bits.cpp -Iinclude -Lbuild -lgridsampler
//       -Wl,-rpath,$PWD/build -o ab_bits      (one command line)
//   ./ab_bits [--filter SUBSTRING] [--count] [--selftest]
//
// The sweep: every mode x padding x align_corners x dtype x layout (NCHW, or
// channels-last input, grad, output and dx) x shape (kShapes) x 1 and 2
// threads; forward, and backward with each output mask. Grids mix uniform
// values with NaN, +-Inf, +-1e30 and lattice points (see grid_value).
// --selftest checks the 16-bit conversions; --count prints the line count.
//
// Lines are "<op> <mode> <padding> ac=<0|1> <dtype> <layout> <shape> t<threads>
// [mask=...] <output> <hash>". An output the mask leaves out is hashed too:
// its buffer holds a fill pattern that must come back untouched. A call that
// fails prints "ERR<code>" in place of the hash.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"

namespace gs = gridsampler;

namespace {

// ---------------------------------------------------------------------------
// Deterministic numbers.

// SplitMix64: tiny, fully specified, and good enough to spread test data.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi): 53 random bits scaled; every step is exact or
  // correctly rounded IEEE arithmetic, so the value is the same everywhere.
  double uniform(double lo, double hi) {
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return lo + u * (hi - lo);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

constexpr uint64_t kFnvOffset = 0xCBF29CE484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001B3ull;

uint64_t fnv1a(uint64_t h, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

uint64_t fnv1a(const std::string& s) { return fnv1a(kFnvOffset, s.data(), s.size()); }

// ---------------------------------------------------------------------------
// float -> 16-bit storage, rounding to nearest even. The public header has
// no 16-bit types, so the bits are made here.

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

uint16_t float_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);  // a carry into the exponent is the right result
}

uint16_t float_to_f16(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  // 65520 lies halfway between 65504 (the largest half) and 65536; the tie
  // goes to the even neighbour, which is infinity.
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    // 2^-25 is halfway between 0 and the smallest subnormal; ties go to 0.
    if (a <= 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = a >> 23;  // 102 .. 112
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value / 2^-24 = m >> shift
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry to the smallest normal, correctly
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t r = a - (112u << 23);  // rebias the exponent from 127 to 15
  uint32_t q = r >> 13;
  const uint32_t rem = r & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

// Stores `v` as one element of `dtype`: double -> float is IEEE
// round-to-nearest-even, then float -> 16 bits as above.
void store(gs::DType dtype, void* base, int64_t index, double v) {
  switch (dtype) {
    case gs::DType::kFloat64: static_cast<double*>(base)[index] = v; break;
    case gs::DType::kFloat32: static_cast<float*>(base)[index] = static_cast<float>(v); break;
    case gs::DType::kFloat16: static_cast<uint16_t*>(base)[index] = float_to_f16(static_cast<float>(v)); break;
    case gs::DType::kBFloat16: static_cast<uint16_t*>(base)[index] = float_to_bf16(static_cast<float>(v)); break;
  }
}

// ---------------------------------------------------------------------------
// Tensors.

struct Tensor {
  std::vector<unsigned char> bytes;
  gs::DType dtype = gs::DType::kFloat32;
  gs::Shape4 shape{};
  gs::Shape4 strides{};
  std::size_t esize = 4;

  Tensor(gs::DType d, const gs::Shape4& s, bool channels_last) : dtype(d), shape(s) {
    strides = channels_last ? gs::channels_last_strides(s) : gs::contiguous_strides(s);
    esize = gs::dtype_size(d);
    bytes.assign(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[3]) * esize, 0xA5);  // the fill pattern
  }
  int64_t offset(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3];
  }
  gs::TensorView view() const { return {bytes.data(), dtype, shape, strides}; }
  gs::MutableTensorView mutable_view() { return {bytes.data(), dtype, shape, strides}; }

  template <class F>
  void for_each(F&& f) const {
    for (int64_t a = 0; a < shape[0]; ++a)
      for (int64_t b = 0; b < shape[1]; ++b)
        for (int64_t c = 0; c < shape[2]; ++c)
          for (int64_t d = 0; d < shape[3]; ++d) f(a, b, c, d, offset(a, b, c, d));
  }
  void fill_uniform(Rng* rng, double lo, double hi) {
    for_each([&](int64_t, int64_t, int64_t, int64_t, int64_t off) { store(dtype, bytes.data(), off, rng->uniform(lo, hi)); });
  }
  // Logical order, so the hash does not depend on the layout.
  uint64_t hash() const {
    uint64_t h = kFnvOffset;
    for_each([&](int64_t, int64_t, int64_t, int64_t, int64_t off) {
      h = fnv1a(h, bytes.data() + static_cast<std::size_t>(off) * esize, esize);
    });
    return h;
  }
};

// One grid coordinate over an axis of `size` input pixels: mostly uniform in
// [-1.2, 1.2] (slightly outside, so every padding rule is exercised), with
// non-finite values, huge values and exact lattice points mixed in, where
// kernels take special paths (NaN handling, clamping, ties of nearest).
double grid_value(Rng* rng, int64_t size, bool align_corners) {
  const uint64_t r = rng->below(100);
  const double s = static_cast<double>(size);
  const double i = static_cast<double>(rng->below(static_cast<uint64_t>(size)));
  if (r < 3) return std::numeric_limits<double>::quiet_NaN();
  if (r < 6) return std::numeric_limits<double>::infinity();
  if (r < 9) return -std::numeric_limits<double>::infinity();
  if (r < 12) return (rng->next() & 1) ? 1e30 : -1e30;
  if (r < 15) return static_cast<double>(static_cast<int>(rng->below(3)) - 1);  // -1, 0, 1
  if (r < 27) {  // a pixel centre
    if (align_corners) return size > 1 ? 2.0 * i / (s - 1.0) - 1.0 : 0.0;
    return (2.0 * i + 1.0) / s - 1.0;
  }
  if (r < 35) {  // a pixel edge (halfway between centres: ties for nearest)
    if (align_corners) return size > 1 ? (2.0 * i + 1.0) / (s - 1.0) - 1.0 : 0.5;
    return 2.0 * i / s - 1.0;
  }
  return rng->uniform(-1.2, 1.2);
}

// ---------------------------------------------------------------------------
// The sweep.

struct Shape {
  int64_t n, c, in_h, in_w, out_h, out_w;
};

// Channel counts 1, 3, 16 and 40 take different kernel plans (planar, narrow
// and full lanes, several lane blocks); batches 1 and 8 change the task
// split. Spatial sizes are small and odd so the sweep stays fast and tiles
// have remainders; 1x1 and 1xW inputs hit the degenerate scales.
constexpr Shape kShapes[] = {
    {1, 1, 7, 9, 5, 11},   {8, 1, 6, 5, 9, 4},   {1, 3, 13, 10, 7, 17}, {8, 3, 5, 7, 6, 3},
    {1, 16, 9, 12, 11, 8}, {8, 16, 4, 6, 5, 7},  {1, 40, 8, 7, 6, 9},   {8, 40, 3, 5, 4, 6},
    {2, 5, 1, 1, 3, 4},    {1, 2, 1, 8, 2, 19},  {2, 16, 23, 29, 31, 19},
};

constexpr gs::DType kDtypes[] = {gs::DType::kFloat16, gs::DType::kBFloat16, gs::DType::kFloat32,
                                 gs::DType::kFloat64};
constexpr gs::Interpolation kModes[] = {gs::Interpolation::kBilinear, gs::Interpolation::kNearest,
                                        gs::Interpolation::kBicubic};
constexpr gs::Padding kPaddings[] = {gs::Padding::kZeros, gs::Padding::kBorder, gs::Padding::kReflection};

const char* dtype_tag(gs::DType d) {
  switch (d) {
    case gs::DType::kFloat16: return "f16";
    case gs::DType::kBFloat16: return "bf16";
    case gs::DType::kFloat32: return "f32";
    case gs::DType::kFloat64: return "f64";
  }
  return "?";
}

struct Sweep {
  std::string filter;
  bool count_only = false;
  long lines = 0;

  void emit(const std::string& label, const gs::Status& status, const Tensor* t) {
    ++lines;
    char hash[64];
    if (!status.ok()) {
      std::snprintf(hash, sizeof hash, "ERR%d", static_cast<int>(status.code()));
    } else {
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(t->hash()));
    }
    std::printf("%s %s\n", label.c_str(), hash);
  }

  void run_case(const Shape& sh, gs::DType dtype, bool channels_last, gs::Interpolation mode, gs::Padding padding,
                bool align, int threads) {
    char base[200];
    std::snprintf(base, sizeof base, "%s %s ac=%d %s %s %lld,%lld,%lld,%lld,%lld,%lld t%d",
                  std::string(gs::to_string(mode)).c_str(), std::string(gs::to_string(padding)).c_str(),
                  align ? 1 : 0, dtype_tag(dtype), channels_last ? "nhwc" : "nchw", static_cast<long long>(sh.n),
                  static_cast<long long>(sh.c), static_cast<long long>(sh.in_h), static_cast<long long>(sh.in_w),
                  static_cast<long long>(sh.out_h), static_cast<long long>(sh.out_w), threads);
    const std::string fwd = std::string("fwd ") + base, bwd = std::string("bwd ") + base;
    struct MaskCase {
      const char* name;
      gs::OutputMask mask;
    };
    constexpr MaskCase kMasks[] = {{"mask=both", {true, true}}, {"mask=dx", {true, false}},
                                   {"mask=dgrid", {false, true}}};
    auto wanted = [&](const std::string& label) { return label.find(filter) != std::string::npos; };
    const bool want_fwd = wanted(fwd + " out");
    bool want_mask[3], want_bwd = false;
    for (int m = 0; m < 3; ++m) {
      const std::string prefix = bwd + " " + kMasks[m].name;
      want_mask[m] = wanted(prefix + " dx") || wanted(prefix + " dgrid");
      want_bwd = want_bwd || want_mask[m];
    }
    if (!want_fwd && !want_bwd) return;
    if (count_only) {
      lines += (want_fwd ? 1 : 0) + 2 * (want_mask[0] + want_mask[1] + want_mask[2]);
      return;
    }

    const gs::Shape4 in_shape{sh.n, sh.c, sh.in_h, sh.in_w}, grid_shape{sh.n, sh.out_h, sh.out_w, 2},
        out_shape{sh.n, sh.c, sh.out_h, sh.out_w};
    // The data depend on the case's label minus the thread count and layout,
    // so those variants see the same numbers and must give the same bits.
    char data_key[200];
    std::snprintf(data_key, sizeof data_key, "%s %s ac=%d %s %lld,%lld,%lld,%lld,%lld,%lld",
                  std::string(gs::to_string(mode)).c_str(), std::string(gs::to_string(padding)).c_str(),
                  align ? 1 : 0, dtype_tag(dtype), static_cast<long long>(sh.n), static_cast<long long>(sh.c),
                  static_cast<long long>(sh.in_h), static_cast<long long>(sh.in_w),
                  static_cast<long long>(sh.out_h), static_cast<long long>(sh.out_w));
    Rng rng{fnv1a(data_key)};
    Tensor input(dtype, in_shape, channels_last), grid(dtype, grid_shape, false),
        grad(dtype, out_shape, channels_last);
    input.fill_uniform(&rng, -1.0, 1.0);
    grad.fill_uniform(&rng, -1.0, 1.0);
    grid.for_each([&](int64_t, int64_t, int64_t, int64_t k, int64_t off) {
      const double v = k == 0 ? grid_value(&rng, sh.in_w, align) : grid_value(&rng, sh.in_h, align);
      store(dtype, grid.bytes.data(), off, v);
    });

    gs::Options options;
    options.interpolation = mode;
    options.padding = padding;
    options.align_corners = align;
    options.num_threads = threads;

    if (want_fwd) {
      Tensor out(dtype, out_shape, channels_last);
      const gs::Status s = gs::grid_sampler_2d(input.view(), grid.view(), out.mutable_view(), options);
      emit(fwd + " out", s, &out);
    }
    for (int i = 0; i < 3; ++i) {
      if (!want_mask[i]) continue;
      const MaskCase& m = kMasks[i];
      Tensor dx(dtype, in_shape, channels_last), dgrid(dtype, grid_shape, false);
      const gs::Status s = gs::grid_sampler_2d_backward(grad.view(), input.view(), grid.view(), dx.mutable_view(),
                                                        dgrid.mutable_view(), options, m.mask);
      emit(bwd + " " + m.name + " dx", s, &dx);
      emit(bwd + " " + m.name + " dgrid", s, &dgrid);
    }
  }

  void run() {
    for (const Shape& sh : kShapes)
      for (gs::DType dtype : kDtypes)
        for (bool channels_last : {false, true})
          for (gs::Interpolation mode : kModes)
            for (gs::Padding padding : kPaddings)
              for (bool align : {false, true})
                for (int threads : {1, 2}) run_case(sh, dtype, channels_last, mode, padding, align, threads);
  }
};

// Checks the 16-bit conversions against exact arithmetic on a spread of
// float bit patterns (every 2^k-th pattern plus the neighbourhoods of the
// boundaries), so that a wrong conversion cannot hide behind equal hashes.
int selftest() {
  long bad = 0;
  auto f16_value = [](uint16_t h) -> double {
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const double mag = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -mag : mag;
  };
  auto bf16_value = [](uint16_t b) -> double {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  // Nearest representable, ties to an even last bit, for finite non-NaN x;
  // `value` maps a non-negative 15-bit pattern to its value.
  auto expect = [](double x, auto value, uint16_t max_finite, uint16_t inf) -> uint16_t {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(x);
    uint16_t lo = 0, hi = inf;  // binary search: value(lo) <= a < value(hi)
    while (hi - lo > 1) {
      const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
      (value(mid) <= a ? lo : hi) = mid;
    }
    double up = value(hi);
    if (hi == inf) up = 2 * value(max_finite) - value(static_cast<uint16_t>(max_finite - 1));  // next step
    const double dl = a - value(lo), du = up - a;
    const uint16_t pick = dl < du ? lo : du < dl ? hi : ((lo & 1) ? hi : lo);
    return static_cast<uint16_t>(sign | pick);
  };
  auto check = [&](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    if (std::isnan(f)) {
      const uint16_t h = float_to_f16(f), b = float_to_bf16(f);
      if ((h & 0x7C00) != 0x7C00 || (h & 0x3FF) == 0 || (b & 0x7F80) != 0x7F80 || (b & 0x7F) == 0) ++bad;
      return;
    }
    const uint16_t want_h = std::isinf(f) ? static_cast<uint16_t>((u >> 16 & 0x8000) | 0x7C00)
                                          : expect(f, f16_value, 0x7BFF, 0x7C00);
    const uint16_t want_b = std::isinf(f) ? static_cast<uint16_t>(u >> 16) : expect(f, bf16_value, 0x7F7F, 0x7F80);
    if (float_to_f16(f) != want_h || float_to_bf16(f) != want_b) {
      if (bad < 10) {
        std::fprintf(stderr, "selftest: %08x -> f16 %04x (want %04x), bf16 %04x (want %04x)\n", u,
                     float_to_f16(f), want_h, float_to_bf16(f), want_b);
      }
      ++bad;
    }
  };
  long checked = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) check(static_cast<uint32_t>(u)), ++checked;
  for (uint32_t centre : {0x33000000u, 0x33800000u, 0x38800000u, 0x387FC000u, 0x477FE000u, 0x477FF000u,
                          0x47800000u, 0x7F7F8000u, 0x7F7FFFFFu, 0x00000000u, 0x00800000u, 0x3F808000u,
                          0x3F818000u, 0x3F801000u, 0x3F803000u}) {
    for (uint32_t sign : {0u, 0x80000000u})
      for (int d = -4200; d <= 4200; ++d) check((centre + static_cast<uint32_t>(d)) ^ sign), ++checked;
  }
  std::printf("selftest: %ld patterns, %ld wrong\n", checked, bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Sweep sweep;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      sweep.filter = argv[++i];
    } else if (a == "--count") {
      sweep.count_only = true;
    } else if (a == "--selftest") {
      return selftest();
    } else {
      std::fprintf(stderr, "usage: %s [--filter SUBSTRING] [--count] [--selftest]\n", argv[0]);
      return 2;
    }
  }
  sweep.run();
  if (sweep.count_only) std::printf("%ld\n", sweep.lines);
  std::fflush(stdout);
  return 0;
}
