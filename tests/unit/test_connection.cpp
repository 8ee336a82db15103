// test_connection.cpp — the one connection state machine (src/connection.hpp)
// on fake Wires and manual time: every transition, with the owner's view of
// it, AUTH, the connect deadline naming its stage, backoff, the bounded
// graceful close, and an owner that closes or frees it inside its events.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "connection.hpp"
#include "fake_wire.hpp"
#include "test_runtime.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace redlock::test;
using std::chrono::milliseconds;
using State = Connection::State;

namespace {

// Owner — records what the Connection tells it; its handshake is one PING.
struct Owner final : ConnectionOwner {
  std::vector<std::string> log;  // "connecting", "ready", "down: why", "reply: text", …
  std::function<void()> inside_down;
  bool refuse_open = false;

  bool on_open() override {
    if (refuse_open) return false;
    const std::string_view ping[1] = {"PING"};
    return conn->write(ping);
  }
  void on_reply(const WireReply& reply) override { log.push_back("reply: " + std::string(reply.str)); }
  void on_down(std::string_view why) override {
    log.push_back("down: " + std::string(why));
    if (inside_down) inside_down();
  }
  void on_state(State, State to, std::string_view reason) override {
    log.push_back(std::string(to_string(to)) + (reason.empty() ? "" : ": " + std::string(reason)));
  }
  Connection* conn = nullptr;
};

struct Bed {
  ManualRuntime runtime;
  FakeWireFactory wires;
  Options options;
  NodeAddress address;
  Owner owner;
  int closed = 0;
  std::unique_ptr<Connection> conn;
  Bed() {
    address.host = "10.0.0.1";
    options.reconnect_min = milliseconds{100};
    options.reconnect_max = milliseconds{400};
    runtime.draw = [](std::uint64_t bound) { return bound - 1; };  // the top of each jitter range
  }
  Connection& make() {
    conn = std::make_unique<Connection>(runtime, wires, address, options, owner, [this] { ++closed; });
    owner.conn = conn.get();
    return *conn;
  }
  FakeWire& wire() {
    REQUIRE(wires.live != nullptr);
    return *wires.live;
  }
};

}  // namespace

TEST_CASE("connecting, handshaking, ready: the owner's handshake goes behind AUTH, whose reply it never sees") {
  Bed bed;
  bed.address.password = "secret";
  bed.address.user = "locker";
  Connection& c = bed.make();
  CHECK(c.state() == State::idle);
  CHECK(c.last_error() == "not connected yet");
  c.start();
  CHECK(c.state() == State::connecting);
  CHECK(bed.owner.log == std::vector<std::string>{"connecting"});
  FakeWire& w = bed.wire();
  w.connected();
  CHECK(c.state() == State::handshaking);
  w.flush();
  REQUIRE(w.sent.size() == 2);
  CHECK(w.sent[0] == Command{"AUTH", "locker", "secret"});
  CHECK(w.sent[1] == Command{"PING"});
  w.answer(status("OK"));  // AUTH's: the Connection's own
  w.answer(status("PONG"));
  c.ready();
  CHECK(c.state() == State::ready);
  CHECK(bed.owner.log == std::vector<std::string>{"connecting", "handshaking", "reply: PONG", "ready"});
  // Ready: the connect deadline no longer runs.
  bed.runtime.advance(bed.options.connect_timeout * 2);
  CHECK(c.state() == State::ready);
  CHECK(bed.wires.connects == 1);
}

namespace {

// refuse_auth: a connection with a wrong password whose AUTH the server
// answers with `text`.
Connection& refuse_auth(Bed& bed, const std::string& text) {
  bed.address.password = "wrong";
  Connection& c = bed.make();
  c.start();
  bed.wire().connected();
  bed.wire().flush();
  bed.wire().answer(error(text));
  return c;
}

}  // namespace

TEST_CASE("a refused AUTH drops the connection with its reason, and it backs off") {
  Bed bed;
  Connection& c = refuse_auth(bed, "WRONGPASS invalid username-password pair");
  CHECK(bed.wires.live == nullptr);
  CHECK(c.state() == State::backing_off);
  CHECK(c.last_error() == "AUTH failed: WRONGPASS invalid username-password pair");
  CHECK(bed.owner.log.back() == "down: AUTH failed: WRONGPASS invalid username-password pair");
  CHECK_FALSE(c.write(std::vector<std::string_view>{"PING"}));  // no Wire, no write
  bed.runtime.advance(milliseconds{100});
  CHECK(bed.wires.connects == 2);
  CHECK(c.state() == State::connecting);
}

TEST_CASE("a server's error text is quoted cut short and with its control bytes made '?'") {
  Bed bed;
  // A hostile server: a megabyte of error text, a terminal escape in it.
  const std::string text = "WRONGPASS \x1b[2J\r\n" + std::string(1 << 20, 'x');
  Connection& c = refuse_auth(bed, text);
  CHECK(c.state() == State::backing_off);
  const std::string& why = c.last_error();
  CHECK(why.size() < 400);
  CHECK(why.starts_with("AUTH failed: WRONGPASS ?[2J??xx"));
  CHECK(why.ends_with("… (" + std::to_string(text.size()) + " bytes)"));
  CHECK(why.find('\x1b') == std::string::npos);
}

TEST_CASE("the connect deadline covers the transport and the owner's handshake, and names what it waited for") {
  Bed bed;
  Connection& c = bed.make();
  c.start();
  bed.runtime.advance(bed.options.connect_timeout);
  CHECK(c.state() == State::backing_off);
  CHECK(c.last_error() == "connect timeout after " + std::to_string(bed.options.connect_timeout.count()) + " ms");

  bed.runtime.advance(milliseconds{100});
  REQUIRE(bed.wires.connects == 2);
  bed.wire().connected();  // the transport is up; the handshake is never answered
  bed.runtime.advance(bed.options.connect_timeout);
  CHECK(c.state() == State::backing_off);
  CHECK(c.last_error() == "connect timeout after " + std::to_string(bed.options.connect_timeout.count()) +
                              " ms, waiting for the server to answer the handshake");
}

TEST_CASE("backoff doubles to the cap and resets once a handshake completes") {
  Bed bed;
  Connection& c = bed.make();
  c.start();
  const long long expected[] = {100, 200, 400, 400};
  for (int i = 0; i < 4; ++i) {
    bed.wire().lose("connection refused");
    CHECK(c.state() == State::backing_off);
    CHECK(c.last_error() == "connection refused");
    bed.runtime.advance(milliseconds{expected[i] - 1});
    CHECK(bed.wires.connects == i + 1);
    bed.runtime.advance(milliseconds{1});
    CHECK(bed.wires.connects == i + 2);
  }
  bed.wire().connected();
  c.ready();
  bed.wire().lose("connection reset by peer");
  bed.runtime.advance(milliseconds{99});
  CHECK(bed.wires.connects == 5);
  bed.runtime.advance(milliseconds{1});
  CHECK(bed.wires.connects == 6);  // back to reconnect_min
}

TEST_CASE("an owner that cannot write its handshake drops the new connection") {
  Bed bed;
  bed.owner.refuse_open = true;
  Connection& c = bed.make();
  c.start();
  CHECK(c.state() == State::backing_off);
  CHECK(c.last_error() == "cannot queue the handshake");
  CHECK(bed.wires.live == nullptr);
}

TEST_CASE("a graceful close waits for the owner's drop, bounded by its drain time, then reports on a later turn") {
  SUBCASE("the owner drops when its replies are in") {
    Bed bed;
    Connection& c = bed.make();
    c.start();
    bed.wire().connected();
    c.ready();
    c.close(milliseconds{500});
    CHECK(c.state() == State::closing);
    CHECK(c.live());
    CHECK(c.write(std::vector<std::string_view>{"PING"}));  // what the owner still owes goes out
    c.drop("client closed");
    CHECK(c.state() == State::closed);
    CHECK(bed.owner.log.back() == "down: client closed");
    CHECK(bed.closed == 0);  // never inside the call
    bed.runtime.advance(milliseconds{0});
    CHECK(bed.closed == 1);
    CHECK(bed.runtime.armed() == 0);
  }
  SUBCASE("the drain bound passes") {
    Bed bed;
    Connection& c = bed.make();
    c.start();
    c.close(milliseconds{500});
    bed.runtime.advance(milliseconds{499});
    CHECK(c.state() == State::closing);
    bed.runtime.advance(milliseconds{1});
    CHECK(c.state() == State::closed);
    CHECK(bed.wires.live == nullptr);
    CHECK(bed.owner.log.back() == "down: client closed");
    bed.runtime.advance(milliseconds{0});
    CHECK(bed.closed == 1);
  }
  SUBCASE("closed while backing off: no reconnect, no on_down") {
    Bed bed;
    Connection& c = bed.make();
    c.start();
    bed.wire().lose("connection refused");
    const std::size_t events = bed.owner.log.size();
    c.close(milliseconds{500});
    CHECK(c.state() == State::closed);
    CHECK(bed.owner.log.size() == events + 1);  // "closed", and no second "down"
    bed.runtime.advance(milliseconds{1000});
    CHECK(bed.wires.connects == 1);
    CHECK(bed.closed == 1);
  }
  SUBCASE("never started") {
    Bed bed;
    Connection& c = bed.make();
    c.close(milliseconds{0});
    c.start();  // too late: nothing opens
    bed.runtime.advance(milliseconds{0});
    CHECK(bed.wires.connects == 0);
    CHECK(bed.closed == 1);
  }
}

TEST_CASE("an owner may close inside on_down, and free the Connection inside on_closed") {
  Bed bed;
  bed.conn = std::make_unique<Connection>(bed.runtime, bed.wires, bed.address, bed.options, bed.owner, [&] {
    bed.conn.reset();
    ++bed.closed;
  });
  bed.owner.conn = bed.conn.get();
  Connection& c = *bed.conn;
  bed.owner.inside_down = [&] { c.close(milliseconds{500}); };
  c.start();
  bed.wire().lose("connection reset by peer");
  CHECK(c.state() == State::closed);  // no Wire left to drain
  bed.runtime.advance(milliseconds{1000});
  CHECK(bed.closed == 1);
  CHECK(bed.conn == nullptr);
  CHECK(bed.wires.connects == 1);  // the backoff armed before on_down never fired
  CHECK(bed.runtime.armed() == 0);
}
