#include "png_writer.hpp"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gridsampler::demo {

RgbImage::RgbImage(int width, int height, Rgb fill)
    : width_(std::max(width, 0)),
      height_(std::max(height, 0)),
      bytes_(static_cast<std::size_t>(width_) * static_cast<std::size_t>(height_) * 3) {
  for (std::size_t i = 0; i < bytes_.size(); i += 3) {
    bytes_[i] = fill.r;
    bytes_[i + 1] = fill.g;
    bytes_[i + 2] = fill.b;
  }
}

void RgbImage::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const std::size_t i =
      (static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) + static_cast<std::size_t>(x)) * 3;
  bytes_[i] = c.r;
  bytes_[i + 1] = c.g;
  bytes_[i + 2] = c.b;
}

Rgb RgbImage::get(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return {};
  const std::size_t i =
      (static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) + static_cast<std::size_t>(x)) * 3;
  return {bytes_[i], bytes_[i + 1], bytes_[i + 2]};
}

void RgbImage::paste(const RgbImage& tile, int x0, int y0) {
  for (int y = 0; y < tile.height(); ++y) {
    for (int x = 0; x < tile.width(); ++x) set(x0 + x, y0 + y, tile.get(x, y));
  }
}

namespace {

uint8_t to_byte(double v) {
  if (!(v > 0)) return 0;  // also NaN
  if (v >= 1) return 255;
  return static_cast<uint8_t>(std::lround(v * 255.0));
}

}  // namespace

Rgb rgb_from_unit(double r, double g, double b) { return {to_byte(r), to_byte(g), to_byte(b)}; }

Rgb inferno(double t) {
  // matplotlib's inferno at t = 0, 1/8, ..., 1.
  static constexpr double kStops[9][3] = {{0, 0, 4},      {31, 12, 72},   {85, 15, 109},
                                          {136, 34, 106}, {186, 54, 85},  {227, 89, 51},
                                          {249, 140, 10}, {249, 201, 50}, {252, 255, 164}};
  if (!(t > 0)) t = 0;
  if (t > 1) t = 1;
  const double pos = t * 8;
  const int i = std::min(static_cast<int>(pos), 7);
  const double f = pos - i;
  double c[3];
  for (int k = 0; k < 3; ++k) c[k] = (kStops[i][k] * (1 - f) + kStops[i + 1][k] * f) / 255.0;
  return rgb_from_unit(c[0], c[1], c[2]);
}

std::string write_png(const std::string& path, const RgbImage& image) {
  if (image.width() <= 0 || image.height() <= 0) return path + ": empty image";
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width());
  png.height = static_cast<png_uint_32>(image.height());
  png.format = PNG_FORMAT_RGB;
  const int ok = png_image_write_to_file(&png, path.c_str(), /*convert_to_8bit=*/0, image.bytes().data(),
                                         /*row_stride=*/0,
                                         /*colormap=*/nullptr);
  std::string error;
  if (!ok) error = path + ": cannot write PNG (" + std::string(png.message) + ")";
  png_image_free(&png);
  return error;
}

}  // namespace gridsampler::demo
