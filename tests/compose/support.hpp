// support.hpp — small helpers shared by the compose tests.
#pragma once

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace compose_test {

using Env = redlock::support::Environment;
using RunResult = redlock::support::ProcessResult;
using redlock::support::current_environment;
using redlock::support::find_program;

// run runs ARGV (argv[0] a path) with exactly ENV, stdin from /dev/null, in
// a process group of its own: at TIMEOUT the whole group (a script and what
// it started) is killed and timed_out is set.
inline RunResult run(const std::vector<std::string>& argv, const Env& env,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  redlock::support::ProcessOptions o;
  o.argv = argv;
  o.env = env;
  o.new_process_group = true;
  return redlock::support::run(std::move(o), timeout);
}

// TempDir — a fresh directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/redlock-compose-test.XXXXXX";
    REQUIRE_MESSAGE(mkdtemp(pattern.data()) != nullptr, "mkdtemp " << pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The source tree (REDLOCK_SOURCE_ROOT, set by meson test), canonical.
inline std::string source_root() {
  const char* root = std::getenv("REDLOCK_SOURCE_ROOT");
  REQUIRE_MESSAGE(root != nullptr, "REDLOCK_SOURCE_ROOT is not set (run through meson test)");
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(root, ec);
  REQUIRE_MESSAGE(!ec, "REDLOCK_SOURCE_ROOT=" << root << ": " << ec.message());
  return canonical.string();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The scalar at KEY in the mapping MAP; a failed REQUIRE naming WHAT and KEY
// if it is missing or not a scalar.
inline std::string scalar(const YAML::Node& map, const std::string& key, const std::string& what) {
  const YAML::Node v = map[key];
  REQUIRE_MESSAGE((v.IsDefined() && v.IsScalar()), what << ": no " << key);
  return v.Scalar();
}

}  // namespace compose_test
