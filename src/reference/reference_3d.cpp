// The float64 reference for volumes (grid_sampler_3d, its backward and its
// double backward).
// Each grid component becomes the taps of its own axis exactly as in 2-D
// (coordinate in the compute type through core/coords.hpp, padded per the
// mode); a sample's taps are the products of the three axes' taps, every
// weight, derivative and sum in double.
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/coords.hpp"
#include "core/dtype.hpp"
#include "core/validate.hpp"
#include "reference/policy.hpp"
#include "reference/reference.hpp"

namespace gridsampler::reference {
namespace {

using detail::Problem;

// One axis of a sample: up to 4 pixel indices along it (possibly outside the
// volume), their weights and the weights' first and second derivatives with
// respect to the pixel coordinate, and d(pixel coordinate)/d(grid value).
struct AxisTaps {
  int count = 0;
  int64_t index[4] = {};
  double w[4] = {}, dw[4] = {}, d2w[4] = {};
  double mult = 0;
};

// T is the coordinate type, `coord` the grid value already in T.
template <class T>
AxisTaps axis_taps(const Options& o, T coord, int64_t size) {
  AxisTaps a;
  T mult = 0;
  if (o.interpolation == Interpolation::kBicubic) {
    // The coordinate is not padded; each tap is (tap_index).
    const T i = bicubic_source(o.padding, coord, size, o.align_corners, &mult);
    const T f = std::floor(i);
    T w[4], minus_dw[4], d2w[4];
    coords::cubic_weights(i - f, w);
    coords::cubic_weight_grads(i - f, minus_dw);
    coords::cubic_weight_curvatures(i - f, d2w);
    a.count = 4;
    for (int k = 0; k < 4; ++k) {
      a.index[k] = tap_index(o.padding, f - 1 + k, size, o.align_corners);
      a.w[k] = w[k];
      a.dw[k] = -double(minus_dw[k]);
      a.d2w[k] = d2w[k];
    }
  } else if (o.interpolation == Interpolation::kNearest) {
    const T i = source_index(o.padding, coord, size, o.align_corners, &mult);
    a.count = 1;
    a.index[0] = coords::to_index(std::nearbyint(i));
    a.w[0] = 1;
    a.dw[0] = 0;  // piecewise constant: no derivatives at all
  } else {
    // Linear along the axis; the distances in T as the 2-D reference forms
    // them (t = i - floor(i), and 1 - t).
    const T i = source_index(o.padding, coord, size, o.align_corners, &mult);
    const T f = std::floor(i);
    const int64_t i0 = coords::to_index(f);
    const T t = i - f;
    a.count = 2;
    a.index[0] = i0;
    a.w[0] = T(1) - t;
    a.dw[0] = -1;
    a.index[1] = i0 + 1;
    a.w[1] = t;
    a.dw[1] = 1;  // linear along the axis: d2w stays 0
  }
  a.mult = mult;
  return a;
}

// One input voxel that a sample reads: its weight, the weight's derivatives
// with respect to the pixel coordinates ix, iy, iz, and its second
// derivatives d2w[a][b] = d2w/(di_a di_b), a, b in (x, y, z) (for the double
// backward).
struct Tap {
  int64_t z, y, x;
  double w, dw_dx, dw_dy, dw_dz;
  double d2w[3][3];
};

// The in-bounds taps of one output voxel and the factors that turn
// d/d(ix, iy, iz) into d/d(grid x, y, z).
struct Sample {
  std::vector<Tap> taps;
  double mult_x = 0, mult_y = 0, mult_z = 0;
};

template <class T>
Sample make_sample(T gx, T gy, T gz, const Problem& p) {
  const AxisTaps ax = axis_taps(p.options, gx, p.in_w);
  const AxisTaps ay = axis_taps(p.options, gy, p.in_h);
  const AxisTaps az = axis_taps(p.options, gz, p.in_d);
  Sample s;
  s.mult_x = ax.mult;
  s.mult_y = ay.mult;
  s.mult_z = az.mult;
  s.taps.reserve(static_cast<std::size_t>(ax.count * ay.count * az.count));
  for (int k = 0; k < az.count; ++k) {
    const int64_t z = az.index[k];
    if (z < 0 || z >= p.in_d) continue;
    for (int j = 0; j < ay.count; ++j) {
      const int64_t y = ay.index[j];
      if (y < 0 || y >= p.in_h) continue;
      for (int i = 0; i < ax.count; ++i) {
        const int64_t x = ax.index[i];
        if (x < 0 || x >= p.in_w) continue;
        // w = wx wy wz: a derivative along one axis replaces that axis's
        // factor by its derivative; along the same axis twice, by its
        // second derivative (0 for linear weights, so trilinear has only
        // the mixed terms).
        const double wx = ax.w[i], wy = ay.w[j], wz = az.w[k];
        const double dx = ax.dw[i], dy = ay.dw[j], dz = az.dw[k];
        Tap t{z, y, x, wx * wy * wz, dx * wy * wz, wx * dy * wz, wx * wy * dz, {}};
        t.d2w[0][0] = ax.d2w[i] * wy * wz;
        t.d2w[1][1] = wx * ay.d2w[j] * wz;
        t.d2w[2][2] = wx * wy * az.d2w[k];
        t.d2w[0][1] = t.d2w[1][0] = dx * dy * wz;
        t.d2w[0][2] = t.d2w[2][0] = dx * wy * dz;
        t.d2w[1][2] = t.d2w[2][1] = wx * dy * dz;
        s.taps.push_back(t);
      }
    }
  }
  return s;
}

template <class S>
Sample sample_at(const View<const S, 5>& grid, int64_t n, int64_t d, int64_t h, int64_t w, const Problem& p) {
  return make_sample(load(grid.at(n, d, h, w, 0)), load(grid.at(n, d, h, w, 1)), load(grid.at(n, d, h, w, 2)), p);
}

template <class S>
void forward(const Problem& p, const VolumeView& input, const VolumeView& grid, const MutableVolumeView& output) {
  if (p.empty()) return;  // an empty output: nothing to sample
  const auto in = view<S>(input);
  const auto gr = view<S>(grid);
  const auto out = view<S>(output);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t d = 0; d < p.out_d; ++d)
      for (int64_t h = 0; h < p.out_h; ++h)
        for (int64_t w = 0; w < p.out_w; ++w) {
          const Sample s = sample_at(gr, n, d, h, w, p);
          for (int64_t c = 0; c < p.c; ++c) {
            double acc = 0;
            for (const Tap& t : s.taps) acc += t.w * double(load(in.at(n, c, t.z, t.y, t.x)));
            out.at(n, c, d, h, w) = store<S>(acc);
          }
        }
}

template <class S>
void backward(const Problem& p, const VolumeView& grad, const VolumeView& input, const VolumeView& grid,
              const MutableVolumeView& dx, const MutableVolumeView& dgrid) {
  const auto go = view<S>(grad);
  const auto in = view<S>(input);
  const auto gr = view<S>(grid);
  const int64_t in_voxels = p.in_d * p.in_h * p.in_w;
  std::vector<double> dx_acc(p.mask.input ? static_cast<std::size_t>(p.n * p.c * in_voxels) : 0);
  auto dx_at = [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) -> double& {
    return dx_acc[static_cast<std::size_t>((((n * p.c + c) * p.in_d + z) * p.in_h + y) * p.in_w + x)];
  };
  // As in 2-D: with no channels dgrid is a sum over nothing (zero) and dx is
  // empty; with no output voxels there is nothing to visit.
  const bool sampled = p.c > 0 && (p.mask.input || p.mask.grid);
  const bool any_voxel = p.n > 0 && p.out_d > 0 && p.out_h > 0 && p.out_w > 0;
  const bool smooth = p.options.interpolation != Interpolation::kNearest;
  for (int64_t n = 0; any_voxel && n < p.n && (sampled || p.mask.grid); ++n)
    for (int64_t d = 0; d < p.out_d; ++d)
      for (int64_t h = 0; h < p.out_h; ++h)
        for (int64_t w = 0; w < p.out_w; ++w) {
          if (!sampled) {
            const auto dg = view<S>(dgrid);
            for (int k = 0; k < 3; ++k) dg.at(n, d, h, w, k) = store<S>(0.0);
            continue;
          }
          const Sample s = sample_at(gr, n, d, h, w, p);
          double gix = 0, giy = 0, giz = 0;
          for (int64_t c = 0; c < p.c; ++c) {
            const double g = load(go.at(n, c, d, h, w));
            for (const Tap& t : s.taps) {
              if (p.mask.input) dx_at(n, c, t.z, t.y, t.x) += t.w * g;
              // nearest's weights are piecewise constant: its dgrid is 0.
              if (p.mask.grid && smooth) {
                const double v = load(in.at(n, c, t.z, t.y, t.x));
                gix += t.dw_dx * v * g;
                giy += t.dw_dy * v * g;
                giz += t.dw_dz * v * g;
              }
            }
          }
          if (p.mask.grid) {
            const auto dg = view<S>(dgrid);
            dg.at(n, d, h, w, 0) = store<S>(s.mult_x * gix);
            dg.at(n, d, h, w, 1) = store<S>(s.mult_y * giy);
            dg.at(n, d, h, w, 2) = store<S>(s.mult_z * giz);
          }
        }
  if (p.mask.input && p.n > 0 && p.c > 0) {
    const auto out = view<S>(dx);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t z = 0; z < p.in_d; ++z)
          for (int64_t y = 0; y < p.in_h; ++y)
            for (int64_t x = 0; x < p.in_w; ++x) out.at(n, c, z, y, x) = store<S>(dx_at(n, c, z, y, x));
  }
}

// The double backward, as in 2-D (docs/design.md, "Second order") with three
// components. With g' = gg_dgrid * mult (the incoming grid gradient in pixel
// units), per output voxel and channel:
//   d_grad  = sum_k w_k gg_dx[k] + v_k x[k],     v_k = sum_a g'_a dw_k/di_a
//   d_input[k] += v_k grad
//   d_grid_b = mult_b sum_c grad sum_k (gg_dx[k] dw_k/di_b + x[k] sum_a g'_a d2w_k/di_a di_b)
template <class S>
void double_backward(const Problem& p, const VolumeView& gg_dx, const VolumeView& gg_dgrid, const VolumeView& grad,
                     const VolumeView& input, const VolumeView& grid, const MutableVolumeView& d_grad,
                     const MutableVolumeView& d_input, const MutableVolumeView& d_grid, DoubleBackwardMask mask) {
  const auto go = view<S>(grad);
  const auto in = view<S>(input);
  const auto gr = view<S>(grid);
  const auto ggx = view<S>(gg_dx);
  const auto ggg = view<S>(gg_dgrid);
  const bool has_ggx = gg_dx.data != nullptr, has_ggg = gg_dgrid.data != nullptr;
  const int64_t in_voxels = p.in_d * p.in_h * p.in_w;
  std::vector<double> acc(mask.input ? static_cast<std::size_t>(p.n * p.c * in_voxels) : 0);
  auto acc_at = [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) -> double& {
    return acc[static_cast<std::size_t>((((n * p.c + c) * p.in_d + z) * p.in_h + y) * p.in_w + x)];
  };
  const bool any_voxel = p.n > 0 && p.out_d > 0 && p.out_h > 0 && p.out_w > 0;
  // nearest's weights are piecewise constant: d_input and d_grid are zero
  // (not 0 * grad, which would be NaN where grad is infinite).
  const bool smooth = p.options.interpolation != Interpolation::kNearest;
  for (int64_t n = 0; any_voxel && n < p.n; ++n)
    for (int64_t d = 0; d < p.out_d; ++d)
      for (int64_t h = 0; h < p.out_h; ++h)
        for (int64_t w = 0; w < p.out_w; ++w) {
          const Sample s = sample_at(gr, n, d, h, w, p);
          const double mult[3] = {s.mult_x, s.mult_y, s.mult_z};
          double gp[3] = {0, 0, 0};  // g' in pixel units
          if (has_ggg) {
            for (int a = 0; a < 3; ++a) gp[a] = double(load(ggg.at(n, d, h, w, a))) * mult[a];
          }
          double t_acc[3] = {0, 0, 0};
          for (int64_t c = 0; c < p.c; ++c) {
            const double g = load(go.at(n, c, d, h, w));
            double dg = 0;
            for (const Tap& t : s.taps) {
              const double dw[3] = {t.dw_dx, t.dw_dy, t.dw_dz};
              // Terms of an absent incoming gradient are left out, not
              // multiplied by zero (an infinite input or grad stays harmless).
              if (has_ggx) {
                const double ev = load(ggx.at(n, c, t.z, t.y, t.x));
                dg += t.w * ev;
                if (smooth) {
                  for (int b = 0; b < 3; ++b) t_acc[b] += g * ev * dw[b];
                }
              }
              if (has_ggg && smooth) {
                const double xv = load(in.at(n, c, t.z, t.y, t.x));
                const double v = gp[0] * dw[0] + gp[1] * dw[1] + gp[2] * dw[2];
                dg += v * xv;
                if (mask.input) acc_at(n, c, t.z, t.y, t.x) += v * g;
                for (int b = 0; b < 3; ++b) {
                  t_acc[b] += g * xv * (gp[0] * t.d2w[0][b] + gp[1] * t.d2w[1][b] + gp[2] * t.d2w[2][b]);
                }
              }
            }
            if (mask.grad) view<S>(d_grad).at(n, c, d, h, w) = store<S>(dg);
          }
          if (mask.grid) {
            const auto out = view<S>(d_grid);
            for (int b = 0; b < 3; ++b) out.at(n, d, h, w, b) = store<S>(mult[b] * t_acc[b]);
          }
        }
  if (mask.input && p.n > 0 && p.c > 0) {
    const auto out = view<S>(d_input);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t z = 0; z < p.in_d; ++z)
          for (int64_t y = 0; y < p.in_h; ++y)
            for (int64_t x = 0; x < p.in_w; ++x) out.at(n, c, z, y, x) = store<S>(acc_at(n, c, z, y, x));
  }
}

}  // namespace

Status grid_sampler_3d(VolumeView input, VolumeView grid, MutableVolumeView output, const Options& options) {
  Problem p;
  if (Status s = detail::validate_forward_3d(input, grid, output, options, &p); !s.ok()) return s;
  visit_dtype(p.dtype, [&](auto tag) { forward<decltype(tag)>(p, input, grid, output); });
  return Status::Ok();
}

Status grid_sampler_3d_backward(VolumeView grad, VolumeView input, VolumeView grid, MutableVolumeView dx,
                                MutableVolumeView dgrid, const Options& options, OutputMask mask) {
  Problem p;
  if (Status s = detail::validate_backward_3d(grad, input, grid, dx, dgrid, options, mask, &p); !s.ok()) return s;
  visit_dtype(p.dtype, [&](auto tag) { backward<decltype(tag)>(p, grad, input, grid, dx, dgrid); });
  return Status::Ok();
}

Status grid_sampler_3d_double_backward(VolumeView gg_dx, VolumeView gg_dgrid, VolumeView grad, VolumeView input,
                                       VolumeView grid, MutableVolumeView d_grad, MutableVolumeView d_input,
                                       MutableVolumeView d_grid, const Options& options, DoubleBackwardMask mask) {
  Problem p;
  if (Status s = detail::validate_double_backward_3d(gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid,
                                                     options, mask, &p);
      !s.ok())
    return s;
  visit_dtype(p.dtype, [&](auto tag) {
    double_backward<decltype(tag)>(p, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, mask);
  });
  return Status::Ok();
}

}  // namespace gridsampler::reference
