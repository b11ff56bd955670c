#include "register/pictures.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "register/typed.hpp"

namespace gridsampler::registration {
namespace {

constexpr double kPi = 3.14159265358979323846;

template <class F>
void for_each_difference(const host::Tensor& a, const host::Tensor& b, F&& f) {
  const int64_t channels = a.shape()[1], plane = a.shape()[2] * a.shape()[3];
  const std::vector<double> va = a.values(), vb = b.values();
  for (int64_t p = 0; p < plane; ++p) {
    double sum = 0;
    for (int64_t c = 0; c < channels; ++c) {
      sum += std::fabs(va[static_cast<std::size_t>(c * plane + p)] - vb[static_cast<std::size_t>(c * plane + p)]);
    }
    f(p, sum / static_cast<double>(channels));
  }
}

// (dx, dy) in pixels at pixel k of an H x W grid.
std::array<double, 2> displacement(const double* g, int64_t k, int64_t height, int64_t width) {
  const int64_t i = k / width, j = k % width;
  const double u = (g[2 * k] + 1) * static_cast<double>(width) / 2 - 0.5;
  const double v = (g[2 * k + 1] + 1) * static_cast<double>(height) / 2 - 0.5;
  return {u - static_cast<double>(j), v - static_cast<double>(i)};
}

// The colour wheel: 55 hues through red, yellow, green, cyan, blue and
// magenta, more of them where the eye tells hues apart best (the segment
// lengths of the Middlebury flow benchmark's wheel).
std::vector<std::array<double, 3>> colour_wheel() {
  struct Segment {
    int n;
    std::array<double, 3> from, to;
  };
  const Segment segments[] = {{15, {1, 0, 0}, {1, 1, 0}}, {6, {1, 1, 0}, {0, 1, 0}},  {4, {0, 1, 0}, {0, 1, 1}},
                              {11, {0, 1, 1}, {0, 0, 1}}, {13, {0, 0, 1}, {1, 0, 1}}, {6, {1, 0, 1}, {1, 0, 0}}};
  std::vector<std::array<double, 3>> wheel;
  for (const Segment& s : segments) {
    for (int i = 0; i < s.n; ++i) {
      const double t = static_cast<double>(i) / s.n;
      wheel.push_back({s.from[0] + t * (s.to[0] - s.from[0]), s.from[1] + t * (s.to[1] - s.from[1]),
                       s.from[2] + t * (s.to[2] - s.from[2])});
    }
  }
  return wheel;
}

png::Rgb flow_colour(double dx, double dy, const std::vector<std::array<double, 3>>& wheel) {
  const double length = std::hypot(dx, dy);
  if (!(length > 0)) return {255, 255, 255};
  const double n = static_cast<double>(wheel.size());
  const double at = (std::atan2(-dy, -dx) / kPi + 1) / 2 * (n - 1);  // 0 .. n - 1
  const std::size_t k0 = static_cast<std::size_t>(at), k1 = (k0 + 1) % wheel.size();
  const double f = at - static_cast<double>(k0);
  std::array<double, 3> c;
  for (std::size_t k = 0; k < 3; ++k) {
    const double hue = (1 - f) * wheel[k0][k] + f * wheel[k1][k];
    c[k] = length <= 1 ? 1 - length * (1 - hue) : 0.75 * hue;
  }
  return png::rgb_from_unit(c[0], c[1], c[2]);
}

}  // namespace

double largest_difference(const host::Tensor& a, const host::Tensor& b) {
  double largest = 0;
  for_each_difference(a, b, [&](int64_t, double d) { largest = std::max(largest, d); });
  return largest;
}

png::RgbImage difference_picture(const host::Tensor& a, const host::Tensor& b, double scale) {
  const int64_t width = a.shape()[3];
  png::RgbImage picture(static_cast<int>(width), static_cast<int>(a.shape()[2]));
  for_each_difference(a, b, [&](int64_t p, double d) {
    picture.set(static_cast<int>(p % width), static_cast<int>(p / width), png::inferno(scale > 0 ? std::sqrt(d / scale) : 0));
  });
  return picture;
}

double longest_displacement(const host::Tensor& grid) {
  const int64_t height = grid.shape()[1], width = grid.shape()[2];
  const double* g = data<double>(grid);
  double longest = 0;
  for (int64_t k = 0; k < height * width; ++k) {
    const auto [dx, dy] = displacement(g, k, height, width);
    longest = std::max(longest, std::hypot(dx, dy));
  }
  return longest;
}

png::RgbImage flow_picture(const host::Tensor& grid, double scale) {
  const int64_t height = grid.shape()[1], width = grid.shape()[2];
  const double* g = data<double>(grid);
  const std::vector<std::array<double, 3>> wheel = colour_wheel();
  png::RgbImage picture(static_cast<int>(width), static_cast<int>(height));
  for (int64_t k = 0; k < height * width; ++k) {
    const auto [dx, dy] = displacement(g, k, height, width);
    const double s = scale > 0 ? 1 / scale : 0;
    picture.set(static_cast<int>(k % width), static_cast<int>(k / width), flow_colour(dx * s, dy * s, wheel));
  }
  return picture;
}

}  // namespace gridsampler::registration
