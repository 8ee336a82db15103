// test_streams.cpp — faultproxy as a byte stream: half-close both ways,
// order under jitter, backpressure under a hold, hundreds of connections,
// and a clean exit whatever state the connections are in.
#include <doctest/doctest.h>

#include <cerrno>
#include <thread>

#include "helpers.hpp"
#include "redis_server.hpp"

using namespace fptest;

TEST_CASE("half-close: the client's FIN follows its (delayed) data, and the reply still comes back") {
  EchoServer echo;
  auto proxy = start_proxy(echo.address());
  auto control = proxy->control();
  control.set("0", "delay_up=50 delay_down=30");
  RawSocket r(proxy->host(0), proxy->port(0));
  r.send_all("hello ");
  r.send_all("world");
  r.shutdown_write();
  // The echo server answers "<EOF>" only once it has read our FIN: the FIN
  // was passed on after every byte, and the down direction stayed open.
  CHECK(r.read_to_eof() == "hello world<EOF>");
  const auto s = wait_status(control, "0", [](const auto& st) { return st["connections"]["active"] == 0; });
  CHECK(s["connections"]["active"] == 0);  // both sides done: the pair was closed
  CHECK(s["up"]["forwarded"] == 11);
  CHECK(s["down"]["forwarded"] == 16);
}

TEST_CASE("half-close from the server side: the client reads EOF and can still send") {
  EchoServer server(EchoServer::Mode::SpeakFirst);
  auto proxy = start_proxy(server.address());
  auto control = proxy->control();
  control.set("0", "delay_down=20");
  RawSocket r(proxy->host(0), proxy->port(0));
  CHECK(r.read_to_eof() == "bye");  // the server's FIN came through, after its data
  r.send_all("still here");         // the other direction is still open
  r.shutdown_write();
  CHECK(server.wait_received() == "still here");
  const auto s = wait_status(control, "0", [](const auto& st) { return st["connections"]["active"] == 0; });
  CHECK(s["connections"]["active"] == 0);
}

TEST_CASE("a server that closes: the client gets every reply, then EOF") {
  redlock::test::RedisServer server;
  auto proxy = start_proxy(server.address());
  // QUIT makes Redis reply +OK and close.
  RawSocket r(proxy->host(0), proxy->port(0));
  r.send_all("PING\r\nQUIT\r\n");
  CHECK(r.read_to_eof() == "+PONG\r\n+OK\r\n");
}

TEST_CASE("jitter never reorders bytes within a connection") {
  EchoServer echo;
  auto proxy = start_proxy(echo.address());
  auto control = proxy->control();
  control.set("*", "jitter_up=40 jitter_down=40");
  RawSocket r(proxy->host(0), proxy->port(0));
  std::string sent;
  for (int i = 0; i < 60; ++i) {
    const std::string chunk = "chunk-" + std::to_string(i) + ";";
    r.send_all(chunk);
    sent += chunk;
    // Wait until the proxy has read this chunk, so every chunk is a read of
    // its own with its own jitter draw (otherwise TCP would coalesce them
    // and there would be little to reorder).
    const auto n = sent.size();
    wait_status(control, "0", [n](const auto& st) {
      return st["up"]["forwarded"].template get<std::size_t>() + st["up"]["queued"].template get<std::size_t>() == n;
    });
  }
  r.shutdown_write();
  CHECK(r.read_to_eof(10000ms) == sent + "<EOF>");
}

TEST_CASE("backpressure: a held direction stops reading at max_queue, then delivers everything in order") {
  EchoServer echo;
  constexpr std::size_t kMaxQueue = 64 * 1024;
  constexpr std::size_t kReadChunk = 64 * 1024;  // the proxy reads at most this much at once
  auto proxy = start_proxy(echo.address(), {"127.0.0.1:0"}, {"--max-queue", std::to_string(kMaxQueue)});
  auto control = proxy->control();
  control.set("0", "hold_down=1");
  RawSocket r(proxy->host(0), proxy->port(0));

  // 32 MiB: far more than the socket buffers on the way can absorb, so the
  // writer blocks until the hold is lifted unless the proxy buffers it all.
  std::string data(32u << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  std::thread writer([&] {
    r.send_all(data);
    r.shutdown_write();
  });
  const auto held = wait_status(control, "0", [&](const auto& st) { return st["down"]["held"] >= kMaxQueue; });
  CHECK(held["down"]["held"].get<std::size_t>() >= kMaxQueue);
  control.clear("0");
  const std::string back = r.read_to_eof(60000ms);
  writer.join();
  CHECK(back.size() == data.size() + 5);
  CHECK((back == data + "<EOF>"));
  const auto s = control.listener_status("0");
  // Memory stayed bounded: never more than the limit plus one read.
  CHECK(s["down"]["peak_queued"].get<std::size_t>() <= kMaxQueue + kReadChunk);
  CHECK(s["up"]["peak_queued"].get<std::size_t>() <= kMaxQueue + kReadChunk);
  CHECK(s["down"]["dropped"] == 0);
}

TEST_CASE("hundreds of connections at once") {
  redlock::test::RedisServer server;
  auto proxy = start_proxy(server.address());
  auto control = proxy->control();
  constexpr int kConnections = 300;
  std::vector<std::unique_ptr<RawSocket>> conns;
  for (int i = 0; i < kConnections; ++i) conns.push_back(std::make_unique<RawSocket>(proxy->host(0), proxy->port(0)));
  for (auto& c : conns) c->send_all("PING\r\n");
  int answered = 0;
  for (auto& c : conns) answered += c->read_exact(7) == "+PONG\r\n" ? 1 : 0;
  CHECK(answered == kConnections);
  auto s = control.listener_status("0");
  CHECK(s["connections"]["accepted"] == kConnections);
  CHECK(s["connections"]["active"] == kConnections);
  conns.clear();
  s = wait_status(control, "0", [](const auto& st) { return st["connections"]["active"] == 0; });
  CHECK(s["connections"]["active"] == 0);
  CHECK(s["connections"]["closed"] == kConnections);
  CHECK(proxy->stop() == 0);
}

TEST_CASE("a clean exit (status 0, no leak under ASan) with connections in every state") {
  redlock::test::RedisServer server;
  auto proxy = start_proxy(server.address(), {"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "[::1]:0"});
  auto control = proxy->control();
  control.set("0", "hold_down=1");
  control.set("1", "delay_up=60000");
  control.set("2", "blackhole=1");
  RawSocket held(proxy->host(0), proxy->port(0));
  RawSocket delayed(proxy->host(1), proxy->port(1));
  RawSocket blackholed(proxy->host(2), proxy->port(2));
  RawSocket v6(proxy->host(3), proxy->port(3));
  held.send_all("PING\r\n");
  delayed.send_all("PING\r\n");
  blackholed.send_all("PING\r\n");
  v6.send_all("PING\r\n");
  CHECK(v6.read_exact(7) == "+PONG\r\n");  // IPv6 loopback works too
  wait_status(control, "0", [](const auto& st) { return st["down"]["held"] == 7; });
  wait_status(control, "1", [](const auto& st) { return st["up"]["queued"] == 6; });
  wait_status(control, "2", [](const auto& st) { return st["up"]["dropped"] == 6; });
  CHECK(proxy->stop() == 0);
  CHECK(held.read_errno() == 0);  // the proxy closed its side in order on the way out
}

namespace {

// send_delayed_then_close: four SETs, each a chunk of its own (the proxy has
// queued one before the next is sent), delayed 300, 600, 900 and 1200 ms;
// then the client closes its socket while all four are still in the proxy.
// Once the first reply reaches the closed socket, its kernel answers with
// a RST, so the next reply fails to be written: the client is gone. The
// 300 ms steps keep the order of those events whatever the machine's load.
// Returns the listener's STATUS once the pair has closed.
nlohmann::json send_delayed_then_close(faultproxy::FaultProxyProcess& proxy) {
  auto control = proxy.control();
  {
    RawSocket r(proxy.host(0), proxy.port(0));
    std::size_t sent = 0;
    int delay = 0;
    for (const char* key : {"a", "b", "c", "d"}) {
      delay += 300;
      control.set("0", "delay_up=" + std::to_string(delay));
      const std::string cmd = std::string("SET ") + key + " 1\r\n";
      r.send_all(cmd);
      sent += cmd.size();
      wait_status(control, "0", [sent](const auto& st) { return st["up"]["queued"] == sent; });
    }
  }  // closed (FIN) with every SET still delayed
  return wait_status(control, "0", [](const auto& st) { return st["connections"]["active"] == 0; });
}

}  // namespace

TEST_CASE("a client that closes with bytes in flight: dropped by default, delivered with --keep-in-flight") {
  SUBCASE("default: the pair is torn down when the client is found gone; later bytes are lost") {
    redlock::test::RedisServer server;
    auto proxy = start_proxy(server.address());
    const auto s = send_delayed_then_close(*proxy);
    CHECK(s["connections"]["active"] == 0);
    CHECK(server.command({"GET", "a"}).str == "1");  // its reply met the closed socket: the RST came back
    CHECK(server.command({"GET", "b"}).str == "1");  // its reply found the client gone: the pair was torn down
    CHECK(server.command({"EXISTS", "c"}).integer == 0);
    CHECK(server.command({"EXISTS", "d"}).integer == 0);
    CHECK(s["up"]["dropped"].get<std::uint64_t>() > 0);
  }
  SUBCASE("--keep-in-flight: every byte the client sent reaches the server, then the pair closes") {
    // A real network still delivers what the client's kernel sent before
    // the close: a late rollback on a dropped connection is exactly that.
    redlock::test::RedisServer server;
    auto proxy = start_proxy(server.address(), {"127.0.0.1:0"}, {"--keep-in-flight"});
    CHECK(proxy->control().status()["keep_in_flight"] == true);
    const auto s = send_delayed_then_close(*proxy);
    CHECK(s["connections"]["active"] == 0);
    for (const char* key : {"a", "b", "c", "d"}) CHECK(server.command({"GET", key}).str == "1");
    CHECK(s["up"]["forwarded"] == 4 * 9);
    CHECK(s["up"]["dropped"] == 0);
    CHECK(s["down"]["dropped"].get<std::uint64_t>() > 0);  // the replies had nobody to go to
    CHECK(proxy->stop() == 0);
  }
}
