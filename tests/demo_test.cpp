// `gridsampler demo` (tools/demo.cpp) at a small size: exit status, the
// table, and the PNG files it writes.
//
// The demo lives in the gridsampler_demo library (tools/CMakeLists.txt),
// which defines GRIDSAMPLER_HAVE_DEMO for whatever links it. Until this test
// links it, the test builds and reports itself as skipped instead of failing
// to link.
#include <gtest/gtest.h>

#include "common/temp_dir.hpp"

#ifndef GRIDSAMPLER_HAVE_DEMO
TEST(Demo, NotLinked) {
  GTEST_SKIP() << "demo_test does not link gridsampler_demo (tools/CMakeLists.txt); nothing tested";
}
#else

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "demo.hpp"

namespace {

namespace fs = std::filesystem;
using gridsampler::DType;
using gridsampler::demo::DemoOptions;
using gridsampler::demo::run_demo;

constexpr int64_t kSize = 48;
constexpr int kStripWidth = 2 * kSize + 4;  // N = 2 images side by side, 4-pixel gap
constexpr int kOverviewSide = 3 * kSize + 8;

// A fresh directory under the system's temporary directory, removed at the end.
using gstest::TempDir;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Checks the PNG signature and the IHDR chunk's width and height.
void expect_png(const fs::path& path, uint32_t width, uint32_t height) {
  SCOPED_TRACE(path.string());
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f) << "missing";
  std::array<unsigned char, 24> head{};
  f.read(reinterpret_cast<char*>(head.data()), head.size());
  ASSERT_EQ(f.gcount(), 24) << "too short";
  const std::array<unsigned char, 8> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  EXPECT_TRUE(std::equal(signature.begin(), signature.end(), head.begin())) << "no PNG signature";
  EXPECT_EQ(std::string(head.begin() + 12, head.begin() + 16), "IHDR");
  auto be32 = [&](int at) {
    return (uint32_t{head[at]} << 24) | (uint32_t{head[at + 1]} << 16) | (uint32_t{head[at + 2]} << 8) |
           uint32_t{head[at + 3]};
  };
  EXPECT_EQ(be32(16), width);
  EXPECT_EQ(be32(20), height);
}

TEST(Demo, SmallRunPassesAndWritesPngs) {
  TempDir tmp;
  DemoOptions options;
  options.size = kSize;
  options.png_dir = (tmp.path() / "pngs" / "nested").string();  // created by the demo
  std::ostringstream out, err;
  const int status = run_demo(options, out, err);
  EXPECT_EQ(status, 0) << out.str() << err.str();
  EXPECT_EQ(err.str(), "");

  // One table row per interpolation x padding (align_corners = false), and
  // the summary as the last line.
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_FALSE(lines.empty());
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      int found = 0;
      for (const std::string& line : lines) {
        const std::vector<std::string> w = words_of(line);
        if (w.size() >= 4 && w[0] == mode && w[1] == padding && w[2] == "false") {
          ++found;
          EXPECT_EQ(w.back(), "pass") << line;
        }
      }
      EXPECT_EQ(found, 1) << mode << "/" << padding << " in\n" << out.str();
    }
  }
  EXPECT_NE(out.str().find("2 x 3 x 48 x 48 float32"), std::string::npos) << out.str();
  EXPECT_NE(lines.back().find("all 10 combinations within tolerance"), std::string::npos) << lines.back();

  const fs::path dir(options.png_dir);
  expect_png(dir / "input.png", kStripWidth, kSize);
  expect_png(dir / "outputs.png", kOverviewSide, kOverviewSide);
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (const char* what : {"out", "dx", "dgrid"}) {
        expect_png(dir / (std::string(mode) + "_" + padding + "_" + what + ".png"), kStripWidth, kSize);
      }
    }
  }
  for (const char* what : {"out", "dx", "dgrid"}) {
    expect_png(dir / (std::string("bilinear_reflection_ac_") + what + ".png"), kStripWidth, kSize);
  }
}

TEST(Demo, EveryDtypePassesWithoutPngs) {
  for (DType dtype : {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(gridsampler::to_string(dtype)));
    DemoOptions options;
    options.size = 24;
    options.dtype = dtype;
    options.seed = 7;
    std::ostringstream out, err;
    EXPECT_EQ(run_demo(options, out, err), 0) << out.str() << err.str();
    EXPECT_EQ(err.str(), "");
    EXPECT_EQ(out.str().find("PNGs in"), std::string::npos);
  }
}

TEST(Demo, BadOptionsExitWithStatus2) {
  for (int64_t size : {int64_t{0}, int64_t{-5}, int64_t{7}, int64_t{1} << 20}) {
    SCOPED_TRACE(size);
    DemoOptions options;
    options.size = size;
    std::ostringstream out, err;
    EXPECT_EQ(run_demo(options, out, err), 2);
    EXPECT_NE(err.str().find("--size"), std::string::npos) << err.str();
    EXPECT_EQ(out.str(), "");
  }

  // A PNG directory that cannot be created: its parent is a file.
  TempDir tmp;
  const fs::path file = tmp.path() / "a_file";
  std::ofstream(file) << "x";
  DemoOptions options;
  options.size = 16;
  options.png_dir = (file / "pngs").string();
  std::ostringstream out, err;
  EXPECT_EQ(run_demo(options, out, err), 2);
  EXPECT_NE(err.str().find("--png"), std::string::npos) << err.str();
  EXPECT_EQ(out.str(), "");
}

}  // namespace

#endif  // GRIDSAMPLER_HAVE_DEMO
