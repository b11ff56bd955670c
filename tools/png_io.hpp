// PNG files of the tools, through libpng: 8-bit pictures written (the demo's
// and the registration's outputs), images read in (the registration's
// inputs), and the colour maps the pictures use.
//
// Writing uses libpng's simplified API; reading uses its full API, since the
// simplified one converts 16-bit samples to linear light and colour-manages
// the others, and a registration wants the file's sample values as they are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace gridsampler::png {

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

// A value in [0, 1] as 8 bits (clamped; NaN is 0).
uint8_t byte_from_unit(double v);

// A colour in [0, 1] per channel (clamped; NaN is black) as 8 bits.
Rgb rgb_from_unit(double r, double g, double b);

// The "inferno" colour map (black - purple - orange - pale yellow), t in
// [0, 1] (clamped; NaN is black), piecewise linear through 9 of its colours.
Rgb inferno(double t);

// Writes `image` to `path` as an 8-bit RGB PNG. Returns an empty string on
// success, else what went wrong.
std::string write_png(const std::string& path, const RgbImage& image);

// Writes a float (1, C, H, W) tensor, C = 1 (grey) or 3 (RGB), values in
// [0, 1] (clamped), as an 8-bit PNG of C channels. Returns "" or the error.
std::string write_png(const std::string& path, const host::Tensor& image);

// Reading. The largest image read_png accepts, in pixels (width x height),
// checked from the header before any pixel memory is allocated: 2^24, e.g.
// 4096 x 4096 (a float RGB copy of it is 192 MiB).
inline constexpr int64_t kMaxReadPixels = int64_t{1} << 24;

struct PngImage {
  int bit_depth = 8;    // of the file's samples after expansion: 8 or 16
  host::Tensor pixels;  // float32 (1, C, H, W), C = 1 or 3, sample / (2^bit_depth - 1)
};

// Reads a PNG: grey or RGB, 8 or 16 bits per sample; 1-, 2- and 4-bit grey
// are widened to 8 bits, palettes expanded to RGB, alpha channels (and
// tRNS transparency) ignored; interlaced files are read too. Errors name
// the file: "<path>: not a PNG file", "<path>: corrupt or truncated PNG
// (<libpng's words>)", "<path>: 5000 x 4000 pixels is over the limit of
// 16777216 pixels", "<path>: cannot open (<reason>)".
Status read_png(const std::string& path, int64_t max_pixels, PngImage* out);

}  // namespace gridsampler::png
