// The objects behind the opaque aclnn handles, the registries that tell a
// live handle from a freed or foreign one, and the thread's last error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "acl/acl.h"
#include "core/validate.hpp"
#include "cpu/plan.hpp"
#include "gridsampler/gridsampler.hpp"

struct aclTensor {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  std::vector<int64_t> storage_dims;
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_UNDEFINED;
  int64_t offset = 0;
  void* data = nullptr;
};

struct aclBoolArray {
  std::vector<bool> values;
};

namespace gridsampler::aclnn {
// The tensors of one call as views of the operator's rank (4: images, 5:
// volumes); those the call does not use stay empty.
template <std::size_t Rank>
struct Operands {
  BasicTensorView<const void*, Rank> grad, input, grid;
  BasicTensorView<void*, Rank> out, dx, dgrid;
};
}  // namespace gridsampler::aclnn

// A plan of either rank: the problem and the kernels' plan are the same types
// for images and volumes (Problem::volume tells them apart); only the views
// differ, and `rank` says which set holds them.
struct aclOpExecutor {
  enum class Kind { kForward, kBackward } kind = Kind::kForward;
  int rank = 4;
  gridsampler::detail::Problem problem;
  gridsampler::cpu::ForwardPlan forward;
  gridsampler::cpu::BackwardPlan backward;
  gridsampler::aclnn::Operands<4> image;
  gridsampler::aclnn::Operands<5> volume;
  uint64_t workspace_bytes = 0;
};

namespace gridsampler::aclnn {

// A set of live handles of one kind. Every handle the library gives out is
// registered; every handle it is given is looked up before use.
template <class T>
class Registry {
 public:
  void add(const T* p) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(p);
  }
  bool contains(const T* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(p) != 0;
  }
  // Removes p; false if it was not live.
  bool remove(const T* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(p) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<const T*> live_;
};

Registry<aclTensor>& tensors();
Registry<aclBoolArray>& bool_arrays();
Registry<aclOpExecutor>& executors();
Registry<void>& streams();

// Records `message` as the calling thread's last error and returns `code`.
int fail(int code, const std::string& message);
void clear_error();

// A Status from the core as an aclnn status (message recorded).
aclnnStatus to_aclnn(const Status& status);

}  // namespace gridsampler::aclnn
