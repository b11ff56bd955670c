#include "png_io.hpp"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

namespace gridsampler::png {

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

uint8_t byte_from_unit(double v) {
  if (!(v > 0)) return 0;  // also NaN
  if (v >= 1) return 255;
  return static_cast<uint8_t>(std::lround(v * 255.0));
}

Rgb rgb_from_unit(double r, double g, double b) { return {byte_from_unit(r), byte_from_unit(g), byte_from_unit(b)}; }

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

namespace {

// 8-bit samples, rows of `channels` interleaved values, to `path`.
std::string write_8bit(const std::string& path, int width, int height, int channels, const uint8_t* bytes) {
  if (width <= 0 || height <= 0) return path + ": empty image";
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(width);
  png.height = static_cast<png_uint_32>(height);
  png.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  const int ok = png_image_write_to_file(&png, path.c_str(), /*convert_to_8bit=*/0, bytes, /*row_stride=*/0,
                                         /*colormap=*/nullptr);
  std::string error;
  if (!ok) error = path + ": cannot write PNG (" + std::string(png.message) + ")";
  png_image_free(&png);
  return error;
}

}  // namespace

std::string write_png(const std::string& path, const RgbImage& image) {
  return write_8bit(path, image.width(), image.height(), 3, image.bytes().data());
}

std::string write_png(const std::string& path, const host::Tensor& image) {
  const Shape4& s = image.shape();
  if (image.dtype() != DType::kFloat32 || s[0] != 1 || (s[1] != 1 && s[1] != 3)) {
    return path + ": not a float32 (1, 1 or 3, H, W) image";
  }
  const int64_t channels = s[1], height = s[2], width = s[3], plane = height * width;
  std::vector<uint8_t> bytes(static_cast<std::size_t>(channels * plane));
  const std::vector<double> values = image.values();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t p = 0; p < plane; ++p) {
      bytes[static_cast<std::size_t>(p * channels + c)] = byte_from_unit(values[static_cast<std::size_t>(c * plane + p)]);
    }
  }
  return write_8bit(path, static_cast<int>(width), static_cast<int>(height), static_cast<int>(channels), bytes.data());
}

// ---------------------------------------------------------------------------
// Reading. libpng reports errors by calling an error function that must not
// return; it longjmps back to the setjmp of the function that made the call.
// Every libpng call that can fail is made from the two functions below, whose
// frames hold nothing with a destructor and change no local after setjmp, so
// the jump skips no C++ cleanup. What they read lands in ReadState.

namespace {

struct ReadState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::FILE* file = nullptr;
  char message[256] = "";
  png_uint_32 width = 0, height = 0;
  int channels = 0, bit_depth = 0;
};

extern "C" void on_png_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<ReadState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings (a bad CRC in an ancillary chunk, which libpng then skips; an
// unknown chunk) do not stop the read.
extern "C" void on_png_warning(png_structp, png_const_charp) {}

// The header and the transformations to grey or RGB of 8 or 16 bits.
bool read_header(ReadState* st) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_init_io(st->png, st->file);
  png_set_sig_bytes(st->png, 8);  // read_png checked the signature
  png_read_info(st->png, st->info);
  const int colour_type = png_get_color_type(st->png, st->info);
  if (colour_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (colour_type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(st->png, st->info) < 8) {
    png_set_expand_gray_1_2_4_to_8(st->png);
  }
  if ((colour_type & PNG_COLOR_MASK_ALPHA) != 0) png_set_strip_alpha(st->png);
  png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  st->width = png_get_image_width(st->png, st->info);
  st->height = png_get_image_height(st->png, st->info);
  st->channels = png_get_channels(st->png, st->info);
  st->bit_depth = png_get_bit_depth(st->png, st->info);
  return true;
}

bool read_rows(ReadState* st, png_bytepp rows) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_read_image(st->png, rows);
  png_read_end(st->png, nullptr);
  return true;
}

Status failed(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

}  // namespace

Status read_png(const std::string& path, int64_t max_pixels, PngImage* out) {
  ReadState st;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return failed(path + ": cannot open (" + std::strerror(errno) + ")");
  st.file = file.get();
  png_byte signature[8] = {};
  if (std::fread(signature, 1, sizeof signature, st.file) != sizeof signature ||
      png_sig_cmp(signature, 0, sizeof signature) != 0) {
    return failed(path + ": not a PNG file");
  }
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, on_png_error, on_png_warning);
  if (st.png != nullptr) st.info = png_create_info_struct(st.png);
  struct Destroy {
    ReadState* st;
    ~Destroy() { png_destroy_read_struct(&st->png, st->info ? &st->info : nullptr, nullptr); }
  } destroy{&st};
  if (st.png == nullptr || st.info == nullptr) return failed(path + ": out of memory for libpng");

  auto corrupt = [&] { return failed(path + ": corrupt or truncated PNG (" + std::string(st.message) + ")"); };
  if (!read_header(&st)) return corrupt();
  const int64_t pixels = int64_t{st.width} * int64_t{st.height};
  if (pixels > max_pixels) {
    return failed(path + ": " + std::to_string(st.width) + " x " + std::to_string(st.height) +
                  " pixels is over the limit of " + std::to_string(max_pixels) + " pixels");
  }
  if ((st.channels != 1 && st.channels != 3) || (st.bit_depth != 8 && st.bit_depth != 16)) {
    return failed(path + ": unsupported PNG layout (" + std::to_string(st.channels) + " channels of " +
                  std::to_string(st.bit_depth) + " bits)");
  }

  const std::size_t row_bytes = std::size_t{st.width} * static_cast<std::size_t>(st.channels * st.bit_depth / 8);
  std::vector<png_byte> data(row_bytes * st.height);
  std::vector<png_bytep> rows(st.height);
  for (png_uint_32 y = 0; y < st.height; ++y) rows[y] = data.data() + y * row_bytes;
  if (!read_rows(&st, rows.data())) return corrupt();

  const int64_t channels = st.channels, height = st.height, width = st.width, plane = pixels;
  host::Tensor image;
  if (Status s = host::Tensor::allocate(path, DType::kFloat32, {1, channels, height, width}, &image); !s.ok()) {
    return s;
  }
  float* dst = static_cast<float*>(image.mutable_view().data);
  const double scale = 1.0 / (st.bit_depth == 16 ? 65535.0 : 255.0);
  for (int64_t p = 0; p < plane; ++p) {
    for (int64_t c = 0; c < channels; ++c) {
      const std::size_t at = static_cast<std::size_t>(p * channels + c);
      const unsigned sample = st.bit_depth == 16 ? (unsigned{data[2 * at]} << 8) | data[2 * at + 1] : data[at];
      dst[c * plane + p] = static_cast<float>(sample * scale);
    }
  }
  out->bit_depth = st.bit_depth;
  out->pixels = std::move(image);
  return Status::Ok();
}

}  // namespace gridsampler::png
