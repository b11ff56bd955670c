// gridsampler: command-line front end of the library (.npy files in and out)
// and of its demonstrations (demo, register: PNG pictures).
//
//   gridsampler forward  --input X.npy --grid G.npy --out Y.npy [options]
//                        (4-D image or 5-D volume files; the input's rank decides)
//   gridsampler backward --grad GO.npy --input X.npy --grid G.npy
//                        --dx DX.npy --dgrid DG.npy [options] [--no-dx] [--no-dgrid]
//   gridsampler demo     [--size S] [--dtype D] [--png DIR] [--seed N]
//   gridsampler register [--fixed F.png --moving M.png] [--transform T] [--iters N]
//                        [--out DIR] [--threads T] [--size S]
//   gridsampler bench    --shape ... (see --help)
//   gridsampler --version
//
// Exit status 0 on success, 2 on any error (including bad arguments); an
// error prints exactly one line, "gridsampler: error: <what>", on stderr and
// writes no output file: everything is computed before the first output is
// written, and an output already written is removed if a later one fails.
//
// Each subcommand is one add_<name>_command() function that registers its
// options and returns the function that runs it; main() only parses and
// dispatches.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "demo.hpp"
#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"
#include "io/npy.hpp"
#include "png_io.hpp"
#include "rank_calls.hpp"
#include "register/register_command.hpp"

#ifndef GRIDSAMPLER_VERSION
#define GRIDSAMPLER_VERSION "unknown"
#endif

namespace gs = gridsampler;

namespace {

constexpr int kExitError = 2;

gs::Status error(std::string message) {
  return gs::Status(gs::StatusCode::kInvalidArgument, std::move(message));
}

// Prints the one error line and returns the exit status for errors.
int report_error(std::string_view message) {
  std::string line(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::cerr << "gridsampler: error: " << line << '\n' << std::flush;
  return kExitError;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// ---------------------------------------------------------------------------
// Operands: a dense C-order tensor, 4-D for images and 5-D for volumes, and
// the name messages use. Every command works on one rank, which the input
// file decides; the code below is written once for both.

using gs::tool::HostTensor;
using gs::tool::sample;
using gs::tool::sample_backward;

template <std::size_t Rank>
struct Operand {
  std::string name;  // "input", "grid", ... as used in messages
  HostTensor<Rank> tensor;
};

// A .npy file as read, before its rank is known.
struct File {
  std::string name, path;
  gs::npy::Array array;
};

gs::Status read_file(const std::string& name, const std::string& path, File* out) {
  out->name = name;
  out->path = path;
  return gs::npy::read(path, &out->array);
}

// The rank of the call: the input's, 4 (an image) or 5 (a volume).
gs::Status call_rank(const File& input, std::size_t* rank) {
  const std::size_t r = input.array.shape.size();
  if (r != 4 && r != 5) {
    return error(input.name + ": expected 4 dimensions (an image) or 5 (a volume), got " + std::to_string(r) + " (" +
                 input.path + " has shape " + shape_string(input.array.shape) + ")");
  }
  *rank = r;
  return gs::Status::Ok();
}

// Moves a file's data into a tensor of the call's rank.
template <std::size_t Rank>
gs::Status take(File&& file, Operand<Rank>* out) {
  if (file.array.shape.size() != Rank) {
    return error(file.name + ": expected " + std::to_string(Rank) + " dimensions, got " +
                 std::to_string(file.array.shape.size()) + " (the call samples " +
                 (Rank == 4 ? "an image" : "a volume") + "; " + file.path + " has shape " +
                 shape_string(file.array.shape) + ")");
  }
  out->name = file.name;
  std::array<int64_t, Rank> shape{};
  std::copy(file.array.shape.begin(), file.array.shape.end(), shape.begin());
  out->tensor = HostTensor<Rank>(file.array.dtype, shape, std::move(file.array.data));
  return gs::Status::Ok();
}

// Converts `t` to `dtype` in place, one rounding per element (via double,
// which holds every value of every source dtype exactly).
template <std::size_t Rank>
gs::Status convert(Operand<Rank>* t, gs::DType dtype) {
  if (t->tensor.dtype() == dtype) return gs::Status::Ok();
  HostTensor<Rank> converted;
  if (gs::Status s = HostTensor<Rank>::allocate(t->name, dtype, t->tensor.shape(), &converted); !s.ok()) return s;
  converted.assign_from(t->tensor);
  t->tensor = std::move(converted);
  return gs::Status::Ok();
}

// Picks the compute dtype: the one requested, to which every tensor is then
// converted, or else the one all tensors share.
template <std::size_t Rank>
gs::Status unify_dtypes(const std::vector<Operand<Rank>*>& operands, std::optional<gs::DType> requested,
                        gs::DType* compute) {
  if (requested) {
    for (Operand<Rank>* t : operands) {
      if (gs::Status s = convert(t, *requested); !s.ok()) return s;
    }
    *compute = *requested;
    return gs::Status::Ok();
  }
  const Operand<Rank>* first = operands.front();
  for (const Operand<Rank>* t : operands) {
    if (t->tensor.dtype() != first->tensor.dtype()) {
      return error("mixed dtypes: " + first->name + " is " + std::string(gs::to_string(first->tensor.dtype())) +
                   ", " + t->name + " is " + std::string(gs::to_string(t->tensor.dtype())) +
                   " (give --dtype to convert them all to one)");
    }
  }
  *compute = first->tensor.dtype();
  return gs::Status::Ok();
}

// The .npy form of a result: bfloat16 (which .npy lacks) is widened exactly
// to float32.
template <std::size_t Rank>
gs::npy::Array to_npy(Operand<Rank>&& t) {
  gs::npy::Array array;
  array.shape.assign(t.tensor.shape().begin(), t.tensor.shape().end());
  if (t.tensor.dtype() != gs::DType::kBFloat16) {
    array.dtype = t.tensor.dtype();
    array.data = t.tensor.release();
    return array;
  }
  HostTensor<Rank> widened(gs::DType::kFloat32, t.tensor.shape());
  widened.assign_from(t.tensor);
  t.tensor = HostTensor<Rank>();
  array.dtype = gs::DType::kFloat32;
  array.data = widened.release();
  return array;
}

// Writes every output, or none: if one fails, those already written are
// removed.
struct PendingOutput {
  std::string path;
  gs::npy::Array array;
};

gs::Status write_all(const std::vector<PendingOutput>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (gs::Status s = gs::npy::write(outputs[i].path, outputs[i].array); !s.ok()) {
      for (std::size_t j = 0; j < i; ++j) std::remove(outputs[j].path.c_str());
      return s;
    }
  }
  return gs::Status::Ok();
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec1), ec1);
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec2), ec2);
  if (ec1 || ec2) return a == b;
  return ca == cb;
}

// ---------------------------------------------------------------------------
// Options shared by forward and backward.

constexpr const char* kDtypeHelp =
    "Compute dtype: f16, bf16, f32 or f64 (default: the dtype of the input files, which must then "
    "all be the same). Each input is converted to it with a single rounding. bf16 results are "
    "rounded to bfloat16 by the library and then written widened (exactly) to float32, since .npy "
    "has no bfloat16 type.";

struct SamplingArgs {
  std::string mode = "bilinear";
  std::string padding = "zeros";
  bool align_corners = false;
  std::string dtype;  // empty: the files' dtype
};

void add_sampling_options(CLI::App* cmd, SamplingArgs* args) {
  cmd->add_option("--mode", args->mode, "Interpolation: bilinear, nearest or bicubic (default: bilinear)")
      ->type_name("MODE");
  cmd->add_option("--padding", args->padding, "Padding: zeros, border or reflection (default: zeros)")
      ->type_name("PADDING");
  cmd->add_flag("--align-corners", args->align_corners,
                "Treat -1 and 1 as the centres of the corner pixels (default: their outer edges)");
  cmd->add_option("--dtype", args->dtype, kDtypeHelp)->type_name("DTYPE");
}

gs::Status resolve_sampling(const SamplingArgs& args, gs::Options* options, std::optional<gs::DType>* dtype) {
  const auto mode = gs::parse_interpolation(args.mode);
  if (!mode) return error("--mode: unknown interpolation '" + args.mode + "' (expected bilinear, nearest or bicubic)");
  const auto padding = gs::parse_padding(args.padding);
  if (!padding) return error("--padding: unknown padding '" + args.padding + "' (expected zeros, border or reflection)");
  options->interpolation = *mode;
  options->padding = *padding;
  options->align_corners = args.align_corners;
  dtype->reset();
  if (!args.dtype.empty()) {
    *dtype = gs::parse_dtype(args.dtype);
    if (!*dtype) return error("--dtype: unknown dtype '" + args.dtype + "' (expected f16, bf16, f32 or f64)");
  }
  return gs::Status::Ok();
}

// ---------------------------------------------------------------------------
// Subcommands.

struct Command {
  CLI::App* app;
  std::function<gs::Status()> run;
};

constexpr const char* kOutputNote =
    "Inputs are .npy files (float16, float32 or float64, little-endian, C order). Outputs are "
    "written in the compute dtype; bfloat16 results are widened exactly to float32 in the file.";

// gridsampler forward
struct ForwardArgs {
  std::string input, grid, out;
  SamplingArgs sampling;
};

template <std::size_t Rank>
gs::Status run_forward_rank(File&& input_file, File&& grid_file, const gs::Options& options,
                            std::optional<gs::DType> requested, const std::string& out_path) {
  Operand<Rank> input, grid;
  if (gs::Status s = take(std::move(input_file), &input); !s.ok()) return s;
  if (gs::Status s = take(std::move(grid_file), &grid); !s.ok()) return s;
  gs::DType dtype = gs::DType::kFloat32;
  if (gs::Status s = unify_dtypes<Rank>({&input, &grid}, requested, &dtype); !s.ok()) return s;

  // Output (N, C, [Dout,] Hout, Wout): the input's N and C, the grid's sizes.
  Operand<Rank> output{"output", {}};
  std::array<int64_t, Rank> out_shape{};
  out_shape[0] = input.tensor.shape()[0];
  out_shape[1] = input.tensor.shape()[1];
  for (std::size_t d = 2; d < Rank; ++d) out_shape[d] = grid.tensor.shape()[d - 1];
  if (gs::Status s = HostTensor<Rank>::allocate(output.name, dtype, out_shape, &output.tensor); !s.ok()) return s;
  if (gs::Status s = sample(input.tensor.view(), grid.tensor.view(), output.tensor.mutable_view(), options); !s.ok()) {
    return s;
  }
  std::vector<PendingOutput> outputs;
  outputs.push_back({out_path, to_npy(std::move(output))});
  return write_all(outputs);
}

gs::Status run_forward(const ForwardArgs& args) {
  gs::Options options;
  std::optional<gs::DType> requested;
  if (gs::Status s = resolve_sampling(args.sampling, &options, &requested); !s.ok()) return s;
  File input, grid;
  if (gs::Status s = read_file("input", args.input, &input); !s.ok()) return s;
  if (gs::Status s = read_file("grid", args.grid, &grid); !s.ok()) return s;
  std::size_t rank = 4;
  if (gs::Status s = call_rank(input, &rank); !s.ok()) return s;
  return rank == 4 ? run_forward_rank<4>(std::move(input), std::move(grid), options, requested, args.out)
                   : run_forward_rank<5>(std::move(input), std::move(grid), options, requested, args.out);
}

Command add_forward_command(CLI::App& app) {
  auto args = std::make_shared<ForwardArgs>();
  CLI::App* cmd = app.add_subcommand("forward", "Sample an image or a volume at grid positions (grid_sample)");
  cmd->add_option("--input", args->input, "Image (N, C, Hin, Win) or volume (N, C, Din, Hin, Win)")
      ->required()
      ->type_name("X.npy");
  cmd->add_option("--grid", args->grid,
                  "Sampling positions in [-1, 1]: (x, y), shape (N, Hout, Wout, 2), for an image; (x, y, z), shape "
                  "(N, Dout, Hout, Wout, 3), for a volume (x indexes W, y H, z D)")
      ->required()
      ->type_name("G.npy");
  cmd->add_option("--out", args->out, "Output, shape (N, C, Hout, Wout) or (N, C, Dout, Hout, Wout)")->required()->type_name("Y.npy");
  add_sampling_options(cmd, &args->sampling);
  cmd->footer(kOutputNote);
  return {cmd, [args] { return run_forward(*args); }};
}

// gridsampler backward
struct BackwardArgs {
  std::string grad, input, grid, dx, dgrid;
  bool no_dx = false;
  bool no_dgrid = false;
  SamplingArgs sampling;
};

template <std::size_t Rank>
gs::Status run_backward_rank(File&& grad_file, File&& input_file, File&& grid_file, const gs::Options& options,
                             std::optional<gs::DType> requested, gs::OutputMask mask, const BackwardArgs& args) {
  Operand<Rank> grad, input, grid;
  if (gs::Status s = take(std::move(grad_file), &grad); !s.ok()) return s;
  if (gs::Status s = take(std::move(input_file), &input); !s.ok()) return s;
  if (gs::Status s = take(std::move(grid_file), &grid); !s.ok()) return s;
  gs::DType dtype = gs::DType::kFloat32;
  if (gs::Status s = unify_dtypes<Rank>({&grad, &input, &grid}, requested, &dtype); !s.ok()) return s;

  Operand<Rank> dx{"dx", {}}, dgrid{"dgrid", {}};
  gs::BasicTensorView<void*, Rank> dx_view{}, dgrid_view{};
  if (mask.input) {
    if (gs::Status s = HostTensor<Rank>::allocate(dx.name, dtype, input.tensor.shape(), &dx.tensor); !s.ok()) {
      return s;
    }
    dx_view = dx.tensor.mutable_view();
  }
  if (mask.grid) {
    if (gs::Status s = HostTensor<Rank>::allocate(dgrid.name, dtype, grid.tensor.shape(), &dgrid.tensor); !s.ok()) {
      return s;
    }
    dgrid_view = dgrid.tensor.mutable_view();
  }
  if (gs::Status s = sample_backward(grad.tensor.view(), input.tensor.view(), grid.tensor.view(), dx_view, dgrid_view,
                                     options, mask);
      !s.ok()) {
    return s;
  }
  std::vector<PendingOutput> outputs;
  if (mask.input) outputs.push_back({args.dx, to_npy(std::move(dx))});
  if (mask.grid) outputs.push_back({args.dgrid, to_npy(std::move(dgrid))});
  return write_all(outputs);
}

gs::Status run_backward(const BackwardArgs& args) {
  gs::Options options;
  std::optional<gs::DType> requested;
  if (gs::Status s = resolve_sampling(args.sampling, &options, &requested); !s.ok()) return s;
  if (args.no_dx && args.no_dgrid) return error("--no-dx and --no-dgrid together leave nothing to compute");
  if (!args.no_dx && args.dx.empty()) return error("--dx is required (or give --no-dx)");
  if (!args.no_dgrid && args.dgrid.empty()) return error("--dgrid is required (or give --no-dgrid)");
  if (!args.no_dx && !args.no_dgrid && same_file(args.dx, args.dgrid)) {
    return error("--dx and --dgrid name the same file '" + args.dx + "'");
  }
  const gs::OutputMask mask{!args.no_dx, !args.no_dgrid};

  File grad, input, grid;
  if (gs::Status s = read_file("grad", args.grad, &grad); !s.ok()) return s;
  if (gs::Status s = read_file("input", args.input, &input); !s.ok()) return s;
  if (gs::Status s = read_file("grid", args.grid, &grid); !s.ok()) return s;
  std::size_t rank = 4;
  if (gs::Status s = call_rank(input, &rank); !s.ok()) return s;
  return rank == 4 ? run_backward_rank<4>(std::move(grad), std::move(input), std::move(grid), options, requested,
                                          mask, args)
                   : run_backward_rank<5>(std::move(grad), std::move(input), std::move(grid), options, requested,
                                          mask, args);
}

Command add_backward_command(CLI::App& app) {
  auto args = std::make_shared<BackwardArgs>();
  CLI::App* cmd = app.add_subcommand("backward", "Gradients of forward: dx and dgrid (GridSampler2DGrad, GridSampler3DGrad)");
  cmd->add_option("--grad", args->grad, "Gradient of the forward output, shape (N, C, [Dout,] Hout, Wout)")
      ->required()
      ->type_name("GO.npy");
  cmd->add_option("--input", args->input, "Image or volume of the forward call, shape (N, C, [Din,] Hin, Win)")
      ->required()
      ->type_name("X.npy");
  cmd->add_option("--grid", args->grid, "Grid of the forward call, shape (N, Hout, Wout, 2) or (N, Dout, Hout, Wout, 3)")
      ->required()
      ->type_name("G.npy");
  cmd->add_option("--dx", args->dx, "Output: gradient for input, shape of input (required unless --no-dx)")
      ->type_name("DX.npy");
  cmd->add_option("--dgrid", args->dgrid, "Output: gradient for grid, shape of grid (required unless --no-dgrid)")
      ->type_name("DG.npy");
  add_sampling_options(cmd, &args->sampling);
  cmd->add_flag("--no-dx", args->no_dx, "Do not compute or write dx");
  cmd->add_flag("--no-dgrid", args->no_dgrid, "Do not compute or write dgrid");
  cmd->footer(kOutputNote);
  return {cmd, [args] { return run_backward(*args); }};
}

// gridsampler demo
struct DemoArgs {
  gs::demo::DemoOptions options;
  std::string dtype = "f32";
};

CLI::App* add_demo_command(CLI::App& app, DemoArgs* args) {
  CLI::App* cmd = app.add_subcommand(
      "demo", "Warp a built-in example image with every mode and padding, check against the float64 reference, time it");
  cmd->add_option("--size", args->options.size, "Input and output images are SIZE x SIZE pixels, 8..2048 (default: 256)")
      ->type_name("SIZE");
  cmd->add_option("--dtype", args->dtype, "Dtype of every tensor: f16, bf16, f32 or f64 (default: f32)")
      ->type_name("DTYPE");
  cmd->add_option("--png", args->options.png_dir,
                  "Also write PNG pictures of the input, the warped outputs and |dx|, |dgrid| to DIR (created if missing)")
      ->type_name("DIR");
  cmd->add_option("--seed", args->options.seed, "Seed of the generated images and elastic field (default: 1)")
      ->type_name("SEED");
  cmd->footer("Exit status: 0 when every result is within its error bound, 1 when one is not, 2 on bad options.");
  return cmd;
}

int run_demo_command(const DemoArgs& args) {
  const std::optional<gs::DType> dtype = gs::parse_dtype(args.dtype);
  if (!dtype) return report_error("--dtype: unknown dtype '" + args.dtype + "' (expected f16, bf16, f32 or f64)");
  gs::demo::DemoOptions options = args.options;
  options.dtype = *dtype;
  return gs::demo::run_demo(options, std::cout, std::cerr);
}

// gridsampler bench
struct BenchArgs {
  int threads = 0;
  int reps = 20;
  std::string shape = "8,64,64,64,64,64", op = "backward", layout = "nchw";
  std::string input, grid, grad;  // .npy files to time instead of random data
  const CLI::Option* shape_option = nullptr;  // to tell a given --shape from the default
  SamplingArgs sampling;
};

// What the bench command has resolved before it knows the rank.
struct BenchCall {
  gs::Options options;
  std::optional<gs::DType> requested;
  bool backward = true, channels_last = false;
  std::vector<int64_t> dims;  // --shape's numbers (6 or 8), or empty: the files'
  File input, grid, grad;     // those given (non-empty path)
};

template <std::size_t Rank>
gs::Status run_bench_rank(const BenchArgs& args, BenchCall&& call) {
  gs::bench::BenchOptions<Rank> o;
  o.options = call.options;
  o.backward = call.backward;
  o.channels_last = call.channels_last;
  o.reps = args.reps;
  o.dtype = call.requested.value_or(gs::DType::kFloat32);
  // Data from files: checked against each other (the same dtype unless
  // --dtype converts them), and without --shape the shape is theirs.
  Operand<Rank> input, grid, grad;
  std::vector<Operand<Rank>*> given;
  for (auto [file, operand] : {std::pair{&call.input, &input}, std::pair{&call.grid, &grid},
                               std::pair{&call.grad, &grad}}) {
    if (file->path.empty()) continue;
    if (gs::Status s = take(std::move(*file), operand); !s.ok()) return s;
    given.push_back(operand);
  }
  if (!given.empty()) {
    gs::DType dtype = gs::DType::kFloat32;
    if (gs::Status s = unify_dtypes<Rank>(given, call.requested, &dtype); !s.ok()) return s;
    o.dtype = dtype;
  }
  if (call.dims.empty()) {  // N, C, the input's sizes, the grid's
    const auto& x = input.tensor.shape();
    const auto& g = grid.tensor.shape();
    o.shape[0] = x[0];
    o.shape[1] = x[1];
    for (std::size_t i = 0; i < Rank - 2; ++i) {
      o.shape[2 + i] = x[2 + i];
      o.shape[Rank + i] = g[1 + i];
    }
  } else {
    std::copy(call.dims.begin(), call.dims.end(), o.shape.begin());
  }
  if (!args.input.empty()) o.input = &input.tensor;
  if (!args.grid.empty()) o.grid = &grid.tensor;
  if (!args.grad.empty()) o.grad = &grad.tensor;
  return gs::bench::run_bench(o, std::cout);
}

gs::Status run_bench_command(const BenchArgs& args) {
  BenchCall call;
  if (gs::Status s = resolve_sampling(args.sampling, &call.options, &call.requested); !s.ok()) return s;
  call.options.num_threads = args.threads;
  if (args.threads < 0) return error("--threads: must be 0 (all) or positive");
  if (args.threads > gs::max_threads()) {
    return error("--threads: at most " + std::to_string(gs::max_threads()) + " on this machine, got " +
                 std::to_string(args.threads));
  }
  std::vector<int64_t> dims;
  std::size_t at = 0;
  while (at <= args.shape.size()) {
    const std::size_t comma = std::min(args.shape.find(',', at), args.shape.size());
    const std::string part = args.shape.substr(at, comma - at);
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0) {
      dims.clear();
      break;
    }
    dims.push_back(v);
    at = comma + 1;
  }
  if (dims.size() != 6 && dims.size() != 8) {
    return error("--shape: expected N,C,Hin,Win,Hout,Wout (six non-negative integers) or N,C,Din,Hin,Win,Dout,Hout,Wout "
                 "(eight, a volume), got '" + args.shape + "'");
  }
  if (args.op != "backward" && args.op != "forward") return error("--op: expected forward or backward, got '" + args.op + "'");
  call.backward = args.op == "backward";
  if (!args.grad.empty() && !call.backward) return error("--grad: only --op backward takes one");
  if (args.layout != "nchw" && args.layout != "nhwc" && args.layout != "ncdhw" && args.layout != "ndhwc") {
    return error("--layout: expected nchw or nhwc (volumes: ncdhw or ndhwc), got '" + args.layout + "'");
  }
  call.channels_last = args.layout == "nhwc" || args.layout == "ndhwc";

  for (auto [name, path, file] : {std::tuple{"input", &args.input, &call.input}, std::tuple{"grid", &args.grid, &call.grid},
                                  std::tuple{"grad", &args.grad, &call.grad}}) {
    if (path->empty()) continue;
    if (gs::Status s = read_file(name, *path, file); !s.ok()) return s;
  }
  const bool files = !args.input.empty() || !args.grid.empty() || !args.grad.empty();
  // The rank: --shape's when given (6 numbers: an image, 8: a volume), else
  // the input file's.
  std::size_t rank = dims.size() == 6 ? 4 : 5;
  if (args.shape_option->count() > 0) {
    call.dims = std::move(dims);
  } else if (files) {
    if (args.input.empty() || args.grid.empty()) {
      return error("--input and --grid together give the shape; with only one of them, give --shape too");
    }
    if (gs::Status s = call_rank(call.input, &rank); !s.ok()) return s;
  } else {
    call.dims = std::move(dims);  // the default shape
  }
  return rank == 4 ? run_bench_rank<4>(args, std::move(call)) : run_bench_rank<5>(args, std::move(call));
}

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time forward or backward on random data or .npy files; print one JSON line");
  args->shape_option =
      cmd->add_option("--shape", args->shape,
                      "N,C,Hin,Win,Hout,Wout for images, N,C,Din,Hin,Win,Dout,Hout,Wout for volumes (default: that "
                      "of the --input and --grid files, else 8,64,64,64,64,64)")
          ->type_name("DIMS");
  cmd->add_option("--input", args->input, "Time on this image (N, C, Hin, Win) or volume (N, C, Din, Hin, Win) instead of random values")
      ->type_name("X.npy");
  cmd->add_option("--grid", args->grid, "Time on this grid, (N, Hout, Wout, 2) or (N, Dout, Hout, Wout, 3), instead of random values")
      ->type_name("G.npy");
  cmd->add_option("--grad", args->grad, "Backward: time on this output gradient, (N, C, Hout, Wout) or (N, C, Dout, Hout, Wout)")
      ->type_name("GO.npy");
  cmd->add_option("--op", args->op, "backward (default) or forward")->type_name("OP");
  add_sampling_options(cmd, &args->sampling);
  cmd->add_option("--layout", args->layout, "nchw (default) or nhwc (volumes: ncdhw or ndhwc; either name works): memory of input, grad, output and dx")
      ->type_name("LAYOUT");
  cmd->add_option("--threads", args->threads,
                  "Threads, at most " + std::to_string(gs::max_threads()) +
                      " on this machine; 0 = OpenMP's default (OMP_NUM_THREADS), capped so (default: 0)")
      ->type_name("T");
  cmd->add_option("--reps", args->reps, "Timed repetitions after one warm-up (default: 20)")->type_name("R");
  cmd->footer("Data: the --input, --grid and --grad files where given (converted to --dtype, stored in --layout); "
              "otherwise input and grad uniform in [-1, 1], grid uniform in [-1.1, 1.1], fixed seed. gbps counts the "
              "bytes of all inputs and outputs once each, divided by the median time. --dtype defaults to the "
              "files' dtype, or f32 without files.");
  return {cmd, [args] { return run_bench_command(*args); }};
}

// gridsampler register
Command add_register_command(CLI::App& app) {
  namespace reg = gs::registration;
  auto args = std::make_shared<reg::RegisterCommand>();
  CLI::App* cmd = app.add_subcommand(
      "register", "Find the warp that makes one image look like another, by gradient descent through GridSampler2DGrad");
  cmd->add_option("--fixed", args->fixed, "The image to match (PNG: grey or RGB, 8 or 16 bits)")->type_name("F.png");
  cmd->add_option("--moving", args->moving, "The image to warp onto it (PNG, the size of --fixed)")->type_name("M.png");
  cmd->add_option("--transform", args->transform,
                  "affine, elastic (a smooth displacement field) or affine+elastic (default)")
      ->type_name("T");
  cmd->add_option("--iters", args->iterations,
                  "Most optimiser steps per pyramid level and pass, 1.." + std::to_string(reg::kMaxIterations) +
                      " (default: " + std::to_string(reg::kDefaultIterations) + ")")
      ->type_name("N");
  cmd->add_option("--out", args->out_dir,
                  "Write warped.png, diff_before.png, diff_after.png, flow.png and result.json to DIR (created if "
                  "missing; default: write nothing)")
      ->type_name("DIR");
  cmd->add_option("--threads", args->threads,
                  "Threads of the library's calls on levels of 2^17 samples (pixels x channels) or more, 0 = all "
                  "(default: 1)")
      ->type_name("T");
  CLI::Option* size = cmd->add_option(
      "--size", args->size,
      "Built-in example only: its images are SIZE x SIZE pixels, " + std::to_string(reg::kMinExampleSize) + ".." +
          std::to_string(reg::kMaxExampleSize) + " (default: " + std::to_string(reg::kDefaultExampleSize) + ")");
  size->type_name("S");
  cmd->footer(
      "Without --fixed and --moving it registers a built-in example (the demo's image and a known affine-plus-elastic "
      "warp of it) and reports how far the recovered displacement is from the true one; with --out it also writes "
      "fixed.png, moving.png and flow_true.png. Images larger than " +
      std::to_string(gs::png::kMaxReadPixels) + " pixels are refused.");
  return {cmd, [args, size] {
            reg::RegisterCommand command = *args;
            command.size_given = size->count() > 0;
            command.show_progress = ::isatty(STDERR_FILENO) != 0;
            return reg::run_register_command(command, std::cout, std::cerr);
          }};
}

int run_main(int argc, char** argv) {
  CLI::App app{"gridsampler: 2-D and 3-D grid sampling (PyTorch's grid_sample) and its gradient, on .npy files.",
               "gridsampler"};
  app.set_version_flag("--version", "gridsampler " GRIDSAMPLER_VERSION);
  app.require_subcommand(1);
  app.footer("Run 'gridsampler <command> --help' for a command's options. Exit status: 0 on success, "
             "2 on any error (demo: 1 when a result exceeds its error bound).");

  std::vector<Command> commands;
  commands.push_back(add_forward_command(app));
  commands.push_back(add_backward_command(app));
  commands.push_back(add_bench_command(app));
  commands.push_back(add_register_command(app));
  DemoArgs demo_args;
  CLI::App* demo = add_demo_command(app, &demo_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);  // --help, --help-all, --version: print to stdout, exit 0
    }
    // CLI11 checks required options before unexpected ones; a misspelt
    // option is the more useful thing to report.
    std::vector<std::string> unexpected = app.remaining();
    for (const Command& command : commands) {
      for (std::string& arg : command.app->remaining()) unexpected.push_back(std::move(arg));
    }
    for (std::string& arg : demo->remaining()) unexpected.push_back(std::move(arg));
    if (!unexpected.empty() && dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) {
      std::string list;
      for (const std::string& arg : unexpected) list += " " + arg;
      return report_error("The following argument" + std::string(unexpected.size() > 1 ? "s were" : " was") +
                          " not expected:" + list);
    }
    return report_error(e.what());
  }

  if (demo->parsed()) return run_demo_command(demo_args);
  for (const Command& command : commands) {
    if (command.app->parsed()) {
      const gs::Status s = command.run();
      return s.ok() ? 0 : report_error(s.message());
    }
  }
  return report_error("no command given");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::bad_alloc&) {
    return report_error("out of memory");
  } catch (const std::exception& e) {
    return report_error(std::string("internal error: ") + e.what());
  } catch (...) {
    return report_error("internal error");
  }
}
