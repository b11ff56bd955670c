// The float64 reference for volumes (grid_sampler_3d and its backward).
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
// volume), their weights and the weights' derivatives with respect to the
// pixel coordinate, and d(pixel coordinate)/d(grid value).
struct AxisTaps {
  int count = 0;
  int64_t index[4] = {};
  double w[4] = {}, dw[4] = {};
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
    T w[4], minus_dw[4];
    coords::cubic_weights(i - f, w);
    coords::cubic_weight_grads(i - f, minus_dw);
    a.count = 4;
    for (int k = 0; k < 4; ++k) {
      a.index[k] = tap_index(o.padding, f - 1 + k, size, o.align_corners);
      a.w[k] = w[k];
      a.dw[k] = -double(minus_dw[k]);
    }
  } else if (o.interpolation == Interpolation::kNearest) {
    const T i = source_index(o.padding, coord, size, o.align_corners, &mult);
    a.count = 1;
    a.index[0] = coords::to_index(std::nearbyint(i));
    a.w[0] = 1;
    a.dw[0] = 0;
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
    a.dw[1] = 1;
  }
  a.mult = mult;
  return a;
}

// One input voxel that a sample reads: its weight and the weight's
// derivatives with respect to the pixel coordinates ix, iy, iz.
struct Tap {
  int64_t z, y, x;
  double w, dw_dx, dw_dy, dw_dz;
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
        s.taps.push_back({z, y, x, ax.w[i] * ay.w[j] * az.w[k], ax.dw[i] * ay.w[j] * az.w[k],
                          ax.w[i] * ay.dw[j] * az.w[k], ax.w[i] * ay.w[j] * az.dw[k]});
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

}  // namespace gridsampler::reference
