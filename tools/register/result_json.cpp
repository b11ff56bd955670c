#include "register/result_json.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace gridsampler::registration {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A JSON string (the names here are file paths: quotes, backslashes and
// control characters escaped).
std::string text(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string pair(double a, double b) {
  std::string s = "[";  // appended piecewise: GCC 12 warns (falsely) on "[" + ... + "]"
  s += number(a);
  s += ", ";
  s += number(b);
  s += ']';
  return s;
}

}  // namespace

std::string result_json(const RunSummary& run, const RegisterResult& result) {
  const Transform& t = result.transform;
  std::ostringstream j;
  j << "{\n";
  j << "  \"fixed\": " << text(run.fixed) << ",\n";
  j << "  \"moving\": " << text(run.moving) << ",\n";
  j << "  \"width\": " << run.width << ", \"height\": " << run.height << ", \"channels\": " << run.channels << ",\n";
  j << "  \"transform\": " << text(std::string(to_string(run.kind))) << ",\n";
  j << "  \"coordinates\": \"moving = affine(fixed) + elastic(fixed); normalised: [-1, 1] across the image "
       "(align_corners = false); pixels: the centre of the top-left pixel at (0, 0)\",\n";
  const auto& a = t.affine;
  const PixelAffine px = affine_in_pixels(t, run.height, run.width);
  j << "  \"affine\": {\"normalised\": {\"matrix\": [" << pair(a[0], a[1]) << ", " << pair(a[2], a[3])
    << "], \"offset\": " << pair(a[4], a[5]) << "},\n";
  j << "             \"pixels\": {\"matrix\": [" << pair(px.matrix[0], px.matrix[1]) << ", "
    << pair(px.matrix[2], px.matrix[3]) << "], \"offset\": " << pair(px.offset[0], px.offset[1]) << "}},\n";
  if (t.elastic()) {
    // Control point displacements in pixels, rows of [dx, dy].
    const double sx = static_cast<double>(run.width) / 2, sy = static_cast<double>(run.height) / 2;
    const int64_t points = t.rows * t.cols;
    j << "  \"elastic\": {\"rows\": " << t.rows << ", \"cols\": " << t.cols
      << ", \"lattice\": \"control points from corner to corner of the image, interpolated bicubically\",\n";
    j << "              \"displacement_px\": [";
    for (int64_t r = 0; r < t.rows; ++r) {
      j << (r ? ",\n                                  [" : "[");
      for (int64_t c = 0; c < t.cols; ++c) {
        const std::size_t k = static_cast<std::size_t>(r * t.cols + c);
        j << (c ? ", " : "") << pair(t.control[k] * sx, t.control[static_cast<std::size_t>(points) + k] * sy);
      }
      j << "]";
    }
    j << "]},\n";
  } else {
    j << "  \"elastic\": null,\n";
  }
  j << "  \"loss\": \"mean over the overlap and the channels of (warped moving - fixed)^2, samples in [0, 1]\",\n";
  j << "  \"loss_before\": " << number(run.loss_before) << ", \"loss_after\": " << number(run.loss_after) << ",\n";
  j << "  \"longest_displacement_px\": " << number(run.longest_displacement_px) << ",\n";
  j << "  \"levels\": [\n";
  for (std::size_t i = 0; i < result.levels.size(); ++i) {
    const LevelReport& l = result.levels[i];
    j << "    {\"pass\": " << text(std::string(to_string(l.stage))) << ", \"width\": " << l.width
      << ", \"height\": " << l.height;
    if (l.control_rows > 0) j << ", \"control_grid\": [" << l.control_rows << ", " << l.control_cols << "]";
    j << ", \"iterations\": " << l.iterations << ", \"stop\": " << text(l.stop) << ", \"seconds\": " << number(l.seconds)
      << ",\n     \"loss\": [";
    for (std::size_t k = 0; k < l.losses.size(); ++k) j << (k ? ", " : "") << number(l.losses[k]);
    j << "]}" << (i + 1 < result.levels.size() ? "," : "") << "\n";
  }
  j << "  ],\n";
  j << "  \"iterations\": " << result.iterations << ", \"max_iterations_per_level\": " << run.max_iterations << ",\n";
  j << "  \"threads\": " << run.threads << ",\n";
  if (run.truth && run.accuracy) {
    const KnownWarp& w = *run.truth;
    j << "  \"true_warp\": {\"rotate_deg\": " << number(w.angle_deg) << ", \"scale\": " << number(w.scale)
      << ", \"shift_px\": " << pair(w.shift_x, w.shift_y) << ", \"elastic_px\": " << number(w.elastic) << "},\n";
    j << "  \"accuracy\": {\"mean_px\": " << number(run.accuracy->mean_px) << ", \"max_px\": "
      << number(run.accuracy->max_px) << ", \"pixels\": " << run.accuracy->pixels
      << ", \"over\": \"fixed pixels whose true source lies inside the moving image\"},\n";
  }
  j << "  \"registration_seconds\": " << number(result.seconds) << ", \"seconds\": " << number(run.seconds) << "\n";
  j << "}\n";
  return j.str();
}

}  // namespace gridsampler::registration
