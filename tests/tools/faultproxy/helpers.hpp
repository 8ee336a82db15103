// helpers.hpp — what the faultproxy tests share: the binary under test, a
// hiredis client with a timeout, a raw TCP client (for byte-exact checks
// and for RST vs FIN), a tiny echo server with half-close, a bounded wait
// on a STATUS condition, and running the binary to collect its exit status
// (support/process.hpp).
#pragma once

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "faultproxy/process.hpp"
#include "support/process.hpp"

namespace fptest {

using namespace std::chrono_literals;

// faultproxy_bin: $FAULTPROXY_BIN (set by meson). Throws if unset.
std::string faultproxy_bin();

// start_proxy: a faultproxy child forwarding to target on the listeners.
std::unique_ptr<faultproxy::FaultProxyProcess> start_proxy(const std::string& target,
                                                          std::vector<std::string> listen = {"127.0.0.1:0"},
                                                          std::vector<std::string> extra_args = {});

// Redis — a hiredis sync connection; every command waits at most `timeout`.
class Redis {
 public:
  Redis(const std::string& host, int port, std::chrono::milliseconds timeout = 2000ms);
  ~Redis();
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;
  // cmd: the reply as text ("PONG", "OK", bulk string; integers as decimal),
  // or throws std::runtime_error with hiredis's error (timeout, EOF, reset).
  std::string cmd(const std::vector<std::string>& argv);
  // fails: true when the command ends in a connection error (no reply).
  bool fails(const std::vector<std::string>& argv, std::string* error = nullptr);

 private:
  redisContext* c_ = nullptr;
};

// RawSocket — a blocking TCP client socket for byte-exact checks.
class RawSocket {
 public:
  RawSocket(const std::string& host, int port);
  ~RawSocket();
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  void send_all(const std::string& data);
  void shutdown_write();
  // read_exact: exactly n bytes, or throws (EOF, error, timeout).
  std::string read_exact(std::size_t n, std::chrono::milliseconds timeout = 5000ms);
  // read_to_eof: everything until the peer's FIN; throws on error/timeout.
  std::string read_to_eof(std::chrono::milliseconds timeout = 5000ms);
  // readable_now: data (or EOF/error) is waiting right now.
  bool readable_now();
  // read_errno: waits for the next read event and returns 0 for EOF,
  // the errno of a failed read (ECONNRESET), or -1 when data arrived.
  int read_errno(std::chrono::milliseconds timeout = 5000ms);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// EchoServer — on 127.0.0.1:<port>, one thread per connection. Used where
// Redis's own behaviour would get in the way (half-close, order, bulk data).
//   Echo:      sends back every byte it reads; at the client's EOF it sends
//              "<EOF>", shuts down writing and closes.
//   SpeakFirst: sends "bye", shuts down writing, then reads until the
//              client's EOF; what it read is returned by wait_received.
class EchoServer {
 public:
  enum class Mode { Echo, SpeakFirst };
  explicit EchoServer(Mode mode = Mode::Echo);
  ~EchoServer();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // wait_received: what the first SpeakFirst connection read before EOF
  // (throws when it did not end within timeout).
  std::string wait_received(std::chrono::milliseconds timeout = 5000ms);

 private:
  void accept_loop();
  void serve(int fd);
  void speak_first(int fd);
  const Mode mode_;
  std::condition_variable cv_;
  bool received_done_ = false;
  std::string received_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
};

// wait_status polls the proxy's STATUS (every 5 ms, at most `bound`) until
// pred holds on the entry of `listener`; returns the last entry seen.
nlohmann::json wait_status(faultproxy::FaultProxyControl& control, const std::string& listener,
                           const std::function<bool(const nlohmann::json&)>& pred,
                           std::chrono::milliseconds bound = 5000ms);

// run_binary: run a command to completion (10 s bound), capturing stdout
// and stderr.
redlock::support::ProcessResult run_binary(const std::vector<std::string>& argv);

}  // namespace fptest
