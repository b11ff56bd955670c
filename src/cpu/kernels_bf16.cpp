// The kernels of one dtype, compiled for every SIMD target (Highway's
// foreach_target). One file per dtype, so that they compile in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/kernels_bf16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/kernels-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
void FillTable_bf16(KernelTable* table) { fill_table<BFloat16>(table); }
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gridsampler::cpu {
HWY_EXPORT(FillTable_bf16);
void kernels_bf16(KernelTable* table) { HWY_DYNAMIC_DISPATCH(FillTable_bf16)(table); }
}  // namespace gridsampler::cpu
#endif
