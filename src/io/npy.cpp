// Strict .npy reader and writer; see npy.hpp.
//
// Format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor
// version byte, the header length (uint16 little-endian for 1.0, uint32 for
// 2.0 and 3.0), then the header: a Python dict literal with exactly the keys
// 'descr', 'fortran_order' and 'shape', padded with spaces and ended by '\n'.
// The array data follow, in C order.
//
// The reader trusts nothing in the file: every length is checked against the
// real file size, and the shape's byte count is computed with overflow checks
// and must equal the bytes actually present before anything is allocated for
// the data.
#include "io/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <utility>

namespace gridsampler::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr int kMaxDims = 8;
// numpy itself refuses headers over 10000 bytes by default
// (max_header_size); a valid header for at most 8 dimensions is far shorter.
constexpr uint64_t kMaxHeaderLen = 1u << 16;
constexpr int kMaxNesting = 32;

Status invalid(const std::string& path, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, path + ": " + what);
}

Status io_error(StatusCode code, const std::string& path, const std::string& what, int err) {
  return Status(code, path + ": " + what + ": " + std::strerror(err));
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports the result (errors of delayed writes show here).
  int close() {
    const int fd = std::exchange(fd_, -1);
    return fd >= 0 ? ::close(fd) : 0;
  }

 private:
  int fd_;
};

// Reads exactly `n` bytes unless the file ends first; returns the number of
// bytes read, or -1 with errno set.
int64_t read_fully(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  std::size_t done = 0;
  while (done < n) {
    const std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
    const ssize_t r = ::read(fd, p + done, chunk);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  return static_cast<int64_t>(done);
}

bool write_fully(int fd, const void* buf, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(buf);
  std::size_t done = 0;
  while (done < n) {
    const std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
    const ssize_t r = ::write(fd, p + done, chunk);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) {
      errno = EIO;
      return false;
    }
    done += static_cast<std::size_t>(r);
  }
  return true;
}

// ---------------------------------------------------------------------------
// A parser for the subset of Python literals a .npy header may hold: a dict
// with string keys whose values are strings, True/False/None, integers,
// tuples and lists (lists appear in structured dtypes, which are rejected
// after parsing, with a message saying so).

struct Value {
  enum class Kind { kString, kBool, kNone, kInt, kTuple, kList };
  Kind kind = Kind::kNone;
  std::string str;        // kString
  bool boolean = false;   // kBool
  bool negative = false;  // kInt: sign
  bool overflow = false;  // kInt: magnitude above int64 range
  int64_t magnitude = 0;  // kInt: absolute value, when !overflow
  std::vector<Value> items;  // kTuple, kList
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, bool allow_long_suffix)
      : s_(text), allow_long_suffix_(allow_long_suffix) {}

  // Parses the whole header as one dict; on failure returns false and sets
  // error().
  bool parse_dict(std::vector<std::pair<std::string, Value>>* out) {
    skip_space();
    if (!consume('{')) return fail("header is not a dict literal");
    skip_space();
    while (!consume('}')) {
      Value key;
      if (!parse_string(&key)) return fail_if_unset("expected a quoted key in the header dict");
      skip_space();
      if (!consume(':')) return fail("expected ':' after key '" + key.str + "'");
      Value value;
      if (!parse_value(&value, 0)) return false;
      for (const auto& kv : *out) {
        if (kv.first == key.str) return fail("key '" + key.str + "' appears twice");
      }
      out->emplace_back(std::move(key.str), std::move(value));
      skip_space();
      if (consume(',')) {
        skip_space();
        continue;
      }
      if (!consume('}')) return fail("expected ',' or '}' in the header dict");
      break;
    }
    skip_space();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict");
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  bool fail(std::string msg) {
    error_ = std::move(msg);
    return false;
  }
  bool fail_if_unset(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    return false;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  bool consume(char c) {
    if (!at_end() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_space() {
    while (!at_end()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool parse_value(Value* v, int depth) {
    if (depth > kMaxNesting) return fail("header nests too deeply");
    skip_space();
    const char c = peek();
    if (c == '\'' || c == '"') return parse_string(v);
    if (c == '(' || c == '[') return parse_sequence(v, depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return parse_int(v);
    if (is_ident_start(c)) {
      const std::size_t start = pos_;
      while (!at_end() && is_ident_char(s_[pos_])) ++pos_;
      const std::string_view word = s_.substr(start, pos_ - start);
      if (word == "True" || word == "False") {
        v->kind = Value::Kind::kBool;
        v->boolean = word == "True";
        return true;
      }
      if (word == "None") {
        v->kind = Value::Kind::kNone;
        return true;
      }
      return fail("unexpected name '" + std::string(word) + "' in the header");
    }
    if (at_end()) return fail("header ends inside a value");
    return fail(std::string("unexpected character '") + printable(c) + "' in the header");
  }

  static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
  static std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    return buf;
  }

  // A plain quoted string: no escapes, no prefixes, no line breaks (numpy
  // never writes them in a header this reader can accept).
  bool parse_string(Value* v) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') return false;
    ++pos_;
    const std::size_t start = pos_;
    while (!at_end() && s_[pos_] != quote) {
      const char c = s_[pos_];
      if (c == '\\') return fail("escape sequences in header strings are not supported");
      if (c == '\n' || c == '\r') return fail("line break inside a header string");
      ++pos_;
    }
    if (at_end()) return fail("unterminated string in the header");
    v->kind = Value::Kind::kString;
    v->str = std::string(s_.substr(start, pos_ - start));
    ++pos_;
    return true;
  }

  bool parse_int(Value* v) {
    v->kind = Value::Kind::kInt;
    if (consume('-')) {
      v->negative = true;
    } else {
      consume('+');
    }
    skip_space();
    const std::size_t start = pos_;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_] - '0';
      if (!v->overflow) {
        if (v->magnitude > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          v->overflow = true;
        } else {
          v->magnitude = v->magnitude * 10 + digit;
        }
      }
      ++pos_;
    }
    const std::size_t len = pos_ - start;
    if (len == 0) return fail("expected digits in the header");
    if (len > 1 && s_[start] == '0') return fail("integer with a leading zero in the header");
    // Python 2's numpy wrote long integers as "3L".
    if (allow_long_suffix_ && (peek() == 'L' || peek() == 'l')) ++pos_;
    if (is_ident_char(peek()) || peek() == '.') {
      return fail("malformed integer in the header");
    }
    return true;
  }

  bool parse_sequence(Value* v, int depth) {
    const char open = peek();
    const char close = open == '(' ? ')' : ']';
    ++pos_;
    v->kind = open == '(' ? Value::Kind::kTuple : Value::Kind::kList;
    bool saw_comma = false;
    skip_space();
    while (!consume(close)) {
      Value item;
      if (!parse_value(&item, depth + 1)) return false;
      v->items.push_back(std::move(item));
      skip_space();
      if (consume(',')) {
        saw_comma = true;
        skip_space();
        continue;
      }
      if (!consume(close)) {
        if (at_end()) return fail("header ends inside a tuple or list");
        return fail(std::string("expected ',' or '") + close + "' in the header");
      }
      break;
    }
    // In Python "(3)" is the integer 3, not a tuple.
    if (v->kind == Value::Kind::kTuple && v->items.size() == 1 && !saw_comma) {
      Value inner = std::move(v->items[0]);
      *v = std::move(inner);
    }
    return true;
  }

  std::string_view s_;
  bool allow_long_suffix_;
  std::size_t pos_ = 0;
  std::string error_;
};

// Checks a 'descr' string and returns the dtype, or an error message that
// says why it is not supported.
std::optional<DType> dtype_from_descr(const std::string& descr, std::string* why) {
  const auto unsupported = [&](const std::string& reason) {
    *why = "unsupported dtype '" + descr + "' (" + reason + ")";
    return std::nullopt;
  };
  if (descr.empty()) return unsupported("empty");
  std::size_t i = 0;
  char order = '\0';
  if (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=') {
    order = descr[0];
    i = 1;
  }
  if (i >= descr.size()) return unsupported("no type code");
  const char kind = descr[i];
  const std::string size_text = descr.substr(i + 1);
  bool size_ok = !size_text.empty() && size_text.size() <= 4 && size_text[0] != '0';
  for (char c : size_text) size_ok = size_ok && c >= '0' && c <= '9';
  const int size = size_ok ? std::stoi(size_text) : -1;
  switch (kind) {
    case 'f':
      break;
    case 'i':
    case 'u':
      return unsupported("integer; only float16, float32 and float64 are supported");
    case 'b':
    case '?':
      return unsupported("boolean; only float16, float32 and float64 are supported");
    case 'c':
      return unsupported("complex; only float16, float32 and float64 are supported");
    case 'O':
      return unsupported("object; only float16, float32 and float64 are supported");
    case 'S':
    case 'U':
    case 'a':
      return unsupported("string; only float16, float32 and float64 are supported");
    case 'V':
      return unsupported("void/structured; only float16, float32 and float64 are supported");
    case 'M':
    case 'm':
      return unsupported("datetime; only float16, float32 and float64 are supported");
    default:
      return unsupported("unknown type code; only float16, float32 and float64 are supported");
  }
  if (size != 2 && size != 4 && size != 8) {
    return unsupported("only float16, float32 and float64 are supported");
  }
  if (order == '>') return unsupported("big-endian");
  if (order == '|') return unsupported("byte order '|' is not valid for a multi-byte float");
  if (order == '=') return unsupported("native byte order '='; expected little-endian '<'");
  if (order != '<') return unsupported("no byte order; expected little-endian '<'");
  return size == 2 ? DType::kFloat16 : size == 4 ? DType::kFloat32 : DType::kFloat64;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  s += ")";
  return s;
}

// Core's name; a value outside the enum (which only a bug passes) by number.
std::string dtype_name(DType dtype) {
  const std::string_view name = to_string(dtype);
  return name == "unknown" ? "dtype " + std::to_string(static_cast<int>(dtype)) : std::string(name);
}

const char* descr_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kBFloat16:
      break;
  }
  return nullptr;
}

// numel * itemsize with overflow checks. Returns false if the byte count
// does not fit in 64 bits, or if the shape is so large that strides over it
// would overflow int64 (the product of its non-zero dimensions).
bool byte_count(const std::vector<int64_t>& shape, std::size_t itemsize, uint64_t* bytes) {
  uint64_t nonzero_product = itemsize;
  bool any_zero = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) {
      any_zero = true;
      continue;
    }
    if (__builtin_mul_overflow(nonzero_product, static_cast<uint64_t>(d), &nonzero_product)) {
      return false;
    }
  }
  if (nonzero_product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *bytes = any_zero ? 0 : nonzero_product;
  return true;
}

uint64_t read_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status read(const std::string& path, Array* out) {
  if (out == nullptr) return Status(StatusCode::kNullPointer, path + ": no output array given");
  // O_NONBLOCK so that opening a FIFO does not hang; it is rejected below.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return io_error(StatusCode::kInvalidArgument, path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return io_error(StatusCode::kInvalidArgument, path, "cannot stat", errno);
  }
  if (S_ISDIR(st.st_mode)) return invalid(path, "is a directory, not a .npy file");
  if (!S_ISREG(st.st_mode)) return invalid(path, "not a regular file");
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  unsigned char prefix[12];
  const auto read_error = [&](int err) {
    return io_error(StatusCode::kInvalidArgument, path, "read error", err);
  };
  const int64_t got = read_fully(fd.get(), prefix, 8);
  if (got < 0) return read_error(errno);
  if (got < static_cast<int64_t>(kMagicLen) || std::memcmp(prefix, kMagic, kMagicLen) != 0) {
    return invalid(path, "not a .npy file (bad magic)");
  }
  if (got < 8) return invalid(path, "truncated header (file ends after the magic)");
  const int major = prefix[6];
  const int minor = prefix[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0)) {
    return invalid(path, "unsupported .npy version " + std::to_string(major) + "." +
                             std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  const int len_bytes = major == 1 ? 2 : 4;
  const int64_t got_len = read_fully(fd.get(), prefix + 8, static_cast<std::size_t>(len_bytes));
  if (got_len < 0) return read_error(errno);
  if (got_len < len_bytes) return invalid(path, "truncated header (file ends in the header length)");
  const uint64_t header_len = read_le(prefix + 8, len_bytes);
  const uint64_t prefix_len = 8u + static_cast<uint64_t>(len_bytes);
  if (file_size < prefix_len) return invalid(path, "file changed while being read");
  if (header_len > file_size - prefix_len) {
    return invalid(path, "header length " + std::to_string(header_len) + " goes beyond the end of the file (" +
                             std::to_string(file_size) + " bytes)");
  }
  if (header_len > kMaxHeaderLen) {
    return invalid(path, "header length " + std::to_string(header_len) + " is implausibly large");
  }
  std::string header(static_cast<std::size_t>(header_len), '\0');
  const int64_t got_header = read_fully(fd.get(), header.data(), header.size());
  if (got_header < 0) return read_error(errno);
  if (static_cast<uint64_t>(got_header) != header_len) {
    return invalid(path, "truncated header (file shrank while being read)");
  }
  if (header.find('\0') != std::string::npos) return invalid(path, "NUL byte in the header");
  if (major < 3) {
    // Versions 1.0 and 2.0 are latin-1; anything a valid header holds is ASCII.
    for (char c : header) {
      if (static_cast<unsigned char>(c) >= 0x80) return invalid(path, "non-ASCII byte in the header");
    }
  }

  std::vector<std::pair<std::string, Value>> dict;
  HeaderParser parser(header, /*allow_long_suffix=*/major < 3);
  if (!parser.parse_dict(&dict)) return invalid(path, "malformed header: " + parser.error());

  const Value* descr = nullptr;
  const Value* fortran = nullptr;
  const Value* shape = nullptr;
  for (const auto& [key, value] : dict) {
    if (key == "descr") {
      descr = &value;
    } else if (key == "fortran_order") {
      fortran = &value;
    } else if (key == "shape") {
      shape = &value;
    } else {
      return invalid(path, "malformed header: unexpected key '" + key + "'");
    }
  }
  if (descr == nullptr) return invalid(path, "malformed header: missing key 'descr'");
  if (fortran == nullptr) return invalid(path, "malformed header: missing key 'fortran_order'");
  if (shape == nullptr) return invalid(path, "malformed header: missing key 'shape'");

  if (descr->kind == Value::Kind::kList) {
    return invalid(path, "unsupported dtype (structured); only float16, float32 and float64 are supported");
  }
  if (descr->kind != Value::Kind::kString) return invalid(path, "malformed header: 'descr' is not a string");
  std::string why;
  const std::optional<DType> dtype = dtype_from_descr(descr->str, &why);
  if (!dtype) return invalid(path, why);

  if (fortran->kind != Value::Kind::kBool) {
    return invalid(path, "malformed header: 'fortran_order' is not True or False");
  }
  if (fortran->boolean) {
    return invalid(path, "fortran_order True is not supported (save a C-order array, "
                         "e.g. numpy.ascontiguousarray)");
  }

  if (shape->kind != Value::Kind::kTuple) return invalid(path, "malformed header: 'shape' is not a tuple");
  if (shape->items.size() > static_cast<std::size_t>(kMaxDims)) {
    return invalid(path, "shape has " + std::to_string(shape->items.size()) + " dimensions (at most " +
                             std::to_string(kMaxDims) + " are supported)");
  }
  std::vector<int64_t> dims;
  dims.reserve(shape->items.size());
  for (const Value& item : shape->items) {
    if (item.kind != Value::Kind::kInt) return invalid(path, "malformed header: 'shape' holds a non-integer");
    if (item.negative && (item.overflow || item.magnitude != 0)) {
      return invalid(path, "malformed header: negative dimension in 'shape'");
    }
    if (item.overflow) return invalid(path, "shape dimension too large");
    dims.push_back(item.magnitude);
  }

  const std::size_t itemsize = dtype_size(*dtype);
  uint64_t need = 0;
  if (!byte_count(dims, itemsize, &need)) {
    return invalid(path, "shape " + shape_to_string(dims) + " is too large");
  }
  const uint64_t data_offset = prefix_len + header_len;
  const uint64_t have = file_size - data_offset;
  if (have != need) {
    return invalid(path, std::string(have < need ? "truncated data" : "extra data after the array") +
                             ": shape " + shape_to_string(dims) + " of " + dtype_name(*dtype) +
                             " needs " + std::to_string(need) + " bytes, the file holds " +
                             std::to_string(have));
  }
  if (need > std::numeric_limits<std::size_t>::max()) {
    return invalid(path, "array too large for this machine");
  }

  host::Bytes data;
  try {
    data.resize(static_cast<std::size_t>(need));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal,
                  path + ": out of memory reading " + std::to_string(need) + " bytes");
  } catch (const std::length_error&) {
    return Status(StatusCode::kInternal,
                  path + ": out of memory reading " + std::to_string(need) + " bytes");
  }
  const int64_t got_data = read_fully(fd.get(), data.data(), data.size());
  if (got_data < 0) return read_error(errno);
  if (static_cast<uint64_t>(got_data) != need) return invalid(path, "truncated data (file shrank while being read)");
  // One more byte would mean the file grew after fstat.
  unsigned char extra;
  const int64_t got_extra = read_fully(fd.get(), &extra, 1);
  if (got_extra < 0) return read_error(errno);
  if (got_extra != 0) return invalid(path, "extra data after the array (file grew while being read)");

  out->dtype = *dtype;
  out->shape = std::move(dims);
  out->data = std::move(data);
  return Status::Ok();
}

namespace {

std::string make_header(const Array& array) {
  std::string dict = "{'descr': '";
  dict += descr_of(array.dtype);
  dict += "', 'fortran_order': False, 'shape': ";
  dict += shape_to_string(array.shape);
  dict += ", }";
  // Magic (6) + version (2) + length (2) + dict + padding + '\n' is a
  // multiple of 64.
  const std::size_t unpadded = 10 + dict.size() + 1;
  const std::size_t total = (unpadded + 63) / 64 * 64;
  std::string header(kMagic, kMagicLen);
  header += '\x01';
  header += '\x00';
  const std::size_t header_len = total - 10;
  header += static_cast<char>(header_len & 0xff);
  header += static_cast<char>((header_len >> 8) & 0xff);
  header += dict;
  header.append(total - unpadded, ' ');
  header += '\n';
  return header;
}

}  // namespace

Status write(const std::string& path, const Array& array) {
  if (path.empty()) return invalid(path, "empty output path");
  if (descr_of(array.dtype) == nullptr) {
    return invalid(path, "cannot write dtype " + dtype_name(array.dtype) +
                             " (.npy has no such type; widen it to float32)");
  }
  if (array.shape.size() > static_cast<std::size_t>(kMaxDims)) {
    return invalid(path, "cannot write " + std::to_string(array.shape.size()) + " dimensions (at most " +
                             std::to_string(kMaxDims) + ")");
  }
  uint64_t need = 0;
  if (!byte_count(array.shape, dtype_size(array.dtype), &need)) {
    return invalid(path, "cannot write shape " + shape_to_string(array.shape) +
                             " (negative or too large)");
  }
  if (need != array.data.size()) {
    return invalid(path, "shape " + shape_to_string(array.shape) + " of " +
                             dtype_name(array.dtype) + " needs " + std::to_string(need) +
                             " bytes, the array holds " + std::to_string(array.data.size()));
  }
  const std::string header = make_header(array);

  // A temporary name in the target's folder, so that rename() is atomic.
  static std::atomic<uint64_t> counter{0};
  const std::size_t slash = path.find_last_of('/');
  const std::string prefix = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string base = path.substr(prefix.size());
  const std::string dir = prefix.empty() ? std::string(".") : prefix;
  if (base.empty() || base == "." || base == "..") return invalid(path, "output path names a folder, not a file");
  std::string tmp;
  int raw_fd = -1;
  for (int attempt = 0; attempt < 100 && raw_fd < 0; ++attempt) {
    const auto ticks = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    tmp = prefix + "." + base + ".tmp" + std::to_string(::getpid()) + "_" +
          std::to_string(counter.fetch_add(1)) + "_" + std::to_string(ticks % 1000000007u);
    raw_fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (raw_fd < 0 && errno != EEXIST) {
      return io_error(StatusCode::kInvalidArgument, path, "cannot create a file in '" + dir + "'", errno);
    }
  }
  if (raw_fd < 0) {
    return io_error(StatusCode::kInvalidArgument, path, "cannot create a temporary file in '" + dir + "'", EEXIST);
  }
  Fd fd(raw_fd);
  const auto fail = [&](const std::string& what, int err) {
    fd.close();
    ::unlink(tmp.c_str());
    return io_error(StatusCode::kInternal, path, what, err);
  };
  if (!write_fully(fd.get(), header.data(), header.size()) ||
      !write_fully(fd.get(), array.data.data(), array.data.size())) {
    return fail("write error", errno);
  }
  if (::fsync(fd.get()) != 0 && errno != EINVAL && errno != EROFS) return fail("write error (fsync)", errno);
  if (fd.close() != 0) return fail("write error (close)", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return io_error(StatusCode::kInvalidArgument, path, "cannot replace the file", err);
  }
  return Status::Ok();
}

}  // namespace gridsampler::npy
