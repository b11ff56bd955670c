#include "demo_scene.hpp"

#include <algorithm>
#include <cmath>

namespace gridsampler::demo {
namespace {

constexpr double kPi = 3.14159265358979323846;

double clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

// Coverage of the box [x0, x1] x [y0, y1] (unit coordinates) at pixel centre
// (u, v), anti-aliased over about one pixel.
double box_alpha(double u, double v, double x0, double x1, double y0, double y1, double size) {
  const double ax = clamp01(std::min(u - x0, x1 - u) * size + 0.5);
  const double ay = clamp01(std::min(v - y0, y1 - v) * size + 0.5);
  return ax * ay;
}

}  // namespace

DemoScene::DemoScene(int variant, std::mt19937_64& rng) : variant_(variant) {
  std::vector<std::array<double, 3>> palette = {{0.92, 0.16, 0.14}, {0.98, 0.84, 0.10}, {0.10, 0.74, 0.86},
                                                {0.86, 0.22, 0.80}, {0.22, 0.80, 0.30}, {0.98, 0.55, 0.10}};
  std::shuffle(palette.begin(), palette.end(), rng);
  std::uniform_real_distribution<double> centre(0.3, 0.82), radius(0.07, 0.12);
  for (int i = 0; i < 4; ++i) {
    const double cx = centre(rng), cy = centre(rng), r = radius(rng);
    discs_.push_back({cx, cy, r, palette[static_cast<std::size_t>(i)]});
  }
}

std::array<double, 3> DemoScene::colour(double u, double v, double s) const {
  constexpr double kSquares = 8;  // checkerboard squares per side
  std::array<double, 3> base = {0.30 + 0.60 * u, 0.30 + 0.60 * v, 0.90 - 0.30 * (u + v)};
  if (variant_ == 1) base = {base[2], base[0], base[1]};
  // Checkerboard, edges smoothed over about a pixel.
  const double checker = std::sin(kPi * kSquares * u) * std::sin(kPi * kSquares * v);
  const double t = 0.5 + 0.5 * std::tanh(1.5 * checker * s / (kPi * kSquares));
  std::array<double, 3> c;
  for (std::size_t k = 0; k < 3; ++k) c[k] = base[k] * (0.35 + 0.65 * t);
  for (const Disc& d : discs_) {
    const double dist = std::hypot(u - d.cx, v - d.cy) * s;
    const double a = clamp01(d.r * s - dist + 0.5);
    for (std::size_t k = 0; k < 3; ++k) c[k] = c[k] * (1 - a) + d.rgb[k] * a;
  }
  // A letter F, so that rotations and reflections are easy to tell apart.
  const double f =
      std::max({box_alpha(u, v, 0.08, 0.13, 0.08, 0.40, s), box_alpha(u, v, 0.08, 0.30, 0.08, 0.13, s),
                box_alpha(u, v, 0.08, 0.25, 0.22, 0.27, s)});
  for (std::size_t k = 0; k < 3; ++k) c[k] = c[k] * (1 - f) + 0.97 * f;
  return c;
}

}  // namespace gridsampler::demo
