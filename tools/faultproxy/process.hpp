// process.hpp — run the faultproxy command as a child process
// (support/process.hpp): spawn it, read the JSON line it prints once it is
// listening, and stop it by pid (never by name). The child dies with its
// parent (PR_SET_PDEATHSIG), so a crashed test does not leave proxies
// behind.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "faultproxy/control_client.hpp"
#include "support/process.hpp"

namespace faultproxy {

struct FaultProxyOptions {
  std::string binary;                            // path of the faultproxy executable
  std::string target;                            // "127.0.0.1:6379"
  std::vector<std::string> listen{"127.0.0.1:0"};
  std::string control = "127.0.0.1:0";           // or "unix:/path"
  std::optional<std::uint64_t> seed;             // --seed (default: the proxy picks)
  std::vector<std::string> extra_args;           // e.g. {"--max-queue", "65536"}
  std::chrono::milliseconds startup_timeout = std::chrono::seconds(10);
};

class FaultProxyProcess {
 public:
  // Starts the proxy and waits for its startup line. Throws
  // std::runtime_error if it cannot be started, exits, or stays silent
  // past startup_timeout (the child is killed then).
  explicit FaultProxyProcess(FaultProxyOptions options);
  FaultProxyProcess(std::string binary, std::string target,
                    std::vector<std::string> listen = {"127.0.0.1:0"});
  ~FaultProxyProcess();  // kill()
  FaultProxyProcess(const FaultProxyProcess&) = delete;
  FaultProxyProcess& operator=(const FaultProxyProcess&) = delete;

  pid_t pid() const { return process_ ? process_->pid() : -1; }
  bool running() const { return process_ && process_->running(); }
  const nlohmann::json& startup_info() const { return info_; }
  const std::string& control_address() const { return control_; }
  const std::vector<std::string>& listeners() const { return listeners_; }  // "ADDR:PORT" each
  const std::string& listener(std::size_t i) const { return listeners_.at(i); }
  std::string host(std::size_t i) const;  // "127.0.0.1"
  int port(std::size_t i) const;
  FaultProxyControl control() const { return FaultProxyControl(control_); }

  // stop asks the proxy to exit (SIGTERM) and waits up to grace for it; it
  // is killed after that. Returns the exit status, or 128 + signal number.
  // A clean exit is 0 (under ASan, a leak makes it non-zero). The grace is
  // long because an ASan build's exit (the leak check) on two cores shared
  // with other sanitized tests once took more than 5 s; a proxy that exits
  // returns at once.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(30));
  void kill();  // SIGKILL + waitpid; no-op when not running

 private:
  void spawn(const FaultProxyOptions& options);

  std::unique_ptr<redlock::support::Process> process_;  // null once stopped
  nlohmann::json info_;
  std::string control_;
  std::vector<std::string> listeners_;
};

}  // namespace faultproxy
