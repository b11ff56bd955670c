// PNG files for the tests of the tools' PNG reading: written through
// libpng's simplified API (any of its formats, 8 or 16 bits, palettes), and
// hand-made ones that only a header says much about. Programs that include
// this link libpng (PNG::PNG).
#pragma once

#include <png.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace gstest {

// Writes `pixels` (rows of samples in `format`, PNG_FORMAT_*; 16-bit
// formats take uint16_t samples) as a PNG; returns false on failure.
inline bool write_png_file(const std::string& path, int width, int height, png_uint_32 format, const void* pixels,
                           const void* colormap = nullptr, int colormap_entries = 0) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = format;
  image.colormap_entries = static_cast<png_uint_32>(colormap_entries);
  const bool ok = png_image_write_to_file(&image, path.c_str(), 0, pixels, 0, colormap) != 0;
  png_image_free(&image);
  return ok;
}

inline uint32_t crc32_of(const unsigned char* p, std::size_t n, uint32_t crc = 0xffffffffu) {
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc;
}

// A PNG that declares width x height 8-bit grey pixels in a valid header,
// followed by an empty IDAT chunk and IEND: a few dozen bytes whatever the
// size it claims.
inline std::vector<unsigned char> png_claiming(uint32_t width, uint32_t height) {
  std::vector<unsigned char> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto be32 = [](std::vector<unsigned char>& v, uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<unsigned char>(x >> s));
  };
  auto chunk = [&](const char* type, const std::vector<unsigned char>& data) {
    be32(out, static_cast<uint32_t>(data.size()));
    std::vector<unsigned char> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    out.insert(out.end(), body.begin(), body.end());
    be32(out, crc32_of(body.data(), body.size()) ^ 0xffffffffu);
  };
  std::vector<unsigned char> ihdr;
  be32(ihdr, width);
  be32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // 8 bits, grey, deflate, adaptive filters, no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", {});
  chunk("IEND", {});
  return out;
}

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                             static_cast<std::streamsize>(bytes.size()));
}

// The offset of the first byte of the first IDAT chunk's data in a PNG.
inline std::size_t idat_data_offset(const std::vector<unsigned char>& png) {
  for (std::size_t at = 8; at + 8 <= png.size();) {
    const uint32_t length = (uint32_t{png[at]} << 24) | (uint32_t{png[at + 1]} << 16) | (uint32_t{png[at + 2]} << 8) |
                            png[at + 3];
    if (std::memcmp(&png[at + 4], "IDAT", 4) == 0) return at + 8;
    at += 12 + length;
  }
  return 0;
}

}  // namespace gstest
