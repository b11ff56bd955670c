#include "reference/reference.hpp"

#include <cmath>
#include <vector>

#include "core/coords.hpp"
#include "core/dtype.hpp"
#include "core/validate.hpp"
#include "reference/policy.hpp"

namespace gridsampler::reference {
namespace {

using detail::Problem;

// One input pixel that a sample reads: its weight, the derivatives of the
// weight with respect to the pixel coordinates ix and iy, and its second
// derivatives (for the double backward).
struct Tap {
  int64_t y, x;
  double w, dw_dx, dw_dy;
  double d2w_xx = 0, d2w_xy = 0, d2w_yy = 0;
};

// Everything one output pixel needs: the in-bounds taps and the factors that
// turn d/d(ix, iy) into d/d(grid x, grid y).
struct Sample {
  std::vector<Tap> taps;
  double mult_x = 0, mult_y = 0;
};

// T is the coordinate type; gx, gy are the grid values already in T.
template <class T>
Sample make_sample(T gx, T gy, const Problem& p) {
  const Options& o = p.options;
  const int64_t H = p.in_h, W = p.in_w;
  Sample s;
  auto add = [&](int64_t y, int64_t x, double w, double dw_dx, double dw_dy, double xx = 0,
                 double xy = 0, double yy = 0) {
    if (coords::in_bounds(y, x, H, W)) s.taps.push_back({y, x, w, dw_dx, dw_dy, xx, xy, yy});
  };
  if (o.interpolation == Interpolation::kBicubic) {
    T mx = 0, my = 0;
    const T ix = bicubic_source(o.padding, gx, W, o.align_corners, &mx);
    const T iy = bicubic_source(o.padding, gy, H, o.align_corners, &my);
    const T fx = std::floor(ix), fy = std::floor(iy);
    T wx[4], wy[4], gwx[4], gwy[4], hwx[4], hwy[4];
    coords::cubic_weights(ix - fx, wx);
    coords::cubic_weights(iy - fy, wy);
    coords::cubic_weight_grads(ix - fx, gwx);  // minus the first derivatives
    coords::cubic_weight_grads(iy - fy, gwy);
    coords::cubic_weight_curvatures(ix - fx, hwx);
    coords::cubic_weight_curvatures(iy - fy, hwy);
    for (int j = 0; j < 4; ++j) {
      const int64_t y = tap_index(o.padding, fy - 1 + j, H, o.align_corners);
      for (int i = 0; i < 4; ++i) {
        const int64_t x = tap_index(o.padding, fx - 1 + i, W, o.align_corners);
        add(y, x, double(wx[i]) * wy[j], -double(gwx[i]) * wy[j], -double(gwy[j]) * wx[i],
            double(hwx[i]) * wy[j], double(gwx[i]) * gwy[j], double(wx[i]) * hwy[j]);
      }
    }
    s.mult_x = mx;
    s.mult_y = my;
    return s;
  }
  T mx = 0, my = 0;
  const T ix = source_index(o.padding, gx, W, o.align_corners, &mx);
  const T iy = source_index(o.padding, gy, H, o.align_corners, &my);
  s.mult_x = mx;
  s.mult_y = my;
  if (o.interpolation == Interpolation::kNearest) {
    add(coords::to_index(std::nearbyint(iy)), coords::to_index(std::nearbyint(ix)), 1, 0, 0);
    return s;
  }
  // Bilinear: distances to the four neighbours, in T as PyTorch forms them
  // (1 - w: (fx + 1) - ix is 0 from 2^24 in float, where fx + 1 rounds to fx).
  const T fx = std::floor(ix), fy = std::floor(iy);
  const int64_t x0 = coords::to_index(fx), y0 = coords::to_index(fy);
  const T west_t = ix - fx, north_t = iy - fy;
  const double west = west_t, east = T(1) - west_t;
  const double north = north_t, south = T(1) - north_t;
  // The weights are bilinear in (ix, iy): the only second derivative is the
  // mixed one, +-1.
  add(y0, x0, south * east, -south, -east, 0, 1, 0);
  add(y0, x0 + 1, south * west, south, -west, 0, -1, 0);
  add(y0 + 1, x0, north * east, -north, east, 0, -1, 0);
  add(y0 + 1, x0 + 1, north * west, north, west, 0, 1, 0);
  return s;
}

template <class S>
void forward(const Problem& p, const TensorView& input, const TensorView& grid,
             const MutableTensorView& output) {
  const auto in = view<S>(input);
  const auto gr = view<S>(grid);
  const auto out = view<S>(output);
  if (p.empty()) return;  // an empty output: nothing to sample
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t h = 0; h < p.out_h; ++h) {
      for (int64_t w = 0; w < p.out_w; ++w) {
        const Sample s = make_sample(load(gr.at(n, h, w, 0)), load(gr.at(n, h, w, 1)), p);
        for (int64_t c = 0; c < p.c; ++c) {
          double acc = 0;
          for (const Tap& t : s.taps) acc += t.w * double(load(in.at(n, c, t.y, t.x)));
          out.at(n, c, h, w) = store<S>(acc);
        }
      }
    }
  }
}

template <class S>
void backward(const Problem& p, const TensorView& grad, const TensorView& input,
              const TensorView& grid, const MutableTensorView& dx, const MutableTensorView& dgrid) {
  const auto go = view<S>(grad);
  const auto in = view<S>(input);
  const auto gr = view<S>(grid);
  std::vector<double> dx_acc(p.mask.input ? static_cast<size_t>(p.n * p.c * p.in_h * p.in_w) : 0);
  auto dx_at = [&](int64_t n, int64_t c, int64_t y, int64_t x) -> double& {
    return dx_acc[static_cast<size_t>(((n * p.c + c) * p.in_h + y) * p.in_w + x)];
  };
  // With no channels nothing is sampled: dgrid is a sum over no channels
  // (zero) and dx is empty. Without outputs, or with no output pixels, there
  // is nothing to visit (loops over empty dimensions could still be long).
  const bool sampled = p.c > 0 && (p.mask.input || p.mask.grid);
  const bool any_pixel = p.n > 0 && p.out_h > 0 && p.out_w > 0;
  for (int64_t n = 0; any_pixel && n < p.n && (sampled || p.mask.grid); ++n) {
    for (int64_t h = 0; h < p.out_h; ++h) {
      for (int64_t w = 0; w < p.out_w; ++w) {
        if (!sampled) {
          const auto dg = view<S>(dgrid);
          dg.at(n, h, w, 0) = store<S>(0.0);
          dg.at(n, h, w, 1) = store<S>(0.0);
          continue;
        }
        const Sample s = make_sample(load(gr.at(n, h, w, 0)), load(gr.at(n, h, w, 1)), p);
        double gix = 0, giy = 0;
        for (int64_t c = 0; c < p.c; ++c) {
          const double g = load(go.at(n, c, h, w));
          for (const Tap& t : s.taps) {
            if (p.mask.input) dx_at(n, c, t.y, t.x) += t.w * g;
            if (p.mask.grid && p.options.interpolation != Interpolation::kNearest) {
              const double v = load(in.at(n, c, t.y, t.x));
              gix += t.dw_dx * v * g;
              giy += t.dw_dy * v * g;
            }
          }
        }
        if (p.mask.grid) {
          const auto dg = view<S>(dgrid);
          dg.at(n, h, w, 0) = store<S>(s.mult_x * gix);
          dg.at(n, h, w, 1) = store<S>(s.mult_y * giy);
        }
      }
    }
  }
  if (p.mask.input && p.n > 0 && p.c > 0) {
    const auto d = view<S>(dx);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t y = 0; y < p.in_h; ++y)
          for (int64_t x = 0; x < p.in_w; ++x) d.at(n, c, y, x) = store<S>(dx_at(n, c, y, x));
  }
}

// The double backward (docs/design.md, "Second order"). With
// g' = gg_dgrid * mult (the incoming grid gradient in pixel units), per
// output pixel and channel:
//   d_grad  = sum_k w_k gg_dx[k] + v_k x[k],     v_k = g'x dw_k/dix + g'y dw_k/diy
//   d_input[k] += v_k grad
//   d_grid_b = mult_b sum_c grad sum_k (gg_dx[k] dw_k/di_b + x[k] sum_a g'_a d2w_k/di_a di_b)
template <class S>
void double_backward(const Problem& p, const TensorView& gg_dx, const TensorView& gg_dgrid,
                     const TensorView& grad, const TensorView& input, const TensorView& grid,
                     const MutableTensorView& d_grad, const MutableTensorView& d_input,
                     const MutableTensorView& d_grid, DoubleBackwardMask mask) {
  const auto go = view<S>(grad);
  const auto in = view<S>(input);
  const auto gr = view<S>(grid);
  const auto ggx = view<S>(gg_dx);
  const auto ggg = view<S>(gg_dgrid);
  const bool has_ggx = gg_dx.data != nullptr, has_ggg = gg_dgrid.data != nullptr;
  std::vector<double> acc(mask.input ? static_cast<size_t>(p.n * p.c * p.in_h * p.in_w) : 0);
  auto acc_at = [&](int64_t n, int64_t c, int64_t y, int64_t x) -> double& {
    return acc[static_cast<size_t>(((n * p.c + c) * p.in_h + y) * p.in_w + x)];
  };
  const bool any_pixel = p.n > 0 && p.out_h > 0 && p.out_w > 0;
  // nearest's weights are piecewise constant: d_input and d_grid are zero
  // (not 0 * grad, which would be NaN where grad is infinite).
  const bool smooth = p.options.interpolation != Interpolation::kNearest;
  for (int64_t n = 0; any_pixel && n < p.n; ++n) {
    for (int64_t h = 0; h < p.out_h; ++h) {
      for (int64_t w = 0; w < p.out_w; ++w) {
        const Sample s = make_sample(load(gr.at(n, h, w, 0)), load(gr.at(n, h, w, 1)), p);
        const double gx = has_ggg ? double(load(ggg.at(n, h, w, 0))) * s.mult_x : 0.0;
        const double gy = has_ggg ? double(load(ggg.at(n, h, w, 1))) * s.mult_y : 0.0;
        double tx = 0, ty = 0;
        for (int64_t c = 0; c < p.c; ++c) {
          const double g = load(go.at(n, c, h, w));
          double dg = 0;
          for (const Tap& t : s.taps) {
            // Terms of an absent incoming gradient are left out, not
            // multiplied by zero (an infinite input or grad stays harmless).
            if (has_ggx) {
              const double ev = load(ggx.at(n, c, t.y, t.x));
              dg += t.w * ev;
              if (smooth) {
                tx += g * ev * t.dw_dx;
                ty += g * ev * t.dw_dy;
              }
            }
            if (has_ggg && smooth) {
              const double xv = load(in.at(n, c, t.y, t.x));
              const double v = gx * t.dw_dx + gy * t.dw_dy;
              dg += v * xv;
              if (mask.input) acc_at(n, c, t.y, t.x) += v * g;
              tx += g * xv * (gx * t.d2w_xx + gy * t.d2w_xy);
              ty += g * xv * (gx * t.d2w_xy + gy * t.d2w_yy);
            }
          }
          if (mask.grad) view<S>(d_grad).at(n, c, h, w) = store<S>(dg);
        }
        if (mask.grid) {
          const auto dg = view<S>(d_grid);
          dg.at(n, h, w, 0) = store<S>(s.mult_x * tx);
          dg.at(n, h, w, 1) = store<S>(s.mult_y * ty);
        }
      }
    }
  }
  if (mask.input && p.n > 0 && p.c > 0) {
    const auto d = view<S>(d_input);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t y = 0; y < p.in_h; ++y)
          for (int64_t x = 0; x < p.in_w; ++x) d.at(n, c, y, x) = store<S>(acc_at(n, c, y, x));
  }
}

}  // namespace

Status grid_sampler_2d(TensorView input, TensorView grid, MutableTensorView output,
                       const Options& options) {
  Problem p;
  if (Status s = detail::validate_forward(input, grid, output, options, &p); !s.ok()) return s;
  visit_dtype(p.dtype, [&](auto tag) { forward<decltype(tag)>(p, input, grid, output); });
  return Status::Ok();
}

Status grid_sampler_2d_backward(TensorView grad, TensorView input, TensorView grid,
                                MutableTensorView dx, MutableTensorView dgrid,
                                const Options& options, OutputMask mask) {
  Problem p;
  if (Status s = detail::validate_backward(grad, input, grid, dx, dgrid, options, mask, &p);
      !s.ok())
    return s;
  visit_dtype(p.dtype,
              [&](auto tag) { backward<decltype(tag)>(p, grad, input, grid, dx, dgrid); });
  return Status::Ok();
}

Status grid_sampler_2d_double_backward(TensorView gg_dx, TensorView gg_dgrid, TensorView grad,
                                       TensorView input, TensorView grid, MutableTensorView d_grad,
                                       MutableTensorView d_input, MutableTensorView d_grid,
                                       const Options& options, DoubleBackwardMask mask) {
  Problem p;
  if (Status s = detail::validate_double_backward(gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input,
                                                  d_grid, options, mask, &p);
      !s.ok())
    return s;
  visit_dtype(p.dtype, [&](auto tag) {
    double_backward<decltype(tag)>(p, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, mask);
  });
  return Status::Ok();
}

}  // namespace gridsampler::reference
