// test_bad_server.cpp — a master that misbehaves at the protocol level: it
// vanishes in the middle of a reply, answers garbage, or hangs up at once;
// one whose connection is slow to start (a master far away); and one that
// floods the client with replies without end. Each must be one node's
// `error` outcome with a clear text; nothing crashes, nothing leaks (ASan),
// the healthy masters decide, and a flood delays no deadline and grows no
// memory.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;

namespace {

using Clock = redlock::BootClock;

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

// FakeMaster — does `misbehave` on the handshake's first command (INFO).
// One connection at a time, on a thread, loopback only.
class FakeMaster {
 public:
  enum class Mode { cut_reply, garbage, hang_up };

  explicit FakeMaster(Mode mode)
      : mode_(mode), listener_([this](int c) {
          if (mode_ != Mode::hang_up) talk(c);
          ::close(c);
        }) {}
  std::string url() const { return listener_.url(); }

 private:
  // talk waits for the first command, answers it with `misbehave` and hangs up.
  void talk(int c) {
    char chunk[4096];
    if (::read(c, chunk, sizeof chunk) <= 0) return;
    send(c, mode_ == Mode::cut_reply ? "+O" : "!!! not RESP\r\n");
  }

  static void send(int c, const std::string& s) { (void)!::write(c, s.data(), s.size()); }

  Mode mode_;
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

// FloodMaster — a minority master gone wrong. It answers the client's
// handshake (SCRIPT LOAD, INFO, the marker) and PING like a redis up for
// long, and every other command with an error; once flood() was called, every
// connection whose handshake it answered gets `shape` without end — for
// at most `flood_for` after flood() and `flood_cap` bytes per connection,
// so that a client the flood holds (the bug this guards against) fails
// the test instead of hanging it or filling the machine.
class FloodMaster {
 public:
  enum class Shape { replies, huge_bulk, huge_array };
  static constexpr std::chrono::seconds flood_for{4};
  static constexpr std::size_t flood_cap = std::size_t{1} << 30;

  explicit FloodMaster(Shape shape)
      : shape_(shape), listener_([this](int c) {
          serve(c);
          ::close(c);
        }) {}
  std::string url() const { return listener_.url(); }
  // flood: from now on, every connection past its handshake is flooded.
  void flood() {
    flood_until_ = (std::chrono::steady_clock::now() + flood_for).time_since_epoch().count();
  }
  int floods() const { return floods_; }

 private:
  bool flooding() const { return std::chrono::steady_clock::now().time_since_epoch().count() < flood_until_; }

  // serve answers commands in order; after the handshake's last answer,
  // it floods once flood() was called.
  void serve(int c) {
    std::string in;
    bool handshaken = false;
    char chunk[4096];
    while (!listener_.stopped()) {
      if (handshaken && flooding()) return pour(c);
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 10) < 0) return;
      if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(c, chunk, sizeof chunk);
      if (n <= 0) return;
      in.append(chunk, static_cast<std::size_t>(n));
      while (std::optional<std::vector<std::string>> argv = next_command(in)) {
        const std::vector<std::string>& a = *argv;
        std::string out;
        if (a[0] == "SCRIPT" && a[1] == "EXISTS") {
          out = "*" + std::to_string(a.size() - 2) + "\r\n";
          for (std::size_t i = 2; i < a.size(); ++i) out += ":1\r\n";
        } else if (a[0] == "SCRIPT") {
          out = "$40\r\n" + std::string(40, 'a') + "\r\n";
        } else if (a[0] == "INFO") {
          out = bulk("redis_version:7.0.0\r\nrun_id:" + std::string(40, 'f') + "\r\nuptime_in_seconds:100000\r\n");
        } else if (a[0] == "PING") {
          out = "+PONG\r\n";
        } else if (a[0] == "EVALSHA" && a.size() == 10 && a[3] == "redlock-marker") {
          // KEYS: the marker, its server, its replid; ARGV: epoch, ms, run id, replid.
          out = "*4\r\n" + bulk("found") + bulk(a[6]) + bulk(a[7]) + bulk("100000000");
          handshaken = true;
        } else {
          out = "-ERR not a real master\r\n";
        }
        if (!send_all(c, out)) return;
      }
    }
  }

  // pour sends the flood: a header (if any), then `body` over and over,
  // as one stream whatever the socket takes at a time.
  void pour(int c) {
    ++floods_;
    std::string head, body;
    switch (shape_) {
      case Shape::replies:
        for (int i = 0; i < 13107; ++i) body += "+OK\r\n";
        break;
      case Shape::huge_bulk:
        head = "$9000000000000000000\r\n";
        body.assign(65536, 'x');
        break;
      case Shape::huge_array:
        head = "*1000000000\r\n";
        body = bulk(std::string(65536, 'x'));  // one element
        break;
    }
    // A deep send buffer: the flood keeps megabytes queued for the client
    // even while this thread waits for the CPU.
    const int deep = 4 << 20;
    ::setsockopt(c, SOL_SOCKET, SO_SNDBUF, &deep, sizeof deep);
    if (!send_all(c, head)) return;
    std::size_t at = 0;
    for (std::size_t sent = 0; sent < flood_cap && flooding() && !listener_.stopped();) {
      pollfd p{c, POLLOUT, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      const ssize_t n = ::send(c, body.data() + at, body.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return;  // the client hung up
      sent += static_cast<std::size_t>(n);
      at = (at + static_cast<std::size_t>(n)) % body.size();
    }
  }

  static std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

  static bool send_all(int c, const std::string& s) {
    for (std::size_t done = 0; done < s.size();) {
      const ssize_t n = ::send(c, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  // next_command takes one whole command (an array of bulk strings) off
  // the front of `in`; none while it is incomplete.
  static std::optional<std::vector<std::string>> next_command(std::string& in) {
    std::size_t at = 0;
    auto number = [&](char kind) -> long {
      if (at >= in.size() || in[at] != kind) return -1;
      const std::size_t eol = in.find("\r\n", at);
      if (eol == std::string::npos) return -1;
      const long n = std::stol(in.substr(at + 1, eol - at - 1));
      at = eol + 2;
      return n;
    };
    const long argc = number('*');
    if (argc < 1) return std::nullopt;
    std::vector<std::string> argv;
    for (long i = 0; i < argc; ++i) {
      const long len = number('$');
      if (len < 0 || in.size() < at + static_cast<std::size_t>(len) + 2) return std::nullopt;
      argv.push_back(in.substr(at, static_cast<std::size_t>(len)));
      at += static_cast<std::size_t>(len) + 2;
    }
    in.erase(0, at);
    return argv;
  }

  Shape shape_;
  std::atomic<Clock::rep> flood_until_{0};
  std::atomic<int> floods_{0};
  Listener listener_;
};

// Memory — resident memory of this process: start() resets the kernel's
// high-water mark (/proc/self/clear_refs) and notes the resident size;
// peak_growth() is how far the high-water mark rose above it since.
struct Memory {
  long start_kb = 0;
  bool reset = false;
  static long field_kb(const std::string& name) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
    }
    return -1;
  }
  void start() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.close();
    reset = clear.good();
    start_kb = field_kb("VmRSS");
  }
  long peak_growth_mb() const { return (field_kb(reset ? "VmHWM" : "VmRSS") - start_kb) / 1024; }
};

// Drops — why the lock connections of one node were dropped (an observer).
struct Drops final : Observer {
  explicit Drops(std::size_t node) : node_(node) {}
  void on_connection(const ConnectionEvent& e) override {
    if (e.node != node_ || e.subscriber || e.to != ConnectionState::backing_off) return;
    std::lock_guard lock(mu_);
    reasons_.emplace_back(e.reason);
  }
  std::vector<std::string> reasons() const {
    std::lock_guard lock(mu_);
    return reasons_;
  }

 private:
  std::size_t node_;
  mutable std::mutex mu_;
  std::vector<std::string> reasons_;
};

// flooded: one flooding master of three, flooding while a lease runs out
// at its deadline (auto_extend off). Its loss (on_lost and the stop
// token) must come on time, the flooding master's connection must end
// with `reason`, the two honest masters must still decide, and memory
// must not grow with what the flood sends.
void flooded(FloodMaster::Shape shape, const std::string& reason) {
  using namespace std::chrono_literals;
  RedisGroup honest(2);
  Memory memory;
  memory.start();
  FloodMaster fake(shape);
  auto drops = std::make_shared<Drops>(1);
  auto client = client_for({honest[0].url(), fake.url(), honest[1].url()},
                           [&](Options& o) { o.observer = drops; });
  REQUIRE(ready_everywhere(*client, 3));

  std::mutex mu;
  std::optional<Clock::time_point> lost_at, stopped_at;
  LeaseOptions opts{.acquire = {.ttl = 1000ms}, .auto_extend = false};
  opts.on_lost = [&](const Error&) {
    std::lock_guard lock(mu);
    lost_at = Clock::now();
  };
  auto lease = client->lock("flooded", opts);
  REQUIRE_MESSAGE(lease.ok(), lease.error().to_string());
  const Clock::time_point deadline = lease->deadline();
  std::stop_callback on_stop(lease->stop_token(), [&] {
    std::lock_guard lock(mu);
    stopped_at = Clock::now();
  });
  fake.flood();

  REQUIRE(eventually([&] {
    std::lock_guard lock(mu);
    return lost_at.has_value() && stopped_at.has_value();
  }, 10000ms));
  // Slack: the watchdog fires 2 ms before the deadline and at most a
  // millisecond late; under the flood a loop turn adds one budget of work
  // per connection (well under 10 ms). The rest is for a loaded machine's
  // scheduling — far below the seconds (or never) of a loop the flood holds.
  const auto slack = 200ms;
  {
    std::lock_guard lock(mu);
    CHECK(*lost_at <= deadline + slack);
    CHECK(*stopped_at <= deadline + slack);
  }
  // Each flood ends its connection, naming why (and the client
  // reconnects, to meet the next one). (A flood that starts while a
  // marker check is on its way answers that first: the check's own error.)
  CHECK(fake.floods() >= 2);
  const std::vector<std::string> why = drops->reasons();
  CAPTURE(why.size());
  CHECK(std::find(why.begin(), why.end(), reason) != why.end());

  // The honest majority still decides, while the flood goes on.
  auto other = client->try_acquire("flooded-other");
  REQUIRE_MESSAGE(other.ok(), other.error().to_string());
  CHECK(client->release(*other)->released);

  // A leak detector, not a speed test: what the flood sent (up to 1 GiB
  // per connection) must not be held.
  const long growth = memory.peak_growth_mb();
  CAPTURE(memory.reset);
  CHECK(growth < 200);
}

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

TEST_CASE("a fenced store that answers a long error full of control bytes is quoted short and clean") {
  // Every command: an error of 64 KiB with escapes and bells in it.
  const std::string hostile = "-ERR " + std::string(65536, 'x') + "\x1b[31m\x07\r\n";
  Listener store([&](int c) {
    char chunk[4096];
    while (::read(c, chunk, sizeof chunk) > 0) (void)!::write(c, hostile.data(), hostile.size());
    ::close(c);
  });
  auto opened = FencedStore::connect(*parse_node_url(store.url()));
  REQUIRE(opened.ok());
  auto w = (*opened)->write("k", 1, "v");
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == Errc::store);
  const std::string text = w.error().to_string();
  CHECK(text.size() < 1024);
  CHECK(std::none_of(text.begin(), text.end(), [](char ch) { return ch == '\x1b' || ch == '\x07'; }));
  auto r = (*opened)->read("k");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().to_string().size() < 1024);
}

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

TEST_CASE("a minority master that floods +OK without end delays no lost signal, grows no memory, and the majority decides") {
  flooded(FloodMaster::Shape::replies, "unsolicited reply (no command was waiting for one); reconnecting");
}

TEST_CASE("a minority master that announces a bulk string of 9e18 bytes and streams bytes: the same") {
  flooded(FloodMaster::Shape::huge_bulk,
          "reply too large: a bulk string of 9000000000000000000 bytes (at most 4194304 bytes in one reply)");
}

TEST_CASE("a minority master that announces an array of 1e9 elements and streams them: the same") {
  flooded(FloodMaster::Shape::huge_array, "reply too large: an array of 1000000000 elements (at most 4096 in one reply)");
}
