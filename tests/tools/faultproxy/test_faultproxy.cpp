// test_faultproxy.cpp — faultproxy between hiredis clients and a real
// redis-server: each fault is shown by what a client (and the server) can
// observe. Lower bounds on time are asserted; upper bounds on speed never.
#include <doctest/doctest.h>

#include <cerrno>
#include <random>

#include "helpers.hpp"
#include "redis_server.hpp"

using namespace fptest;
using redlock::test::RedisServer;
using Clock = std::chrono::steady_clock;

namespace {

// Two listeners on different loopback addresses: two "network paths" to
// the same server, so a fault on one is a partition seen by one client.
struct Bed {
  RedisServer server;
  std::unique_ptr<faultproxy::FaultProxyProcess> proxy =
      start_proxy(server.address(), {"127.0.0.1:0", "127.0.0.2:0"});
  faultproxy::FaultProxyControl control = proxy->control();

  std::unique_ptr<Redis> client(std::size_t listener, std::chrono::milliseconds timeout = 2000ms) {
    return std::make_unique<Redis>(proxy->host(listener), proxy->port(listener), timeout);
  }
  std::unique_ptr<RawSocket> raw(std::size_t listener) {
    return std::make_unique<RawSocket>(proxy->host(listener), proxy->port(listener));
  }
  // connections_received: the server's own count of accepted connections
  // (each call adds one: the fixture's connection for INFO itself).
  long long connections_received() {
    const std::string info = server.command({"INFO", "stats"}).str;
    const std::string key = "total_connections_received:";
    return std::stoll(info.substr(info.find(key) + key.size()));
  }
};

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

}  // namespace

TEST_CASE("forwards commands and a 1 MiB value unchanged, to and from the real server") {
  Bed bed;
  CHECK(bed.proxy->listeners().size() == 2);
  CHECK(bed.proxy->host(1) == "127.0.0.2");
  auto c = bed.client(0);
  CHECK(c->cmd({"PING"}) == "PONG");

  std::string value(1 << 20, '\0');
  std::mt19937 rng(1);
  for (auto& ch : value) ch = static_cast<char>(rng());
  CHECK(c->cmd({"SET", "big", value}) == "OK");
  CHECK(c->cmd({"GET", "big"}) == value);
  CHECK(bed.server.command({"GET", "big"}).str == value);  // really stored on the server

  const auto s = bed.control.listener_status("0");
  CHECK(s["connections"]["accepted"] == 1);
  CHECK(s["connections"]["active"] == 1);
  CHECK(s["up"]["forwarded"].get<std::uint64_t>() > value.size());
  CHECK(s["down"]["forwarded"].get<std::uint64_t>() > value.size());
  CHECK(s["up"]["dropped"] == 0);
  CHECK(bed.proxy->stop() == 0);  // clean exit with a connection open (and no leak under ASan)
}

TEST_CASE("delay_up / delay_down: every request or reply takes at least the delay, existing connections too") {
  Bed bed;
  auto up = bed.client(0);    // connected before the fault is set
  auto down = bed.client(1);
  CHECK(up->cmd({"PING"}) == "PONG");
  bed.control.set("0", "delay_up=100");
  bed.control.set("127.0.0.2:" + std::to_string(bed.proxy->port(1)), "delay_down=100 jitter_down=20");
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    CHECK(up->cmd({"PING"}) == "PONG");
    CHECK(ms_since(t0) >= 100);
    t0 = Clock::now();
    CHECK(down->cmd({"ECHO", "x"}) == "x");
    CHECK(ms_since(t0) >= 100);
  }
  auto fresh = bed.client(0);  // a new connection gets the fault as well
  const auto t0 = Clock::now();
  CHECK(fresh->cmd({"PING"}) == "PONG");
  CHECK(ms_since(t0) >= 100);
  CHECK(bed.control.listener_status("0")["faults"]["delay_up"] == 100);
}

TEST_CASE("blackhole on one listener: its client times out, the other path still answers (a partition)") {
  Bed bed;
  auto a = bed.client(0, 300ms);
  auto b = bed.client(1, 300ms);
  CHECK(a->cmd({"PING"}) == "PONG");
  CHECK(b->cmd({"PING"}) == "PONG");

  bed.control.set("0", "blackhole=1");
  std::string error;
  CHECK(a->fails({"PING"}, &error));
  INFO("client error: ", error);
  CHECK(b->cmd({"PING"}) == "PONG");
  const auto s = wait_status(bed.control, "0", [](const auto& st) { return st["up"]["dropped"] == 14; });
  CHECK(s["up"]["dropped"] == 14);  // "*1\r\n$4\r\nPING\r\n" read and dropped

  // A connection made during the blackhole never reaches the server (its
  // SYN is "lost"); once the blackhole lifts it connects and works.
  const long long before = bed.connections_received();
  auto late = bed.client(0, 2000ms);
  wait_status(bed.control, "0", [](const auto& s) { return s["connections"]["accepted"] == 2; });
  CHECK(bed.connections_received() == before + 1);  // just the INFO connection itself
  bed.control.clear("0");
  CHECK(late->cmd({"PING"}) == "PONG");
  CHECK(bed.connections_received() == before + 3);  // INFO, INFO, and the late client
}

TEST_CASE("drop_down: the server applies the write, the client never sees the reply") {
  Bed bed;
  auto c = bed.client(0, 300ms);
  CHECK(c->cmd({"PING"}) == "PONG");
  bed.control.set("0", "drop_down=1");
  CHECK(c->fails({"SET", "k", "applied"}));
  // The reply "+OK\r\n" reached the proxy and was dropped: the SET ran.
  const auto s = wait_status(bed.control, "0", [](const auto& st) { return st["down"]["dropped"] == 5; });
  CHECK(s["down"]["dropped"] == 5);
  CHECK(bed.server.command({"GET", "k"}).str == "applied");
}

TEST_CASE("drop_up: the server never sees the request") {
  Bed bed;
  auto c = bed.client(0, 300ms);
  bed.control.set("0", "drop_up=1");
  CHECK(c->fails({"SET", "k", "lost"}));
  // The whole request (30 bytes of RESP) was read by the proxy and dropped.
  const auto s = wait_status(bed.control, "0", [](const auto& st) { return st["up"]["dropped"] == 30; });
  CHECK(s["up"]["dropped"] == 30);
  CHECK(s["up"]["forwarded"] == 0);
  CHECK(bed.server.command({"EXISTS", "k"}).integer == 0);
}

TEST_CASE("hold_down: replies wait inside the proxy until CLEAR, then arrive in order") {
  Bed bed;
  auto r = bed.raw(0);
  bed.control.set("0", "hold_down=1");
  r->send_all("PING\r\nECHO hello\r\n");
  // Both replies (+PONG\r\n and $5\r\nhello\r\n: 18 bytes) are held by the proxy...
  const auto s = wait_status(bed.control, "0", [](const auto& st) { return st["down"]["held"] == 18; });
  CHECK(s["down"]["held"] == 18);
  CHECK_FALSE(r->readable_now());  // ...so nothing has reached the client
  bed.control.clear("0");
  CHECK(r->read_exact(18) == "+PONG\r\n$5\r\nhello\r\n");
  CHECK(bed.control.listener_status("0")["down"]["held"] == 0);
}

TEST_CASE("refuse: new connections are closed at once, an existing one keeps working") {
  Bed bed;
  auto existing = bed.client(0);
  CHECK(existing->cmd({"PING"}) == "PONG");
  bed.control.set("0", "refuse=1");
  {
    auto r = bed.raw(0);
    CHECK(r->read_errno() == 0);  // EOF without sending anything: closed right after accept
  }
  bool refused = false;
  try {
    auto fresh = bed.client(0);
    refused = fresh->fails({"PING"});
  } catch (const std::runtime_error&) {
    refused = true;  // the connect itself may already see the close
  }
  CHECK(refused);
  CHECK(existing->cmd({"PING"}) == "PONG");
  CHECK(bed.control.listener_status("0")["connections"]["refused"] == 2);
  bed.control.set("0", "refuse=0");
  CHECK(bed.client(0)->cmd({"PING"}) == "PONG");
}

TEST_CASE("RESET: every connection of the listener gets a RST; other listeners are untouched") {
  Bed bed;
  auto c = bed.client(0);
  auto r = bed.raw(0);
  auto other = bed.client(1);
  CHECK(c->cmd({"PING"}) == "PONG");
  r->send_all("PING\r\n");
  CHECK(r->read_exact(7) == "+PONG\r\n");
  CHECK(other->cmd({"PING"}) == "PONG");

  CHECK(bed.control.reset("0") == 2);
  CHECK(r->read_errno() == ECONNRESET);  // a reset, not an orderly close
  CHECK(c->fails({"PING"}));
  CHECK(other->cmd({"PING"}) == "PONG");
  const auto s = bed.control.listener_status("0");
  CHECK(s["connections"]["reset"] == 2);
  CHECK(s["connections"]["active"] == 0);

  auto again = bed.raw(0);  // "SET <l> reset=1" is the same action
  again->send_all("PING\r\n");
  CHECK(again->read_exact(7) == "+PONG\r\n");
  bed.control.set("0", "reset=1");
  CHECK(again->read_errno() == ECONNRESET);
}

TEST_CASE("STATUS counts connections and bytes exactly") {
  Bed bed;
  {
    auto r = bed.raw(0);
    r->send_all("PING\r\n");
    CHECK(r->read_exact(7) == "+PONG\r\n");
    const auto s = bed.control.listener_status("0");
    CHECK(s["index"] == 0);
    CHECK(s["name"] == bed.proxy->listener(0));
    CHECK(s["connections"]["accepted"] == 1);
    CHECK(s["connections"]["active"] == 1);
    CHECK(s["up"]["forwarded"] == 6);
    CHECK(s["down"]["forwarded"] == 7);
    CHECK(s["up"]["queued"] == 0);
  }
  const auto s = wait_status(bed.control, "0", [](const auto& st) { return st["connections"]["active"] == 0; });
  CHECK(s["connections"]["active"] == 0);
  CHECK(s["connections"]["closed"] == 1);

  const auto all = bed.control.status();
  CHECK(all["target"] == bed.server.address());
  CHECK(all["listeners"].size() == 2);
  CHECK(all["listeners"][1]["connections"]["accepted"] == 0);
  CHECK(all["max_queue"] == 4 * 1024 * 1024);
}

TEST_CASE("a target that refuses: the client is reset and connect_failed counts it") {
  const int dead_port = redlock::test::free_port();  // nothing listens there
  auto proxy = start_proxy("127.0.0.1:" + std::to_string(dead_port));
  auto control = proxy->control();
  RawSocket r(proxy->host(0), proxy->port(0));
  CHECK(r.read_errno() == ECONNRESET);
  CHECK(control.listener_status("0")["connections"]["connect_failed"] == 1);
  CHECK(proxy->stop() == 0);
}
