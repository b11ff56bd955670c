#include "transform.hpp"

#include <algorithm>
#include <cmath>

#include "register/typed.hpp"

namespace gridsampler::registration {

std::optional<TransformKind> parse_transform(std::string_view name) {
  if (name == "affine") return TransformKind::kAffine;
  if (name == "elastic") return TransformKind::kElastic;
  if (name == "affine+elastic") return TransformKind::kAffineElastic;
  return std::nullopt;
}

std::string_view to_string(TransformKind kind) {
  switch (kind) {
    case TransformKind::kAffine:
      return "affine";
    case TransformKind::kElastic:
      return "elastic";
    case TransformKind::kAffineElastic:
      break;
  }
  return "affine+elastic";
}

int64_t control_cells(int64_t full, int64_t level) {
  const int64_t target = std::max<int64_t>(1, (full + kControlSpacing / 2) / kControlSpacing);
  return std::max<int64_t>(1, std::min(target, level / kMinCellPixels));
}

namespace {

// Normalised position of lattice point i of n spanning [-1, 1] (align_corners = true).
double lattice(int64_t i, int64_t n) { return n > 1 ? -1 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 0; }

}  // namespace

Status refine_control(const Transform& t, int64_t rows, int64_t cols, Transform* out) {
  Transform r;
  r.affine = t.affine;
  r.rows = rows;
  r.cols = cols;
  r.control.assign(static_cast<std::size_t>(2 * rows * cols), 0.0);
  if (t.elastic()) {
    // The old field sampled at the new points: bicubic with border padding
    // over align_corners = true is the interpolation that defines d.
    host::Tensor old_points(DType::kFloat64, {1, 2, t.rows, t.cols});
    host::Tensor where(DType::kFloat64, {1, rows, cols, 2});
    host::Tensor values(DType::kFloat64, {1, 2, rows, cols});
    std::copy(t.control.begin(), t.control.end(), data<double>(old_points));
    double* g = data<double>(where);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        g[(i * cols + j) * 2] = lattice(j, cols);
        g[(i * cols + j) * 2 + 1] = lattice(i, rows);
      }
    }
    const Options options{Interpolation::kBicubic, Padding::kBorder, /*align_corners=*/true, /*num_threads=*/1};
    if (Status s = grid_sampler_2d(old_points.view(), where.view(), values.mutable_view(), options); !s.ok()) return s;
    const double* v = data<double>(values);
    std::copy(v, v + r.control.size(), r.control.begin());
  }
  *out = std::move(r);
  return Status::Ok();
}

double bending_energy(const Transform& t, std::vector<double>* grad_control) {
  if (!t.elastic()) return 0;
  const int64_t rows = t.rows, cols = t.cols;
  const double hx = cols > 1 ? 2.0 / static_cast<double>(cols - 1) : 2.0;
  const double hy = rows > 1 ? 2.0 / static_cast<double>(rows - 1) : 2.0;
  const double area = hx * hy / 4;  // each term stands for one cell of the image's 2 x 2 square
  double energy = 0;
  for (int64_t c = 0; c < 2; ++c) {
    const double* phi = t.control.data() + c * rows * cols;
    double* grad = grad_control ? grad_control->data() + c * rows * cols : nullptr;
    auto at = [&](int64_t i, int64_t j) { return i * cols + j; };
    // One term: weight * (sum_k coef_k phi[idx_k] / h2)^2.
    auto term = [&](double weight, double h2, std::initializer_list<std::pair<int64_t, double>> taps) {
      double d = 0;
      for (const auto& [idx, coef] : taps) d += coef * phi[idx];
      d /= h2;
      energy += weight * d * d;
      if (grad) {
        for (const auto& [idx, coef] : taps) grad[idx] += weight * 2 * d * coef / h2;
      }
    };
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 1; j + 1 < cols; ++j) term(area, hx * hx, {{at(i, j - 1), 1}, {at(i, j), -2}, {at(i, j + 1), 1}});
    }
    for (int64_t i = 1; i + 1 < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) term(area, hy * hy, {{at(i - 1, j), 1}, {at(i, j), -2}, {at(i + 1, j), 1}});
    }
    for (int64_t i = 0; i + 1 < rows; ++i) {
      for (int64_t j = 0; j + 1 < cols; ++j) {
        term(2 * area, hx * hy, {{at(i, j), 1}, {at(i, j + 1), -1}, {at(i + 1, j), -1}, {at(i + 1, j + 1), 1}});
      }
    }
  }
  return energy;
}

std::vector<double> pack(TransformKind kind, const Transform& t) {
  std::vector<double> x;
  if (has_affine(kind)) {
    const auto& a = t.affine;
    x = {a[0] - 1, a[1], a[2], a[3] - 1, a[4], a[5]};
  }
  if (has_elastic(kind)) x.insert(x.end(), t.control.begin(), t.control.end());
  return x;
}

void unpack(TransformKind kind, const std::vector<double>& x, Transform* t) {
  std::size_t at = 0;
  if (has_affine(kind)) {
    t->affine = {x[0] + 1, x[1], x[2], x[3] + 1, x[4], x[5]};
    at = 6;
  }
  if (has_elastic(kind)) std::copy(x.begin() + static_cast<std::ptrdiff_t>(at), x.end(), t->control.begin());
}

PixelAffine affine_in_pixels(const Transform& t, int64_t height, int64_t width) {
  const double sx = static_cast<double>(width) / 2, sy = static_cast<double>(height) / 2;
  const auto& a = t.affine;
  // Pixel (j, i) -> normalised -> A p + b -> moving pixel.
  auto map = [&](double j, double i, double* u, double* v) {
    const double x = (j + 0.5) / sx - 1, y = (i + 0.5) / sy - 1;
    *u = sx * (a[0] * x + a[1] * y + a[4] + 1) - 0.5;
    *v = sy * (a[2] * x + a[3] * y + a[5] + 1) - 0.5;
  };
  PixelAffine p;
  double u0, v0, ux, vx, uy, vy;
  map(0, 0, &u0, &v0);
  map(1, 0, &ux, &vx);
  map(0, 1, &uy, &vy);
  p.matrix = {ux - u0, uy - u0, vx - v0, vy - v0};
  p.offset = {u0, v0};
  return p;
}

}  // namespace gridsampler::registration
