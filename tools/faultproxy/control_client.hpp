// control_client.hpp — a small blocking client for the faultproxy control
// socket, for test code and the chaos runner. Not thread-safe: one object
// per thread (each keeps its own connection).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <string>

namespace faultproxy {

class FaultProxyControl {
 public:
  // control_address: "127.0.0.1:PORT", "[::1]:PORT" or "unix:PATH" (as the
  // proxy printed it). Connects lazily, on the first command, and again
  // after a connection error.
  explicit FaultProxyControl(std::string control_address,
                             std::chrono::milliseconds timeout = std::chrono::seconds(2));
  ~FaultProxyControl();
  FaultProxyControl(FaultProxyControl&& other) noexcept;
  FaultProxyControl& operator=(FaultProxyControl&& other) noexcept;
  FaultProxyControl(const FaultProxyControl&) = delete;
  FaultProxyControl& operator=(const FaultProxyControl&) = delete;

  // raw sends one line and returns the reply line as it is ("OK ...",
  // "ERR ..."). Throws std::runtime_error on a connection error or timeout,
  // std::invalid_argument for a line containing a newline.
  std::string raw(const std::string& line);
  // command is raw that also throws std::runtime_error (with the reply as
  // message) when the reply is not OK.
  std::string command(const std::string& line);

  void ping();
  // set("0", "delay_up=100 jitter_up=20"); listener: index, "ADDR:PORT" or "*".
  void set(const std::string& listener, const std::string& settings);
  void clear(const std::string& listener = "*");
  std::size_t reset(const std::string& listener = "*");  // connections reset
  nlohmann::json status();
  // listener_status: the STATUS entry of one listener (index or name).
  nlohmann::json listener_status(const std::string& listener);

  const std::string& address() const { return address_; }

 private:
  void connect();
  void disconnect();
  [[noreturn]] void fail(const std::string& what);

  std::string address_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string buffer_;  // bytes received after the last reply line
};

}  // namespace faultproxy
