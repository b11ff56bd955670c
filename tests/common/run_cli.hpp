// Runs the built `gridsampler` tool (GS_CLI_PATH, which tests/CMakeLists.txt
// defines for every test program) and checks its error contract; shared by
// the tests that run the tool.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/temp_dir.hpp"

namespace gstest {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// `s` quoted for the shell.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs the tool with `args`, and `env` (VAR=value words) added to its
// environment; stdout and stderr are captured in files of a folder of their
// own, so that tests can check which files the tool created.
inline CliResult run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  static TempDir capture;
  const std::string out = capture.file("stdout");
  const std::string err = capture.file("stderr");
  std::string cmd = "env";
  for (const std::string& e : env) cmd.append(" ").append(quote(e));
  cmd.append(" ").append(quote(GS_CLI_PATH));
  for (const std::string& a : args) cmd.append(" ").append(quote(a));
  cmd.append(" >").append(quote(out)).append(" 2>").append(quote(err));
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

// Checks the error contract: exit status 2, exactly one line on stderr that
// starts with "gridsampler: error: " and contains `what`, nothing on stdout.
inline void expect_error(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("gridsampler: error: ", 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << "stderr: " << r.err << "expected: " << what;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace gstest
