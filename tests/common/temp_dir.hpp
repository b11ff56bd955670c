// A fresh folder under the system's temporary folder, removed with its
// contents when the object goes.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>

namespace gstest {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "gridsampler_test") {
    std::string templ = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of the files in the folder.
  std::set<std::string> files() const {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.insert(e.path().filename().string());
    return out;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace gstest
