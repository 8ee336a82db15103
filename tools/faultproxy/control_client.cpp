// control_client.cpp — see control_client.hpp.
#include "faultproxy/control_client.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "faultproxy/address.hpp"

namespace faultproxy {
namespace {

using Clock = std::chrono::steady_clock;

// wait_fd polls fd for events until deadline; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the next call report the error
  }
}

}  // namespace

FaultProxyControl::FaultProxyControl(std::string control_address, std::chrono::milliseconds timeout)
    : address_(std::move(control_address)), timeout_(timeout) {}

FaultProxyControl::~FaultProxyControl() { disconnect(); }

FaultProxyControl::FaultProxyControl(FaultProxyControl&& other) noexcept
    : address_(std::move(other.address_)), timeout_(other.timeout_), fd_(other.fd_), buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
}

FaultProxyControl& FaultProxyControl::operator=(FaultProxyControl&& other) noexcept {
  if (this != &other) {
    disconnect();
    address_ = std::move(other.address_);
    timeout_ = other.timeout_;
    fd_ = other.fd_;
    buffer_ = std::move(other.buffer_);
    other.fd_ = -1;
  }
  return *this;
}

void FaultProxyControl::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffer_.clear();
}

void FaultProxyControl::fail(const std::string& what) {
  disconnect();
  throw std::runtime_error("faultproxy control " + address_ + ": " + what);
}

void FaultProxyControl::connect() {
  Endpoint ep;
  try {
    ep = parse_endpoint(address_, "control address", true);
  } catch (const AddressError& e) {
    throw std::runtime_error(e.what());
  }
  sockaddr_un un{};
  socklen_t len = 0;
  const sockaddr* sa = nullptr;
  if (ep.is_unix) {
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, ep.path.data(), ep.path.size());
    sa = reinterpret_cast<const sockaddr*>(&un);
    len = sizeof un;
  } else {
    sa = ep.sa();
    len = ep.addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  }
  fd_ = ::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) fail(std::string("socket: ") + std::strerror(errno));
  // Non-blocking connect, so a listener that never accepts costs at most
  // the timeout.
  if (::connect(fd_, sa, len) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) fail(std::string("connect: ") + std::strerror(errno));
    if (!wait_fd(fd_, POLLOUT, Clock::now() + timeout_)) fail("connect: timed out");
    int err = 0;
    socklen_t elen = sizeof err;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err != 0) fail(std::string("connect: ") + std::strerror(err));
  }
}

std::string FaultProxyControl::raw(const std::string& line) {
  if (line.find_first_of("\r\n") != std::string::npos)
    throw std::invalid_argument("faultproxy control: a command must be one line: '" + line + "'");
  if (fd_ < 0) connect();
  const auto deadline = Clock::now() + timeout_;
  const std::string out = line + "\n";
  for (std::size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd_, POLLOUT, deadline)) fail("send: timed out");
    } else {
      fail(std::string("send: ") + std::strerror(errno));
    }
  }
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return reply;
    }
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      buffer_.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      fail("connection closed by the proxy");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_fd(fd_, POLLIN, deadline)) fail("no reply to '" + line + "' within the timeout");
    } else {
      fail(std::string("recv: ") + std::strerror(errno));
    }
  }
}

std::string FaultProxyControl::command(const std::string& line) {
  std::string reply = raw(line);
  if (reply != "OK" && reply.rfind("OK ", 0) != 0)
    throw std::runtime_error("faultproxy control " + address_ + ": '" + line + "': " + reply);
  return reply;
}

void FaultProxyControl::ping() { command("PING"); }

void FaultProxyControl::set(const std::string& listener, const std::string& settings) {
  command("SET " + listener + " " + settings);
}

void FaultProxyControl::clear(const std::string& listener) { command("CLEAR " + listener); }

std::size_t FaultProxyControl::reset(const std::string& listener) {
  const std::string reply = command("RESET " + listener);
  return nlohmann::json::parse(reply.substr(3)).at("reset").get<std::size_t>();
}

nlohmann::json FaultProxyControl::status() {
  const std::string reply = command("STATUS");
  return nlohmann::json::parse(reply.substr(3));
}

nlohmann::json FaultProxyControl::listener_status(const std::string& listener) {
  const nlohmann::json s = status();
  for (const auto& l : s.at("listeners")) {
    if (l.at("name") == listener || std::to_string(l.at("index").get<std::size_t>()) == listener) return l;
  }
  throw std::runtime_error("faultproxy control " + address_ + ": no listener '" + listener + "'");
}

}  // namespace faultproxy
