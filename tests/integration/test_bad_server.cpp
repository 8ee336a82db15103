// test_bad_server.cpp — a master that misbehaves at the protocol level: it
// vanishes in the middle of a reply, answers garbage, or hangs up at once;
// and one whose connection is slow to start (a master far away).
// Each must be one node's `error` outcome with a clear text; nothing
// crashes, nothing leaks (ASan), and the healthy masters decide.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

// Listener — a port on 127.0.0.1 whose connections go, one by one, to
// `serve` (which closes them) on a thread of its own, until stop() or its
// destruction. Declared last in its owner: its thread uses the rest.
class Listener {
 public:
  explicit Listener(std::function<void(int)> serve) : serve_(std::move(serve)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    REQUIRE(::listen(fd_, 8) == 0);
    thread_ = std::thread([this] {
      for (int c = 0; !stopped_ && (c = ::accept(fd_, nullptr, nullptr)) >= 0;) serve_(c);
    });
  }
  ~Listener() { stop(); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  void stop() {
    if (stopped_.exchange(true)) return;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  bool stopped() const { return stopped_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  std::function<void(int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

// FakeMaster — answers the client's handshake (3 × SCRIPT LOAD, INFO) like
// a redis that has been up for long, then does `misbehave` on the first
// script call. One connection at a time, on a thread, loopback only.
class FakeMaster {
 public:
  enum class Mode { cut_reply, garbage, hang_up };

  explicit FakeMaster(Mode mode)
      : mode_(mode), listener_([this](int c) {
          if (mode_ != Mode::hang_up) talk(c);
          ::close(c);
        }) {}
  std::string url() const { return listener_.url(); }
  int script_calls() const { return script_calls_; }

 private:
  // talk answers commands in order; a command starts with '*' at a line start.
  void talk(int c) {
    std::string buf;
    int seen = 0;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(c, chunk, sizeof chunk);
      if (n <= 0) return;
      buf.append(chunk, static_cast<std::size_t>(n));
      int commands = 0;
      for (std::size_t i = 0; i < buf.size(); ++i) commands += buf[i] == '*' && (i == 0 || buf[i - 1] == '\n');
      for (; seen < commands; ++seen) {
        if (seen < 3) {
          send(c, "$40\r\n" + std::string(40, 'a') + "\r\n");  // SCRIPT LOAD
        } else if (seen == 3) {
          send(c, "$26\r\nuptime_in_seconds:100000\r\n");     // INFO server
        } else {
          ++script_calls_;
          send(c, mode_ == Mode::cut_reply ? "+O" : "!!! not RESP\r\n");
          return;  // and hang up
        }
      }
    }
  }

  static void send(int c, const std::string& s) { (void)!::write(c, s.data(), s.size()); }

  Mode mode_;
  std::atomic<int> script_calls_{0};
  Listener listener_;
};

// SlowStartRelay — a master far away, as its first answers see it: each
// connection is accepted at once (TCP is up), but nothing is forwarded to
// or from the real server for `hold`; then bytes pass both ways as they
// come. The client's handshake thus takes longer than `hold`.
class SlowStartRelay {
 public:
  SlowStartRelay(int target_port, std::chrono::milliseconds hold)
      : target_(target_port), hold_(hold), listener_([this](int c) {
          links_.emplace_back([this, c] { link(c); });  // every connection at once (lock and subscriber)
        }) {}
  ~SlowStartRelay() {
    listener_.stop();  // no new links
    for (std::thread& t : links_) t.join();
  }
  std::string url() const { return listener_.url(); }

 private:
  void link(int c) {
    std::this_thread::sleep_for(hold_);  // the slow network, not a wait for an event
    const int up = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(target_);
    if (::connect(up, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) pump(c, up);
    ::close(up);
    ::close(c);
  }
  // pump forwards both ways until either side closes or the relay stops.
  void pump(int a, int b) {
    char chunk[65536];
    while (!listener_.stopped()) {
      pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (::poll(fds, 2, 50) < 0) return;
      for (int i = 0; i < 2; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = ::read(fds[i].fd, chunk, sizeof chunk);
        if (n <= 0) return;
        const int to = i == 0 ? b : a;
        for (ssize_t done = 0; done < n;) {
          const ssize_t w = ::write(to, chunk + done, static_cast<std::size_t>(n - done));
          if (w <= 0) return;
          done += w;
        }
      }
    }
  }

  int target_;
  std::chrono::milliseconds hold_;
  std::vector<std::thread> links_;  // only the listener's thread adds to it
  Listener listener_;
};

// With one good and one fake master the majority is both, so every round
// waits for the fake and shows exactly what became of it.
std::string fake_error(FakeMaster::Mode mode) {
  RedisServer good;
  FakeMaster fake(mode);
  auto client = client_for({good.url(), fake.url()});
  std::string text;
  for (int round = 0; round < 3; ++round) {  // the client reconnects in between
    auto lock = client->try_acquire("bad-" + std::to_string(round));
    REQUIRE_FALSE(lock.ok());
    CHECK(lock.error().code == Errc::no_quorum);
    CHECK(lock.error().nodes[1].outcome == Outcome::error);
    CHECK(lock.error().message.find(lock.error().nodes[1].address) != std::string::npos);
    text = lock.error().nodes[1].error;
    // Each attempt is rolled back on the good master (queued behind its SET).
    CHECK(eventually([&] { return good.keys("redlock:*").empty(); }));
  }
  return text;
}

}  // namespace

TEST_CASE("a master that vanishes in the middle of a reply is an error outcome, not a crash") {
  const std::string why = fake_error(FakeMaster::Mode::cut_reply);
  CAPTURE(why);
  CHECK_FALSE(why.empty());
}

TEST_CASE("a master that answers garbage is an error outcome naming a protocol error") {
  const std::string why = fake_error(FakeMaster::Mode::garbage);
  CAPTURE(why);
  CHECK(why.find("rotocol") != std::string::npos);
}

TEST_CASE("a master that hangs up at once is an error outcome") {
  const std::string why = fake_error(FakeMaster::Mode::hang_up);
  CAPTURE(why);
  CHECK_FALSE(why.empty());
}

TEST_CASE("a master whose handshake takes longer than node_timeout answers the first command: its node timeout runs from its write") {
  // One master: its answer decides. The relay holds the connection's first
  // bytes for 1.5 s, three node timeouts; the connect deadline allows it.
  // (Before, the command's node timeout ran from the call: both failed.)
  RedisServer server;
  SlowStartRelay far(server.port(), std::chrono::milliseconds{1500});
  auto client = client_for({far.url()}, [](Options& o) {
    o.node_timeout = std::chrono::milliseconds{500};
    o.stall_timeout = std::chrono::milliseconds{3000};
    o.connect_timeout = std::chrono::milliseconds{10000};
  });
  auto status = client->status("far");  // sent before the handshake completed
  REQUIRE(status.ok());
  REQUIRE(status->nodes.size() == 1);
  INFO(status->nodes[0].error);
  CHECK(status->nodes[0].state == NodeHolding::State::free);
  auto lock = client->try_acquire("far");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(client->release(*lock)->released);
}
