// helpers.cpp — see helpers.hpp.
#include "helpers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace fptest {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const std::string& what, int e = errno) { return what + ": " + std::strerror(e); }

// wait_readable: poll for POLLIN until deadline; false on timeout.
bool wait_readable(int fd, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) throw std::runtime_error(errno_text("poll"));
  }
}

}  // namespace

std::string faultproxy_bin() {
  const char* bin = std::getenv("FAULTPROXY_BIN");
  if (bin == nullptr || *bin == '\0') throw std::runtime_error("FAULTPROXY_BIN is not set (run through meson test)");
  return bin;
}

std::unique_ptr<faultproxy::FaultProxyProcess> start_proxy(const std::string& target, std::vector<std::string> listen,
                                                          std::vector<std::string> extra_args) {
  faultproxy::FaultProxyOptions o;
  o.binary = faultproxy_bin();
  o.target = target;
  o.listen = std::move(listen);
  o.seed = 42;  // reproducible jitter
  o.extra_args = std::move(extra_args);
  return std::make_unique<faultproxy::FaultProxyProcess>(o);
}

// ---- Redis -------------------------------------------------------------------

Redis::Redis(const std::string& host, int port, std::chrono::milliseconds timeout) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  c_ = redisConnectWithTimeout(host.c_str(), port, tv);
  if (c_ == nullptr || c_->err != 0) {
    std::string e = c_ != nullptr ? c_->errstr : "cannot allocate context";
    if (c_ != nullptr) redisFree(c_);
    throw std::runtime_error(host + ":" + std::to_string(port) + ": " + e);
  }
  redisSetTimeout(c_, tv);
}

Redis::~Redis() { redisFree(c_); }

std::string Redis::cmd(const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  if (r == nullptr) throw std::runtime_error(c_->errstr[0] != '\0' ? c_->errstr : "no reply");
  std::string out;
  if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
  else if (r->str != nullptr) out.assign(r->str, r->len);
  if (r->type == REDIS_REPLY_NIL) out = "(nil)";
  freeReplyObject(r);
  return out;
}

bool Redis::fails(const std::vector<std::string>& argv, std::string* error) {
  try {
    cmd(argv);
    return false;
  } catch (const std::runtime_error& e) {
    if (error != nullptr) *error = e.what();
    return true;
  }
}

// ---- RawSocket -----------------------------------------------------------------

RawSocket::RawSocket(const std::string& host, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *in;
  } else if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *in6;
  } else {
    throw std::runtime_error("RawSocket: not an address: " + host);
  }
  fd_ = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(errno_text("socket"));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    ::close(fd_);
    throw std::runtime_error(errno_text("connect " + host + ":" + std::to_string(port), e));
  }
}

RawSocket::~RawSocket() {
  if (fd_ >= 0) ::close(fd_);
}

void RawSocket::send_all(const std::string& data) {
  for (std::size_t sent = 0; sent < data.size();) {
    const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(errno_text("send"));
    sent += static_cast<std::size_t>(n);
  }
}

void RawSocket::shutdown_write() {
  if (::shutdown(fd_, SHUT_WR) != 0) throw std::runtime_error(errno_text("shutdown"));
}

std::string RawSocket::read_exact(std::size_t n, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    if (!wait_readable(fd_, deadline))
      throw std::runtime_error("read_exact: timed out after " + std::to_string(out.size()) + " of " + std::to_string(n));
    const ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r == 0) throw std::runtime_error("read_exact: EOF after " + std::to_string(out.size()) + " bytes");
    if (r < 0 && errno != EINTR) throw std::runtime_error(errno_text("recv"));
    if (r > 0) out.append(buf, static_cast<std::size_t>(r));
  }
  return out;
}

std::string RawSocket::read_to_eof(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[65536];
  for (;;) {
    if (!wait_readable(fd_, deadline)) throw std::runtime_error("read_to_eof: timed out after '" + out + "'");
    const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r == 0) return out;
    if (r < 0 && errno != EINTR) throw std::runtime_error(errno_text("recv after '" + out + "'"));
    if (r > 0) out.append(buf, static_cast<std::size_t>(r));
  }
}

bool RawSocket::readable_now() {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

int RawSocket::read_errno(std::chrono::milliseconds timeout) {
  if (!wait_readable(fd_, Clock::now() + timeout)) throw std::runtime_error("read_errno: timed out");
  char c;
  const ssize_t r = ::recv(fd_, &c, 1, 0);
  if (r == 0) return 0;
  if (r < 0) return errno;
  return -1;
}

// ---- EchoServer ------------------------------------------------------------------

EchoServer::EchoServer(Mode mode) : mode_(mode) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 512) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe2(stop_pipe_, O_CLOEXEC) != 0)
    throw std::runtime_error(errno_text("EchoServer"));
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

EchoServer::~EchoServer() {
  const char x = 'x';
  ssize_t ignored = ::write(stop_pipe_[1], &x, 1);  // wakes the acceptor
  (void)ignored;
  acceptor_.join();
  for (auto& t : workers_) t.join();  // each ends at its client's EOF or error
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

void EchoServer::accept_loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if (p[0].revents == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    workers_.emplace_back([this, fd] { mode_ == Mode::Echo ? serve(fd) : speak_first(fd); });
  }
}

void EchoServer::serve(int fd) {
  char buf[65536];
  for (;;) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;  // reset: just close
    if (r == 0) {
      static const char kEof[] = "<EOF>";
      ::send(fd, kEof, sizeof kEof - 1, MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
      break;
    }
    for (ssize_t sent = 0; sent < r;) {
      const ssize_t n = ::send(fd, buf + sent, static_cast<std::size_t>(r - sent), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(fd);
        return;
      }
      sent += n;
    }
  }
  ::close(fd);
}

void EchoServer::speak_first(int fd) {
  ::send(fd, "bye", 3, MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got.append(buf, static_cast<std::size_t>(r));
  }
  ::close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  if (!received_done_) {
    received_ = got;
    received_done_ = true;
    cv_.notify_all();
  }
}

std::string EchoServer::wait_received(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return received_done_; }))
    throw std::runtime_error("EchoServer: the connection did not end within the timeout");
  return received_;
}

// ---- waits and runs -----------------------------------------------------------------

nlohmann::json wait_status(faultproxy::FaultProxyControl& control, const std::string& listener,
                           const std::function<bool(const nlohmann::json&)>& pred, std::chrono::milliseconds bound) {
  // The proxy has no push notifications; polling STATUS with a bound is
  // waiting for its state, not guessing a delay.
  const auto deadline = Clock::now() + bound;
  for (;;) {
    nlohmann::json s = control.listener_status(listener);
    if (pred(s) || Clock::now() >= deadline) return s;
    std::this_thread::sleep_for(5ms);
  }
}

redlock::support::ProcessResult run_binary(const std::vector<std::string>& argv) {
  redlock::support::ProcessOptions o;
  o.argv = argv;
  return redlock::support::run(std::move(o), 10s);
}

}  // namespace fptest
