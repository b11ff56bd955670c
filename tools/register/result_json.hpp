// result.json of `gridsampler register`: the transform found, the loss of
// every level, the iterations and the times (and, for the built-in example,
// the true warp and how far the recovered one is from it).
#pragma once

#include <cstdint>
#include <string>

#include "register/registration.hpp"
#include "register/synthetic.hpp"

namespace gridsampler::registration {

struct RunSummary {
  std::string fixed, moving;  // file names, or a description of the built-in example
  int64_t height = 0, width = 0, channels = 0;
  TransformKind kind = TransformKind::kAffineElastic;
  int threads = 0;            // as asked for (0: all)
  int max_iterations = 0;     // per level
  double loss_before = 0, loss_after = 0;  // the mean squared difference over the overlap, full resolution
  double longest_displacement_px = 0;
  double seconds = 0;         // the whole command
  const KnownWarp* truth = nullptr;           // built-in example only
  const DisplacementError* accuracy = nullptr;
};

std::string result_json(const RunSummary& run, const RegisterResult& result);

}  // namespace gridsampler::registration
