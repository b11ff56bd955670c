#include "register/register_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "png_io.hpp"
#include "register/pictures.hpp"
#include "register/registration.hpp"
#include "register/result_json.hpp"
#include "register/synthetic.hpp"
#include "register/typed.hpp"

namespace gridsampler::registration {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Status error(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// Whether `dir` exists as a writable directory or could be made as one
// (its nearest existing ancestor is a writable directory); creates nothing.
Status check_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return error("--out: " + dir + ": " + ec.message());
  while (!fs::exists(p, ec)) {
    if (ec) return error("--out: " + dir + ": " + ec.message());
    if (!p.has_parent_path() || p.parent_path() == p) return error("--out: " + dir + ": no existing parent");
    p = p.parent_path();
  }
  if (!fs::is_directory(p, ec)) return error("--out: cannot create directory " + dir + ": " + p.string() + " is not a directory");
  if (::access(p.c_str(), W_OK | X_OK) != 0) return error("--out: cannot write in " + p.string());
  return Status::Ok();
}

// A grey image as three equal channels, so that it compares with an RGB one.
host::Tensor as_rgb(const host::Tensor& grey) {
  const Shape4& s = grey.shape();
  host::Tensor rgb(DType::kFloat32, {1, 3, s[2], s[3]});
  const int64_t plane = s[2] * s[3];
  const float* g = data<float>(grey);
  float* out = data<float>(rgb);
  for (int64_t c = 0; c < 3; ++c) std::copy(g, g + plane, out + c * plane);
  return rgb;
}

std::string describe(const host::Tensor& t) {
  return format("%lld x %lld", static_cast<long long>(t.shape()[3]), static_cast<long long>(t.shape()[2]));
}

// The files of a run, made in memory first.
struct Output {
  std::string name;
  std::function<std::string(const std::string& path)> write;  // "" or the error
};

// Writes every output into dir (created if missing), or none: on a failure
// the files written and the directories made are removed again.
Status write_outputs(const std::string& dir, const std::vector<Output>& outputs) {
  std::error_code ec;
  fs::path top = fs::absolute(dir, ec);
  fs::path made;  // the outermost directory this call creates
  for (fs::path p = top; !fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p; p = p.parent_path()) {
    made = p;
  }
  fs::create_directories(top, ec);
  if (ec) return error("--out: cannot create directory " + dir + ": " + ec.message());
  std::vector<fs::path> written;
  for (const Output& o : outputs) {
    const fs::path path = top / o.name;
    const std::string e = o.write(path.string());
    if (!e.empty()) {
      for (const fs::path& w : written) fs::remove(w, ec);
      fs::remove(path, ec);
      if (!made.empty()) fs::remove_all(made, ec);
      return error("--out: " + e);
    }
    written.push_back(path);
  }
  return Status::Ok();
}

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  return f ? "" : path + ": cannot write";
}

// The progress line: rewritten in place, at most ten times a second.
class ProgressLine {
 public:
  ProgressLine(std::ostream& out, bool enabled) : out_(out), enabled_(enabled) {}
  void show(const Progress& p) {
    if (!enabled_) return;
    const Clock::time_point now = Clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const std::string line = format("register: pass %d/%d (%s), level %d/%d (%lld x %lld), iteration %d, loss %.4e",
                                    p.stage, p.stages, std::string(to_string(p.kind)).c_str(), p.level, p.levels,
                                    static_cast<long long>(p.width), static_cast<long long>(p.height), p.iteration,
                                    p.loss);
    out_ << '\r' << line << std::string(width_ > line.size() ? width_ - line.size() : 0, ' ') << std::flush;
    width_ = std::max(width_, line.size());
    shown_ = true;
  }
  void clear() {
    if (shown_) out_ << '\r' << std::string(width_, ' ') << '\r' << std::flush;
    shown_ = false;
  }

 private:
  std::ostream& out_;
  bool enabled_;
  bool shown_ = false;
  std::size_t width_ = 0;
  Clock::time_point last_;
};

}  // namespace

Status run_register_command(const RegisterCommand& command, std::ostream& out, std::ostream& progress) {
  const Clock::time_point start = Clock::now();
  // Options first.
  const std::optional<TransformKind> kind = parse_transform(command.transform);
  if (!kind) {
    return error("--transform: unknown transform '" + command.transform + "' (expected affine, elastic or affine+elastic)");
  }
  if (command.iterations < 1 || command.iterations > kMaxIterations) {
    return error(format("--iters: must be 1..%d, got %d", kMaxIterations, command.iterations));
  }
  if (command.threads < 0 || command.threads > kMaxThreads) {
    return error(format("--threads: must be 0 (all) or 1..%d, got %d", kMaxThreads, command.threads));
  }
  const bool builtin = command.fixed.empty() && command.moving.empty();
  if (!builtin && (command.fixed.empty() || command.moving.empty())) {
    return error(std::string("--fixed and --moving go together (") + (command.fixed.empty() ? "--moving" : "--fixed") +
                 " given alone); without both, the built-in example runs");
  }
  if (!builtin && command.size_given) return error("--size: only for the built-in example (without --fixed and --moving)");
  if (builtin && (command.size < kMinExampleSize || command.size > kMaxExampleSize)) {
    return error(format("--size: must be %lld..%lld, got %lld", static_cast<long long>(kMinExampleSize),
                        static_cast<long long>(kMaxExampleSize), static_cast<long long>(command.size)));
  }
  if (!command.out_dir.empty()) {
    if (Status s = check_out_dir(command.out_dir); !s.ok()) return s;
  }

  // The images.
  host::Tensor fixed, moving;
  Example example;
  KnownWarp truth;
  std::string fixed_name = command.fixed, moving_name = command.moving;
  if (builtin) {
    truth = default_warp(command.size);
    example = make_example(command.size, truth);
    fixed = example.fixed;
    moving = example.moving;
    fixed_name = format("built-in: the demo's scene, %lld x %lld, seen through a known warp",
                        static_cast<long long>(command.size), static_cast<long long>(command.size));
    moving_name = "built-in: the demo's scene";
  } else {
    png::PngImage f, m;
    if (Status s = png::read_png(command.fixed, png::kMaxReadPixels, &f); !s.ok()) return error("--fixed: " + s.message());
    if (Status s = png::read_png(command.moving, png::kMaxReadPixels, &m); !s.ok()) return error("--moving: " + s.message());
    fixed = std::move(f.pixels);
    moving = std::move(m.pixels);
    if (fixed.shape()[2] != moving.shape()[2] || fixed.shape()[3] != moving.shape()[3]) {
      return error("--fixed is " + describe(fixed) + " pixels, --moving " + describe(moving) +
                   ": register needs two images of one size (every transform maps the fixed image's pixels "
                   "into the moving image's frame)");
    }
    if (fixed.shape()[1] != moving.shape()[1]) {  // a grey image against a colour one
      if (fixed.shape()[1] == 1) fixed = as_rgb(fixed);
      if (moving.shape()[1] == 1) moving = as_rgb(moving);
    }
  }
  const int64_t channels = fixed.shape()[1], height = fixed.shape()[2], width = fixed.shape()[3];

  // The registration.
  RegisterOptions options;
  options.kind = *kind;
  options.max_iterations = command.iterations;
  options.num_threads = command.threads;
  ProgressLine line(progress, command.show_progress);
  RegisterResult result;
  const Status status = register_images(fixed, moving, options, [&](const Progress& p) { line.show(p); }, &result);
  line.clear();
  if (!status.ok()) return status;

  // What it found.
  host::Tensor grid, warped;
  if (Status s = sampling_grid(result.transform, height, width, &grid); !s.ok()) return s;
  if (Status s = warp_image(moving, result.transform, command.threads, &warped); !s.ok()) return s;
  RunSummary run;
  run.fixed = fixed_name;
  run.moving = moving_name;
  run.height = height;
  run.width = width;
  run.channels = channels;
  run.kind = *kind;
  run.threads = command.threads;
  run.max_iterations = command.iterations;
  if (Status s = loss_and_gradient(fixed, moving, TransformKind::kAffine, Transform{}, 0, command.threads,
                                   &run.loss_before, nullptr);
      !s.ok()) {
    return s;
  }
  const TransformKind found_kind = result.transform.elastic() ? TransformKind::kAffineElastic : TransformKind::kAffine;
  if (Status s = loss_and_gradient(fixed, moving, found_kind, result.transform, 0, command.threads, &run.loss_after,
                                   nullptr);
      !s.ok()) {
    return s;
  }
  run.longest_displacement_px = longest_displacement(grid);
  DisplacementError accuracy;
  if (builtin) {
    accuracy = displacement_error(example.true_grid, grid);
    run.truth = &truth;
    run.accuracy = &accuracy;
  }

  // The files.
  if (!command.out_dir.empty()) {
    const double diff_scale = largest_difference(fixed, moving);
    double flow_scale = run.longest_displacement_px;
    if (builtin) flow_scale = std::max(flow_scale, longest_displacement(example.true_grid));
    std::vector<Output> outputs;
    outputs.push_back({"warped.png", [&](const std::string& p) { return png::write_png(p, warped); }});
    outputs.push_back({"diff_before.png",
                       [&](const std::string& p) { return png::write_png(p, difference_picture(fixed, moving, diff_scale)); }});
    outputs.push_back({"diff_after.png",
                       [&](const std::string& p) { return png::write_png(p, difference_picture(fixed, warped, diff_scale)); }});
    outputs.push_back({"flow.png", [&](const std::string& p) { return png::write_png(p, flow_picture(grid, flow_scale)); }});
    if (builtin) {
      outputs.push_back({"fixed.png", [&](const std::string& p) { return png::write_png(p, fixed); }});
      outputs.push_back({"moving.png", [&](const std::string& p) { return png::write_png(p, moving); }});
      outputs.push_back(
          {"flow_true.png", [&](const std::string& p) { return png::write_png(p, flow_picture(example.true_grid, flow_scale)); }});
    }
    // result.json last, with the time of everything before it.
    outputs.push_back({"result.json", [&](const std::string& p) {
                         run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
                         return write_text(p, result_json(run, result));
                       }});
    if (Status s = write_outputs(command.out_dir, outputs); !s.ok()) return s;
  }

  std::string summary = format(
      "register: %lld x %lld %s, %s: loss %.3e -> %.3e, %d iterations (%d %s over %d pyramid levels), %.2f s",
      static_cast<long long>(width), static_cast<long long>(height), channels == 1 ? "grey" : "RGB",
      std::string(to_string(*kind)).c_str(), run.loss_before, run.loss_after, result.iterations, result.passes,
      result.passes == 1 ? "pass" : "passes", result.pyramid_levels, result.seconds);
  if (builtin) {
    summary += format("; recovered vs true displacement: mean %.3f px, max %.3f px", accuracy.mean_px, accuracy.max_px);
  }
  summary += command.out_dir.empty() ? "; nothing written (no --out)"
                                     : "; pictures and result.json in " + command.out_dir + "/";
  out << summary << '\n' << std::flush;
  return Status::Ok();
}

}  // namespace gridsampler::registration
