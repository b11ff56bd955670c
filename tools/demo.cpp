#include "demo.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "demo_scene.hpp"
#include "host/tensor.hpp"
#include "png_io.hpp"
#include "reference/reference.hpp"

namespace gridsampler::demo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBatch = 2;
constexpr int64_t kChannels = 3;
constexpr int kGap = 4;  // pixels between tiles in the PNGs
constexpr double kPi = 3.14159265358979323846;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Timing: median of up to this many runs, fewer once a call's runs have
// taken this long (the first run always counts).
constexpr int kLibraryReps = 5;
constexpr int kReferenceReps = 3;
constexpr double kRepBudgetMs = 150;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

using host::Tensor;
using png::inferno;
using png::Rgb;
using png::rgb_from_unit;
using png::RgbImage;
using png::write_png;

// ---------------------------------------------------------------------------
// The example.

struct Affine {
  double angle_deg, scale, shift_x, shift_y;
};
// Image 0 is zoomed out (its grid reaches well outside [-1, 1]), image 1
// zoomed in and turned the other way (only its corners reach outside).
constexpr std::array<Affine, kBatch> kAffine = {{{15, 1.2, 0.05, -0.04}, {-30, 0.8, -0.08, 0.06}}};
constexpr int kWaves = 4;                 // sinusoids per axis of the elastic field
constexpr double kWaveAmplitude = 0.015;  // each, in normalised coordinates

struct Example {
  std::vector<double> input;  // (N, C, S, S)
  std::vector<double> grid;   // (N, S, S, 2)
  double max_elastic_px = 0;  // largest elastic displacement, in input pixels
};

// One RGB image, values in [0, 1], into dst (C, S, S). `variant` permutes
// the colours of the background gradient.
void draw_image(int64_t size, int variant, std::mt19937_64& rng, double* dst) {
  const DemoScene scene(variant, rng);
  const double s = static_cast<double>(size);
  const int64_t plane = size * size;
  for (int64_t y = 0; y < size; ++y) {
    for (int64_t x = 0; x < size; ++x) {
      const double u = (static_cast<double>(x) + 0.5) / s, v = (static_cast<double>(y) + 0.5) / s;
      const std::array<double, 3> c = scene.colour(u, v, s);
      for (int64_t k = 0; k < kChannels; ++k) dst[k * plane + y * size + x] = c[static_cast<std::size_t>(k)];
    }
  }
}

Example make_example(int64_t size, uint64_t seed) {
  Example ex;
  const int64_t plane = size * size;
  ex.input.resize(static_cast<std::size_t>(kBatch * kChannels * plane));
  ex.grid.resize(static_cast<std::size_t>(kBatch * plane * 2));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> freq(0.5, 1.5), phase(0, 2 * kPi), sign(-1, 1);
  const double s = static_cast<double>(size);
  double max_elastic = 0;
  for (int64_t n = 0; n < kBatch; ++n) {
    draw_image(size, static_cast<int>(n), rng, ex.input.data() + n * kChannels * plane);
    struct Wave {
      double fx, fy, phase;
    };
    std::array<std::array<Wave, kWaves>, 2> waves;  // per axis
    for (auto& axis : waves) {
      for (Wave& w : axis) {
        const double fx = freq(rng) * (sign(rng) < 0 ? -1 : 1), fy = freq(rng) * (sign(rng) < 0 ? -1 : 1);
        w = {fx, fy, phase(rng)};
      }
    }
    const Affine& a = kAffine[static_cast<std::size_t>(n)];
    const double ca = std::cos(a.angle_deg * kPi / 180), sa = std::sin(a.angle_deg * kPi / 180);
    for (int64_t h = 0; h < size; ++h) {
      for (int64_t w = 0; w < size; ++w) {
        // Pixel centres in [-1, 1] (align_corners = false).
        const double x = (2.0 * static_cast<double>(w) + 1) / s - 1;
        const double y = (2.0 * static_cast<double>(h) + 1) / s - 1;
        double d[2] = {0, 0};
        for (std::size_t k = 0; k < 2; ++k) {
          for (const Wave& wv : waves[k]) {
            d[k] += kWaveAmplitude * std::sin(kPi * (wv.fx * x + wv.fy * y) + wv.phase);
          }
        }
        max_elastic = std::max(max_elastic, std::hypot(d[0], d[1]));
        double* g = ex.grid.data() + ((n * size + h) * size + w) * 2;
        g[0] = a.scale * (ca * x - sa * y) + a.shift_x + d[0];
        g[1] = a.scale * (sa * x + ca * y) + a.shift_y + d[1];
      }
    }
  }
  ex.max_elastic_px = max_elastic * s / 2;
  return ex;
}

// ---------------------------------------------------------------------------
// Checks and timing.

// max |a - b| / max |b|; 0 when both are all zeros, infinite when only the
// reference is, NaN when a difference is not a number.
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return kNaN;
    max_diff = std::max(max_diff, d);
    max_ref = std::max(max_ref, std::fabs(b[i]));
  }
  if (max_ref == 0) return max_diff == 0 ? 0 : std::numeric_limits<double>::infinity();
  return max_diff / max_ref;
}

// Runs `call` up to `reps` times (fewer once kRepBudgetMs is spent) and
// returns the median time in milliseconds; NaN, with *status set, on error.
template <class F>
double median_ms(F&& call, int reps, Status* status) {
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < reps && (times.empty() || total < kRepBudgetMs)) {
    const Clock::time_point t0 = Clock::now();
    Status s = call();
    const double ms = seconds_since(t0) * 1e3;
    if (!s.ok()) {
      *status = std::move(s);
      return kNaN;
    }
    times.push_back(ms);
    total += ms;
  }
  std::sort(times.begin(), times.end());
  const std::size_t m = times.size() / 2;
  return times.size() % 2 ? times[m] : (times[m - 1] + times[m]) / 2;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return 1e-10;
    case DType::kFloat32:
      return 1e-4;
    case DType::kFloat16:
      return 4 * std::ldexp(1.0, -10);
    case DType::kBFloat16:
      break;
  }
  return 4 * std::ldexp(1.0, -7);
}

struct Row {
  Options options;
  double err_out = kNaN, err_dx = kNaN, err_dgrid = kNaN;
  double lib_fwd = kNaN, lib_bwd = kNaN, ref_fwd = kNaN, ref_bwd = kNaN;
  bool pass = false;
  std::string name() const {
    return std::string(to_string(options.interpolation)) + "/" + std::string(to_string(options.padding)) +
           (options.align_corners ? " (align_corners)" : "");
  }
  std::string file_stem() const {
    return std::string(to_string(options.interpolation)) + "_" + std::string(to_string(options.padding)) +
           (options.align_corners ? "_ac" : "");
  }
};

// ---------------------------------------------------------------------------
// Pictures.

int strip_width(int64_t size) { return static_cast<int>(kBatch * size + kGap * (kBatch - 1)); }

// N tiles side by side; tile(n, x, y) gives the colour of item n at (x, y).
template <class F>
RgbImage strip(int64_t size, F&& tile) {
  RgbImage img(strip_width(size), static_cast<int>(size), Rgb{128, 128, 128});
  for (int64_t n = 0; n < kBatch; ++n) {
    const int x0 = static_cast<int>(n * (size + kGap));
    for (int64_t y = 0; y < size; ++y) {
      for (int64_t x = 0; x < size; ++x) {
        img.set(x0 + static_cast<int>(x), static_cast<int>(y), tile(n, x, y));
      }
    }
  }
  return img;
}

RgbImage image_tile(const std::vector<double>& v, int64_t size, int64_t n) {
  const int64_t plane = size * size;
  RgbImage img(static_cast<int>(size), static_cast<int>(size));
  for (int64_t y = 0; y < size; ++y) {
    for (int64_t x = 0; x < size; ++x) {
      const double* p = v.data() + n * kChannels * plane + y * size + x;
      img.set(static_cast<int>(x), static_cast<int>(y), rgb_from_unit(p[0], p[plane], p[2 * plane]));
    }
  }
  return img;
}

RgbImage image_strip(const std::vector<double>& v, int64_t size) {
  RgbImage img(strip_width(size), static_cast<int>(size), Rgb{128, 128, 128});
  for (int64_t n = 0; n < kBatch; ++n)
    img.paste(image_tile(v, size, n), static_cast<int>(n * (size + kGap)), 0);
  return img;
}

// A per-pixel magnitude map (n, x, y) -> value >= 0, each batch item
// normalised to its own largest value, on a square-root scale (so that the
// weaker structure next to the few strongest edges stays visible), in the
// inferno colour map.
template <class F>
RgbImage magnitude_strip(int64_t size, F&& magnitude) {
  std::vector<double> max(static_cast<std::size_t>(kBatch), 0.0);
  for (int64_t n = 0; n < kBatch; ++n) {
    for (int64_t y = 0; y < size; ++y) {
      for (int64_t x = 0; x < size; ++x)
        max[static_cast<std::size_t>(n)] = std::max(max[static_cast<std::size_t>(n)], magnitude(n, x, y));
    }
  }
  return strip(size, [&](int64_t n, int64_t x, int64_t y) {
    const double m = max[static_cast<std::size_t>(n)];
    return inferno(m > 0 ? std::sqrt(magnitude(n, x, y) / m) : 0.0);
  });
}

// Writes the out, dx and dgrid pictures of one row; returns "" or an error.
std::string write_row_pngs(const std::filesystem::path& dir, const std::string& stem, int64_t size,
                           const std::vector<double>& out, const std::vector<double>& dx,
                           const std::vector<double>& dgrid) {
  const int64_t plane = size * size;
  std::string e = write_png((dir / (stem + "_out.png")).string(), image_strip(out, size));
  if (!e.empty()) return e;
  e = write_png(
      (dir / (stem + "_dx.png")).string(), magnitude_strip(size, [&](int64_t n, int64_t x, int64_t y) {
        double sum = 0;
        for (int64_t c = 0; c < kChannels; ++c) {
          sum += std::fabs(dx[static_cast<std::size_t>((n * kChannels + c) * plane + y * size + x)]);
        }
        return sum;
      }));
  if (!e.empty()) return e;
  return write_png((dir / (stem + "_dgrid.png")).string(),
                   magnitude_strip(size, [&](int64_t n, int64_t x, int64_t y) {
                     const double* g = dgrid.data() + ((n * size + y) * size + x) * 2;
                     return std::hypot(g[0], g[1]);
                   }));
}

std::string format_error(double e) {
  if (e == 0) return "0";
  return format("%.1e", e);
}

std::string format_ms(double ms) { return std::isnan(ms) ? "-" : format(ms < 100 ? "%.2f" : "%.1f", ms); }

std::string format_speedup(double ref, double lib) {
  if (std::isnan(ref) || std::isnan(lib) || lib <= 0) return "-";
  return format("%.1fx", ref / lib);
}

std::string pad(const std::string& s, std::size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// `s` centred in `width` columns (as far as it fits; at least one space before).
std::string centre(const std::string& s, std::size_t width) {
  const std::size_t left = s.size() + 1 >= width ? 1 : (width - s.size() + 1) / 2;
  return pad(std::string(left, ' ') + s, width);
}

}  // namespace

int run_demo(const DemoOptions& options, std::ostream& out, std::ostream& err) {
  const Clock::time_point start = Clock::now();
  const int64_t size = options.size;
  if (size < kMinDemoSize || size > kMaxDemoSize) {
    err << "gridsampler: error: --size must be in " << kMinDemoSize << ".." << kMaxDemoSize << ", got "
        << size << '\n';
    return kDemoBadOptions;
  }
  const DType dtype = options.dtype;
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16 && dtype != DType::kFloat32 &&
      dtype != DType::kFloat64) {
    err << "gridsampler: error: --dtype: unknown dtype " << static_cast<int>(dtype) << '\n';
    return kDemoBadOptions;
  }
  const std::filesystem::path png_dir(options.png_dir);
  if (!options.png_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(png_dir, ec);
    if (ec || !std::filesystem::is_directory(png_dir)) {
      err << "gridsampler: error: --png: cannot create directory " << options.png_dir
          << (ec ? ": " + ec.message() : std::string()) << '\n';
      return kDemoBadOptions;
    }
  }

  // The example, stored in the dtype.
  const Example ex = make_example(size, options.seed);
  const Shape4 image_shape = {kBatch, kChannels, size, size};
  const Shape4 grid_shape = {kBatch, size, size, 2};
  Tensor input(dtype, image_shape), grid(dtype, grid_shape), grad(dtype, image_shape);
  input.assign(ex.input);
  grid.assign(ex.grid);
  const std::vector<double> input_values = input.values();
  Tensor ref_out(dtype, image_shape), lib_out(dtype, image_shape);
  Tensor ref_dx(dtype, image_shape), lib_dx(dtype, image_shape);
  Tensor ref_dgrid(dtype, grid_shape), lib_dgrid(dtype, grid_shape);
  const double tol = tolerance(dtype);

  const std::string dtype_name(to_string(dtype));
  out << "gridsampler demo: grid_sample forward and backward (GridSampler2DGrad), library vs float64 "
         "reference\n";
  out << format(
      "  input  %lld x %lld x %lld x %lld %s (N x C x H x W): checkerboard with colour gradients,\n",
      static_cast<long long>(kBatch), static_cast<long long>(kChannels), static_cast<long long>(size),
      static_cast<long long>(size), dtype_name.c_str());
  out << format("         4 discs and a letter F (seed %llu)\n",
                static_cast<unsigned long long>(options.seed));
  out << format(
      "  grid   %lld x %lld x %lld x 2, output %lld x %lld; a spatial-transformer warp per image:\n",
      static_cast<long long>(kBatch), static_cast<long long>(size), static_cast<long long>(size),
      static_cast<long long>(size), static_cast<long long>(size));
  for (int64_t n = 0; n < kBatch; ++n) {
    const Affine& a = kAffine[static_cast<std::size_t>(n)];
    out << format("         image %lld: rotate %+.0f deg, scale %.2f (%s), shift (%+.2f, %+.2f)\n",
                  static_cast<long long>(n), a.angle_deg, a.scale, a.scale > 1 ? "zoom out" : "zoom in",
                  a.shift_x, a.shift_y);
  }
  out << format("         plus a smooth elastic field (%d sinusoids per axis, up to %.1f px)\n", kWaves,
                ex.max_elastic_px);
  out << "  grad   output - input: the gradient of 1/2 ||warp(x) - x||^2, as in registration\n";
  out << format("  error  max |library - reference| / max |reference| per output; bound %.1e (%s)\n", tol,
                dtype_name.c_str());
  out << format(
      "  time   library: median of up to %d runs, milliseconds, one thread; speed-up: median\n"
      "         reference time (of up to %d runs) / library time\n\n",
      kLibraryReps, kReferenceReps);

  // Column widths; numbers are right-aligned under right-aligned headings.
  constexpr std::size_t kMode = 10, kPad = 12, kAlign = 14, kErr = 9, kFwd = 11, kBwd = 10, kSpeed = 10;
  std::string heading1 = std::string(kMode + kPad + kAlign, ' ') +
                         centre("error / max |reference|", 3 * kErr) + centre("library (ms)", kFwd + kBwd) +
                         centre("speed-up vs reference", 2 * kSpeed);
  const std::string heading2 = pad("mode", kMode) + pad("padding", kPad) + pad("align_corners", kAlign) +
                               pad("out", kErr, true) + pad("dx", kErr, true) + pad("dgrid", kErr, true) +
                               pad("forward", kFwd, true) + pad("backward", kBwd, true) +
                               pad("forward", kSpeed, true) + pad("backward", kSpeed, true) + "  check";
  const std::string rule(heading2.size(), '-');
  while (!heading1.empty() && heading1.back() == ' ') heading1.pop_back();
  out << heading1 << '\n' << heading2 << '\n' << rule << '\n' << std::flush;

  std::vector<Options> combos;
  for (Interpolation m : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    for (Padding p : {Padding::kZeros, Padding::kBorder, Padding::kReflection})
      combos.push_back({m, p, false});
  }
  combos.push_back({Interpolation::kBilinear, Padding::kReflection, true});

  std::vector<Row> rows;
  std::vector<std::string> failures;
  std::vector<RgbImage> overview_tiles;  // item 0's output, 3 x 3 combinations
  bool io_error = false;
  for (const Options& o : combos) {
    Row row;
    row.options = o;
    Status status;
    std::string failed_call;
    auto check = [&](const char* what, double ms) {
      if (std::isnan(ms) && failed_call.empty()) failed_call = what;
      return ms;
    };
    ref_out.fill(kNaN);
    lib_out.fill(kNaN);
    row.ref_fwd = check(
        "reference forward",
        median_ms(
            [&] { return reference::grid_sampler_2d(input.view(), grid.view(), ref_out.mutable_view(), o); },
            kReferenceReps, &status));
    if (failed_call.empty()) {
      row.lib_fwd = check(
          "forward",
          median_ms([&] { return grid_sampler_2d(input.view(), grid.view(), lib_out.mutable_view(), o); },
                    kLibraryReps, &status));
    }
    const std::vector<double> out_ref = ref_out.values(), out_lib = lib_out.values();
    std::vector<double> g(out_ref.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = out_ref[i] - input_values[i];
    grad.assign(g);
    ref_dx.fill(kNaN);
    ref_dgrid.fill(kNaN);
    lib_dx.fill(kNaN);
    lib_dgrid.fill(kNaN);
    if (failed_call.empty()) {
      row.ref_bwd = check("reference backward", median_ms(
                                                    [&] {
                                                      return reference::grid_sampler_2d_backward(
                                                          grad.view(), input.view(), grid.view(),
                                                          ref_dx.mutable_view(), ref_dgrid.mutable_view(), o);
                                                    },
                                                    kReferenceReps, &status));
    }
    if (failed_call.empty()) {
      row.lib_bwd = check("backward", median_ms(
                                          [&] {
                                            return grid_sampler_2d_backward(
                                                grad.view(), input.view(), grid.view(), lib_dx.mutable_view(),
                                                lib_dgrid.mutable_view(), o);
                                          },
                                          kLibraryReps, &status));
    }
    const std::vector<double> dx_lib = lib_dx.values(), dgrid_lib = lib_dgrid.values();
    if (failed_call.empty()) {
      row.err_out = relative_error(out_lib, out_ref);
      row.err_dx = relative_error(dx_lib, ref_dx.values());
      row.err_dgrid = relative_error(dgrid_lib, ref_dgrid.values());
      row.pass = row.err_out <= tol && row.err_dx <= tol && row.err_dgrid <= tol;
    } else {
      err << "gridsampler: demo: " << row.name() << ": " << failed_call << " failed: " << status.message()
          << '\n';
    }
    if (!row.pass) failures.push_back(row.name());

    out << pad(std::string(to_string(o.interpolation)), kMode) +
               pad(std::string(to_string(o.padding)), kPad) +
               pad(o.align_corners ? "true" : "false", kAlign) + pad(format_error(row.err_out), kErr, true) +
               pad(format_error(row.err_dx), kErr, true) + pad(format_error(row.err_dgrid), kErr, true) +
               pad(format_ms(row.lib_fwd), kFwd, true) + pad(format_ms(row.lib_bwd), kBwd, true) +
               pad(format_speedup(row.ref_fwd, row.lib_fwd), kSpeed, true) +
               pad(format_speedup(row.ref_bwd, row.lib_bwd), kSpeed, true) + "  " +
               (row.pass ? "pass" : "FAIL")
        << '\n'
        << std::flush;

    if (!options.png_dir.empty() && !io_error) {
      const std::string e = write_row_pngs(png_dir, row.file_stem(), size, out_lib, dx_lib, dgrid_lib);
      if (!e.empty()) {
        err << "gridsampler: error: --png: " << e << '\n';
        io_error = true;
      }
      if (!o.align_corners) overview_tiles.push_back(image_tile(out_lib, size, 0));
    }
    rows.push_back(std::move(row));
  }
  out << rule << '\n';

  if (!options.png_dir.empty() && !io_error) {
    std::string e = write_png((png_dir / "input.png").string(), image_strip(input_values, size));
    if (e.empty()) {
      const int side = static_cast<int>(3 * size + 2 * kGap);
      RgbImage overview(side, side, Rgb{128, 128, 128});
      for (std::size_t i = 0; i < overview_tiles.size(); ++i) {
        overview.paste(overview_tiles[i], static_cast<int>((i % 3) * static_cast<std::size_t>(size + kGap)),
                       static_cast<int>((i / 3) * static_cast<std::size_t>(size + kGap)));
      }
      e = write_png((png_dir / "outputs.png").string(), overview);
    }
    if (!e.empty()) {
      err << "gridsampler: error: --png: " << e << '\n';
      io_error = true;
    } else {
      out << format("PNGs in %s: input.png, outputs.png (image 0, rows bilinear/nearest/bicubic,\n",
                    options.png_dir.c_str());
      out << "  columns zeros/border/reflection), <mode>_<padding>[_ac]_{out,dx,dgrid}.png for each row\n";
      out << "  (out: warped images; dx: sum over channels of |dx|; dgrid: |dgrid|; maps: sqrt(value / "
             "max))\n";
    }
  }

  const double total_s = seconds_since(start);
  if (failures.empty()) {
    out << format("all %zu combinations within tolerance (%.1e of max |reference|, %s); demo took %.1f s\n",
                  rows.size(), tol, dtype_name.c_str(), total_s);
  } else {
    std::string list;
    for (const std::string& f : failures) list += (list.empty() ? "" : ", ") + f;
    out << format("%zu of %zu combinations FAILED (bound %.1e, %s): ", failures.size(), rows.size(), tol,
                  dtype_name.c_str())
        << list << format("; demo took %.1f s\n", total_s);
    err << "gridsampler: demo: " << failures.size() << " of " << rows.size()
        << " combinations exceeded the error bound or failed\n";
  }
  out << std::flush;
  if (io_error) return kDemoBadOptions;
  return failures.empty() ? kDemoPassed : kDemoFailed;
}

}  // namespace gridsampler::demo
