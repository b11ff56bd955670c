// `gridsampler register` end to end: the built-in example at a small size,
// PNG inputs (8-bit RGB against 16-bit grey) whose known shift comes back
// in result.json, and every bad input refused with one error line, exit
// status 2 and nothing written (the --out directory not even created).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/png_files.hpp"
#include "common/run_cli.hpp"
#include "common/temp_dir.hpp"
#include "png_io.hpp"
#include "register/synthetic.hpp"

namespace gridsampler::registration {
namespace {

namespace fs = std::filesystem;
using gstest::expect_error;
using gstest::run;
using gstest::TempDir;

// The number after `key` in `text` (NaN if missing).
double number_after(const std::string& text, const std::string& key) {
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(RegisterCli, BuiltInExampleRecoversItsWarpAndWritesItsPictures) {
  TempDir tmp;
  const fs::path out = tmp.path() / "made" / "here";
  const gstest::CliResult r = run({"register", "--size", "48", "--out", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");  // stderr is not a terminal: no progress line
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;  // one summary line
  EXPECT_EQ(r.out.rfind("register: 48 x 48 RGB, affine+elastic: loss ", 0), 0u) << r.out;
  const double mean = number_after(r.out, "displacement: mean "), max = number_after(r.out, "px, max ");
  EXPECT_LT(mean, 0.5) << r.out;
  EXPECT_LT(max, 2.0) << r.out;
  EXPECT_EQ(files_in(out), (std::set<std::string>{"warped.png", "diff_before.png", "diff_after.png", "flow.png",
                                                   "fixed.png", "moving.png", "flow_true.png", "result.json"}));
  for (const char* name : {"warped.png", "diff_before.png", "diff_after.png", "flow.png", "flow_true.png"}) {
    png::PngImage image;
    const Status s = png::read_png((out / name).string(), png::kMaxReadPixels, &image);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(image.pixels.shape(), (Shape4{1, 3, 48, 48})) << name;
  }
  const std::string json = gstest::read_text((out / "result.json").string());
  EXPECT_NEAR(number_after(json, "\"mean_px\": "), mean, 1e-3) << json;
  EXPECT_NEAR(number_after(json, "\"rotate_deg\": "), 6, 0) << json;
  EXPECT_GT(number_after(json, "\"iterations\": "), 0) << json;
  EXPECT_LT(number_after(json, "\"loss_after\": "), number_after(json, "\"loss_before\": ") / 100) << json;
  EXPECT_NE(json.find("\"pass\": \"elastic\""), std::string::npos);
  EXPECT_NE(json.find("\"displacement_px\": [[["), std::string::npos);
}

// A fixed and a moving PNG of the demo's scene, the moving one shifted.
struct Pair {
  TempDir dir;
  std::string fixed = dir.file("fixed.png"), moving = dir.file("moving.png");
};

TEST(RegisterCli, PngInputsOfMixedDepthAndChannelsGiveTheirShift) {
  // The fixed image's pixel (x, y) shows the moving image's (x + 6.6, y - 4.3):
  // fixed as 16-bit grey, moving as 8-bit RGB (grey is compared with each
  // of R, G and B).
  KnownWarp warp;
  warp.shift_x = 6.6;
  warp.shift_y = -4.3;
  const Example ex = make_example(64, warp);
  Pair files;
  std::vector<uint16_t> grey(64 * 64);
  for (int64_t k = 0; k < 64 * 64; ++k) {
    const double mean = (ex.fixed.get(0, 0, k / 64, k % 64) + ex.fixed.get(0, 1, k / 64, k % 64) +
                         ex.fixed.get(0, 2, k / 64, k % 64)) / 3;
    grey[static_cast<std::size_t>(k)] = static_cast<uint16_t>(std::lround(mean * 65535));
  }
  ASSERT_TRUE(gstest::write_png_file(files.fixed, 64, 64, PNG_FORMAT_LINEAR_Y, grey.data()));
  host::Tensor moving_grey_match(DType::kFloat32, {1, 3, 64, 64});  // each channel the grey mean, so the images agree
  for (int64_t k = 0; k < 64 * 64; ++k) {
    const double mean = (ex.moving.get(0, 0, k / 64, k % 64) + ex.moving.get(0, 1, k / 64, k % 64) +
                         ex.moving.get(0, 2, k / 64, k % 64)) / 3;
    for (int64_t c = 0; c < 3; ++c) moving_grey_match.set(0, c, k / 64, k % 64, mean);
  }
  ASSERT_EQ(png::write_png(files.moving, moving_grey_match), "");

  const fs::path out = files.dir.path() / "out";
  const gstest::CliResult r = run({"register", "--fixed", files.fixed, "--moving", files.moving, "--transform", "affine",
                                   "--iters", "50", "--threads", "1", "--out", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("register: 64 x 64 RGB, affine: loss ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("displacement: mean"), std::string::npos);  // no truth to compare with
  EXPECT_EQ(files_in(out), (std::set<std::string>{"warped.png", "diff_before.png", "diff_after.png", "flow.png",
                                                   "result.json"}));
  const std::string json = gstest::read_text((out / "result.json").string());
  // "pixels": {"matrix": [[m00, m01], [m10, m11]], "offset": [x, y]}
  const std::size_t pixels = json.find("\"pixels\": {\"matrix\": [[");
  ASSERT_NE(pixels, std::string::npos) << json;
  const std::string tail = json.substr(pixels);
  const double m00 = number_after(tail, "[[");
  const double x = number_after(tail, "\"offset\": [");
  const double y = number_after(tail.substr(tail.find("\"offset\": [")), ", ");
  EXPECT_NEAR(m00, 1, 5e-3) << tail;
  EXPECT_NEAR(x, 6.6, 0.1) << tail;
  EXPECT_NEAR(y, -4.3, 0.1) << tail;
  EXPECT_NE(json.find("\"elastic\": null"), std::string::npos);
}

// Every refusal: one error line, exit status 2, and no --out directory.
class RegisterCliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<uint8_t> rgb(40 * 32 * 3);  // enough for both images
    for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    ASSERT_TRUE(gstest::write_png_file(good_, 32, 32, PNG_FORMAT_RGB, rgb.data()));
    ASSERT_TRUE(gstest::write_png_file(wide_, 40, 32, PNG_FORMAT_RGB, rgb.data()));
    bytes_ = gstest::read_bytes(good_);
  }

  void expect_refused(std::vector<std::string> args, const std::string& message) {
    SCOPED_TRACE(message);
    std::vector<std::string> full = {"register"};
    full.insert(full.end(), args.begin(), args.end());
    full.insert(full.end(), {"--out", out_});
    expect_error(run(full), message);
    EXPECT_FALSE(fs::exists(out_)) << "the --out directory was created";
  }

  TempDir dir_;
  std::string good_ = dir_.file("good.png"), wide_ = dir_.file("wide.png"), out_ = dir_.file("out");
  std::vector<unsigned char> bytes_;
};

TEST_F(RegisterCliErrors, BadFilesAreRefusedBeforeAnythingIsWritten) {
  const std::string text = dir_.file("text.png"), truncated = dir_.file("truncated.png"),
                    corrupt = dir_.file("corrupt.png"), huge = dir_.file("huge.png");
  gstest::write_bytes(text, {'n', 'o', 't', ' ', 'a', ' ', 'p', 'n', 'g', '\n'});
  gstest::write_bytes(truncated, std::vector<unsigned char>(bytes_.begin(), bytes_.begin() + bytes_.size() / 2));
  std::vector<unsigned char> bad = bytes_;
  bad[gstest::idat_data_offset(bad) + 50] ^= 0x5a;
  gstest::write_bytes(corrupt, bad);
  gstest::write_bytes(huge, gstest::png_claiming(5000, 4000));

  expect_refused({"--fixed", text, "--moving", good_}, "--fixed: " + text + ": not a PNG file");
  expect_refused({"--fixed", good_, "--moving", truncated}, "--moving: " + truncated + ": corrupt or truncated PNG (");
  expect_refused({"--fixed", corrupt, "--moving", good_}, "--fixed: " + corrupt + ": corrupt or truncated PNG (IDAT: ");
  expect_refused({"--fixed", good_, "--moving", huge},
                 "--moving: " + huge + ": 5000 x 4000 pixels is over the limit of 16777216 pixels");
  expect_refused({"--fixed", dir_.file("missing.png"), "--moving", good_}, "missing.png: cannot open");
  expect_refused({"--fixed", good_, "--moving", wide_},
                 "--fixed is 32 x 32 pixels, --moving 40 x 32: register needs two images of one size");
}

TEST_F(RegisterCliErrors, BadOptionsAreRefusedBeforeAnythingIsWritten) {
  const std::vector<std::string> pair = {"--fixed", good_, "--moving", good_};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = pair;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_refused(with({"--iters", "0"}), "--iters: must be 1..100000, got 0");
  expect_refused(with({"--iters", "-3"}), "--iters: must be 1..100000, got -3");
  expect_refused(with({"--iters", "many"}), "--iters");
  expect_refused(with({"--iters", "99999999999"}), "--iters");
  expect_refused(with({"--threads", "-1"}), "--threads: must be 0 (all) or 1..1024, got -1");
  expect_refused(with({"--threads", "two"}), "--threads");
  expect_refused(with({"--transform", "rigid"}), "--transform: unknown transform 'rigid' (expected affine, elastic or affine+elastic)");
  expect_refused(with({"--size", "64"}), "--size: only for the built-in example");
  expect_refused({"--fixed", good_}, "--fixed and --moving go together (--fixed given alone)");
  expect_refused({"--moving", good_}, "--fixed and --moving go together (--moving given alone)");
  expect_refused({"--size", "16"}, "--size: must be 32..2048, got 16");
  expect_refused(with({"--bogus"}), "--bogus");
}

TEST_F(RegisterCliErrors, UnwritableOutDirIsRefusedBeforeRegistering) {
  // A directory that cannot be made: a file stands in its parent's place.
  const std::string file = dir_.file("a_file");
  gstest::write_bytes(file, {'x'});
  const gstest::CliResult r =
      run({"register", "--fixed", good_, "--moving", good_, "--out", (fs::path(file) / "out").string()});
  expect_error(r, "--out: cannot create directory " + (fs::path(file) / "out").string() + ": " + file +
                      " is not a directory");
  EXPECT_EQ(files_in(dir_.path()), (std::set<std::string>{"good.png", "wide.png", "a_file"}));
}

}  // namespace
}  // namespace gridsampler::registration
