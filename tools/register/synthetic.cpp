#include "register/synthetic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "demo_scene.hpp"
#include "register/typed.hpp"

namespace gridsampler::registration {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kWaves = 3;  // sinusoids per axis

}  // namespace

KnownWarp default_warp(int64_t size) {
  const double s = static_cast<double>(size);
  return {/*angle_deg=*/6, /*scale=*/0.95, /*shift_x=*/-0.075 * s, /*shift_y=*/0.047 * s, /*elastic=*/0.012 * s,
          /*seed=*/7};
}

Example make_example(int64_t size, const KnownWarp& warp) {
  Example ex;
  const double s = static_cast<double>(size);
  ex.fixed = host::Tensor(DType::kFloat32, {1, 3, size, size});
  ex.moving = host::Tensor(DType::kFloat32, {1, 3, size, size});
  ex.true_grid = host::Tensor(DType::kFloat64, {1, size, size, 2});

  std::mt19937_64 scene_rng(1);  // the demo's first image
  const demo::DemoScene scene(0, scene_rng);

  struct Wave {
    double fx, fy, phase;
  };
  std::mt19937_64 rng(warp.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::array<std::array<Wave, kWaves>, 2> waves;
  for (auto& axis : waves) {
    for (Wave& w : axis) {
      const double angle = 2 * kPi * unit(rng), frequency = 0.5 + 1.0 * unit(rng);  // cycles per image width
      w = {frequency * std::cos(angle), frequency * std::sin(angle), 2 * kPi * unit(rng)};
    }
  }
  const double amplitude = warp.elastic * 2 / s / kWaves;  // normalised, per wave
  const double ca = std::cos(warp.angle_deg * kPi / 180), sa = std::sin(warp.angle_deg * kPi / 180);
  const double bx = warp.shift_x * 2 / s, by = warp.shift_y * 2 / s;

  const int64_t plane = size * size;
  float* fixed = data<float>(ex.fixed);
  float* moving = data<float>(ex.moving);
  double* grid = data<double>(ex.true_grid);
  for (int64_t i = 0; i < size; ++i) {
    for (int64_t j = 0; j < size; ++j) {
      const double x = (2.0 * static_cast<double>(j) + 1) / s - 1, y = (2.0 * static_cast<double>(i) + 1) / s - 1;
      double e[2] = {0, 0};
      for (std::size_t k = 0; k < 2; ++k) {
        for (const Wave& w : waves[k]) e[k] += amplitude * std::sin(kPi * (w.fx * x + w.fy * y) + w.phase);
      }
      const double gx = warp.scale * (ca * x - sa * y) + bx + e[0];
      const double gy = warp.scale * (sa * x + ca * y) + by + e[1];
      grid[(i * size + j) * 2] = gx;
      grid[(i * size + j) * 2 + 1] = gy;
      const std::array<double, 3> f = scene.colour((gx + 1) / 2, (gy + 1) / 2, s);
      const std::array<double, 3> m = scene.colour((x + 1) / 2, (y + 1) / 2, s);
      for (int64_t c = 0; c < 3; ++c) {
        fixed[c * plane + i * size + j] = static_cast<float>(std::clamp(f[static_cast<std::size_t>(c)], 0.0, 1.0));
        moving[c * plane + i * size + j] = static_cast<float>(std::clamp(m[static_cast<std::size_t>(c)], 0.0, 1.0));
      }
    }
  }
  return ex;
}

DisplacementError displacement_error(const host::Tensor& true_grid, const host::Tensor& grid) {
  const int64_t height = true_grid.shape()[1], width = true_grid.shape()[2];
  const double* t = data<double>(true_grid);
  const double* g = data<double>(grid);
  DisplacementError e;
  double sum = 0;
  for (int64_t k = 0; k < height * width; ++k) {
    const double tx = t[2 * k], ty = t[2 * k + 1];
    if (!(std::fabs(tx) <= 1 && std::fabs(ty) <= 1)) continue;
    const double d = std::hypot((g[2 * k] - tx) * static_cast<double>(width) / 2,
                                (g[2 * k + 1] - ty) * static_cast<double>(height) / 2);
    sum += d;
    e.max_px = std::max(e.max_px, d);
    ++e.pixels;
  }
  e.mean_px = e.pixels > 0 ? sum / static_cast<double>(e.pixels) : 0;
  return e;
}

}  // namespace gridsampler::registration
