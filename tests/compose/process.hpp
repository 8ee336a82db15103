// process.hpp — run a program (fork/execve) with a given environment and
// capture its exit status, stdout and stderr; bounded in time.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace compose_test {

struct RunResult {
  int exit_code = -1;    // exit status, or 128 + signal if killed by one
  bool timed_out = false;
  std::string out;
  std::string err;
};

using Env = std::map<std::string, std::string>;

// This process's environment as a map.
Env current_env();

// Runs ARGV[0] (a path: no PATH search) with ARGV and ENV, stdin from
// /dev/null, in its own process group. After TIMEOUT the group is killed
// with SIGKILL and timed_out is set.
RunResult run(const std::vector<std::string>& argv, const Env& env,
              std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The first executable NAME in the directories of PATH_VALUE ("" if none).
std::string find_in_path(const std::string& name, const std::string& path_value);

// A fresh directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace compose_test
