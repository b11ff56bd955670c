// Times grid_sampler_3d / grid_sampler_3d_backward on .npy files, for
// bench/compare_torch.py's volume cases (until the CLI's bench takes 5-D
// files):
//   gridsampler_volume_bench --dir D --op forward|backward --mode M --padding P
//       [--align-corners] --dtype f32|f64|f16|bf16 [--layout ncdhw|ndhwc] --threads T --reps R
// reads D/input.npy (N, C, Din, Hin, Win), D/grid.npy (N, Dout, Hout, Wout,
// 3) and D/grad.npy, calls the op once to warm up and R times, and prints
// one JSON line: median_ms, gbps (every input and output once each) and
// peak_extra_mib (peak resident memory over the resident memory once the
// inputs exist: outputs and workspace, as bench/memory.py counts it).
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/element_access.hpp"
#include "io/npy.hpp"

namespace gs = gridsampler;

namespace {

struct Buffer {
  std::vector<unsigned char> bytes;
  gs::DType dtype;
  gs::Shape5 shape{}, strides{};
  gs::VolumeView view() const { return {bytes.data(), dtype, shape, strides}; }
  gs::MutableVolumeView mutable_view() { return {bytes.data(), dtype, shape, strides}; }
};

int64_t numel(const gs::Shape5& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A .npy file's values in `dtype`, in NCDHW or (input-shaped, ndhwc) NDHWC memory.
Buffer load(const std::string& path, gs::DType dtype, bool channels_last) {
  gs::npy::Array a;
  if (gs::Status s = gs::npy::read(path, &a); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(2);
  }
  Buffer b;
  b.dtype = dtype;
  for (int i = 0; i < 5; ++i) b.shape[i] = a.shape.at(i);
  b.strides = channels_last ? gs::channels_last_strides_5d(b.shape) : gs::contiguous_strides_5d(b.shape);
  const std::size_t elem = gs::dtype_size(dtype), from = gs::dtype_size(a.dtype);
  b.bytes.resize(static_cast<std::size_t>(numel(b.shape)) * elem);
  const gs::Shape5 dense = gs::contiguous_strides_5d(b.shape);
  int64_t i[5];
  for (i[0] = 0; i[0] < b.shape[0]; ++i[0])
    for (i[1] = 0; i[1] < b.shape[1]; ++i[1])
      for (i[2] = 0; i[2] < b.shape[2]; ++i[2])
        for (i[3] = 0; i[3] < b.shape[3]; ++i[3])
          for (i[4] = 0; i[4] < b.shape[4]; ++i[4]) {
            int64_t src = 0, dst = 0;
            for (int k = 0; k < 5; ++k) {
              src += i[k] * dense[k];
              dst += i[k] * b.strides[k];
            }
            const double v = gs::host::load_element(a.data.data() + src * from, a.dtype);
            gs::host::store_element(b.bytes.data() + dst * elem, dtype, v);
          }
  return b;
}

Buffer empty_like(const gs::Shape5& shape, gs::DType dtype, bool channels_last) {
  Buffer b;
  b.dtype = dtype;
  b.shape = shape;
  b.strides = channels_last ? gs::channels_last_strides_5d(shape) : gs::contiguous_strides_5d(shape);
  b.bytes.resize(static_cast<std::size_t>(numel(shape)) * gs::dtype_size(dtype));
  return b;
}

long resident_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, op = "backward", mode = "bilinear", padding = "zeros", dtype_name = "f32", layout = "ncdhw";
  bool align = false;
  int threads = 1, reps = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--dir") dir = next();
    else if (a == "--op") op = next();
    else if (a == "--mode") mode = next();
    else if (a == "--padding") padding = next();
    else if (a == "--dtype") dtype_name = next();
    else if (a == "--layout") layout = next();
    else if (a == "--align-corners") align = true;
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const auto dtype = gs::parse_dtype(dtype_name);
  const auto m = gs::parse_interpolation(mode);
  const auto p = gs::parse_padding(padding);
  if (!dtype || !m || !p) {
    std::fprintf(stderr, "bad --dtype, --mode or --padding\n");
    return 2;
  }
  const bool cl = layout == "ndhwc";
  const Buffer input = load(dir + "/input.npy", *dtype, cl);
  const Buffer grid = load(dir + "/grid.npy", *dtype, false);
  const gs::Shape5 out_shape{input.shape[0], input.shape[1], grid.shape[1], grid.shape[2], grid.shape[3]};
  Buffer grad;
  if (op == "backward") grad = load(dir + "/grad.npy", *dtype, cl);
  // The baseline: inputs exist; freed start-up memory returned, peak reset.
  malloc_trim(0);
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  const long base_kib = resident_kib();
  Buffer out, dx, dgrid;
  if (op == "backward") {
    dx = empty_like(input.shape, *dtype, cl);
    dgrid = empty_like(grid.shape, *dtype, false);
  } else {
    out = empty_like(out_shape, *dtype, cl);
  }
  const gs::Options opt{*m, *p, align, threads};
  std::vector<double> ms;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const gs::Status s = op == "backward"
                             ? gs::grid_sampler_3d_backward(grad.view(), input.view(), grid.view(), dx.mutable_view(),
                                                            dgrid.mutable_view(), opt)
                             : gs::grid_sampler_3d(input.view(), grid.view(), out.mutable_view(), opt);
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  const double elem = static_cast<double>(gs::dtype_size(*dtype));
  const double x = static_cast<double>(numel(input.shape)), g = static_cast<double>(numel(grid.shape)),
               y = static_cast<double>(numel(out_shape));
  const double bytes = (op == "backward" ? y + 2 * x + 2 * g : x + g + y) * elem;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"median_ms\": %.4f, \"gbps\": %.4f, \"peak_extra_mib\": %.2f}\n", median, bytes / (median * 1e6),
              static_cast<double>(ru.ru_maxrss - base_kib) / 1024.0);
  return 0;
}
