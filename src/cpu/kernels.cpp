// Scalar CPU kernels. For each output pixel the stencil (which input pixels
// are read, their weights and weight derivatives) is formed once in the
// compute type and then applied to every channel; dx and the channel sums of
// dgrid accumulate in the compute type (float32 for the 16-bit dtypes, whose
// dx goes through a float32 workspace and is rounded once at the end).
#include "cpu/kernels.hpp"

#include <array>
#include <cmath>
#include <cstdint>

#include "core/coords.hpp"
#include "core/dtype.hpp"

namespace gridsampler::cpu {
namespace {

using detail::Problem;

template <class T>
struct Stencil {
  static constexpr int kMaxTaps = 16;
  int count = 0;
  int64_t y[kMaxTaps] = {}, x[kMaxTaps] = {};
  T w[kMaxTaps] = {}, dw_dx[kMaxTaps] = {}, dw_dy[kMaxTaps] = {};
  T mult_x = 0, mult_y = 0;

  void add(int64_t ty, int64_t tx, T tw, T tdx, T tdy, int64_t height, int64_t width) {
    if (!coords::in_bounds(ty, tx, height, width)) return;
    y[count] = ty;
    x[count] = tx;
    w[count] = tw;
    dw_dx[count] = tdx;
    dw_dy[count] = tdy;
    ++count;
  }
};

template <Interpolation M, Padding P, bool kAlign, class T>
void make_stencil(T gx, T gy, int64_t height, int64_t width, Stencil<T>* s) {
  s->count = 0;
  if constexpr (M == Interpolation::kBicubic) {
    const T ix = coords::bicubic_source<P>(gx, width, kAlign, &s->mult_x);
    const T iy = coords::bicubic_source<P>(gy, height, kAlign, &s->mult_y);
    const T fx = std::floor(ix), fy = std::floor(iy);
    T cx[4], cy[4], gcx[4], gcy[4];
    coords::cubic_weights(ix - fx, cx);
    coords::cubic_weights(iy - fy, cy);
    coords::cubic_weight_grads(ix - fx, gcx);
    coords::cubic_weight_grads(iy - fy, gcy);
    int64_t tx[4];
    for (int i = 0; i < 4; ++i) tx[i] = coords::tap_index<P>(fx - 1 + i, width, kAlign);
    for (int j = 0; j < 4; ++j) {
      const int64_t ty = coords::tap_index<P>(fy - 1 + j, height, kAlign);
      for (int i = 0; i < 4; ++i) {
        s->add(ty, tx[i], cx[i] * cy[j], -gcx[i] * cy[j], -gcy[j] * cx[i], height, width);
      }
    }
  } else {
    const T ix = coords::source_index<P>(gx, width, kAlign, &s->mult_x);
    const T iy = coords::source_index<P>(gy, height, kAlign, &s->mult_y);
    if constexpr (M == Interpolation::kNearest) {
      s->add(coords::to_index(std::nearbyint(iy)), coords::to_index(std::nearbyint(ix)), T(1), T(0),
             T(0), height, width);
    } else {
      const T fx = std::floor(ix), fy = std::floor(iy);
      const int64_t x0 = coords::to_index(fx), y0 = coords::to_index(fy);
      const T west = ix - fx, east = (fx + 1) - ix;
      const T north = iy - fy, south = (fy + 1) - iy;
      s->add(y0, x0, south * east, -south, -east, height, width);
      s->add(y0, x0 + 1, south * west, south, -west, height, width);
      s->add(y0 + 1, x0, north * east, -north, east, height, width);
      s->add(y0 + 1, x0 + 1, north * west, north, west, height, width);
    }
  }
}

inline int64_t offset(const Shape4& st, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * st[0] + b * st[1] + c * st[2] + d * st[3];
}

template <class S, Interpolation M, Padding P, bool kAlign>
void forward(const Problem& p, const TensorView& input, const TensorView& grid,
             const MutableTensorView& output) {
  using T = compute_t<S>;
  const S* in = static_cast<const S*>(input.data);
  const S* gr = static_cast<const S*>(grid.data);
  S* out = static_cast<S*>(output.data);
  const Shape4& is = input.strides;
  Stencil<T> s;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t h = 0; h < p.out_h; ++h) {
      for (int64_t w = 0; w < p.out_w; ++w) {
        const S* g = gr + offset(grid.strides, n, h, w, 0);
        make_stencil<M, P, kAlign>(load(g[0]), load(g[grid.strides[3]]), p.in_h, p.in_w, &s);
        for (int64_t c = 0; c < p.c; ++c) {
          const S* plane = in + n * is[0] + c * is[1];
          T acc = 0;
          for (int k = 0; k < s.count; ++k) acc += s.w[k] * load(plane[s.y[k] * is[2] + s.x[k] * is[3]]);
          out[offset(output.strides, n, c, h, w)] = store<S>(acc);
        }
      }
    }
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void backward(const Problem& p, const TensorView& grad, const TensorView& input,
              const TensorView& grid, const MutableTensorView& dx, const MutableTensorView& dgrid,
              void* workspace) {
  using T = compute_t<S>;
  constexpr bool kWideDx = !std::is_same_v<S, T>;  // 16-bit: accumulate dx in float32
  const S* go = static_cast<const S*>(grad.data);
  const S* in = static_cast<const S*>(input.data);
  const S* gr = static_cast<const S*>(grid.data);
  const Shape4& is = input.strides;
  const bool want_dx = p.mask.input;
  const bool want_dgrid = p.mask.grid;

  // dx accumulators: the output itself, or a dense float32 workspace.
  T* acc = nullptr;
  Shape4 as{};
  if (want_dx) {
    if constexpr (kWideDx) {
      acc = static_cast<T*>(workspace);
      as = contiguous_strides(dx.shape);
    } else {
      acc = static_cast<T*>(dx.data);
      as = dx.strides;
    }
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t y = 0; y < p.in_h; ++y)
          for (int64_t x = 0; x < p.in_w; ++x) acc[offset(as, n, c, y, x)] = 0;
  }

  Stencil<T> s;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t h = 0; h < p.out_h; ++h) {
      for (int64_t w = 0; w < p.out_w; ++w) {
        const S* g = gr + offset(grid.strides, n, h, w, 0);
        make_stencil<M, P, kAlign>(load(g[0]), load(g[grid.strides[3]]), p.in_h, p.in_w, &s);
        T gix = 0, giy = 0;
        for (int64_t c = 0; c < p.c; ++c) {
          const T gout = load(go[offset(grad.strides, n, c, h, w)]);
          if (want_dx) {
            T* plane = acc + n * as[0] + c * as[1];
            for (int k = 0; k < s.count; ++k) plane[s.y[k] * as[2] + s.x[k] * as[3]] += s.w[k] * gout;
          }
          if constexpr (M != Interpolation::kNearest) {
            if (want_dgrid) {
              const S* plane = in + n * is[0] + c * is[1];
              for (int k = 0; k < s.count; ++k) {
                const T v = load(plane[s.y[k] * is[2] + s.x[k] * is[3]]) * gout;
                gix += s.dw_dx[k] * v;
                giy += s.dw_dy[k] * v;
              }
            }
          }
        }
        if (want_dgrid) {
          S* dg = static_cast<S*>(dgrid.data) + offset(dgrid.strides, n, h, w, 0);
          dg[0] = store<S>(s.mult_x * gix);
          dg[dgrid.strides[3]] = store<S>(s.mult_y * giy);
        }
      }
    }
  }

  if constexpr (kWideDx) {
    if (want_dx) {
      S* out = static_cast<S*>(dx.data);
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t c = 0; c < p.c; ++c)
          for (int64_t y = 0; y < p.in_h; ++y)
            for (int64_t x = 0; x < p.in_w; ++x)
              out[offset(dx.strides, n, c, y, x)] = store<S>(acc[offset(as, n, c, y, x)]);
    }
  }
}

// The dispatch table: every (dtype, mode, padding, align_corners) in one
// place, indexed as ((dtype * 3 + mode) * 3 + padding) * 2 + align.
constexpr int kEntries = 4 * 3 * 3 * 2;

constexpr int index_of(int dtype, int mode, int pad, int align) {
  return ((dtype * 3 + mode) * 3 + pad) * 2 + align;
}

template <int I>
struct Entry {
  static constexpr int kAlign = I % 2;
  static constexpr int kPad = (I / 2) % 3;
  static constexpr int kMode = (I / 6) % 3;
  static constexpr int kDType = I / 18;
  template <class F>
  static constexpr auto pick(F f) {
    if constexpr (kDType == static_cast<int>(DType::kFloat16)) return f(Half{});
    else if constexpr (kDType == static_cast<int>(DType::kBFloat16)) return f(BFloat16{});
    else if constexpr (kDType == static_cast<int>(DType::kFloat32)) return f(float{});
    else return f(double{});
  }
  static constexpr ForwardFn forward_fn() {
    return pick([](auto tag) -> ForwardFn {
      return &forward<decltype(tag), static_cast<Interpolation>(kMode), static_cast<Padding>(kPad),
                      kAlign == 1>;
    });
  }
  static constexpr BackwardFn backward_fn() {
    return pick([](auto tag) -> BackwardFn {
      return &backward<decltype(tag), static_cast<Interpolation>(kMode), static_cast<Padding>(kPad),
                       kAlign == 1>;
    });
  }
};

template <int... I>
constexpr std::array<ForwardFn, kEntries> forward_table(std::integer_sequence<int, I...>) {
  return {Entry<I>::forward_fn()...};
}
template <int... I>
constexpr std::array<BackwardFn, kEntries> backward_table(std::integer_sequence<int, I...>) {
  return {Entry<I>::backward_fn()...};
}

constexpr auto kForward = forward_table(std::make_integer_sequence<int, kEntries>{});
constexpr auto kBackward = backward_table(std::make_integer_sequence<int, kEntries>{});

int index_of(const Problem& p) {
  return index_of(static_cast<int>(p.dtype), static_cast<int>(p.options.interpolation),
                  static_cast<int>(p.options.padding), p.options.align_corners ? 1 : 0);
}

}  // namespace

ForwardFn forward_kernel(const Problem& problem) { return kForward[index_of(problem)]; }
BackwardFn backward_kernel(const Problem& problem) { return kBackward[index_of(problem)]; }

std::size_t backward_workspace_bytes(const Problem& p) {
  if (!p.mask.input || p.dtype == DType::kFloat32 || p.dtype == DType::kFloat64) return 0;
  return static_cast<std::size_t>(p.n * p.c * p.in_h * p.in_w) * sizeof(float);
}

}  // namespace gridsampler::cpu
