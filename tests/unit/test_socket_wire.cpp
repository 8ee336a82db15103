// test_socket_wire.cpp — the production Wire (src/socket_wire.hpp) on a
// real uv loop against sockets the test holds itself: events never inside
// a call, every address tried in turn, replies split across reads, a peer
// that resets mid-write (no SIGPIPE), and name resolution — a resolver
// that never answers costs the connect deadline and nothing else, and a
// cancelled lookup leaves nothing on the loop; the reply limits (the
// ReplyScanner, src/resp.hpp) and the per-turn budget.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "node_session.hpp"
#include "resolver.hpp"
#include "resp.hpp"
#include "scripts.hpp"
#include "socket_wire.hpp"
#include "uv_runtime.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {

// Loop — a private uv loop that must close with nothing left on it.
struct Loop {
  uv_loop_t loop{};
  Loop() { uv_loop_init(&loop); }
  ~Loop() {
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
  }
  // run_until turns the loop until `done` holds (bounded by a 5 s timer).
  bool run_until(const std::function<bool()>& done) {
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    uv_timer_start(&guard, [](uv_timer_t*) {}, 5000, 0);
    while (!done() && uv_is_active(reinterpret_cast<uv_handle_t*>(&guard))) uv_run(&loop, UV_RUN_ONCE);
    uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
    uv_run(&loop, UV_RUN_NOWAIT);
    return done();
  }
};

struct Events final : WireEvents {
  std::vector<std::string> log;
  std::function<void()> after_reply;
  void on_connected() override { log.push_back("connected"); }
  void on_reply(const WireReply& r) override {
    log.push_back(r.type == WireReply::Type::integer ? "int " + std::to_string(r.integer) : "str " + std::string(r.str));
    if (after_reply) after_reply();
  }
  void on_flush() override {}
  void on_lost(std::string_view why) override { log.push_back("lost: " + std::string(why)); }
  bool has(const std::string& entry) const {
    for (const auto& l : log)
      if (l == entry || l.starts_with(entry)) return true;
    return false;
  }
};

// bind_loopback binds `fd` to a free port of 127.0.0.1 and returns it.
int bind_loopback(int fd) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// Listener — a listening TCP socket on 127.0.0.1.
struct Listener {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = bind_loopback(fd);
  Listener() { REQUIRE(::listen(fd, 8) == 0); }
  ~Listener() { ::close(fd); }
  int accept() const { return ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC); }
};

// ClosedPort — a loopback port nobody listens on (bound, never listened).
struct ClosedPort {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = bind_loopback(fd);
  ~ClosedPort() { ::close(fd); }
};

NodeAddress tcp(const std::string& host, int port) {
  NodeAddress a;
  a.host = host;
  a.port = port;
  return a;
}

// Resolvers the test controls: answers with fixed addresses on a later
// loop turn, or never.
struct FakeLookup final : Lookup {
  int* cancelled;
  explicit FakeLookup(int* c) : cancelled(c) {}
  ~FakeLookup() override { ++*cancelled; }
};

struct NeverResolver final : Resolver {
  int calls = 0, cancelled = 0;
  std::unique_ptr<Lookup> resolve(const std::string&, int, Done) override {
    ++calls;
    return std::make_unique<FakeLookup>(&cancelled);
  }
};

struct FixedResolver final : Resolver {
  std::vector<int> ports;  // 127.0.0.1 on each, in order
  Done pending;
  int cancelled = 0;
  std::unique_ptr<Lookup> resolve(const std::string&, int, Done done) override {
    pending = std::move(done);
    return std::make_unique<FakeLookup>(&cancelled);
  }
  void answer() {
    std::vector<SocketAddress> out;
    for (int p : ports) {
      std::vector<SocketAddress> one = numeric_address("127.0.0.1", p);
      out.insert(out.end(), one.begin(), one.end());
    }
    auto done = std::move(pending);
    done(std::move(out), {});
  }
};

}  // namespace

TEST_CASE("socket wire: a refused connect reports on a later turn, and a numeric host needs no lookup") {
  Loop l;
  NeverResolver resolver;
  SocketWireFactory factory(&l.loop, nullptr, &resolver);
  ClosedPort closed;
  Events ev;
  auto wire = factory.connect(tcp("127.0.0.1", closed.port), ev);
  CHECK(ev.log.empty());  // never inside connect
  CHECK(wire->write(std::array<std::string_view, 1>{"PING"}));
  REQUIRE(l.run_until([&] { return !ev.log.empty(); }));
  CHECK(ev.log == std::vector<std::string>{"lost: connection refused"});
  CHECK(resolver.calls == 0);
  CHECK_FALSE(wire->write(std::array<std::string_view, 1>{"PING"}));  // failed: nothing more is queued
}

TEST_CASE("socket wire: a missing unix socket names the OS reason") {
  Loop l;
  SocketWireFactory factory(&l.loop, nullptr);
  NodeAddress a;
  a.kind = NodeAddress::Kind::unix_socket;
  a.path = "/nonexistent/redlock-test.sock";
  Events ev;
  auto wire = factory.connect(a, ev);
  CHECK(ev.log.empty());
  REQUIRE(l.run_until([&] { return !ev.log.empty(); }));
  CHECK(ev.log == std::vector<std::string>{"lost: no such file or directory"});
}

TEST_CASE("socket wire: every address of a name is tried in turn") {
  Loop l;
  FixedResolver resolver;
  ClosedPort closed;
  Listener server;
  resolver.ports = {closed.port, server.port};
  SocketWireFactory factory(&l.loop, nullptr, &resolver);
  Events ev;
  auto wire = factory.connect(tcp("master.test", 6379), ev);
  CHECK(wire->waiting_for() == "the name master.test to resolve");
  resolver.answer();
  REQUIRE(l.run_until([&] { return !ev.log.empty(); }));
  CHECK(ev.log == std::vector<std::string>{"connected"});
  CHECK(resolver.cancelled == 1);  // the lookup object was let go once answered
}

TEST_CASE("socket wire: commands go out in RESP in one write; replies split across reads come whole and in order") {
  Loop l;
  Listener server;
  SocketWireFactory factory(&l.loop, nullptr);
  Events ev;
  auto wire = factory.connect(tcp("127.0.0.1", server.port), ev);
  wire->write(std::array<std::string_view, 2>{"GET", "k"});
  wire->write(std::array<std::string_view, 1>{"PING"});
  REQUIRE(l.run_until([&] { return ev.has("connected"); }));
  const int peer = server.accept();
  REQUIRE(peer >= 0);
  std::string got;
  const std::string expected = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
  REQUIRE(l.run_until([&] {
    char buf[256];
    const ssize_t n = ::recv(peer, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) got.append(buf, static_cast<std::size_t>(n));
    return got.size() >= expected.size();
  }));
  CHECK(got == expected);
  ::send(peer, "$5\r\nhel", 7, 0);
  uv_run(&l.loop, UV_RUN_NOWAIT);  // loopback: the bytes are readable already
  CHECK(ev.log.size() == 1);       // half a reply is no reply
  ::send(peer, "lo\r\n:42\r\n", 9, 0);
  REQUIRE(l.run_until([&] { return ev.log.size() == 3; }));
  CHECK(ev.log == std::vector<std::string>{"connected", "str hello", "int 42"});
  ::close(peer);
  REQUIRE(l.run_until([&] { return ev.log.size() == 4; }));
  CHECK(ev.log[3] == "lost: server closed the connection");
}

TEST_CASE("socket wire: a peer that resets while we write costs an error, never SIGPIPE") {
  struct sigaction old {};
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, &old);  // the default action would end this process
  {
    Loop l;
    Listener server;
    SocketWireFactory factory(&l.loop, nullptr);
    Events ev;
    auto wire = factory.connect(tcp("127.0.0.1", server.port), ev);
    REQUIRE(l.run_until([&] { return ev.has("connected"); }));
    const int peer = server.accept();
    linger hard{1, 0};
    ::setsockopt(peer, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    ::close(peer);  // RST
    const std::string big(64 * 1024, 'x');
    for (int i = 0; i < 64 && !ev.has("lost"); ++i) {
      wire->write(std::array<std::string_view, 2>{"ECHO", big});
      l.run_until([&] { return ev.has("lost"); });
    }
    REQUIRE(ev.has("lost"));
    INFO(ev.log.back());
    CHECK((ev.log.back().find("reset") != std::string::npos || ev.log.back().find("broken pipe") != std::string::npos ||
           ev.log.back().find("closed") != std::string::npos));
  }
  sigaction(SIGPIPE, &old, nullptr);
}

TEST_CASE("socket wire: the owner may destroy the Wire inside on_reply") {
  Loop l;
  Listener server;
  SocketWireFactory factory(&l.loop, nullptr);
  Events ev;
  std::unique_ptr<Wire> wire = factory.connect(tcp("127.0.0.1", server.port), ev);
  ev.after_reply = [&] { wire.reset(); };
  REQUIRE(l.run_until([&] { return ev.has("connected"); }));
  const int peer = server.accept();
  ::send(peer, ":1\r\n:2\r\n:3\r\n", 12, 0);  // three replies in one read
  REQUIRE(l.run_until([&] { return wire == nullptr; }));
  CHECK(ev.log == std::vector<std::string>{"connected", "int 1"});  // nothing after its destruction
  ::close(peer);
}

TEST_CASE("resolver: a name resolves on its thread; a cancelled lookup never answers and leaves nothing open") {
  Loop l;
  ThreadResolver resolver(&l.loop);
  std::vector<SocketAddress> found;
  std::string why = "unset";
  auto lookup = resolver.resolve("localhost", 6379, [&](std::vector<SocketAddress> a, std::string w) {
    found = std::move(a);
    why = std::move(w);
  });
  REQUIRE(l.run_until([&] { return why != "unset"; }));
  CHECK(why.empty());
  REQUIRE_FALSE(found.empty());
  for (const SocketAddress& a : found) {
    if (a.storage.ss_family == AF_INET) {
      CHECK(ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port) == 6379);
    }
  }
  bool called = false;
  auto cancelled = resolver.resolve("localhost", 6379, [&](std::vector<SocketAddress>, std::string) { called = true; });
  cancelled.reset();
  uv_run(&l.loop, UV_RUN_DEFAULT);  // returns: nothing is left on the loop
  CHECK_FALSE(called);

  std::string failure;
  auto bad = resolver.resolve("name.invalid.", 1, [&](std::vector<SocketAddress> a, std::string w) {
    CHECK(a.empty());
    failure = std::move(w);
  });
  REQUIRE(l.run_until([&] { return !failure.empty(); }));
  CHECK(failure.starts_with("cannot resolve name.invalid.: "));
}

TEST_CASE("a resolver that never answers costs the session its connect deadline, and closing does not wait for it") {
  Loop l;
  NeverResolver resolver;
  SocketWireFactory factory(&l.loop, nullptr, &resolver);
  UvRuntime runtime(&l.loop);
  Options options;
  options.connect_timeout = 60ms;
  options.reconnect_min = 1000ms;
  options.reconnect_max = 1000ms;
  std::array<std::string, script_count> shas{};
  bool closed = false;
  auto session = std::make_unique<NodeSession>(runtime, factory, tcp("hangs.test", 6379), options, shas.data(),
                                               [&] { closed = true; });
  session->start();
  REQUIRE(l.run_until([&] { return session->state() == NodeSession::State::backing_off && resolver.calls == 1 &&
                                   resolver.cancelled == 1; }));
  CHECK(session->last_error() == "connect timeout after 60 ms, waiting for the name hangs.test to resolve");
  session->close();
  REQUIRE(l.run_until([&] { return closed; }));
  session.reset();
}

// ---- Reply limits and the per-turn budget ------------------------------------------

namespace {

// scan_all: the replies `stream` completes when scanned in pieces of
// `step` bytes; -1 (and `why`) when the scanner stops it.
long scan_all(const resp::ReplyLimits& limits, std::string_view stream, std::size_t step, std::string& why) {
  resp::ReplyScanner scanner(limits);
  for (std::size_t at = 0; at < stream.size(); at += step) {
    if (!scanner.scan(stream.substr(at, step), why)) return -1;
  }
  return static_cast<long>(scanner.ready());
}

// CountingEvents — counts replies without keeping them (a flood sends millions).
struct CountingEvents final : WireEvents {
  std::size_t replies = 0;
  std::string lost;
  std::function<void()> after_reply;
  void on_connected() override {}
  void on_reply(const WireReply&) override {
    ++replies;
    if (after_reply) after_reply();
  }
  void on_flush() override {}
  void on_lost(std::string_view why) override { lost = why; }
};

// Connected — a SocketWire connected to a socket the test holds (`peer`).
struct Connected {
  explicit Connected(const resp::ReplyLimits& limits = resp::reply_limits) : factory(&l.loop, nullptr, nullptr, limits) {}
  Loop l;
  Listener server;
  SocketWireFactory factory;
  CountingEvents ev;
  std::unique_ptr<Wire> wire = factory.connect(tcp("127.0.0.1", server.port), ev);
  int peer = server.accept();
  ~Connected() {
    wire.reset();
    if (peer >= 0) ::close(peer);
  }
  void send(std::string_view bytes) const { REQUIRE(::send(peer, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size())); }
};

}  // namespace

TEST_CASE("reply scanner: every split of a stream completes the same replies, as hiredis reads them") {
  const std::string stream =
      "+OK\r\n-ERR no\r\n:42\r\n$5\r\nhe\r\nl\r\n$-1\r\n*-1\r\n*0\r\n$0\r\n\r\n"
      "*4\r\n$7\r\ncreated\r\n$2\r\ne1\r\n$5\r\n10102\r\n$1\r\n0\r\n"
      "*2\r\n*2\r\n:1\r\n:2\r\n+x\r\r\n";
  std::string why;
  for (std::size_t step : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, stream.size()}) {
    CAPTURE(step);
    CHECK(scan_all(resp::reply_limits, stream, step, why) == 10);
  }
  redisReader* reader = redisReaderCreate();
  redisReaderFeed(reader, stream.data(), stream.size());
  long parsed = 0;
  for (void* r = nullptr; redisReaderGetReply(reader, &r) == REDIS_OK && r != nullptr; r = nullptr) {
    ++parsed;
    freeReplyObject(r);
  }
  redisReaderFree(reader);
  CHECK(parsed == 10);
  CHECK(scan_all(resp::reply_limits, "$5\r\nhel", 1, why) == 0);  // half a reply is none
}

TEST_CASE("reply scanner: a length past the limits stops the stream at its header, naming it") {
  std::string why;
  CHECK(scan_all(resp::reply_limits, "$9000000000000000000\r\n", 64, why) == -1);
  CHECK(why == "reply too large: a bulk string of 9000000000000000000 bytes (at most 4194304 bytes in one reply)");
  CHECK(scan_all(resp::reply_limits, "*1000000000\r\n", 64, why) == -1);
  CHECK(why == "reply too large: an array of 1000000000 elements (at most 4096 in one reply)");
  CHECK(scan_all(resp::reply_limits, "$99999999999999999999\r\n", 64, why) == -1);  // 20 digits
  CHECK(why.starts_with("protocol error: bad length"));
  CHECK(scan_all(resp::reply_limits, "$-2\r\n", 64, why) == -1);
  CHECK(why.starts_with("protocol error: bad length"));
  CHECK(scan_all(resp::reply_limits, "!!! not RESP\r\n", 64, why) == -1);
  CHECK(why == "protocol error: a reply starts with '!', which no RESP2 reply does");

  // Small limits, to see each one exactly at its edge.
  const resp::ReplyLimits small{32, 4, 2};
  CHECK(scan_all(small, "$25\r\n" + std::string(25, 'x') + "\r\n", 5, why) == 1);  // 32 bytes in all
  CHECK(scan_all(small, "$26\r\n", 5, why) == -1);
  CHECK(why == "reply too large: a bulk string of 26 bytes (at most 32 bytes in one reply)");
  CHECK(scan_all(small, "+" + std::string(29, 'x') + "\r\n", 5, why) == 1);
  CHECK(scan_all(small, "+" + std::string(30, 'x') + "\r\n", 5, why) == -1);
  CHECK(why == "reply too large: more than 32 bytes");
  CHECK(scan_all(small, "+" + std::string(1000, 'x'), 100, why) == -1);  // a line with no end
  CHECK(scan_all(small, "*2\r\n*2\r\n:1\r\n:2\r\n:3\r\n", 1, why) == 1);   // 4 elements, depth 2
  CHECK(scan_all(small, "*2\r\n*3\r\n", 1, why) == -1);                    // 5 elements, at every depth
  CHECK(why == "reply too large: an array of 3 elements (at most 4 in one reply)");
  CHECK(scan_all(small, "*1\r\n*1\r\n*1\r\n", 1, why) == -1);
  CHECK(why == "reply too large: arrays nested more than 2 deep");
  // The limits are per reply: many small replies are fine.
  std::string many;
  for (int i = 0; i < 100; ++i) many += "*2\r\n:1\r\n:2\r\n";
  CHECK(scan_all(small, many, 7, why) == 100);
}

TEST_CASE("socket wire: a reply past the limits ends the connection at its header, with its reason") {
  for (const std::string& header : {std::string("$9000000000000000000\r\n"), std::string("*1000000000\r\n"),
                                    std::string("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n")}) {
    CAPTURE(header);
    Connected c;
    c.send(header);
    REQUIRE(c.l.run_until([&] { return !c.ev.lost.empty(); }));
    CHECK(c.ev.replies == 0);
    CHECK(c.ev.lost.starts_with("reply too large: "));
  }
}

TEST_CASE("socket wire: a factory's reply limits hold each of its Wires (a CLUSTER SLOTS connection gets larger ones)") {
  std::string wide = "*5000\r\n";
  for (int i = 0; i < 5000; ++i) wide += ":1\r\n";
  {
    Connected usual;
    usual.send(wide);
    REQUIRE(usual.l.run_until([&] { return !usual.ev.lost.empty(); }));
    CHECK(usual.ev.lost == "reply too large: an array of 5000 elements (at most 4096 in one reply)");
  }
  Connected larger(resp::ReplyLimits{1024 * 1024, 8192, 1});
  larger.send(wide);
  REQUIRE(larger.l.run_until([&] { return larger.ev.replies == 1; }));
  CHECK(larger.ev.lost.empty());
}

TEST_CASE("socket wire: one turn delivers at most its budget of replies; the loop's timers run in between, and the rest follow without more bytes") {
  Connected c;
  REQUIRE(c.peer >= 0);
  std::string burst;
  for (int i = 0; i < 3000; ++i) burst += ":1\r\n";  // 12 KB: one read
  uv_timer_t timer;
  uv_timer_init(&c.l.loop, &timer);
  std::size_t seen_by_timer = 0;
  timer.data = &seen_by_timer;
  c.ev.after_reply = [&] {
    if (c.ev.replies == 1) {
      // Due at once: it runs at the loop's next turn.
      uv_timer_start(&timer, [](uv_timer_t* t) { *static_cast<std::size_t*>(t->data) = 1; }, 0, 0);
    }
    if (seen_by_timer == 1) seen_by_timer = c.ev.replies;  // the first reply after it ran
  };
  c.send(burst);
  REQUIRE(c.l.run_until([&] { return c.ev.replies == 3000; }));
  CHECK(seen_by_timer > 1);
  CHECK(seen_by_timer <= 1025);  // after the first turn's 1,024
  CHECK(c.ev.lost.empty());
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
}

TEST_CASE("socket wire: a server that never lets the socket go empty does not hold the loop: its timers run after one budget") {
  Connected c;
  REQUIRE(c.peer >= 0);
  // The flood is refilled from inside on_reply, before the Wire reads
  // again (as much as was taken: the socket never fills, and this send
  // never blocks the loop): every read finds it full, up to 200,000
  // replies.
  std::string batch;
  for (int i = 0; i < 4096; ++i) batch += ":1\r\n";  // 16 KiB
  constexpr std::size_t total = 200000;
  std::size_t sent = 2 * 4096;
  uv_timer_t timer;
  uv_timer_init(&c.l.loop, &timer);
  std::size_t seen_by_timer = 0;
  timer.data = &seen_by_timer;
  c.ev.after_reply = [&] {
    if (c.ev.replies == 1) uv_timer_start(&timer, [](uv_timer_t* t) { *static_cast<std::size_t*>(t->data) = 1; }, 0, 0);
    if (seen_by_timer == 1) seen_by_timer = c.ev.replies;
    if (c.ev.replies % 4096 == 0 && sent < total) {
      c.send(batch);
      sent += 4096;
    }
  };
  c.send(batch + batch);
  REQUIRE(c.l.run_until([&] { return c.ev.replies == sent && sent >= total; }));
  CHECK(seen_by_timer > 1);
  CHECK(seen_by_timer <= 1025);  // the first turn's budget, and no more
  CHECK(c.ev.lost.empty());
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
}
