// Names, parsing and stride helpers of the public header.
#include "gridsampler/gridsampler.hpp"

namespace gridsampler {

Shape4 contiguous_strides(const Shape4& s) { return {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1}; }

Shape4 channels_last_strides(const Shape4& s) { return {s[2] * s[3] * s[1], 1, s[3] * s[1], s[1]}; }

Shape5 contiguous_strides_5d(const Shape5& s) {
  return {s[1] * s[2] * s[3] * s[4], s[2] * s[3] * s[4], s[3] * s[4], s[4], 1};
}

Shape5 channels_last_strides_5d(const Shape5& s) {
  return {s[2] * s[3] * s[4] * s[1], 1, s[3] * s[4] * s[1], s[4] * s[1], s[1]};
}

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "unknown";
}

std::string_view to_string(Interpolation mode) {
  switch (mode) {
    case Interpolation::kBilinear: return "bilinear";
    case Interpolation::kNearest: return "nearest";
    case Interpolation::kBicubic: return "bicubic";
  }
  return "unknown";
}

std::string_view to_string(Padding padding) {
  switch (padding) {
    case Padding::kZeros: return "zeros";
    case Padding::kBorder: return "border";
    case Padding::kReflection: return "reflection";
  }
  return "unknown";
}

std::optional<Interpolation> parse_interpolation(std::string_view name) {
  for (auto m : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::optional<Padding> parse_padding(std::string_view name) {
  for (auto p : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
    if (name == to_string(p)) return p;
  }
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "f16" || name == "float16") return DType::kFloat16;
  if (name == "bf16" || name == "bfloat16") return DType::kBFloat16;
  if (name == "f32" || name == "float32") return DType::kFloat32;
  if (name == "f64" || name == "float64") return DType::kFloat64;
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) { return dtype == DType::kFloat64 ? 8 : dtype == DType::kFloat32 ? 4 : 2; }

}  // namespace gridsampler
