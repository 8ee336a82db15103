// process.cpp — see process.hpp.
#include "faultproxy/process.hpp"

#include <algorithm>
#include <stdexcept>

#include "faultproxy/address.hpp"

namespace faultproxy {

FaultProxyProcess::FaultProxyProcess(FaultProxyOptions options) { spawn(options); }

FaultProxyProcess::FaultProxyProcess(std::string binary, std::string target, std::vector<std::string> listen) {
  FaultProxyOptions o;
  o.binary = std::move(binary);
  o.target = std::move(target);
  o.listen = std::move(listen);
  spawn(o);
}

FaultProxyProcess::~FaultProxyProcess() = default;  // the Process kills and reaps it

void FaultProxyProcess::spawn(const FaultProxyOptions& o) {
  std::string listen;
  for (const auto& l : o.listen) listen += (listen.empty() ? "" : ",") + l;
  redlock::support::ProcessOptions po;
  po.argv = {o.binary, "--target", o.target, "--listen", listen, "--control", o.control};
  if (o.seed) po.argv.insert(po.argv.end(), {"--seed", std::to_string(*o.seed)});
  po.argv.insert(po.argv.end(), o.extra_args.begin(), o.extra_args.end());
  po.out = redlock::support::Stream::pipe();
  try {
    process_ = std::make_unique<redlock::support::Process>(std::move(po));
  } catch (const std::exception& e) {
    throw std::runtime_error("faultproxy " + o.binary + ": " + e.what());
  }

  // The first line: the proxy prints it once every socket is bound, so the
  // addresses in it are ready to use.
  const auto started = std::chrono::steady_clock::now();
  const std::optional<std::string> line = process_->read_line(o.startup_timeout);
  std::string problem;
  if (!line && !process_->output_ended()) {
    problem = "no startup line within " + std::to_string(o.startup_timeout.count()) + " ms";
  } else if (!line) {
    const auto left = o.startup_timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::steady_clock::now() - started);
    const std::optional<int> code = process_->wait(std::max(left, std::chrono::milliseconds(100)));
    problem = code ? "exited before it was ready (status " + std::to_string(*code) + "; see its stderr)"
                   : "closed its stdout before it was ready";
  } else {
    try {
      info_ = nlohmann::json::parse(*line);
      control_ = info_.at("control").get<std::string>();
      listeners_ = info_.at("listeners").get<std::vector<std::string>>();
    } catch (const std::exception& e) {
      problem = "bad startup line '" + *line + "': " + e.what();
    }
  }
  // Later output (there is none by design) would hit a closed pipe; the
  // proxy ignores SIGPIPE.
  process_->close_output();
  if (!problem.empty()) {
    kill();
    throw std::runtime_error("faultproxy " + o.binary + ": " + problem);
  }
}

std::string FaultProxyProcess::host(std::size_t i) const {
  return parse_endpoint(listener(i), "listener", false).host();
}

int FaultProxyProcess::port(std::size_t i) const { return parse_endpoint(listener(i), "listener", false).port(); }

int FaultProxyProcess::stop(std::chrono::milliseconds grace) {
  if (!process_) return -1;
  const int code = process_->stop(grace);
  process_.reset();
  return code;
}

void FaultProxyProcess::kill() { process_.reset(); }

}  // namespace faultproxy
