// The run-time choice of SIMD target and the kernel tables per dtype.
#include "cpu/dispatch.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "hwy/highway.h"
#include "hwy/targets.h"

namespace gridsampler::cpu {

// One per dtype, in kernels_<dtype>.cpp: fills the table for the target in use.
void kernels_f16(KernelTable* table);
void kernels_bf16(KernelTable* table);
void kernels_f32(KernelTable* table);
void kernels_f64(KernelTable* table);

namespace {

// GRIDSAMPLER_SIMD_TARGET=<name> (AVX3, AVX2, SSE2, ...) restricts the
// choice to that target when the library is first used.
void apply_environment() {
  static const bool once = [] {
    if (const char* want = std::getenv("GRIDSAMPLER_SIMD_TARGET")) {
      for (int64_t t = hwy::SupportedTargets() & HWY_TARGETS; t != 0; t &= t - 1) {
        const int64_t bit = t & -t;
        if (std::strcmp(hwy::TargetName(bit), want) == 0) hwy::SetSupportedTargetsForTest(bit);
      }
    }
    return true;
  }();
  (void)once;
}

}  // namespace

KernelTable kernels(DType dtype) {
  apply_environment();
  KernelTable table;
  switch (dtype) {
    case DType::kFloat16: kernels_f16(&table); break;
    case DType::kBFloat16: kernels_bf16(&table); break;
    case DType::kFloat32: kernels_f32(&table); break;
    case DType::kFloat64: kernels_f64(&table); break;
  }
  return table;
}

int64_t available_targets() { return hwy::SupportedTargets() & HWY_TARGETS; }
int64_t current_target() {
  const int64_t targets = available_targets();
  return targets & -targets;  // the lowest bit is the best target
}
bool vector_target() {
  const int64_t target = current_target();
#ifdef HWY_EMU128
  if (target == HWY_EMU128) return false;
#endif
  return target != HWY_SCALAR;
}
void force_targets(int64_t targets) { hwy::SetSupportedTargetsForTest(targets); }

namespace {

// Whether CPUID's vendor string is `name` (12 characters).
bool vendor_is(const char* name) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned max_leaf = 0, vendor[3] = {};
  if (__get_cpuid(0, &max_leaf, &vendor[0], &vendor[2], &vendor[1]) == 0) return false;
  return std::memcmp(vendor, name, 12) == 0;
#else
  (void)name;
  return false;
#endif
}

// The environment's 0 or 1 where set, else the CPU's default.
bool choice(const char* name, bool cpu_default) {
  if (const char* want = std::getenv(name)) return std::strcmp(want, "0") != 0;
  return cpu_default;
}

}  // namespace

bool window_reads_pay() {
  static const bool pay = choice("GRIDSAMPLER_WINDOW_READS", vendor_is("AuthenticAMD"));
  return pay;
}

bool planar_downsampling_pays() {
  static const bool pay = choice("GRIDSAMPLER_PLANAR_DOWNSAMPLING", vendor_is("GenuineIntel"));
  return pay;
}

const char* target_name(int64_t target) { return hwy::TargetName(target); }

}  // namespace gridsampler::cpu
