// aclnnGridSampler2D[Backward] and aclnnGridSampler3D[Backward]: phase one
// validates and plans through the same core as the C++ API; phase two runs
// the plan. One code path serves both ranks, templated on the views' rank
// (4: images, 5: volumes); only the dimension count, the format tags, the
// validation entry and the views the executor keeps depend on it.
#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "aclnn/handles.hpp"
#include "aclnnop/aclnn_grid_sampler2d.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_grid_sampler3d.h"
#include "aclnnop/aclnn_grid_sampler3d_backward.h"
#include "core/validate.hpp"
#include "cpu/plan.hpp"
#include "cpu/volume_call.hpp"

namespace gridsampler::aclnn {
namespace {

template <std::size_t Rank>
using View = BasicTensorView<const void*, Rank>;
template <std::size_t Rank>
using MutableView = BasicTensorView<void*, Rank>;

std::string named(const char* name, const std::string& rule) { return std::string(name) + ": " + rule; }

bool to_dtype(aclDataType t, DType* out) {
  switch (t) {
    case ACL_FLOAT: *out = DType::kFloat32; return true;
    case ACL_FLOAT16: *out = DType::kFloat16; return true;
    case ACL_DOUBLE: *out = DType::kFloat64; return true;
    case ACL_BF16: *out = DType::kBFloat16; return true;
    default: return false;
  }
}

// The format tags an operator of this rank takes. The tag does not decide the
// layout (the strides do); it must only name one of the rank's layouts.
template <std::size_t Rank>
bool format_ok(aclFormat f) {
  if constexpr (Rank == 4) {
    return f == ACL_FORMAT_NCHW || f == ACL_FORMAT_NHWC || f == ACL_FORMAT_ND;
  } else {
    return f == ACL_FORMAT_NCDHW || f == ACL_FORMAT_NDHWC || f == ACL_FORMAT_ND;
  }
}
template <std::size_t Rank>
const char* expected_formats() {
  return Rank == 4 ? "ACL_FORMAT_NCHW, ACL_FORMAT_NHWC or ACL_FORMAT_ND"
                   : "ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC or ACL_FORMAT_ND";
}

// Checks what only the aclnn form can get wrong (handle, rank, dtype code,
// format, storage bounds) and turns the tensor into a view; the core's
// validation does the rest.
template <std::size_t Rank>
aclnnStatus to_view(const char* name, const aclTensor* t, MutableView<Rank>* view) {
  if (t == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, named(name, "tensor is null"));
  if (!tensors().contains(t)) {
    return fail(ACLNN_ERR_PARAM_INVALID, named(name, "not a live tensor (destroyed or foreign)"));
  }
  if (t->dims.size() != Rank) {
    return fail(ACLNN_ERR_PARAM_INVALID, named(name, "expected " + std::to_string(Rank) + " dimensions, got " +
                                                         std::to_string(t->dims.size())));
  }
  if (!to_dtype(t->dtype, &view->dtype)) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                named(name, "unsupported dtype " + std::to_string(static_cast<int>(t->dtype)) +
                                " (expected ACL_FLOAT16, ACL_BF16, ACL_FLOAT or ACL_DOUBLE)"));
  }
  if (!format_ok<Rank>(t->format)) {
    return fail(ACLNN_ERR_PARAM_INVALID, named(name, "unsupported format " +
                                                         std::to_string(static_cast<int>(t->format)) +
                                                         " (expected " + expected_formats<Rank>() + ")"));
  }
  int64_t numel = 1;
  for (std::size_t d = 0; d < Rank; ++d) {
    if (t->dims[d] < 0) {
      return fail(ACLNN_ERR_PARAM_INVALID, named(name, "dimension " + std::to_string(d) +
                                                           " is negative (" +
                                                           std::to_string(t->dims[d]) + ")"));
    }
    view->shape[d] = t->dims[d];
    view->strides[d] = t->strides[d];
    if (__builtin_mul_overflow(numel, t->dims[d], &numel)) numel = INT64_MAX;
  }
  if (numel > 0) {
    // The view must lie inside its storage: offset + every reachable element
    // offset in [0, product of storageDims).
    int64_t storage = 1;
    for (int64_t s : t->storage_dims) {
      if (s < 0) return fail(ACLNN_ERR_PARAM_INVALID, named(name, "negative storage dimension"));
      if (__builtin_mul_overflow(storage, s, &storage)) {
        return fail(ACLNN_ERR_PARAM_INVALID, named(name, "storage size overflows 64 bits"));
      }
    }
    int64_t lo = 0, hi = 0;
    if (!detail::stride_reach(view->shape, view->strides, t->offset, &lo, &hi)) {
      return fail(ACLNN_ERR_PARAM_INVALID, named(name, "strides overflow 64 bits"));
    }
    if (lo < 0 || hi >= storage) {
      return fail(ACLNN_ERR_PARAM_INVALID,
                  named(name, "view reaches elements " + std::to_string(lo) + ".." +
                                  std::to_string(hi) + " outside its storage of " +
                                  std::to_string(storage) + " elements"));
    }
    int64_t end_bytes = 0;
    if (__builtin_mul_overflow(hi + 1, static_cast<int64_t>(dtype_size(view->dtype)), &end_bytes)) {
      return fail(ACLNN_ERR_PARAM_INVALID, named(name, "view reaches beyond 2^63 bytes of its storage"));
    }
    if (t->data == nullptr) {
      return fail(ACLNN_ERR_PARAM_NULLPTR, named(name, "data is null"));
    }
    view->data = static_cast<char*>(t->data) + t->offset * static_cast<int64_t>(dtype_size(view->dtype));
  } else {
    view->data = t->data;
  }
  return ACLNN_SUCCESS;
}

aclnnStatus check_attrs(int64_t mode, int64_t padding, Options* options) {
  if (mode < 0 || mode > 2) {
    return fail(ACLNN_ERR_PARAM_INVALID, "interpolationMode: unknown value " + std::to_string(mode) +
                                             " (expected 0 bilinear, 1 nearest or 2 bicubic)");
  }
  if (padding < 0 || padding > 2) {
    return fail(ACLNN_ERR_PARAM_INVALID, "paddingMode: unknown value " + std::to_string(padding) +
                                             " (expected 0 zeros, 1 border or 2 reflection)");
  }
  options->interpolation = static_cast<Interpolation>(mode);
  options->padding = static_cast<Padding>(padding);
  return ACLNN_SUCCESS;
}

// The executor's views of this rank.
template <std::size_t Rank, class Executor>
auto& operands(Executor& e) {
  if constexpr (Rank == 4) {
    return e.image;
  } else {
    return e.volume;
  }
}

// The core's validation of this rank; for volumes also whether each view
// can be merged or packed (cpu/volume_call.hpp).
Status validate(const Operands<4>& v, const Options& o, detail::Problem* p, const detail::TensorNames& names) {
  return detail::validate_forward(v.input, v.grid, v.out, o, p, names);
}
Status validate(const Operands<5>& v, const Options& o, detail::Problem* p, const detail::TensorNames& names) {
  if (Status s = detail::validate_forward_3d(v.input, v.grid, v.out, o, p, names); !s.ok()) return s;
  return cpu::check_views_3d(*p, v.input, v.grid, v.out);
}
Status validate(const Operands<4>& v, const Options& o, OutputMask m, detail::Problem* p,
                const detail::TensorNames& names) {
  return detail::validate_backward(v.grad, v.input, v.grid, v.dx, v.dgrid, o, m, p, names);
}
Status validate(const Operands<5>& v, const Options& o, OutputMask m, detail::Problem* p,
                const detail::TensorNames& names) {
  if (Status s = detail::validate_backward_3d(v.grad, v.input, v.grid, v.dx, v.dgrid, o, m, p, names); !s.ok()) {
    return s;
  }
  return cpu::check_views_3d(*p, v.grad, v.input, v.grid, v.dx, v.dgrid);
}

// The kernels' plans and runs of this rank (volumes: cpu/volume_call.hpp).
cpu::ForwardPlan plan_forward_of(const Operands<4>&, const detail::Problem& p) { return cpu::plan_forward(p); }
cpu::ForwardPlan plan_forward_of(const Operands<5>& v, const detail::Problem& p) {
  return cpu::plan_forward_3d(p, v.input);
}
cpu::BackwardPlan plan_backward_of(const Operands<4>&, const detail::Problem& p) { return cpu::plan_backward(p); }
cpu::BackwardPlan plan_backward_of(const Operands<5>& v, const detail::Problem& p) {
  return cpu::plan_backward_3d(p, v.input, v.dx);
}
Status run(const aclOpExecutor& plan, const Operands<4>& v, void* workspace) {
  if (plan.kind == aclOpExecutor::Kind::kForward) {
    if (!plan.problem.empty()) cpu::run_forward(plan.forward, v.input, v.grid, v.out);
  } else {
    cpu::run_backward(plan.backward, v.grad, v.input, v.grid, v.dx, v.dgrid, workspace);
  }
  return Status::Ok();
}
Status run(const aclOpExecutor& plan, const Operands<5>& v, void* workspace) {
  if (plan.kind == aclOpExecutor::Kind::kForward) return cpu::run_forward_3d(plan.forward, v.input, v.grid, v.out);
  return cpu::run_backward_3d(plan.backward, v.grad, v.input, v.grid, v.dx, v.dgrid, workspace);
}

// Registers a finished plan and hands it out.
aclnnStatus issue(std::unique_ptr<aclOpExecutor> plan, uint64_t* workspace_size,
                  aclOpExecutor** executor) {
  *workspace_size = plan->workspace_bytes;
  *executor = plan.release();
  executors().add(*executor);
  return ACLNN_SUCCESS;
}

// A fresh executor for phase one, or the error of its arguments.
aclnnStatus start_plan(uint64_t* workspace_size, aclOpExecutor** executor, aclOpExecutor::Kind kind, int rank,
                       std::unique_ptr<aclOpExecutor>* plan) {
  if (workspace_size == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, "workspaceSize: pointer is null");
  if (executor == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, "executor: pointer is null");
  plan->reset(new (std::nothrow) aclOpExecutor);
  if (!*plan) return fail(ACLNN_ERR_INNER, "executor: out of memory");
  (*plan)->kind = kind;
  (*plan)->rank = rank;
  return ACLNN_SUCCESS;
}

// Phase one of the backward, either rank.
template <std::size_t Rank>
aclnnStatus plan_backward_call(const aclTensor* gradOutput, const aclTensor* input, const aclTensor* grid,
                               int64_t interpolationMode, int64_t paddingMode, bool alignCorners,
                               const aclBoolArray* outputMask, aclTensor* inputGrad, aclTensor* gridGrad,
                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  std::unique_ptr<aclOpExecutor> plan;
  if (aclnnStatus s = start_plan(workspaceSize, executor, aclOpExecutor::Kind::kBackward, Rank, &plan);
      s != ACLNN_SUCCESS) {
    return s;
  }
  Options options;
  options.align_corners = alignCorners;
  if (aclnnStatus s = check_attrs(interpolationMode, paddingMode, &options); s != ACLNN_SUCCESS) return s;
  OutputMask mask;
  if (outputMask != nullptr) {
    if (!bool_arrays().contains(outputMask)) {
      return fail(ACLNN_ERR_PARAM_INVALID, "outputMask: not a live bool array");
    }
    if (outputMask->values.size() != 2) {
      return fail(ACLNN_ERR_PARAM_INVALID, "outputMask: expected 2 values, got " +
                                               std::to_string(outputMask->values.size()));
    }
    mask = {outputMask->values[0], outputMask->values[1]};
  }
  Operands<Rank>& v = operands<Rank>(*plan);
  MutableView<Rank> grad, in, gr;
  if (aclnnStatus s = to_view("gradOutput", gradOutput, &grad); s != ACLNN_SUCCESS) return s;
  if (aclnnStatus s = to_view("input", input, &in); s != ACLNN_SUCCESS) return s;
  if (aclnnStatus s = to_view("grid", grid, &gr); s != ACLNN_SUCCESS) return s;
  if (mask.input) {
    if (aclnnStatus s = to_view("inputGrad", inputGrad, &v.dx); s != ACLNN_SUCCESS) return s;
  }
  if (mask.grid) {
    if (aclnnStatus s = to_view("gridGrad", gridGrad, &v.dgrid); s != ACLNN_SUCCESS) return s;
  }
  v.grad = grad;
  v.input = in;
  v.grid = gr;
  detail::TensorNames names;  // as aclnn callers know them
  names.grad = "gradOutput";
  names.dx = "inputGrad";
  names.dgrid = "gridGrad";
  if (Status st = validate(v, options, mask, &plan->problem, names); !st.ok()) return to_aclnn(st);
  plan->backward = plan_backward_of(v, plan->problem);
  plan->workspace_bytes = plan->backward.workspace_bytes;
  return issue(std::move(plan), workspaceSize, executor);
}

// Phase one of the forward, either rank.
template <std::size_t Rank>
aclnnStatus plan_forward_call(const aclTensor* input, const aclTensor* grid, int64_t interpolationMode,
                              int64_t paddingMode, bool alignCorners, aclTensor* out, uint64_t* workspaceSize,
                              aclOpExecutor** executor) {
  std::unique_ptr<aclOpExecutor> plan;
  if (aclnnStatus s = start_plan(workspaceSize, executor, aclOpExecutor::Kind::kForward, Rank, &plan);
      s != ACLNN_SUCCESS) {
    return s;
  }
  Options options;
  options.align_corners = alignCorners;
  if (aclnnStatus s = check_attrs(interpolationMode, paddingMode, &options); s != ACLNN_SUCCESS) return s;
  Operands<Rank>& v = operands<Rank>(*plan);
  MutableView<Rank> in, gr;
  if (aclnnStatus s = to_view("input", input, &in); s != ACLNN_SUCCESS) return s;
  if (aclnnStatus s = to_view("grid", grid, &gr); s != ACLNN_SUCCESS) return s;
  if (aclnnStatus s = to_view("out", out, &v.out); s != ACLNN_SUCCESS) return s;
  v.input = in;
  v.grid = gr;
  detail::TensorNames names;
  names.output = "out";
  if (Status st = validate(v, options, &plan->problem, names); !st.ok()) return to_aclnn(st);
  plan->forward = plan_forward_of(v, plan->problem);
  plan->workspace_bytes = 0;
  return issue(std::move(plan), workspaceSize, executor);
}

// Phase two, shared by every operator: `kind` and `rank` say which one the
// caller called, `api` its name.
aclnnStatus execute(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, aclrtStream stream,
                    aclOpExecutor::Kind kind, int rank, const char* api) {
  if (executor == nullptr) return fail(ACLNN_ERR_PARAM_NULLPTR, std::string(api) + ": executor is null");
  // A live executor is consumed here, whatever happens next.
  if (!executors().remove(executor)) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                std::string(api) + ": executor is not live (already executed, or not from this library)");
  }
  std::unique_ptr<aclOpExecutor> plan(executor);
  if (plan->kind != kind || plan->rank != rank) {
    const std::string planned = std::string("aclnnGridSampler") + (plan->rank == 4 ? "2D" : "3D") +
                                (plan->kind == aclOpExecutor::Kind::kBackward ? "Backward" : "");
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(api) +
                                             ": executor was planned for another grid sampler operator (" +
                                             planned + ")");
  }
  if (stream != nullptr && !streams().contains(stream)) {
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(api) + ": stream is not from aclrtCreateStream");
  }
  if (plan->workspace_bytes > 0) {
    if (workspace == nullptr) {
      return fail(ACLNN_ERR_PARAM_NULLPTR, "workspace: null but " +
                                               std::to_string(plan->workspace_bytes) + " bytes are needed");
    }
    if (workspace_size < plan->workspace_bytes) {
      return fail(ACLNN_ERR_PARAM_INVALID, "workspace: " + std::to_string(workspace_size) +
                                               " bytes given, " + std::to_string(plan->workspace_bytes) +
                                               " needed");
    }
  }
  // Volumes whose views do not merge run on packed copies, which can fail
  // for want of memory (ACLNN_ERR_INNER).
  const Status st = rank == 4 ? run(*plan, plan->image, workspace) : run(*plan, plan->volume, workspace);
  return st.ok() ? ACLNN_SUCCESS : to_aclnn(st);
}

}  // namespace
}  // namespace gridsampler::aclnn

using namespace gridsampler;        // NOLINT
using namespace gridsampler::aclnn;  // NOLINT

extern "C" {

aclnnStatus aclnnGridSampler2DBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* grid,
    int64_t interpolationMode, int64_t paddingMode, bool alignCorners,
    const aclBoolArray* outputMask, aclTensor* inputGrad, aclTensor* gridGrad,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return plan_backward_call<4>(gradOutput, input, grid, interpolationMode, paddingMode, alignCorners, outputMask,
                               inputGrad, gridGrad, workspaceSize, executor);
}

aclnnStatus aclnnGridSampler2DBackward(void* workspace, uint64_t workspaceSize,
                                       aclOpExecutor* executor, aclrtStream stream) {
  return execute(workspace, workspaceSize, executor, stream, aclOpExecutor::Kind::kBackward, 4,
                 "aclnnGridSampler2DBackward");
}

aclnnStatus aclnnGridSampler2DGetWorkspaceSize(const aclTensor* input, const aclTensor* grid,
                                               int64_t interpolationMode, int64_t paddingMode,
                                               bool alignCorners, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return plan_forward_call<4>(input, grid, interpolationMode, paddingMode, alignCorners, out, workspaceSize,
                              executor);
}

aclnnStatus aclnnGridSampler2D(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                               aclrtStream stream) {
  return execute(workspace, workspaceSize, executor, stream, aclOpExecutor::Kind::kForward, 4,
                 "aclnnGridSampler2D");
}

aclnnStatus aclnnGridSampler3DBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* grid,
    int64_t interpolationMode, int64_t paddingMode, bool alignCorners,
    const aclBoolArray* outputMask, aclTensor* inputGrad, aclTensor* gridGrad,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return plan_backward_call<5>(gradOutput, input, grid, interpolationMode, paddingMode, alignCorners, outputMask,
                               inputGrad, gridGrad, workspaceSize, executor);
}

aclnnStatus aclnnGridSampler3DBackward(void* workspace, uint64_t workspaceSize,
                                       aclOpExecutor* executor, aclrtStream stream) {
  return execute(workspace, workspaceSize, executor, stream, aclOpExecutor::Kind::kBackward, 5,
                 "aclnnGridSampler3DBackward");
}

aclnnStatus aclnnGridSampler3DGetWorkspaceSize(const aclTensor* input, const aclTensor* grid,
                                               int64_t interpolationMode, int64_t paddingMode,
                                               bool alignCorners, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return plan_forward_call<5>(input, grid, interpolationMode, paddingMode, alignCorners, out, workspaceSize,
                              executor);
}

aclnnStatus aclnnGridSampler3D(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                               aclrtStream stream) {
  return execute(workspace, workspaceSize, executor, stream, aclOpExecutor::Kind::kForward, 5,
                 "aclnnGridSampler3D");
}

}  // extern "C"
