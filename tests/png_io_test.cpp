// Reading PNGs (tools/png_io.cpp): every layout the registration takes
// comes back with its exact sample values, and every broken or oversized
// file is refused with a message that names it, before any pixel memory is
// allocated for an oversized one.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/png_files.hpp"
#include "common/temp_dir.hpp"
#include "png_io.hpp"

namespace gridsampler::png {
namespace {

using gstest::TempDir;

constexpr int kW = 5, kH = 3;

// Sample (c, y, x) of a read image.
double at(const PngImage& image, int c, int y, int x) { return image.pixels.get(0, c, y, x); }

TEST(PngRead, Rgb8BitValuesExactly) {
  TempDir dir;
  std::vector<uint8_t> rgb(kW * kH * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 17 % 256);
  ASSERT_TRUE(gstest::write_png_file(dir.file("a.png"), kW, kH, PNG_FORMAT_RGB, rgb.data()));
  PngImage image;
  const Status s = read_png(dir.file("a.png"), kMaxReadPixels, &image);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(image.bit_depth, 8);
  ASSERT_EQ(image.pixels.shape(), (Shape4{1, 3, kH, kW}));
  EXPECT_EQ(image.pixels.dtype(), DType::kFloat32);
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_FLOAT_EQ(at(image, c, y, x), rgb[static_cast<std::size_t>((y * kW + x) * 3 + c)] / 255.0);
      }
    }
  }
}

TEST(PngRead, Grey16BitKeepsAllBits) {
  TempDir dir;
  std::vector<uint16_t> grey(kW * kH);
  for (std::size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<uint16_t>(1 + i * 4099);  // odd low bytes
  // libpng's simplified API writes 16-bit samples as given (with a gAMA of
  // 1, which the reader, wanting the stored values, ignores).
  ASSERT_TRUE(gstest::write_png_file(dir.file("g.png"), kW, kH, PNG_FORMAT_LINEAR_Y, grey.data()));
  PngImage image;
  const Status s = read_png(dir.file("g.png"), kMaxReadPixels, &image);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(image.bit_depth, 16);
  ASSERT_EQ(image.pixels.shape(), (Shape4{1, 1, kH, kW}));
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      EXPECT_FLOAT_EQ(at(image, 0, y, x), grey[static_cast<std::size_t>(y * kW + x)] / 65535.0);
    }
  }
}

TEST(PngRead, PaletteAndAlphaBecomeRgbAndGrey) {
  TempDir dir;
  // A palette image: index i is colour (10 i, 20 i, 30 i).
  std::vector<uint8_t> colormap;
  for (int i = 0; i < 8; ++i) colormap.insert(colormap.end(), {uint8_t(10 * i), uint8_t(20 * i), uint8_t(30 * i)});
  std::vector<uint8_t> indices(kW * kH);
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<uint8_t>(i % 8);
  ASSERT_TRUE(gstest::write_png_file(dir.file("p.png"), kW, kH, PNG_FORMAT_RGB_COLORMAP, indices.data(),
                                     colormap.data(), 8));
  PngImage image;
  Status s = read_png(dir.file("p.png"), kMaxReadPixels, &image);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(image.pixels.shape(), (Shape4{1, 3, kH, kW}));
  for (int k = 0; k < kW * kH; ++k) {
    for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(at(image, c, k / kW, k % kW), 10.0 * (c + 1) * (k % 8) / 255.0);
  }

  // Grey with alpha: the alpha channel is dropped, grey kept as stored.
  std::vector<uint8_t> grey_alpha(kW * kH * 2);
  for (int k = 0; k < kW * kH; ++k) {
    grey_alpha[static_cast<std::size_t>(2 * k)] = static_cast<uint8_t>(40 + k);
    grey_alpha[static_cast<std::size_t>(2 * k + 1)] = 255;  // opaque: libpng's simplified writer stores it unchanged
  }
  ASSERT_TRUE(gstest::write_png_file(dir.file("ga.png"), kW, kH, PNG_FORMAT_GA, grey_alpha.data()));
  s = read_png(dir.file("ga.png"), kMaxReadPixels, &image);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(image.pixels.shape(), (Shape4{1, 1, kH, kW}));
  for (int k = 0; k < kW * kH; ++k) EXPECT_FLOAT_EQ(at(image, 0, k / kW, k % kW), (40 + k) / 255.0);
}

TEST(PngRead, RefusesBrokenFilesNamingThem) {
  TempDir dir;
  std::vector<uint8_t> rgb(64 * 64 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);  // noise: no tiny IDAT
  ASSERT_TRUE(gstest::write_png_file(dir.file("good.png"), 64, 64, PNG_FORMAT_RGB, rgb.data()));
  const std::vector<unsigned char> good = gstest::read_bytes(dir.file("good.png"));

  auto refused = [&](const std::string& name, const std::string& message) {
    SCOPED_TRACE(name);
    PngImage image;
    const Status s = read_png(dir.file(name), kMaxReadPixels, &image);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(dir.file(name)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
    EXPECT_EQ(image.pixels.numel(), 0);
  };

  gstest::write_bytes(dir.file("text.png"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'});
  refused("text.png", ": not a PNG file");
  gstest::write_bytes(dir.file("empty.png"), {});
  refused("empty.png", ": not a PNG file");
  refused("missing.png", ": cannot open (No such file or directory)");

  std::vector<unsigned char> truncated(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
  gstest::write_bytes(dir.file("truncated.png"), truncated);
  refused("truncated.png", ": corrupt or truncated PNG (");
  std::vector<unsigned char> header_only(good.begin(), good.begin() + 20);
  gstest::write_bytes(dir.file("header_only.png"), header_only);
  refused("header_only.png", ": corrupt or truncated PNG (");

  // A flipped byte in the compressed pixels: zlib or the chunk's CRC
  // (whichever libpng meets first) refuses it.
  std::vector<unsigned char> corrupt = good;
  const std::size_t idat = gstest::idat_data_offset(corrupt);
  ASSERT_GT(idat, 0u);
  corrupt[idat + 100] ^= 0x5a;
  gstest::write_bytes(dir.file("corrupt.png"), corrupt);
  refused("corrupt.png", ": corrupt or truncated PNG (IDAT: ");
  // A flipped byte in the header's CRC.
  std::vector<unsigned char> bad_header = good;
  bad_header[8 + 8 + 13] ^= 0x01;  // signature, length and type, 13 bytes of IHDR data, then its CRC
  gstest::write_bytes(dir.file("bad_header.png"), bad_header);
  refused("bad_header.png", ": corrupt or truncated PNG (IHDR: CRC error)");
}

TEST(PngRead, RefusesImagesOverThePixelLimitFromTheHeader) {
  TempDir dir;
  // 5000 x 4000 = 2e7 pixels claimed by a 57-byte file: refused from its
  // header, before the (missing) pixel data would be read.
  gstest::write_bytes(dir.file("huge.png"), gstest::png_claiming(5000, 4000));
  PngImage image;
  Status s = read_png(dir.file("huge.png"), kMaxReadPixels, &image);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("huge.png: 5000 x 4000 pixels is over the limit of 16777216 pixels"), std::string::npos)
      << s.message();
  // At the limit the header passes, and the empty pixel data is what fails.
  gstest::write_bytes(dir.file("limit.png"), gstest::png_claiming(4096, 4096));
  s = read_png(dir.file("limit.png"), kMaxReadPixels, &image);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("limit.png: corrupt or truncated PNG ("), std::string::npos) << s.message();
  // A smaller limit applies as given.
  gstest::write_bytes(dir.file("small.png"), gstest::png_claiming(10, 10));
  s = read_png(dir.file("small.png"), 99, &image);
  EXPECT_NE(s.message().find("small.png: 10 x 10 pixels is over the limit of 99 pixels"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace gridsampler::png
