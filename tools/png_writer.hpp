// 8-bit RGB images for the demo, a colour map, and writing them as PNG
// (libpng's simplified API, so no setjmp/longjmp crosses C++ frames).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gridsampler::demo {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

class RgbImage {
 public:
  RgbImage() = default;
  RgbImage(int width, int height, Rgb fill = {});

  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, Rgb c);
  Rgb get(int x, int y) const;
  // Copies `tile` with its top-left corner at (x0, y0), clipped to this image.
  void paste(const RgbImage& tile, int x0, int y0);
  const std::vector<uint8_t>& bytes() const { return bytes_; }  // rows of R, G, B

 private:
  int width_ = 0, height_ = 0;
  std::vector<uint8_t> bytes_;
};

// A colour in [0, 1] per channel (clamped; NaN is black) as 8 bits.
Rgb rgb_from_unit(double r, double g, double b);

// The "inferno" colour map (black - purple - orange - pale yellow), t in
// [0, 1] (clamped; NaN is black), piecewise linear through 9 of its colours.
Rgb inferno(double t);

// Writes `image` to `path` as an 8-bit RGB PNG. Returns an empty string on
// success, else what went wrong.
std::string write_png(const std::string& path, const RgbImage& image);

}  // namespace gridsampler::demo
