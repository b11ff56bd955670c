// libFuzzer target for the operators behind the aclnn C interface:
// aclnnGridSampler2DBackwardGetWorkspaceSize + aclnnGridSampler2DBackward,
// the forward pair, and their 3-D twins (5-D tensors), on tensors decoded
// from the fuzz input.
//
// Input format (read front to back by gsfuzz::Bytes; missing bytes read as
// 0; fuzz/make_corpus.py writes seeds in it):
//   flags   bit0 forward, bit1 align_corners, bit2 raw values (any bit
//           pattern, no oracle), bit3 outputMask given, bit4 mask dx,
//           bit5 mask dgrid, bit6 mask of 3 values, bit7 per-call threads
//   mode, padding   one byte each: < 192 -> value % 3, else an odd value
//   dtype   one byte: the shared dtype (low 2 bits), see kDtypes; bit 2 set:
//           volumes (the 3-D operators, 5-D tensors)
//   N, C, Hin, Win, Hout, Wout   one byte each (decode_dim); volumes then
//           Din, Dout (so that 2-D inputs decode as they always did)
//   per tensor (backward: gradOutput, input, grid, inputGrad, gridGrad;
//   forward: input, grid, out): one control byte and the bytes it asks for
//   (decode_tensor), then phase two's byte (workspace, stream, reuse)
//   then values for every buffer, element by element (decode_value).
//
// Every buffer holds exactly the storage its aclTensor claims (malloc of that
// many bytes), so ASan reports any access outside a tensor's storage. Checked
// on every call: an error leaves every buffer byte-for-byte untouched and
// sets a message; planning writes nothing; a success writes only the
// elements of the wanted outputs' views; the executor is single-use; the
// results equal the C++ API's bit for bit and, with finite inputs, the float64
// reference's within rounding error.
//
// Environment: GS_FUZZ_NO_ORACLE=1 skips the value comparisons; GS_FUZZ_VERBOSE=1 prints
// how far each input got.
#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler2d.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_grid_sampler3d.h"
#include "aclnnop/aclnn_grid_sampler3d_backward.h"
#include "core/validate.hpp"
#include "fuzz_common.hpp"
#include "gridsampler/gridsampler.hpp"
#include "host/element_access.hpp"
#include "reference/reference.hpp"

namespace {

using gsfuzz::Bytes;
namespace gs = gridsampler;

constexpr int64_t kMaxStorageBytes = int64_t{1} << 16;    // per buffer
constexpr uint64_t kMaxWorkspaceBytes = uint64_t{64} << 20;
constexpr int64_t kMaxWork = int64_t{1} << 22;            // multiply-adds per call

bool env_flag(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}
bool no_oracle() {
  static const bool b = env_flag("GS_FUZZ_NO_ORACLE", "1");
  return b;
}
// GS_FUZZ_VERBOSE=1: one line per input saying how far the call went.
void trace(const char* stage, int status) {
  static const bool b = env_flag("GS_FUZZ_VERBOSE", "1");
  if (b) std::fprintf(stderr, "[aclnn_fuzzer] %s: %d %s\n", stage, status, status ? aclGetRecentErrMsg() : "");
}

// ---------------------------------------------------------------------------
// Decoding.

const int32_t kDtypes[4] = {ACL_FLOAT16, ACL_BF16, ACL_FLOAT, ACL_DOUBLE};

bool dtype_of(int32_t code, gs::DType* d) {
  switch (code) {
    case ACL_FLOAT16: *d = gs::DType::kFloat16; return true;
    case ACL_BF16: *d = gs::DType::kBFloat16; return true;
    case ACL_FLOAT: *d = gs::DType::kFloat32; return true;
    case ACL_DOUBLE: *d = gs::DType::kFloat64; return true;
    default: return false;
  }
}
int64_t item_size(int32_t code) {
  gs::DType d;
  return dtype_of(code, &d) ? static_cast<int64_t>(gs::dtype_size(d)) : 4;
}

// A dtype code: mostly valid ones, else anything an int can hold.
int32_t decode_dtype_code(Bytes& in) {
  const uint8_t b = in.u8();
  if (b < 128) return kDtypes[b % 4];
  static const int32_t kOdd[] = {ACL_INT32, ACL_INT8, ACL_UINT8, ACL_INT64, ACL_BOOL, ACL_COMPLEX64,
                                 ACL_DT_UNDEFINED, 5, 14, 15, 26, 28, 31, -32, 100, 0x7fffffff,
                                 -0x7fffffff - 1, 1000};
  return kOdd[b % (sizeof kOdd / sizeof kOdd[0])];
}
int32_t decode_format_code(Bytes& in) {
  const uint8_t b = in.u8();
  if (b < 192) return b % 3;
  static const int32_t kOdd[] = {-1, 3, -4, 29, 100, -100, 0x7fffffff};
  return kOdd[b % (sizeof kOdd / sizeof kOdd[0])];
}

// A dimension: small most of the time, else a hostile value.
int64_t decode_dim(Bytes& in) {
  const uint8_t b = in.u8();
  if (b < 224) return b % 7;
  static const int64_t kHuge[] = {
      -1, -2, 7, 16, 65537, int64_t{1} << 31, (int64_t{1} << 32) + 1, int64_t{1} << 40,
      (int64_t{1} << 40) + 1, int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min(), 3037000500 /* ~sqrt(2^63) */, 1000000,
      // 2^63 - 1 = 7^2 * 73 * 127 * 337 * 92737 * 649657: a pair of factors
      // below 2^40 whose product is INT64_MAX.
      int64_t{49} * 73 * 127 * 337, int64_t{92737} * 649657};
  return kHuge[b % (sizeof kHuge / sizeof kHuge[0])];
}

int64_t decode_stride(Bytes& in) {
  const int8_t b = in.i8();
  if (b != -128) return b;
  static const int64_t kHuge[] = {int64_t{1} << 31, -(int64_t{1} << 31), int64_t{1} << 40,
                                  std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min(), int64_t{1} << 62};
  return kHuge[in.u8() % 6];
}

// A grid value. `size` is the image's width, so that the values just inside
// and just outside the border after unnormalisation come up.
double decode_grid_value(uint8_t b, int64_t size) {
  if (b < 128) return (b - 64) / 32.0;  // [-2, 2) on a 1/32 lattice (ties included)
  const double inf = std::numeric_limits<double>::infinity();
  const double s = size > 0 && size < (int64_t{1} << 40) ? static_cast<double>(size) : 4.0;
  const double table[] = {
      std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(), inf,
      -inf, 1e30, -1e30, 3e38, -3e38, 1.7e308, -1.7e308, 4.9e-324, -4.9e-324, 1e-310, 1.4e-45,
      -0.0, 0.0, 1.0, -1.0, std::nextafter(1.0, 2.0), std::nextafter(1.0, 0.0),
      std::nextafter(-1.0, -2.0), std::nextafter(-1.0, 0.0), 1.0 + 0x1p-23, -1.0 - 0x1p-23,
      1.0 - 0x1p-24, -1.0 + 0x1p-24, 2147483648.0, -2147483648.0, 2147483647.0, 4294967296.0,
      0x1p53, 0x1p63, -0x1p63, 0x1p64, 1e19, -1e19, 0x1p48, 0x1p47 + 0.5, 4e9, -4e9, 1e10,
      0.5, -0.5, 1.5, -1.5, 1.0 / 3.0, 0x1p-24, -0x1p-24, 65504.0, 65520.0,
      // Border neighbourhoods: align_corners=false puts x = +-1 on the outer
      // edges (ix = -0.5 and size - 0.5), x = +-(1 + 1/size) half a pixel
      // further out (ix = -1 and size), x = +-(1 - 1/size) on the first and
      // last pixel centres.
      1.0 + 1.0 / s, -1.0 - 1.0 / s, 1.0 - 1.0 / s, -1.0 + 1.0 / s, 1.0 + 2.0 / s, -1.0 - 2.0 / s,
      1.0 + 0.5 / s, -1.0 - 0.5 / s, std::nextafter(1.0 + 1.0 / s, 0.0),
      std::nextafter(-1.0 - 1.0 / s, 0.0), std::nextafter(1.0 + 1.0 / s, 2.0),
      std::nextafter(-1.0 - 1.0 / s, -2.0),
      // ... and after a reflection or two.
      3.0, -3.0, 3.0 + 1.0 / s, -3.0 - 1.0 / s, 5.0 - 1.0 / s, 1e6 + 0.25};
  return table[(b - 128) % (sizeof table / sizeof table[0])];
}

// ---------------------------------------------------------------------------
// Buffers: exactly `bytes` bytes, optionally shifted inside a larger block
// whose extra bytes are poisoned, so ASan still reports the first byte
// outside.

struct Buffer {
  unsigned char* block = nullptr;
  unsigned char* data = nullptr;
  int64_t bytes = 0;
  int64_t shift = 0;
  bool grid_values = false;  // filled with grid values
  bool output = false;       // owned by an output (filled with a sentinel)
  int32_t dtype_code = ACL_FLOAT;
  std::vector<unsigned char> before;

  Buffer(int64_t n, int64_t sh) : bytes(n), shift(sh) {
    block = static_cast<unsigned char*>(std::malloc(static_cast<std::size_t>(n + sh)));
    if (block == nullptr) gsfuzz::fail("malloc");
    data = block + sh;
    if (sh > 0) ASAN_POISON_MEMORY_REGION(block, static_cast<std::size_t>(sh));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (shift > 0) ASAN_UNPOISON_MEMORY_REGION(block, static_cast<std::size_t>(shift));
    std::free(block);
  }
  void snapshot() { before.assign(data, data + bytes); }
  bool unchanged() const {
    return bytes == 0 || std::memcmp(before.data(), data, static_cast<std::size_t>(bytes)) == 0;
  }
};

// One tensor as handed to aclCreateTensor, and what the harness knows of it.
struct Spec {
  const char* name = "";
  bool output = false;
  bool grid_like = false;  // (N, H, W, 2): filled with grid values
  std::vector<int64_t> dims;
  bool null_strides = false;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::vector<int64_t> storage_dims;
  int32_t dtype_code = ACL_FLOAT;
  int32_t format_code = ACL_FORMAT_ND;
  int buffer = -1;  // -1: null data
  aclTensor* t = nullptr;
};

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

template <std::size_t Rank>
using View = gs::BasicTensorView<const void*, Rank>;
template <std::size_t Rank>
using MutableView = gs::BasicTensorView<void*, Rank>;

template <std::size_t Rank>
bool empty(const View<Rank>& v) {
  for (int64_t d : v.shape) {
    if (d == 0) return true;
  }
  return false;
}

// Calls every element offset (in elements, from v.data) of a view, in
// logical order, with its index.
template <std::size_t Rank, class F>
void for_each_offset(const View<Rank>& v, F&& f) {
  if (empty(v)) return;
  std::array<int64_t, Rank> i{};
  for (;;) {
    int64_t off = 0;
    for (std::size_t d = 0; d < Rank; ++d) off += i[d] * v.strides[d];
    f(off, i);
    std::size_t d = Rank;
    while (d-- > 0 && ++i[d] == v.shape[d]) i[d] = 0;
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

// Element offsets [lo, hi] a view of `Rank` dimensions reaches; false if it
// is empty or overflows.
template <std::size_t Rank>
bool reach(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t* lo, int64_t* hi) {
  *lo = *hi = 0;
  std::array<int64_t, Rank> shape, st;
  for (std::size_t d = 0; d < Rank; ++d) {
    if (dims[d] <= 0) return false;
    shape[d] = dims[d];
    st[d] = strides[d];
  }
  return gs::detail::stride_reach(shape, st, 0, lo, hi);
}

bool row_major(const std::vector<int64_t>& dims, std::vector<int64_t>* strides) {
  strides->assign(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) {
    if (!mul_ok((*strides)[i], dims[i], &(*strides)[i - 1])) return false;
  }
  return true;
}

Spec make_spec(const char* name, bool output, bool grid_like) {
  Spec s;
  s.name = name;
  s.output = output;
  s.grid_like = grid_like;
  return s;
}

class Case {
 public:
  explicit Case(Bytes& in) : in_(in) {}
  ~Case() {
    for (Spec& s : specs_) aclDestroyTensor(s.t);
  }
  void run();

 private:
  void decode_header();
  void decode_tensor(Spec& s, std::vector<int64_t> logical);
  void fill_values();
  void snapshot() {
    for (auto& b : buffers_) b->snapshot();
  }
  void expect_unchanged(const char* when) {
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      GS_FUZZ_CHECK(buffers_[i]->unchanged(), "%s: buffer %zu changed", when, i);
    }
  }
  void expect_error(aclnnStatus s, const char* when) {
    GS_FUZZ_CHECK(s == ACLNN_ERR_PARAM_NULLPTR || s == ACLNN_ERR_PARAM_INVALID || s == ACLNN_ERR_INNER,
                  "%s: unexpected status %d", when, s);
    GS_FUZZ_CHECK(aclGetRecentErrMsg()[0] != '\0', "%s: status %d without a message", when, s);
    expect_unchanged(when);
  }
  template <std::size_t Rank>
  void check_success_writes();
  template <std::size_t Rank>
  void compare_with_cpp_api_and_reference();
  template <std::size_t Rank>
  bool view_of(const Spec& s, View<Rank>* v) const;
  std::size_t rank() const { return volume_ ? 5 : 4; }
  double max_abs_of(const Spec& s, gs::DType d) const;
  int64_t work_estimate() const;

  Bytes& in_;
  bool forward_ = false, align_ = false, raw_ = false, threads_flag_ = false;
  bool mask_given_ = false, mask_dx_ = true, mask_dgrid_ = true, mask3_ = false;
  int64_t mode_ = 0, padding_ = 0;
  int32_t dtype_code_ = ACL_FLOAT;
  bool volume_ = false;
  int64_t n_ = 0, c_ = 0, din_ = 1, hin_ = 0, win_ = 0, dout_ = 1, hout_ = 0, wout_ = 0;
  std::vector<Spec> specs_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

void Case::decode_header() {
  const uint8_t flags = in_.u8();
  forward_ = flags & 1;
  align_ = flags & 2;
  raw_ = flags & 4;
  mask_given_ = flags & 8;
  mask_dx_ = mask_given_ ? (flags & 16) != 0 : true;
  mask_dgrid_ = mask_given_ ? (flags & 32) != 0 : true;
  mask3_ = flags & 64;
  threads_flag_ = flags & 128;
  const uint8_t m = in_.u8(), p = in_.u8();
  static const int64_t kOdd[] = {3, -1, 7, std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(), 256};
  mode_ = m < 192 ? m % 3 : kOdd[m % 6];
  padding_ = p < 192 ? p % 3 : kOdd[p % 6];
  const uint8_t dtype = in_.u8();
  dtype_code_ = kDtypes[dtype % 4];
  volume_ = dtype & 4;
  n_ = decode_dim(in_);
  c_ = decode_dim(in_);
  hin_ = decode_dim(in_);
  win_ = decode_dim(in_);
  hout_ = decode_dim(in_);
  wout_ = decode_dim(in_);
  if (volume_) {
    din_ = decode_dim(in_);
    dout_ = decode_dim(in_);
  }
}

// Control byte: bits 0-1 layout (0 row-major strides given, 1 a permutation,
// 2 explicit strides, 3 NULL strides); bit 2 change one dim; bit 3 change the
// rank; bit 4 own dtype; bit 5 own format; bit 6 null data or share another
// tensor's buffer; bit 7 move the offset and the storage size.
void Case::decode_tensor(Spec& s, std::vector<int64_t> dims) {
  const uint8_t ctl = in_.u8();
  s.dtype_code = dtype_code_;
  if (ctl & 4) {
    const uint8_t which = in_.u8();
    dims[which % dims.size()] = decode_dim(in_);
  }
  if (ctl & 8) {
    const int rank = in_.u8() % 6;
    dims.resize(static_cast<std::size_t>(rank), 2);
  }
  if (ctl & 16) s.dtype_code = decode_dtype_code(in_);
  if (ctl & 32) s.format_code = decode_format_code(in_);
  s.dims = dims;
  const std::size_t rank = dims.size();
  switch (ctl & 3) {
    case 0:
      if (!row_major(dims, &s.strides)) s.strides.assign(rank, 1);
      break;
    case 1: {  // a permutation of the row-major layout (channels-last, transposes)
      std::vector<int> order(rank);
      for (std::size_t i = 0; i < rank; ++i) order[i] = static_cast<int>(i);
      const uint8_t perm = in_.u8();
      for (std::size_t i = rank; i > 1; --i) std::swap(order[i - 1], order[perm % i]);
      std::vector<int64_t> permuted(rank), st;
      for (std::size_t i = 0; i < rank; ++i) permuted[i] = dims[static_cast<std::size_t>(order[i])];
      if (!row_major(permuted, &st)) st.assign(rank, 1);
      s.strides.assign(rank, 1);
      for (std::size_t i = 0; i < rank; ++i) s.strides[static_cast<std::size_t>(order[i])] = st[i];
      break;
    }
    case 2:
      s.strides.resize(rank);
      for (auto& st : s.strides) st = decode_stride(in_);
      break;
    case 3:
      s.null_strides = true;
      // What aclCreateTensor will compute (a NULL stride means row-major);
      // if that overflows, the library must refuse the tensor cleanly.
      if (!row_major(dims, &s.strides)) {
        s.strides.assign(rank, 0);
      }
      break;
  }
  int share = -1;
  bool null_data = false;
  if (ctl & 64) {
    const uint8_t b = in_.u8();
    if (b < 64) {
      null_data = true;
    } else if (!buffers_.empty()) {
      share = b % static_cast<int>(buffers_.size());
    }
  }
  int64_t off_delta = 0, storage_delta = 0, shift = 0;
  bool storage_rank2 = false;
  if (ctl & 128) {
    off_delta = in_.i8();
    storage_delta = in_.i8();
    const uint8_t b = in_.u8();
    storage_rank2 = b & 1;
    shift = (b >> 1) & 7;  // elements
  }
  const int64_t es = item_size(s.dtype_code);
  int64_t lo = 0, hi = -1;
  const bool nonempty = rank == this->rank() && (volume_ ? reach<5>(dims, s.strides, &lo, &hi)
                                                         : reach<4>(dims, s.strides, &lo, &hi));
  // The natural storage: exactly what the view reaches (capped: a view
  // larger than the cap is then refused as outside its storage).
  const int64_t cap = kMaxStorageBytes / es;
  int64_t offset = nonempty && lo != std::numeric_limits<int64_t>::min() ? -lo : 0;
  int64_t storage = 0, span = 0;
  if (nonempty) storage = __builtin_sub_overflow(hi, lo, &span) || span >= cap ? cap : span + 1;
  if (__builtin_add_overflow(offset, off_delta, &offset)) offset = std::numeric_limits<int64_t>::max();
  storage = std::clamp<int64_t>(storage + storage_delta, 0, cap);
  if (share >= 0) {
    Buffer& b = *buffers_[static_cast<std::size_t>(share)];
    storage = b.bytes / es;
    s.buffer = share;
  } else if (!null_data) {
    auto buf = std::make_unique<Buffer>(storage * es, shift * es);
    buf->grid_values = s.grid_like;
    buf->output = s.output;
    buf->dtype_code = s.dtype_code;
    buffers_.push_back(std::move(buf));
    s.buffer = static_cast<int>(buffers_.size()) - 1;
  }
  s.offset = offset;
  if (storage_rank2 && storage % 2 == 0) {
    s.storage_dims = {storage / 2, 2};
  } else {
    s.storage_dims = {storage};
  }
  void* data = s.buffer >= 0 ? buffers_[static_cast<std::size_t>(s.buffer)]->data : nullptr;
  s.t = aclCreateTensor(s.dims.data(), s.dims.size(), static_cast<aclDataType>(s.dtype_code),
                        s.null_strides ? nullptr : s.strides.data(), s.offset,
                        static_cast<aclFormat>(s.format_code), s.storage_dims.data(),
                        s.storage_dims.size(), data);
  if (s.t == nullptr) GS_FUZZ_CHECK(aclGetRecentErrMsg()[0] != '\0', "aclCreateTensor: no message");
}

void Case::fill_values() {
  for (auto& bp : buffers_) {
    Buffer& b = *bp;
    gs::DType d;
    if (b.output || raw_ || !dtype_of(b.dtype_code, &d)) {
      // Outputs hold a sentinel; raw mode any bit pattern.
      for (int64_t i = 0; i < b.bytes; ++i) {
        b.data[i] = b.output ? static_cast<unsigned char>(0xA5 ^ (i & 3)) : in_.u8();
      }
      continue;
    }
    const int64_t es = static_cast<int64_t>(gs::dtype_size(d));
    for (int64_t i = 0; i + es <= b.bytes; i += es) {
      const uint8_t v = in_.remaining() > 0 ? in_.u8() : static_cast<uint8_t>((i * 37) % 97);
      const double x = b.grid_values ? decode_grid_value(v, win_) : static_cast<int8_t>(v) / 16.0;
      gs::host::store_element(b.data + i, d, x);
    }
  }
}

template <std::size_t Rank>
bool Case::view_of(const Spec& s, View<Rank>* v) const {
  gs::DType d;
  if (s.dims.size() != Rank || !dtype_of(s.dtype_code, &d)) return false;
  v->dtype = d;
  bool empty = false;
  for (std::size_t i = 0; i < Rank; ++i) {
    v->shape[i] = s.dims[static_cast<std::size_t>(i)];
    v->strides[i] = s.strides[static_cast<std::size_t>(i)];
    empty = empty || v->shape[i] == 0;
  }
  if (s.buffer < 0) {
    v->data = nullptr;
  } else {
    unsigned char* base = buffers_[static_cast<std::size_t>(s.buffer)]->data;
    // An empty view's data pointer is the storage's (the offset is unused).
    v->data = empty ? base : base + s.offset * static_cast<int64_t>(gs::dtype_size(d));
  }
  return true;
}

// Multiply-adds of a call (saturating): the kernels' work, and the reference's.
int64_t Case::work_estimate() const {
  // From the tensors as planned (a dimension changed on one tensor and its
  // partner may differ from the header's).
  const Spec& input = specs_[forward_ ? 0 : 1];
  const Spec& grid = specs_[forward_ ? 1 : 2];
  const std::size_t r = rank();
  if (input.dims.size() != r || grid.dims.size() != r) return 0;
  // Images as volumes of depth 1.
  const int64_t n = input.dims[0], c = input.dims[1], din = volume_ ? input.dims[2] : 1;
  const int64_t hin = input.dims[r - 2], win = input.dims[r - 1];
  const int64_t dout = volume_ ? grid.dims[1] : 1, hout = grid.dims[r - 3], wout = grid.dims[r - 2];
  const int64_t taps = (mode_ == 2 ? 16 : 4) * (volume_ ? (mode_ == 2 ? 4 : 2) : 1);
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  auto product = [&](std::initializer_list<int64_t> fs) {
    int64_t p = 1;
    for (int64_t f : fs) {
      if (f <= 0) return int64_t{0};
    }
    for (int64_t f : fs) {
      if (!mul_ok(p, f, &p)) return kMax;
    }
    return p;
  };
  int64_t w = product({n, c, dout, hout, wout, taps});
  // The backward also sets up a plane of accumulators per (n, channel) task,
  // and writes dgrid even when there are no channels (zeros).
  if (!forward_) {
    const int64_t planes = product({n, c, din, hin, win});
    const int64_t points = product({n, dout, hout, wout});
    if (__builtin_add_overflow(w, planes, &w) || __builtin_add_overflow(w, points, &w)) return kMax;
  }
  return w;
}

// After a success: bytes outside the wanted outputs' views are unchanged.
template <std::size_t Rank>
void Case::check_success_writes() {
  std::vector<std::vector<bool>> writable(buffers_.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i) writable[i].assign(static_cast<std::size_t>(buffers_[i]->bytes), false);
  for (std::size_t k = 0; k < specs_.size(); ++k) {
    const Spec& s = specs_[k];
    if (!s.output || s.buffer < 0) continue;
    if (!forward_ && ((k == 3 && !mask_dx_) || (k == 4 && !mask_dgrid_))) continue;
    View<Rank> v;
    if (!view_of(s, &v) || empty(v)) continue;
    const int64_t es = static_cast<int64_t>(gs::dtype_size(v.dtype));
    const auto* base = buffers_[static_cast<std::size_t>(s.buffer)]->data;
    for_each_offset(v, [&](int64_t element, const auto&) {
      const int64_t off = (static_cast<const unsigned char*>(v.data) - base) + element * es;
      GS_FUZZ_CHECK(off >= 0 && off + es <= buffers_[static_cast<std::size_t>(s.buffer)]->bytes,
                    "%s: accepted a view outside its storage", s.name);
      for (int64_t e = 0; e < es; ++e) writable[static_cast<std::size_t>(s.buffer)][static_cast<std::size_t>(off + e)] = true;
    });
  }
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = *buffers_[i];
    for (int64_t j = 0; j < b.bytes; ++j) {
      if (!writable[i][static_cast<std::size_t>(j)]) {
        GS_FUZZ_CHECK(b.data[j] == b.before[static_cast<std::size_t>(j)],
                      "buffer %zu byte %lld written outside every wanted output", i,
                      static_cast<long long>(j));
      }
    }
  }
}

// Machine epsilon of a dtype's storage and of its compute type.
double eps_storage(gs::DType d) {
  switch (d) {
    case gs::DType::kFloat16: return 0x1p-11;
    case gs::DType::kBFloat16: return 0x1p-8;
    case gs::DType::kFloat32: return 0x1p-24;
    case gs::DType::kFloat64: return 0x1p-53;
  }
  return 1;
}
double tiny_storage(gs::DType d) {
  switch (d) {
    case gs::DType::kFloat16: return 0x1p-24;
    case gs::DType::kBFloat16: return 0x1p-133;
    case gs::DType::kFloat32: return 0x1p-149;
    case gs::DType::kFloat64: return 0x1p-1074;
  }
  return 1;
}

// Largest |value| in a buffer (an upper bound over any view of it).
double max_abs(const Buffer& b, gs::DType d) {
  const int64_t es = static_cast<int64_t>(gs::dtype_size(d));
  double m = 0;
  for (int64_t i = 0; i + es <= b.bytes; i += es) m = std::max(m, std::fabs(gs::host::load_element(b.data + i, d)));
  return m;
}

double Case::max_abs_of(const Spec& s, gs::DType d) const {
  return s.buffer < 0 ? 0.0 : max_abs(*buffers_[static_cast<std::size_t>(s.buffer)], d);
}

// Copies of the outputs' buffers (same bytes as before the call), for the C++
// API and the reference to write into.
template <std::size_t Rank>
struct OutputCopy {
  std::vector<unsigned char> bytes;
  MutableView<Rank> view;
};

// "[a,b,c,d]" or "[a,b,c,d,e]".
template <std::size_t Rank>
std::string index_string(const std::array<int64_t, Rank>& i) {
  std::string out = "[";
  for (std::size_t d = 0; d < Rank; ++d) out.append(d ? "," : "").append(std::to_string(i[d]));
  return out + "]";
}

template <std::size_t Rank>
void compare_views(const char* what, const View<Rank>& got, const View<Rank>& want, double tol_abs, double eps,
                   bool exact) {
  const int64_t es = static_cast<int64_t>(gs::dtype_size(got.dtype));
  for_each_offset(got, [&](int64_t, const std::array<int64_t, Rank>& i) {
    auto at = [&](const View<Rank>& v) {
      int64_t off = 0;
      for (std::size_t d = 0; d < Rank; ++d) off += i[d] * v.strides[d];
      return static_cast<const unsigned char*>(v.data) + off * es;
    };
    if (exact) {
      GS_FUZZ_CHECK(std::memcmp(at(got), at(want), static_cast<std::size_t>(es)) == 0,
                    "%s%s: aclnn %.17g, C++ API %.17g (bits differ)", what, index_string(i).c_str(),
                    gs::host::load_element(at(got), got.dtype), gs::host::load_element(at(want), want.dtype));
      return;
    }
    const double g = gs::host::load_element(at(got), got.dtype), w = gs::host::load_element(at(want), want.dtype);
    if (g == w) return;  // infinities of an overflowing 16-bit result included
    const double tol = tol_abs + 2 * eps * std::fabs(w);
    GS_FUZZ_CHECK(std::isfinite(g) && std::fabs(g - w) <= tol, "%s%s: kernels %.17g, reference %.17g, tolerance %.3g",
                  what, index_string(i).c_str(), g, w, tol);
  });
}

// The C++ API's and the reference's calls of each rank.
gs::Status api_forward(const View<4>& in, const View<4>& grid, const MutableView<4>& out, const gs::Options& o) {
  return gs::grid_sampler_2d(in, grid, out, o);
}
gs::Status api_forward(const View<5>& in, const View<5>& grid, const MutableView<5>& out, const gs::Options& o) {
  return gs::grid_sampler_3d(in, grid, out, o);
}
gs::Status ref_forward(const View<4>& in, const View<4>& grid, const MutableView<4>& out, const gs::Options& o) {
  return gs::reference::grid_sampler_2d(in, grid, out, o);
}
gs::Status ref_forward(const View<5>& in, const View<5>& grid, const MutableView<5>& out, const gs::Options& o) {
  return gs::reference::grid_sampler_3d(in, grid, out, o);
}
gs::Status api_backward(const View<4>& g, const View<4>& in, const View<4>& grid, const MutableView<4>& dx,
                        const MutableView<4>& dgrid, const gs::Options& o, gs::OutputMask m) {
  return gs::grid_sampler_2d_backward(g, in, grid, dx, dgrid, o, m);
}
gs::Status api_backward(const View<5>& g, const View<5>& in, const View<5>& grid, const MutableView<5>& dx,
                        const MutableView<5>& dgrid, const gs::Options& o, gs::OutputMask m) {
  return gs::grid_sampler_3d_backward(g, in, grid, dx, dgrid, o, m);
}
gs::Status ref_backward(const View<4>& g, const View<4>& in, const View<4>& grid, const MutableView<4>& dx,
                        const MutableView<4>& dgrid, const gs::Options& o, gs::OutputMask m) {
  return gs::reference::grid_sampler_2d_backward(g, in, grid, dx, dgrid, o, m);
}
gs::Status ref_backward(const View<5>& g, const View<5>& in, const View<5>& grid, const MutableView<5>& dx,
                        const MutableView<5>& dgrid, const gs::Options& o, gs::OutputMask m) {
  return gs::reference::grid_sampler_3d_backward(g, in, grid, dx, dgrid, o, m);
}

template <std::size_t Rank>
void Case::compare_with_cpp_api_and_reference() {
  gs::Options opt;
  opt.interpolation = static_cast<gs::Interpolation>(mode_);
  opt.padding = static_cast<gs::Padding>(padding_);
  opt.align_corners = align_;
  opt.num_threads = threads_flag_ ? 1 + static_cast<int>(n_ % 3) : 0;
  const gs::OutputMask mask{mask_dx_, mask_dgrid_};
  const std::size_t first_out = forward_ ? 2 : 3;
  std::vector<View<Rank>> views(specs_.size());
  for (std::size_t k = 0; k < specs_.size(); ++k) {
    if (!view_of(specs_[k], &views[k])) {
      // Only a masked-off output may lack a view.
      GS_FUZZ_CHECK(k >= first_out, "%s: accepted without a view", specs_[k].name);
      views[k] = {};
    }
  }
  // Outputs for the C++ API and the reference: copies of their buffers as
  // they were before the call, at the same offsets.
  auto copy_of = [&](std::size_t k) {
    OutputCopy<Rank> o;
    const Spec& s = specs_[k];
    o.view = {nullptr, views[k].dtype, views[k].shape, views[k].strides};
    if (s.buffer < 0 || views[k].data == nullptr) return o;
    const Buffer& b = *buffers_[static_cast<std::size_t>(s.buffer)];
    o.bytes = b.before;
    o.bytes.resize(o.bytes.size() + 8);
    o.view = {o.bytes.data() + (static_cast<const unsigned char*>(views[k].data) - b.data),
              views[k].dtype, views[k].shape, views[k].strides};
    return o;
  };
  const gs::DType dt = views[0].dtype;
  const double eps_t = dt == gs::DType::kFloat64 ? 0x1p-53 : 0x1p-24;
  const double eps_s = eps_storage(dt);
  const double tiny = 4 * tiny_storage(dt);
  const int64_t taps = (mode_ == 2 ? 16 : mode_ == 1 ? 1 : 4) * (volume_ ? (mode_ == 2 ? 4 : mode_ == 1 ? 1 : 2) : 1);

  if (forward_) {
    OutputCopy<Rank> api = copy_of(2), ref = copy_of(2);
    const gs::Status s = api_forward(views[0], views[1], api.view, opt);
    GS_FUZZ_CHECK(s.ok(), "aclnn accepted, C++ API refused: %s", s.message().c_str());
    compare_views<Rank>("forward", views[2], api.view, 0, 0, true);
    if (raw_ || no_oracle()) return;
    const gs::Status r = ref_forward(views[0], views[1], ref.view, opt);
    GS_FUZZ_CHECK(r.ok(), "aclnn accepted, reference refused: %s", r.message().c_str());
    const double maxv = max_abs_of(specs_[0], dt);
    const double scale = 1.4 * maxv;
    compare_views<Rank>("forward", views[2], ref.view, (taps + 4) * eps_t * scale * 4 + tiny, eps_s, false);
    return;
  }
  OutputCopy<Rank> api_dx = copy_of(3), api_dg = copy_of(4), ref_dx = copy_of(3), ref_dg = copy_of(4);
  const gs::Status s = api_backward(views[0], views[1], views[2], api_dx.view, api_dg.view, opt, mask);
  GS_FUZZ_CHECK(s.ok(), "aclnn accepted, C++ API refused: %s", s.message().c_str());
  if (mask_dx_) compare_views<Rank>("dx", views[3], api_dx.view, 0, 0, true);
  if (mask_dgrid_) compare_views<Rank>("dgrid", views[4], api_dg.view, 0, 0, true);
  if (raw_ || no_oracle()) return;
  const gs::Status r = ref_backward(views[0], views[1], views[2], ref_dx.view, ref_dg.view, opt, mask);
  GS_FUZZ_CHECK(r.ok(), "aclnn accepted, reference refused: %s", r.message().c_str());
  const double maxg = max_abs_of(specs_[0], dt);
  const double maxv = max_abs_of(specs_[1], dt);
  const double pixels = static_cast<double>(dout_) * static_cast<double>(hout_) * static_cast<double>(wout_);
  if (mask_dx_) {
    // Each dx element sums at most pixels * taps terms of total size
    // <= 1.4 * pixels * max|grad|.
    const double terms = pixels * static_cast<double>(taps) + 4;
    compare_views<Rank>("dx", views[3], ref_dx.view, terms * eps_t * 1.4 * pixels * maxg * 2 + tiny, eps_s, false);
  }
  if (mask_dgrid_) {
    // C * taps terms, each <= mult * 4 * max|input| * max|grad|.
    const double mult = static_cast<double>(std::max({din_, hin_, win_})) / 2 + 1;
    const double terms = static_cast<double>(c_) * static_cast<double>(taps) + 8;
    const double scale = mult * static_cast<double>(c_) * 4 * maxv * maxg;
    compare_views<Rank>("dgrid", views[4], ref_dg.view, terms * eps_t * scale * 4 + tiny, eps_s, false);
  }
}

void Case::run() {
  decode_header();
  const std::vector<int64_t> image_in = volume_ ? std::vector<int64_t>{n_, c_, din_, hin_, win_}
                                                : std::vector<int64_t>{n_, c_, hin_, win_};
  const std::vector<int64_t> image_out = volume_ ? std::vector<int64_t>{n_, c_, dout_, hout_, wout_}
                                                 : std::vector<int64_t>{n_, c_, hout_, wout_};
  const std::vector<int64_t> grid = volume_ ? std::vector<int64_t>{n_, dout_, hout_, wout_, 3}
                                            : std::vector<int64_t>{n_, hout_, wout_, 2};
  if (forward_) {
    specs_.resize(3);
    specs_[0] = make_spec("input", false, false);
    specs_[1] = make_spec("grid", false, true);
    specs_[2] = make_spec("out", true, false);
    decode_tensor(specs_[0], image_in);
    decode_tensor(specs_[1], grid);
    decode_tensor(specs_[2], image_out);
  } else {
    specs_.resize(5);
    specs_[0] = make_spec("gradOutput", false, false);
    specs_[1] = make_spec("input", false, false);
    specs_[2] = make_spec("grid", false, true);
    specs_[3] = make_spec("inputGrad", true, false);
    specs_[4] = make_spec("gridGrad", true, true);
    decode_tensor(specs_[0], image_out);
    decode_tensor(specs_[1], image_in);
    decode_tensor(specs_[2], grid);
    decode_tensor(specs_[3], image_in);
    decode_tensor(specs_[4], grid);
  }
  // Phase two: bits 0-1 workspace (exact, NULL, one byte short, shifted by 4
  // bytes), bits 2-3 stream (NULL, created, junk), bit 4 run the executor a
  // second time, bit 5 destroy a tensor between the phases, bit 6 hand the
  // executor to the other rank's operator (which must refuse it).
  const uint8_t phase2 = in_.u8();
  using PlanForward = aclnnStatus (*)(const aclTensor*, const aclTensor*, int64_t, int64_t, bool, aclTensor*,
                                      uint64_t*, aclOpExecutor**);
  using PlanBackward = aclnnStatus (*)(const aclTensor*, const aclTensor*, const aclTensor*, int64_t, int64_t, bool,
                                       const aclBoolArray*, aclTensor*, aclTensor*, uint64_t*, aclOpExecutor**);
  using Execute = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);
  const PlanForward plan_forward = volume_ ? aclnnGridSampler3DGetWorkspaceSize : aclnnGridSampler2DGetWorkspaceSize;
  const PlanBackward plan_backward =
      volume_ ? aclnnGridSampler3DBackwardGetWorkspaceSize : aclnnGridSampler2DBackwardGetWorkspaceSize;
  const bool other_rank = phase2 & 64;
  const Execute run_forward = volume_ != other_rank ? aclnnGridSampler3D : aclnnGridSampler2D;
  const Execute run_backward = volume_ != other_rank ? aclnnGridSampler3DBackward : aclnnGridSampler2DBackward;
  const Execute rerun = forward_ ? (volume_ ? aclnnGridSampler3D : aclnnGridSampler2D)
                                 : (volume_ ? aclnnGridSampler3DBackward : aclnnGridSampler2DBackward);
  fill_values();
  snapshot();

  uint64_t ws = 0xdeadbeef;
  aclOpExecutor* exec = nullptr;
  aclnnStatus st;
  if (forward_) {
    st = plan_forward(specs_[0].t, specs_[1].t, mode_, padding_, align_,
                                            specs_[2].t, &ws, &exec);
  } else {
    aclBoolArray* mask = nullptr;
    if (mask_given_) {
      const bool m[3] = {mask_dx_, mask_dgrid_, true};
      mask = aclCreateBoolArray(m, mask3_ ? 3 : 2);
    }
    st = plan_backward(specs_[0].t, specs_[1].t, specs_[2].t, mode_,
                                                    padding_, align_, mask, specs_[3].t, specs_[4].t,
                                                    &ws, &exec);
    aclDestroyBoolArray(mask);
  }
  trace(forward_ ? "forward planning" : "backward planning", st);
  if (st != ACLNN_SUCCESS) {
    expect_error(st, "planning");
    return;
  }
  GS_FUZZ_CHECK(exec != nullptr, "planning succeeded without an executor");
  expect_unchanged("planning (nothing may be written before phase two)");

  // Validity as the harness sees it; a plan for anything else is a bug.
  GS_FUZZ_CHECK(mode_ >= 0 && mode_ <= 2 && padding_ >= 0 && padding_ <= 2, "accepted mode %lld padding %lld",
                (long long)mode_, (long long)padding_);
  GS_FUZZ_CHECK(forward_ || !(mask_given_ && mask3_), "accepted a mask of 3 values");

  aclrtStream stream = nullptr, created = nullptr;
  const int stream_kind = (phase2 >> 2) & 3;
  int junk_stream = 0;
  if (stream_kind == 1) {
    GS_FUZZ_CHECK(aclrtCreateStream(&created) == ACL_SUCCESS, "aclrtCreateStream");
    stream = created;
  } else if (stream_kind == 2) {
    stream = &junk_stream;
  }
  const bool too_big = ws > kMaxWorkspaceBytes || work_estimate() > kMaxWork;
  // Too much work for a fuzzer: consume the executor through an error path.
  if (too_big && stream_kind != 2) stream = &junk_stream;
  std::unique_ptr<Buffer> wbuf;
  void* wptr = nullptr;
  uint64_t wsize = ws;
  const int ws_kind = phase2 & 3;
  if (ws > 0 && ws <= kMaxWorkspaceBytes && ws_kind != 1) {
    const int64_t shift = ws_kind == 3 ? 4 : 0;
    wbuf = std::make_unique<Buffer>(static_cast<int64_t>(ws), shift);
    std::memset(wbuf->data, 0x5a, ws);
    wptr = wbuf->data;
    if (ws_kind == 2) wsize = ws - 1;
  }
  if (phase2 & 32) {
    // Tensors may be destroyed once planned (the plan keeps what it needs).
    aclDestroyTensor(specs_[0].t);
    specs_[0].t = nullptr;
  }
  st = forward_ ? run_forward(wptr, wsize, exec, stream) : run_backward(wptr, wsize, exec, stream);
  const bool should_fail = other_rank || stream == &junk_stream || (ws > 0 && (wptr == nullptr || wsize < ws));
  if (created != nullptr) GS_FUZZ_CHECK(aclrtDestroyStream(created) == ACL_SUCCESS, "aclrtDestroyStream");
  trace("execution", st);
  if (st != ACLNN_SUCCESS) {
    GS_FUZZ_CHECK(should_fail, "execution failed on a valid call: %d %s", st, aclGetRecentErrMsg());
    expect_error(st, "execution");
  } else {
    GS_FUZZ_CHECK(!should_fail, "execution succeeded with a bad workspace or stream, or by the other rank's operator");
    if (volume_) {
      check_success_writes<5>();
    } else {
      check_success_writes<4>();
    }
  }
  // The executor is spent either way; a second run is refused untouched.
  if (phase2 & 16) {
    snapshot();
    const aclnnStatus again = rerun(wptr, wsize, exec, nullptr);
    GS_FUZZ_CHECK(again == ACLNN_ERR_PARAM_INVALID, "executor reused: status %d", again);
    expect_unchanged("reused executor");
  }
  if (st == ACLNN_SUCCESS) {
    if (volume_) {
      compare_with_cpp_api_and_reference<5>();
    } else {
      compare_with_cpp_api_and_reference<4>();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  Case c(in);
  c.run();
  return 0;
}
