#include "register/registration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "register/lbfgs.hpp"
#include "register/pyramid.hpp"
#include "register/typed.hpp"
#include "register/warp_grid.hpp"

namespace gridsampler::registration {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// How the moving image is sampled: bicubic, whose interpolant has a
// continuous gradient, so the loss is smooth in the parameters (bilinear
// has a kink at every pixel edge). On the built-in example bilinear ended
// 1.6x higher in loss and at 0.069 / 0.46 px mean / max displacement error
// against bicubic's 0.058 / 0.34.
Options sampling_options(int num_threads) {
  return {Interpolation::kBicubic, Padding::kBorder, /*align_corners=*/false, num_threads};
}

// Pixels of the fixed image whose source falls outside the moving image
// see nothing of it (the fixed image shows what the moving one lacks), so
// the loss is the mean over the overlap: each pixel weighted by how far its
// source lies inside the moving image, ramped down to 0 over the last
// kEdgeRamp pixels so that the loss stays continuous as pixels cross the
// edge. Without it the optimiser bends the warp near the edges to pull
// content the moving image has over the parts it lacks.
constexpr double kEdgeRamp = 2;

// The loss at one pyramid level as a function of the packed parameters.
template <class T>
class LevelObjective {
 public:
  LevelObjective(const host::Tensor& fixed, const host::Tensor& moving, TransformKind kind, Transform start,
                 double smoothness, int num_threads)
      : fixed_(fixed),
        moving_(moving),
        kind_(kind),
        t_(std::move(start)),
        smoothness_(smoothness),
        options_(sampling_options(num_threads)),
        warp_(fixed.shape()[2], fixed.shape()[3], num_threads),
        warped_(dtype_of<T>(), fixed.shape()),
        residual_(dtype_of<T>(), fixed.shape()),
        dgrid_(dtype_of<T>(), {1, fixed.shape()[2], fixed.shape()[3], 2}),
        weight_(static_cast<std::size_t>(fixed.shape()[2] * fixed.shape()[3])),
        d_weight_(2 * weight_.size()),
        squares_(weight_.size()) {}

  const Status& status() const { return status_; }

  double value(const std::vector<double>& x) {
    unpack(kind_, x, &t_);
    if (!(status_ = warp_.build(t_, &grid_)).ok()) return kNaN;
    if (!(status_ = grid_sampler_2d(moving_.view(), grid_.view(), warped_.mutable_view(), options_)).ok()) return kNaN;
    const int64_t channels = fixed_.shape()[1], plane = fixed_.shape()[2] * fixed_.shape()[3];
    const double half_w = half_width(), half_h = half_height();
    const T* g = data<T>(grid_);
    const T* w = data<T>(warped_);
    const T* f = data<T>(fixed_);
    weighted_sum_ = 0;
    weight_sum_ = 0;
    for (int64_t p = 0; p < plane; ++p) {
      // Pixel coordinates of the source, and its depth inside the moving image.
      const double u = (static_cast<double>(g[2 * p]) + 1) * half_w - 0.5;
      const double v = (static_cast<double>(g[2 * p + 1]) + 1) * half_h - 0.5;
      double dwx = 0, dwy = 0;
      const double wx = edge_ramp(u, 2 * half_w, &dwx), wy = edge_ramp(v, 2 * half_h, &dwy);
      weight_[static_cast<std::size_t>(p)] = wx * wy;
      d_weight_[static_cast<std::size_t>(2 * p)] = dwx * half_w * wy;  // d weight / d grid x
      d_weight_[static_cast<std::size_t>(2 * p + 1)] = wx * dwy * half_h;
      double squares = 0;
      for (int64_t c = 0; c < channels; ++c) {
        const double d = static_cast<double>(w[c * plane + p]) - static_cast<double>(f[c * plane + p]);
        squares += d * d;
      }
      squares_[static_cast<std::size_t>(p)] = squares;
      weighted_sum_ += wx * wy * squares;
      weight_sum_ += wx * wy;
    }
    if (!(weight_sum_ > 0)) return std::numeric_limits<double>::infinity();  // no overlap left
    data_loss_ = weighted_sum_ / (static_cast<double>(channels) * weight_sum_);
    return data_loss_ + smoothness_ * bending_energy(t_, nullptr);
  }

  // At the x of the latest value() call. The data term is A / (C B) with
  // A = sum_p w_p sum_c r_pc^2 and B = sum_p w_p, so dL/dg_p is
  // (w_p sum_c 2 r_pc dM_c/dg_p + dw_p/dg_p (sum_c r_pc^2 - C L)) / (C B):
  // the library's backward gives the first part from the output gradient
  // 2 w_p r_pc / (C B), the second is added here.
  void gradient(std::vector<double>* g) {
    g->clear();
    const int64_t channels = fixed_.shape()[1], plane = fixed_.shape()[2] * fixed_.shape()[3];
    const double norm = static_cast<double>(channels) * weight_sum_;
    const T* w = data<T>(warped_);
    const T* f = data<T>(fixed_);
    T* r = data<T>(residual_);
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < plane; ++p) {
        const double d = static_cast<double>(w[c * plane + p]) - static_cast<double>(f[c * plane + p]);
        r[c * plane + p] = static_cast<T>(2 * weight_[static_cast<std::size_t>(p)] * d / norm);
      }
    }
    status_ = grid_sampler_2d_backward(residual_.view(), moving_.view(), grid_.view(), MutableTensorView{},
                                       dgrid_.mutable_view(), options_, OutputMask{/*input=*/false, /*grid=*/true});
    T* dg = data<T>(dgrid_);
    for (int64_t p = 0; p < plane; ++p) {
      const double excess = (squares_[static_cast<std::size_t>(p)] - static_cast<double>(channels) * data_loss_) / norm;
      for (int64_t k = 0; k < 2; ++k) {
        dg[2 * p + k] = static_cast<T>(static_cast<double>(dg[2 * p + k]) + d_weight_[static_cast<std::size_t>(2 * p + k)] * excess);
      }
    }
    std::array<double, 6> d_affine{};
    std::vector<double> d_control;
    if (status_.ok()) status_ = warp_.chain(t_, dgrid_, &d_affine, &d_control);
    if (!status_.ok()) {
      g->assign(pack(kind_, t_).size(), kNaN);
      return;
    }
    if (has_affine(kind_)) g->assign(d_affine.begin(), d_affine.end());
    if (has_elastic(kind_)) {
      std::vector<double> bend(d_control.size(), 0.0);
      bending_energy(t_, &bend);
      for (std::size_t i = 0; i < d_control.size(); ++i) g->push_back(d_control[i] + smoothness_ * bend[i]);
    }
  }

  // The largest displacement a parameter step causes anywhere, in pixels of
  // this level: |dA| over the square [-1, 1]^2 plus |db| plus the largest
  // control-point change, per axis.
  double step_length(const std::vector<double>& s) const {
    double sx = 0, sy = 0;
    std::size_t at = 0;
    if (has_affine(kind_)) {
      sx = std::fabs(s[0]) + std::fabs(s[1]) + std::fabs(s[4]);
      sy = std::fabs(s[2]) + std::fabs(s[3]) + std::fabs(s[5]);
      at = 6;
    }
    const std::size_t points = (s.size() - at) / 2;
    double cx = 0, cy = 0;
    for (std::size_t k = 0; k < points; ++k) {
      cx = std::max(cx, std::fabs(s[at + k]));
      cy = std::max(cy, std::fabs(s[at + points + k]));
    }
    return std::max((sx + cx) * half_width(), (sy + cy) * half_height());
  }

  // The Gauss-Newton diagonal if the image's gradient were the same
  // everywhere (one grey level per pixel): sum over pixels of (dg/dparam)^2,
  // in pixels, per pixel.
  std::vector<double> diagonal() {
    const double wx = half_width() * half_width(), wy = half_height() * half_height();
    std::vector<double> d;
    if (has_affine(kind_)) {
      const double xx = mean_square(fixed_.shape()[3]), yy = mean_square(fixed_.shape()[2]);
      d = {xx * wx, yy * wx, xx * wy, yy * wy, wx, wy};
    }
    if (has_elastic(kind_) && t_.elastic()) {
      std::vector<double> coverage;
      if (!(status_ = warp_.control_coverage(t_, &coverage)).ok()) coverage.assign(2 * t_.rows * t_.cols, 1.0);
      const double floor = 1e-6 * *std::max_element(coverage.begin(), coverage.end());
      const std::size_t points = coverage.size() / 2;
      // A bicubic weight's square sums to about half of the weight itself.
      for (std::size_t k = 0; k < coverage.size(); ++k) {
        d.push_back(0.5 * std::max(coverage[k], floor) * (k < points ? wx : wy));
      }
    }
    return d;
  }

 private:
  double half_width() const { return static_cast<double>(fixed_.shape()[3]) / 2; }
  double half_height() const { return static_cast<double>(fixed_.shape()[2]) / 2; }
  // Mean of x^2 over the n pixel centres x of an axis in [-1, 1].
  static double mean_square(int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double x = (2.0 * static_cast<double>(i) + 1) / static_cast<double>(n) - 1;
      s += x * x;
    }
    return s / static_cast<double>(n);
  }

  // How much a pixel whose source is at pixel coordinate u of an axis of n
  // pixels counts: 1 inside, falling linearly to 0 over the kEdgeRamp pixels
  // up to the image's edge, 0 outside; *slope is its derivative in u.
  static double edge_ramp(double u, double n, double* slope) {
    const double from_start = u + 0.5, from_end = n - 0.5 - u;
    const double depth = std::min(from_start, from_end);
    *slope = 0;
    if (!(depth > 0)) return 0;
    if (depth >= kEdgeRamp) return 1;
    *slope = (from_start < from_end ? 1 : -1) / kEdgeRamp;
    return depth / kEdgeRamp;
  }

  const host::Tensor& fixed_;
  const host::Tensor& moving_;
  TransformKind kind_;
  Transform t_;
  double smoothness_;
  Options options_;
  WarpGrid<T> warp_;
  host::Tensor grid_, warped_, residual_, dgrid_;
  // Of the latest value() call, per pixel: weight, its gradient (x, y) and
  // the sum over channels of the squared residuals; and the sums.
  std::vector<double> weight_, d_weight_, squares_;
  double weighted_sum_ = 0, weight_sum_ = 0, data_loss_ = 0;
  Status status_;
};

template <class T>
host::Tensor converted(const host::Tensor& image) {
  host::Tensor out(dtype_of<T>(), image.shape());
  out.assign_from(image);
  return out;
}

// Levels with fewer samples (pixels x channels) than this run the library
// on one thread: a call there takes a millisecond or less, and the wake-ups
// and barriers of its parallel regions cost more than a second thread
// saves (on a busy 2-core machine, 128 x 128 RGB levels ran 3x slower on
// two threads than on one: the other thread waits for a time slice at
// every barrier).
constexpr int64_t kThreadedSamples = int64_t{1} << 17;

int threads_for(int64_t samples, int requested) { return samples < kThreadedSamples ? 1 : requested; }

// The passes over the pyramid: affine+elastic finds the affine part first,
// then the elastic part with the affine one held, since the two overlap (a
// control grid can bend into a shear or a zoom, which its bending energy
// does not penalise) and a joint fit from the identity lets the control
// grid take over part of a large affine warp, badly.
std::vector<TransformKind> stages_of(TransformKind kind) {
  if (kind == TransformKind::kAffineElastic) return {TransformKind::kAffine, TransformKind::kElastic};
  return {kind};
}

template <class T>
Status register_typed(const host::Tensor& fixed, const host::Tensor& moving, const RegisterOptions& options,
                      const std::function<void(const Progress&)>& progress, RegisterResult* result) {
  const Clock::time_point start = Clock::now();
  const int64_t channels = fixed.shape()[1], height = fixed.shape()[2], width = fixed.shape()[3];
  const std::vector<std::pair<int64_t, int64_t>> sizes = pyramid_sizes(height, width);
  std::vector<host::Tensor> fixed_levels, moving_levels;
  fixed_levels.push_back(converted<T>(fixed));
  moving_levels.push_back(converted<T>(moving));
  for (std::size_t l = 1; l < sizes.size(); ++l) {
    host::Tensor f, m;
    const auto [h, w] = sizes[l];
    const int threads = threads_for(h * w * channels, options.num_threads);
    if (Status s = downsample<T>(fixed_levels.back(), h, w, threads, &f); !s.ok()) return s;
    if (Status s = downsample<T>(moving_levels.back(), h, w, threads, &m); !s.ok()) return s;
    fixed_levels.push_back(std::move(f));
    moving_levels.push_back(std::move(m));
  }

  RegisterResult r;
  Transform& t = r.transform;
  const int levels = static_cast<int>(sizes.size());
  const std::vector<TransformKind> stages = stages_of(options.kind);
  for (std::size_t stage = 0; stage < stages.size(); ++stage) {
    const TransformKind kind = stages[stage];
    for (int l = levels - 1; l >= 0; --l) {
      const Clock::time_point level_start = Clock::now();
      const auto [h, w] = sizes[static_cast<std::size_t>(l)];
      if (has_elastic(kind)) {
        if (Status s = refine_control(t, control_cells(height, h) + 1, control_cells(width, w) + 1, &t); !s.ok()) {
          return s;
        }
      }
      LevelObjective<T> objective(fixed_levels[static_cast<std::size_t>(l)],
                                  moving_levels[static_cast<std::size_t>(l)], kind, t, options.smoothness,
                                  threads_for(h * w * channels, options.num_threads));
      LbfgsProblem problem;
      problem.value = [&](const std::vector<double>& x) { return objective.value(x); };
      problem.gradient = [&](std::vector<double>* g) { objective.gradient(g); };
      problem.step_length = [&](const std::vector<double>& s) { return objective.step_length(s); };
      problem.diagonal = objective.diagonal();
      const Progress where{static_cast<int>(stage) + 1, static_cast<int>(stages.size()), kind, levels - l, levels,
                           h, w, 0, 0};
      problem.on_iteration = [&](int iteration, double loss) {
        if (!progress) return;
        Progress p = where;
        p.iteration = iteration;
        p.loss = loss;
        progress(p);
      };
      if (!objective.status().ok()) return objective.status();
      LbfgsOptions lbfgs;
      lbfgs.max_iterations = options.max_iterations;
      const LbfgsResult found = minimise(problem, pack(kind, t), lbfgs);
      if (!objective.status().ok()) return objective.status();
      unpack(kind, found.x, &t);

      LevelReport report;
      report.stage = kind;
      report.height = h;
      report.width = w;
      report.control_rows = has_elastic(kind) ? t.rows : 0;
      report.control_cols = has_elastic(kind) ? t.cols : 0;
      report.losses = found.losses;
      report.iterations = static_cast<int>(found.losses.size()) - 1;
      report.stop = found.stop;
      report.seconds = seconds_since(level_start);
      r.iterations += report.iterations;
      r.levels.push_back(std::move(report));
    }
  }
  r.passes = static_cast<int>(stages.size());
  r.pyramid_levels = levels;
  r.seconds = seconds_since(start);
  *result = std::move(r);
  return Status::Ok();
}

Status invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

}  // namespace

Status register_images(const host::Tensor& fixed, const host::Tensor& moving, const RegisterOptions& options,
                       const std::function<void(const Progress&)>& progress, RegisterResult* result) {
  if (fixed.shape() != moving.shape() || fixed.shape()[0] != 1) {
    return invalid("register: fixed and moving must be (1, C, H, W) of one shape");
  }
  if (options.max_iterations < 1) return invalid("register: max_iterations must be positive");
  if (options.dtype == DType::kFloat64) return register_typed<double>(fixed, moving, options, progress, result);
  if (options.dtype == DType::kFloat32) return register_typed<float>(fixed, moving, options, progress, result);
  return invalid("register: dtype must be float32 or float64");
}

Status loss_and_gradient(const host::Tensor& fixed, const host::Tensor& moving, TransformKind kind,
                         const Transform& t, double smoothness, int num_threads, double* loss,
                         std::vector<double>* gradient) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    LevelObjective<T> objective(fixed, moving, kind, t, smoothness, num_threads);
    *loss = objective.value(pack(kind, t));
    if (gradient && objective.status().ok()) objective.gradient(gradient);
    return objective.status();
  };
  if (fixed.dtype() != moving.dtype() || fixed.shape() != moving.shape()) {
    return invalid("loss_and_gradient: fixed and moving differ in dtype or shape");
  }
  if (fixed.dtype() == DType::kFloat64) return run(double{});
  if (fixed.dtype() == DType::kFloat32) return run(float{});
  return invalid("loss_and_gradient: dtype must be float32 or float64");
}

Status sampling_grid(const Transform& t, int64_t height, int64_t width, host::Tensor* grid) {
  WarpGrid<double> warp(height, width, /*num_threads=*/0);
  return warp.build(t, grid);
}

Status warp_image(const host::Tensor& moving, const Transform& t, int num_threads, host::Tensor* out) {
  const Shape4& s = moving.shape();
  WarpGrid<float> warp(s[2], s[3], num_threads);
  host::Tensor grid;
  if (Status st = warp.build(t, &grid); !st.ok()) return st;
  const host::Tensor input = converted<float>(moving);
  *out = host::Tensor(DType::kFloat32, s);
  return grid_sampler_2d(input.view(), grid.view(), out->mutable_view(), sampling_options(num_threads));
}

}  // namespace gridsampler::registration
