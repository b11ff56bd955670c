// `gridsampler register`: reads two PNGs (or makes the built-in example),
// registers them, writes the pictures and result.json, prints one summary
// line. Everything that can be refused is checked before the registration
// runs, and nothing is written until it has: an error leaves no file and no
// directory behind.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::registration {

inline constexpr int kDefaultIterations = 100;  // per pyramid level
inline constexpr int kMaxIterations = 100000;
inline constexpr int kMaxThreads = 1024;
inline constexpr int64_t kDefaultExampleSize = 256;
inline constexpr int64_t kMinExampleSize = 32, kMaxExampleSize = 2048;

struct RegisterCommand {
  std::string fixed, moving;  // PNG files; both empty: the built-in example
  std::string transform = "affine+elastic";
  int iterations = kDefaultIterations;
  // The library's threads (0: all it may use). One by default: a
  // registration makes thousands of calls of a few milliseconds, and on a
  // shared machine a second thread made every level slower, waiting for a
  // time slice at each call's barriers (README, "Command line").
  int threads = 1;
  std::string out_dir;        // empty: write nothing
  int64_t size = kDefaultExampleSize;  // of the built-in example
  bool size_given = false;
  bool show_progress = false;  // a progress line on `progress` (the CLI: when stderr is a terminal)
};

// The summary line goes to `out`, the progress line to `progress`. A
// non-ok status is the command's one error line (without the
// "gridsampler: error: " prefix).
Status run_register_command(const RegisterCommand& command, std::ostream& out, std::ostream& progress);

}  // namespace gridsampler::registration
