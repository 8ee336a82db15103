// test_control.cpp — the control protocol's replies (every mistake is an
// ERR naming the bad token), the unix control socket, and the command
// line: non-loopback addresses are refused with exit status 2 before any
// socket is made.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "faultproxy/address.hpp"
#include "helpers.hpp"

using namespace fptest;

TEST_CASE("every bad control command gets ERR naming what is wrong, and changes nothing") {
  EchoServer echo;
  auto proxy = start_proxy(echo.address(), {"127.0.0.1:0", "127.0.0.1:0"});
  auto control = proxy->control();
  const std::string name0 = proxy->listener(0);
  CHECK(control.raw("PING") == "OK");
  CHECK(control.raw("ping") == "OK");  // command words are case-insensitive
  CHECK(control.raw("SET " + name0 + " delay_up=5") == "OK");
  CHECK(control.raw("CLEAR *") == "OK");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty command"},
      {"FROB 0", "unknown command 'FROB'"},
      {"PING now", "PING takes no arguments, got 'now'"},
      {"STATUS 0", "STATUS takes no arguments"},
      {"SET", "SET needs a listener"},
      {"SET 0", "SET needs a listener and at least one key=value"},
      {"SET 7 delay_up=1", "unknown listener '7'"},
      {"SET 127.0.0.1:1 delay_up=1", "unknown listener '127.0.0.1:1'"},
      {"SET 0 delay_upp=1", "unknown key 'delay_upp'"},
      {"SET 0 delay_up", "malformed setting 'delay_up' (expected key=value)"},
      {"SET 0 =1", "malformed setting '=1'"},
      {"SET 0 delay_up=-5", "bad value '-5' for delay_up"},
      {"SET 0 delay_up=10ms", "bad value '10ms' for delay_up"},
      {"SET 0 jitter_down=99999999", "bad value '99999999' for jitter_down"},
      {"SET 0 blackhole=yes", "bad value 'yes' for blackhole (expected 0 or 1)"},
      {"SET 0 delay_up=5 refuse=2", "bad value '2' for refuse"},
      {"CLEAR", "CLEAR takes exactly one listener"},
      {"CLEAR 0 1", "CLEAR takes exactly one listener"},
      {"RESET x", "unknown listener 'x'"},
  };
  for (const auto& [line, expected] : cases) {
    const std::string reply = control.raw(line);
    INFO("command: '", line, "' reply: '", reply, "'");
    CHECK(reply.rfind("ERR ", 0) == 0);
    CHECK(reply.find(expected) != std::string::npos);
  }
  // All-or-nothing: "delay_up=5 refuse=2" above applied neither key.
  CHECK(control.listener_status("0")["faults"]["delay_up"] == 0);
  // The typed API throws with the reply in the message.
  CHECK_THROWS_WITH_AS(control.set("0", "nope=1"), doctest::Contains("unknown key 'nope'"), std::runtime_error);
  CHECK_THROWS_AS(control.raw("PING\nPING"), std::invalid_argument);
  // Several commands in one write, CRLF or LF: one reply per line, in order;
  // a client that half-closes right after still gets every reply.
  const auto ep = faultproxy::parse_endpoint(proxy->control_address(), "control", false);
  RawSocket pipelined(ep.host(), ep.port());
  pipelined.send_all("PING\r\nSET 0 drop_up=1\nFROB\r\nCLEAR 0\n");
  pipelined.shutdown_write();
  const std::string replies = pipelined.read_to_eof();
  CHECK(replies.rfind("OK\nOK\nERR unknown command 'FROB'", 0) == 0);
  CHECK(replies.size() > 4);
  CHECK(replies.substr(replies.size() - 4) == "\nOK\n");
  CHECK(proxy->stop() == 0);
}

TEST_CASE("the control socket may be a unix socket; it is removed on exit") {
  EchoServer echo;
  char tmpl[] = "/tmp/faultproxy-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/ctl.sock";
  faultproxy::FaultProxyOptions o;
  o.binary = faultproxy_bin();
  o.target = echo.address();
  o.control = "unix:" + path;
  {
    faultproxy::FaultProxyProcess proxy(o);
    CHECK(proxy.control_address() == "unix:" + path);
    auto control = proxy.control();
    control.ping();
    control.set("*", "delay_down=3");
    CHECK(control.status()["listeners"][0]["faults"]["delay_down"] == 3);
    struct stat st{};
    CHECK(::stat(path.c_str(), &st) == 0);
    CHECK(proxy.stop() == 0);
    CHECK(::stat(path.c_str(), &st) != 0);  // removed by the proxy on its way out
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("non-loopback or malformed addresses are refused with exit status 2") {
  const std::string bin = faultproxy_bin();
  const std::string ok_target = "127.0.0.1:1";
  struct Case {
    std::vector<std::string> args;
    std::string expected;  // in stderr
  };
  const std::vector<Case> cases = {
      {{"--target", ok_target, "--listen", "10.0.0.1:0"}, "'10.0.0.1' is not a loopback address"},
      {{"--target", ok_target, "--listen", "127.0.0.1:0,192.168.1.20:0"}, "'192.168.1.20' is not a loopback address"},
      {{"--target", ok_target, "--listen", "0.0.0.0:0"}, "'0.0.0.0' is not a loopback address"},
      {{"--target", ok_target, "--listen", "[::]:0"}, "'::' is not a loopback address"},
      {{"--target", ok_target, "--listen", "[2001:db8::1]:0"}, "not a loopback address"},
      {{"--target", "172.16.0.5:6379", "--listen", "127.0.0.1:0"}, "--target: '172.16.0.5' is not a loopback"},
      {{"--target", "8.8.8.8:53", "--listen", "127.0.0.1:0"}, "'8.8.8.8' is not a loopback address"},
      {{"--target", ok_target, "--listen", "127.0.0.1:0", "--control", "10.1.2.3:0"}, "--control: '10.1.2.3'"},
      {{"--target", "example.com:80", "--listen", "127.0.0.1:0"}, "'example.com' is not a numeric IP address"},
      {{"--target", ok_target, "--listen", "127.0.0.1"}, "expected ADDR:PORT"},
      {{"--target", ok_target, "--listen", "127.0.0.1:70000"}, "bad port '70000'"},
      {{"--target", "unix:/tmp/x.sock", "--listen", "127.0.0.1:0"}, "unix sockets are not supported"},
      {{"--listen", "127.0.0.1:0"}, "--target is required"},
      {{"--target", ok_target, "--listen", "127.0.0.1:0", "--bogus"}, "--bogus"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv{bin};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_binary(argv);
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    INFO("args: ", cmd, " stderr: ", r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.expected) != std::string::npos);
    CHECK(r.out.empty());  // no startup line: nothing was bound
  }
}

TEST_CASE("--help exits 0; a listen address in use exits 1 naming it") {
  const std::string bin = faultproxy_bin();
  CHECK(run_binary({bin, "--help"}).exit_code == 0);
  EchoServer echo;  // its port is taken
  const auto r = run_binary({bin, "--target", echo.address(), "--listen", echo.address()});
  INFO("stderr: ", r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot listen on " + echo.address()) != std::string::npos);
}
