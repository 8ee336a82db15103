// test_master.cpp — the simulated Redis master (tools/sim/master.hpp): the
// library's real scripts through SCRIPT LOAD + EVALSHA, expiry on the
// master's own clock, restarts, data loss and error replies. Time is the
// `now` each test sets; nothing sleeps.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "keys.hpp"
#include "master.hpp"
#include "scripts.hpp"
#include "sha1.hpp"

namespace doctest {
template <>
struct StringMaker<redlock::sim::Reply> {
  static String convert(const redlock::sim::Reply& r) { return redlock::sim::to_string(r).c_str(); }
};
}  // namespace doctest

namespace {

using redlock::sim::Master;
using redlock::sim::Reply;
namespace scripts = redlock::detail;

Reply S(std::string text) { return Reply{Reply::Type::status, 0, std::move(text), {}}; }
Reply B(std::string text) { return Reply{Reply::Type::string, 0, std::move(text), {}}; }
Reply I(long long n) { return Reply{Reply::Type::integer, n, {}, {}}; }
Reply E(std::string text) { return Reply{Reply::Type::error, 0, std::move(text), {}}; }
Reply A(std::vector<Reply> elements) { return Reply{Reply::Type::array, 0, {}, std::move(elements)}; }
const Reply nil{};

// Sim — one master on a clock the test moves.
struct Sim {
  long long now = 1'700'000'000'123;  // an ordinary wall-clock reading, ms
  Master master{"master-1", [this] { return now; }};
  std::vector<std::pair<std::string, std::string>> published;

  Sim() {
    master.on_publish = [this](const std::string& channel, const std::string& message) {
      published.emplace_back(channel, message);
      return 3LL;
    };
  }

  Reply cmd(std::vector<std::string> argv) { return master.execute(argv); }

  // evalsha loads `body` (as the client does, once per connection) and
  // runs it by SHA.
  Reply evalsha(std::string_view body, std::vector<std::string> keys, std::vector<std::string> args) {
    const Reply loaded = cmd({"SCRIPT", "LOAD", std::string(body)});
    REQUIRE(loaded == B(redlock::detail::sha1_hex(body)));
    std::vector<std::string> argv{"EVALSHA", loaded.str, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return cmd(argv);
  }
};

bool is_error_starting(const Reply& r, std::string_view prefix) {
  return r.type == Reply::Type::error && std::string_view(r.str).substr(0, prefix.size()) == prefix;
}

const std::string lock = scripts::lock_key("redlock:", "r");
const std::string fence = scripts::fence_key("redlock:", "r");
const std::string channel = scripts::release_channel("redlock:", "r");

}  // namespace

TEST_CASE("acquire: sets a free key, refreshes its own, reports the holder's PTTL") {
  Sim sim;
  CHECK(sim.evalsha(scripts::acquire_script, {lock}, {"v1", "1000"}) == S("OK"));
  CHECK(sim.cmd({"GET", lock}) == B("v1"));
  CHECK(sim.cmd({"PTTL", lock}) == I(1000));

  sim.now += 400;
  CHECK(sim.evalsha(scripts::acquire_script, {lock}, {"v1", "1000"}) == S("OK"));
  CHECK(sim.cmd({"PTTL", lock}) == I(1000));  // refreshed, not 600

  sim.now += 250;
  CHECK(sim.evalsha(scripts::acquire_script, {lock}, {"v2", "1000"}) == I(750));
  CHECK(sim.cmd({"GET", lock}) == B("v1"));
}

TEST_CASE("extend: only while our value is there; never recreates a missing key") {
  Sim sim;
  REQUIRE(sim.cmd({"SET", lock, "v1", "PX", "1000"}) == S("OK"));
  sim.now += 900;
  CHECK(sim.evalsha(scripts::extend_script, {lock}, {"v1", "1000"}) == I(1));
  CHECK(sim.cmd({"PTTL", lock}) == I(1000));
  CHECK(sim.evalsha(scripts::extend_script, {lock}, {"v2", "5000"}) == I(0));
  CHECK(sim.cmd({"PTTL", lock}) == I(1000));

  sim.now += 1000;  // expired
  CHECK(sim.evalsha(scripts::extend_script, {lock}, {"v1", "1000"}) == I(0));
  CHECK(sim.cmd({"EXISTS", lock}) == I(0));
}

TEST_CASE("release: deletes only our value; publishes on the channel when one is given") {
  Sim sim;
  REQUIRE(sim.cmd({"SET", lock, "v1", "PX", "1000"}) == S("OK"));
  CHECK(sim.evalsha(scripts::release_script, {lock}, {"v2", channel}) == I(0));
  CHECK(sim.cmd({"GET", lock}) == B("v1"));
  CHECK(sim.published.empty());

  SUBCASE("a release publishes the value") {
    CHECK(sim.evalsha(scripts::release_script, {lock}, {"v1", channel}) == I(1));
    CHECK(sim.published == std::vector<std::pair<std::string, std::string>>{{channel, "v1"}});
  }
  SUBCASE("a rollback (no channel) publishes nothing") {
    CHECK(sim.evalsha(scripts::release_script, {lock}, {"v1"}) == I(1));
    CHECK(sim.published.empty());
  }
  CHECK(sim.cmd({"EXISTS", lock}) == I(0));
  CHECK(sim.evalsha(scripts::release_script, {lock}, {"v1", channel}) == I(0));
}

TEST_CASE("PUBLISH answers the hook's receiver count, 0 without a hook") {
  Sim sim;
  CHECK(sim.cmd({"PUBLISH", "ch", "msg"}) == I(3));
  sim.master.on_publish = nullptr;
  CHECK(sim.cmd({"PUBLISH", "ch", "msg"}) == I(0));
}

TEST_CASE("fenced_acquire reads the counter in the same step; fence_raise raises it only for the holder") {
  Sim sim;
  CHECK(sim.evalsha(scripts::fenced_acquire_script, {lock, fence}, {"v1", "1000"}) == A({I(1), I(0)}));
  CHECK(sim.evalsha(scripts::fence_raise_script, {lock, fence}, {"v1", "1"}) == I(1));
  CHECK(sim.cmd({"GET", fence}) == B("1"));
  CHECK(sim.cmd({"PTTL", fence}) == I(-1));  // the counter never expires

  CHECK(sim.evalsha(scripts::fence_raise_script, {lock, fence}, {"v1", "1"}) == I(0));  // not above
  CHECK(sim.evalsha(scripts::fence_raise_script, {lock, fence}, {"v2", "9"}) == I(0));  // not the holder
  CHECK(sim.cmd({"GET", fence}) == B("1"));

  sim.now += 100;
  CHECK(sim.evalsha(scripts::fenced_acquire_script, {lock, fence}, {"v2", "1000"}) == A({I(0), I(1), I(900)}));
  CHECK(sim.evalsha(scripts::fenced_acquire_script, {lock, fence}, {"v1", "1000"}) == A({I(1), I(1)}));
  CHECK(sim.cmd({"PTTL", lock}) == I(1000));

  sim.now += 1000;
  CHECK(sim.evalsha(scripts::fence_raise_script, {lock, fence}, {"v1", "2"}) == I(0));  // our key expired
  CHECK(sim.evalsha(scripts::fenced_acquire_script, {lock, fence}, {"v2", "1000"}) == A({I(1), I(1)}));
  CHECK(sim.evalsha(scripts::fence_raise_script, {lock, fence}, {"v2", "2"}) == I(1));
  CHECK(sim.cmd({"GET", fence}) == B("2"));

  REQUIRE(sim.cmd({"SET", fence, "junk"}) == S("OK"));
  CHECK(sim.evalsha(scripts::fenced_acquire_script, {lock, fence}, {"v2", "1000"}) ==
        E("fence counter " + fence + " is not a number"));
  CHECK(sim.evalsha(scripts::fence_raise_script, {lock, fence}, {"v2", "3"}) == I(0));
}

TEST_CASE("multi_acquire / multi_extend / multi_release: all or none") {
  Sim sim;
  const std::string a = scripts::lock_key("redlock:", "a"), b = scripts::lock_key("redlock:", "b");
  CHECK(sim.evalsha(scripts::multi_acquire_script, {a, b}, {"v1", "1000"}) == S("OK"));
  CHECK(sim.master.keys() == std::vector<std::pair<std::string, std::string>>{{a, "v1"}, {b, "v1"}});

  sim.now += 300;
  CHECK(sim.evalsha(scripts::multi_acquire_script, {a, b}, {"v1", "1000"}) == S("OK"));  // refresh
  CHECK(sim.cmd({"PTTL", b}) == I(1000));

  const std::string c = scripts::lock_key("redlock:", "c");
  sim.now += 100;
  CHECK(sim.evalsha(scripts::multi_acquire_script, {c, b}, {"v2", "1000"}) == I(900));
  CHECK(sim.cmd({"EXISTS", c}) == I(0));  // nothing set

  CHECK(sim.evalsha(scripts::multi_extend_script, {a, b}, {"v1", "2000"}) == I(1));
  CHECK(sim.cmd({"PTTL", a}) == I(2000));
  CHECK(sim.evalsha(scripts::multi_extend_script, {a, b, c}, {"v1", "5000"}) == I(0));
  CHECK(sim.cmd({"PTTL", a}) == I(2000));  // none extended

  REQUIRE(sim.cmd({"SET", c, "v2", "PX", "1000"}) == S("OK"));
  CHECK(sim.evalsha(scripts::multi_release_script, {a, c}, {"v1", "ch-a", "ch-c"}) == I(1));
  CHECK(sim.published == std::vector<std::pair<std::string, std::string>>{{"ch-a", "v1"}});
  CHECK(sim.master.keys() == std::vector<std::pair<std::string, std::string>>{{b, "v1"}, {c, "v2"}});
  CHECK(sim.evalsha(scripts::multi_release_script, {b}, {"v1"}) == I(1));  // a rollback: no channel
  CHECK(sim.published.size() == 1);
  CHECK(sim.evalsha(scripts::multi_release_script, {a, b}, {"v1"}) == I(0));
}

TEST_CASE("inspect: free and held, the value last even with spaces") {
  Sim sim;
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence}, {}) == B("-2 0"));
  REQUIRE(sim.cmd({"SET", fence, "7"}) == S("OK"));
  REQUIRE(sim.cmd({"SET", lock, "some other value", "PX", "5000"}) == S("OK"));
  sim.now += 1234;
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence}, {}) == B("3766 7 some other value"));
  REQUIRE(sim.cmd({"SET", lock, "forever"}) == S("OK"));
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence}, {}) == B("-1 7 forever"));
}

TEST_CASE("marker: created once with the master's time, then found with its age; the declared ms only rises") {
  Sim sim;
  const std::string key(scripts::marker_key);
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ab12", "3000"}) ==
        A({B("created"), B("ab12"), B("3000"), B("0")}));
  CHECK(sim.cmd({"GET", key}) == B("ab12 3000 " + std::to_string(sim.now)));
  CHECK(sim.cmd({"PTTL", key}) == I(-1));

  sim.now += 2500;
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ffff", "1000"}) ==
        A({B("found"), B("ab12"), B("3000"), B("2500")}));
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ffff", "8000"}) ==
        A({B("found"), B("ab12"), B("8000"), B("2500")}));
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ffff", "1000"}) ==
        A({B("found"), B("ab12"), B("8000"), B("2500")}));

  sim.now -= 10'000;  // a clock stepped back: the age is never negative
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ffff", "1000"}) == A({B("found"), B("ab12"), B("8000"), B("0")}));

  REQUIRE(sim.cmd({"SET", key, "not a marker"}) == S("OK"));
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ffff", "1000"}) ==
        E("key redlock-marker is not a redlock marker"));
}

TEST_CASE("marker: lost with the data on restart without persistence and on FLUSHALL, kept with persistence") {
  Sim sim;
  const std::string key(scripts::marker_key);
  REQUIRE(sim.evalsha(scripts::marker_script, {key}, {"ab12", "3000"}).elements.at(0) == B("created"));
  sim.master.restart(true);
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"cd34", "3000"}).elements.at(0) == B("found"));
  sim.master.restart(false);
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"cd34", "3000"}).elements.at(0) == B("created"));
  CHECK(sim.cmd({"FLUSHALL"}) == S("OK"));
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"ef56", "3000"}).elements.at(1) == B("ef56"));
  sim.master.flushall();
  CHECK(sim.master.key_count() == 0);
  CHECK(sim.evalsha(scripts::marker_script, {key}, {"0077", "3000"}).elements.at(1) == B("0077"));
}

TEST_CASE("NOSCRIPT after SCRIPT FLUSH, flush_scripts and restart; EVAL runs and caches") {
  Sim sim;
  const std::string sha = redlock::detail::sha1_hex(scripts::extend_script);
  const std::vector<std::string> evalsha{"EVALSHA", sha, "1", lock, "v1", "1000"};
  const Reply noscript{Reply::Type::error, 0, "NOSCRIPT No matching script. Please use EVAL.", {}};
  CHECK(sim.cmd(evalsha) == noscript);
  CHECK(sim.cmd({"EVAL", std::string(scripts::extend_script), "1", lock, "v1", "1000"}) == I(0));
  CHECK(sim.cmd(evalsha) == I(0));
  CHECK(sim.cmd({"SCRIPT", "EXISTS", sha, std::string(40, 'a')}) == A({I(1), I(0)}));

  SUBCASE("SCRIPT FLUSH") { CHECK(sim.cmd({"SCRIPT", "FLUSH"}) == S("OK")); }
  SUBCASE("flush_scripts") { sim.master.flush_scripts(); }
  SUBCASE("restart keeping data") { sim.master.restart(true); }
  SUBCASE("restart without data") { sim.master.restart(false); }
  CHECK(sim.cmd(evalsha) == noscript);
  CHECK(sim.cmd({"SCRIPT", "LOAD", std::string(scripts::extend_script)}) == B(sha));
  std::string upper = sha;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  CHECK(sim.cmd({"evalsha", upper, "1", lock, "v1", "1000"}) == I(0));  // the SHA in any case
}

TEST_CASE("expiry follows this master's clock: PX passes, a forward step expires early, a backward step delays") {
  Sim sim;
  REQUIRE(sim.cmd({"SET", lock, "v1", "PX", "1000"}) == S("OK"));
  sim.now += 999;
  CHECK(sim.cmd({"PTTL", lock}) == I(1));
  CHECK(sim.master.pttl(lock) == 1);
  sim.now += 1;  // expire-at ≤ now: gone
  CHECK(sim.cmd({"GET", lock}) == nil);
  CHECK(sim.cmd({"PTTL", lock}) == I(-2));
  CHECK(sim.master.key_count() == 0);

  REQUIRE(sim.cmd({"SET", lock, "v2", "PX", "10000"}) == S("OK"));
  sim.now -= 5000;  // stepped back: the absolute expire-at stays, the key lives longer
  CHECK(sim.cmd({"PTTL", lock}) == I(15000));
  sim.now += 60'000;  // stepped forward past it
  CHECK(sim.cmd({"EXISTS", lock}) == I(0));
  CHECK(sim.evalsha(scripts::acquire_script, {lock}, {"v3", "1000"}) == S("OK"));
}

TEST_CASE("restart: new run_id and uptime from 0; keys kept or dropped") {
  Sim sim;
  sim.now = 1'000'999;  // 999 ms into a second
  Master m("m", [&sim] { return sim.now; });
  const auto info_field = [&m](const std::string& name) {
    const std::string info = m.execute({"INFO", "server"}).str;
    const std::size_t at = info.find("\r\n" + name + ":");
    REQUIRE(at != std::string::npos);
    const std::size_t begin = at + name.size() + 3;
    return info.substr(begin, info.find("\r\n", begin) - begin);
  };
  CHECK(info_field("uptime_in_seconds") == "0");
  sim.now += 1;  // 1 ms later, a new wall-clock second: Redis says 1 (whole seconds subtracted)
  CHECK(info_field("uptime_in_seconds") == "1");
  sim.now += 5000;
  CHECK(info_field("uptime_in_seconds") == "6");
  CHECK(info_field("run_id") == m.run_id());
  CHECK(m.run_id().size() == 40);

  REQUIRE(m.execute({"SET", "a", "1"}) == S("OK"));
  REQUIRE(m.execute({"SET", "b", "2", "PX", "3000"}) == S("OK"));
  const std::string first = m.run_id();
  m.restart(true);
  CHECK(m.run_id() != first);
  CHECK(info_field("uptime_in_seconds") == "0");
  CHECK(m.keys() == std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "2"}});
  sim.now += 3000;  // expiry still by absolute time across the restart
  CHECK(m.keys() == std::vector<std::pair<std::string, std::string>>{{"a", "1"}});

  const std::string second = m.run_id();
  m.restart(false);
  CHECK(m.run_id() != second);
  CHECK(m.run_id() != first);
  CHECK(m.key_count() == 0);

  // Deterministic: the same seed name gives the same run_ids.
  Master twin("m", [&sim] { return sim.now; });
  CHECK(twin.run_id() == first);
  Master other("n", [&sim] { return sim.now; });
  CHECK(other.run_id() != first);
}

TEST_CASE("INFO: the fields the client reads, by section") {
  Sim sim;
  const std::string all = sim.cmd({"INFO"}).str;
  for (const char* field :
       {"# Server\r\n", "\r\nredis_version:7.0.15\r\n", "\r\nrun_id:", "\r\nuptime_in_seconds:0\r\n", "# Memory\r\n",
        "\r\nmaxmemory:0\r\n", "\r\nmaxmemory_policy:noeviction\r\n"}) {
    CHECK_MESSAGE(all.find(field) != std::string::npos, field);
  }
  const std::string server = sim.cmd({"INFO", "SERVER"}).str;
  CHECK(server.rfind("# Server\r\n", 0) == 0);
  CHECK(server.find("maxmemory") == std::string::npos);

  sim.master.set_maxmemory(1 << 20);
  sim.master.set_maxmemory_policy("allkeys-lru");
  const std::string memory = sim.cmd({"info", "memory"}).str;
  CHECK(memory == "# Memory\r\nmaxmemory:1048576\r\nmaxmemory_policy:allkeys-lru\r\n");
  CHECK(sim.cmd({"INFO", "nosuchsection"}) == B(""));
}

TEST_CASE("evict removes one live key") {
  Sim sim;
  REQUIRE(sim.cmd({"SET", "a", "1"}) == S("OK"));
  REQUIRE(sim.cmd({"SET", "b", "2", "PX", "10"}) == S("OK"));
  CHECK(sim.master.evict("a"));
  CHECK_FALSE(sim.master.evict("a"));
  sim.now += 10;
  CHECK_FALSE(sim.master.evict("b"));  // already expired
  CHECK(sim.master.key_count() == 0);
}

TEST_CASE("SET: NX, XX, PX, EX, KEEPTTL, GET and bad options") {
  Sim sim;
  CHECK(sim.cmd({"SET", "k", "v1", "NX", "PX", "100"}) == S("OK"));
  CHECK(sim.cmd({"set", "k", "v2", "nx", "px", "100"}) == nil);
  CHECK(sim.cmd({"GET", "k"}) == B("v1"));
  sim.now += 100;
  CHECK(sim.cmd({"SET", "k", "v2", "PX", "100", "NX"}) == S("OK"));  // expired counts as free
  CHECK(sim.cmd({"SET", "k", "v3", "XX"}) == S("OK"));
  CHECK(sim.cmd({"PTTL", "k"}) == I(-1));  // a plain SET drops the TTL
  CHECK(sim.cmd({"SET", "x", "v", "XX"}) == nil);
  CHECK(sim.cmd({"EXISTS", "x", "k", "k"}) == I(2));

  CHECK(sim.cmd({"SET", "k", "v4", "EX", "2"}) == S("OK"));
  CHECK(sim.cmd({"PTTL", "k"}) == I(2000));
  CHECK(sim.cmd({"SET", "k", "v5", "KEEPTTL", "GET"}) == B("v4"));
  CHECK(sim.cmd({"PTTL", "k"}) == I(2000));
  CHECK(sim.cmd({"SET", "k", "v6", "PXAT", std::to_string(sim.now + 50)}) == S("OK"));
  CHECK(sim.cmd({"PTTL", "k"}) == I(50));
  CHECK(sim.cmd({"SET", "k", "v7", "NX", "GET"}) == B("v6"));
  CHECK(sim.cmd({"GET", "k"}) == B("v6"));

  const Reply bad_expire{Reply::Type::error, 0, "ERR invalid expire time in 'set' command", {}};
  const Reply syntax{Reply::Type::error, 0, "ERR syntax error", {}};
  CHECK(sim.cmd({"SET", "k", "v", "PX", "0"}) == bad_expire);
  CHECK(sim.cmd({"SET", "k", "v", "PX", "-5"}) == bad_expire);
  CHECK(sim.cmd({"SET", "k", "v", "EX", "9223372036854775807"}) == bad_expire);
  CHECK(sim.cmd({"SET", "k", "v", "PX", "ten"}) == E("ERR value is not an integer or out of range"));
  CHECK(sim.cmd({"SET", "k", "v", "PX"}) == syntax);
  CHECK(sim.cmd({"SET", "k", "v", "NX", "XX"}) == syntax);
  CHECK(sim.cmd({"SET", "k", "v", "PX", "5", "EX", "5"}) == syntax);
  CHECK(sim.cmd({"SET", "k", "v", "KEEPTTL", "PX", "5"}) == syntax);
  CHECK(sim.cmd({"SET", "k", "v", "BOGUS"}) == syntax);
  CHECK(sim.cmd({"GET", "k"}) == B("v6"));
}

TEST_CASE("DEL, PEXPIRE, INCR, TIME, PING, AUTH, SELECT") {
  Sim sim;
  REQUIRE(sim.cmd({"SET", "a", "1"}) == S("OK"));
  REQUIRE(sim.cmd({"SET", "b", "2"}) == S("OK"));
  CHECK(sim.cmd({"DEL", "a", "b", "c"}) == I(2));

  CHECK(sim.cmd({"PEXPIRE", "a", "100"}) == I(0));  // missing
  REQUIRE(sim.cmd({"SET", "a", "1"}) == S("OK"));
  CHECK(sim.cmd({"PEXPIRE", "a", "100", "XX"}) == I(0));
  CHECK(sim.cmd({"PEXPIRE", "a", "100", "NX"}) == I(1));
  CHECK(sim.cmd({"PEXPIRE", "a", "50", "GT"}) == I(0));
  CHECK(sim.cmd({"PEXPIRE", "a", "50", "LT"}) == I(1));
  CHECK(sim.cmd({"PTTL", "a"}) == I(50));
  CHECK(sim.cmd({"PEXPIRE", "a", "0"}) == I(1));  // in the past: deleted
  CHECK(sim.cmd({"EXISTS", "a"}) == I(0));
  CHECK(is_error_starting(sim.cmd({"PEXPIRE", "a", "1", "NX", "XX"}), "ERR NX and XX"));
  CHECK(is_error_starting(sim.cmd({"PEXPIRE", "a", "1", "ZZ"}), "ERR Unsupported option ZZ"));

  CHECK(sim.cmd({"INCR", "n"}) == I(1));
  REQUIRE(sim.cmd({"PEXPIRE", "n", "500"}) == I(1));
  CHECK(sim.cmd({"INCR", "n"}) == I(2));
  CHECK(sim.cmd({"PTTL", "n"}) == I(500));  // INCR keeps the TTL
  REQUIRE(sim.cmd({"SET", "n", "9223372036854775807"}) == S("OK"));
  CHECK(is_error_starting(sim.cmd({"INCR", "n"}), "ERR increment or decrement would overflow"));
  for (const char* bad : {"x", "01", "+1", " 1", "-0", ""}) {
    REQUIRE(sim.cmd({"SET", "n", bad}) == S("OK"));
    CHECK_MESSAGE(sim.cmd({"INCR", "n"}) == E("ERR value is not an integer or out of range"), bad);
  }

  sim.now = 1'700'000'000'123;
  CHECK(sim.cmd({"TIME"}) == A({B("1700000000"), B("123000")}));
  CHECK(sim.cmd({"PING"}) == S("PONG"));
  CHECK(sim.cmd({"PING", "hi"}) == B("hi"));
  CHECK(sim.cmd({"AUTH", "secret"}) == S("OK"));
  CHECK(sim.cmd({"AUTH", "user", "secret"}) == S("OK"));
  CHECK(sim.cmd({"SELECT", "15"}) == S("OK"));
  CHECK(is_error_starting(sim.cmd({"SELECT", "16"}), "ERR DB index is out of range"));
}

TEST_CASE("error replies: arity, unknown command, EVALSHA's numkeys") {
  Sim sim;
  CHECK(sim.cmd({"GET"}) == E("ERR wrong number of arguments for 'get' command"));
  CHECK(sim.cmd({"Get", "a", "b"}) == E("ERR wrong number of arguments for 'get' command"));
  CHECK(is_error_starting(sim.cmd({"SET", "k"}), "ERR wrong number of arguments for 'set' command"));
  CHECK(is_error_starting(sim.cmd({"TIME", "x"}), "ERR wrong number of arguments for 'time' command"));
  CHECK(is_error_starting(sim.cmd({"PING", "a", "b"}), "ERR wrong number of arguments for 'ping' command"));
  CHECK(is_error_starting(sim.cmd({"SCRIPT", "LOAD"}), "ERR wrong number of arguments for 'script|load' command"));
  CHECK(is_error_starting(sim.cmd({"SCRIPT", "KILL"}), "ERR unknown subcommand 'KILL'"));
  CHECK(sim.cmd({"HGETALL", "k"}) == E("ERR unknown command 'HGETALL', with args beginning with: 'k' "));
  CHECK(is_error_starting(sim.cmd({"averyveryverylongcommandname"}),
                          "ERR unknown command 'averyveryverylongcommandname'"));
  CHECK(is_error_starting(sim.master.execute({}), "ERR"));

  const std::string sha = redlock::detail::sha1_hex(scripts::acquire_script);
  REQUIRE(sim.cmd({"SCRIPT", "LOAD", std::string(scripts::acquire_script)}) == B(sha));
  CHECK(sim.cmd({"EVALSHA", sha, "one", lock}) == E("ERR value is not an integer or out of range"));
  CHECK(sim.cmd({"EVALSHA", sha, "3", lock, "v"}) == E("ERR Number of keys can't be greater than number of args"));
  CHECK(sim.cmd({"EVALSHA", sha, "-1", lock}) == E("ERR Number of keys can't be negative"));
  CHECK(is_error_starting(sim.cmd({"EVALSHA", "abc", "0"}), "NOSCRIPT"));
  CHECK(is_error_starting(sim.cmd({"EVALSHA", sha}), "ERR wrong number of arguments for 'evalsha' command"));
  CHECK(is_error_starting(sim.cmd({"EVAL", "return +", "0"}), "ERR Error compiling script"));
  CHECK(is_error_starting(sim.cmd({"SCRIPT", "LOAD", "return +"}), "ERR Error compiling script"));
  // The acquire script with TTL 0: its SET fails inside redis.call, which
  // raises; the script's reply is the command's error.
  CHECK(is_error_starting(sim.cmd({"EVALSHA", sha, "1", lock, "v", "0"}), "ERR invalid expire time in 'set' command"));
}

TEST_CASE("Lua: Redis' conversion rules both ways, redis.pcall, read-only globals") {
  Sim sim;
  const auto eval = [&sim](const std::string& body, std::vector<std::string> keys_then_args = {}, int numkeys = 0) {
    std::vector<std::string> argv{"EVAL", body, std::to_string(numkeys)};
    argv.insert(argv.end(), keys_then_args.begin(), keys_then_args.end());
    return sim.cmd(argv);
  };
  CHECK(eval("return 3.99") == I(3));
  CHECK(eval("return -3.99") == I(-3));
  CHECK(eval("return 'x'") == B("x"));
  CHECK(eval("return true") == I(1));
  CHECK(eval("return false") == nil);
  CHECK(eval("return nil") == nil);
  CHECK(eval("return {1, 'a', {2}, false, nil, 9}") == A({I(1), B("a"), A({I(2)}), nil}));
  CHECK(eval("return {ok = 'FINE'}") == S("FINE"));
  CHECK(eval("return {err = 'CODE text'}") == E("CODE text"));
  CHECK(eval("return redis.error_reply('-WRONG thing')") == E("WRONG thing"));
  CHECK(eval("return redis.error_reply('oneword')") == E("ERR oneword"));
  CHECK(eval("return redis.status_reply('QUEUED')") == S("QUEUED"));

  // Redis → Lua: nil bulk → false, status → {ok}, error → {err}, array → table.
  CHECK(eval("return redis.call('GET', 'none') == false") == I(1));
  CHECK(eval("return redis.call('SET', 'k', 'v').ok") == B("OK"));  // status → {ok}; a string → bulk
  CHECK(eval("return redis.call('INCR', 'n') + 1") == I(2));
  CHECK(eval("return redis.pcall('INCR', 'k').err") == B("ERR value is not an integer or out of range"));
  CHECK(eval("local t = redis.call('TIME') return #t") == I(2));
  CHECK(eval("return redis.call('PEXPIRE', 'n', 1500)") == I(1));  // a number argument
  CHECK(sim.cmd({"PTTL", "n"}) == I(1500));
  CHECK(eval("return redis.call('GET', KEYS[1]) .. ARGV[1]", {"k", "!"}, 1) == B("v!"));

  CHECK(is_error_starting(eval("return redis.call('INCR', 'k')"), "ERR value is not an integer or out of range"));
  CHECK(is_error_starting(eval("return redis.call('NOPE')"), "ERR unknown command"));
  CHECK(is_error_starting(eval("return redis.call('EVAL', 'return 1', '0')"),
                          "ERR This Redis command is not allowed from script"));
  CHECK(is_error_starting(eval("return redis.call()"), "ERR Please specify at least one argument"));
  CHECK(is_error_starting(eval("return redis.call('GET', {})"), "ERR Lua redis lib command arguments"));
  CHECK(is_error_starting(eval("x = 1"), "ERR user_script:1: Script attempted to create global variable 'x'"));
  CHECK(is_error_starting(eval("return y"),
                          "ERR user_script:1: Script attempted to access nonexistent global variable 'y'"));
  CHECK(is_error_starting(eval("error('boom')"), "ERR user_script:1: boom"));
  // A table that holds itself: converted as deep as Lua's stack allows,
  // then an error in its place (as Redis does), never a crash.
  Reply deep = eval("local t = {} t[1] = t return t");
  const Reply* inner = &deep;
  while (inner->type == Reply::Type::array && inner->elements.size() == 1) inner = &inner->elements[0];
  CHECK(*inner == E("ERR reached lua stack limit"));
  CHECK(is_error_starting(eval("return dofile('/etc/passwd')"), "ERR"));
  CHECK(eval("return string.format('%d', 1700000000123) .. ' ' .. math.max(1, math.floor(2.5))") ==
        B("1700000000123 2"));
  CHECK(eval("return #KEYS + #ARGV", {"a", "b", "c"}, 2) == I(3));
  CHECK(eval("return #KEYS + #ARGV") == I(0));  // KEYS and ARGV are new per call
}

// Micro-benchmark, skipped by default (run the test binary with --no-skip):
// EVALSHA acquire-script calls per second of one Master.
TEST_CASE("benchmark: EVALSHA acquire calls per second" * doctest::skip()) {
  long long now = 1'700'000'000'000;
  Master master("bench", [&now] { return now; });
  const std::string sha = master.execute({"SCRIPT", "LOAD", std::string(scripts::acquire_script)}).str;
  const std::string release = master.execute({"SCRIPT", "LOAD", std::string(scripts::release_script)}).str;
  const std::string key = scripts::lock_key("redlock:", "bench");
  const std::string token = "0123456789abcdef0123456789abcdef-1";
  const std::string other = "fedcba9876543210fedcba9876543210-2";
  const auto measure = [&](const char* what, const std::vector<std::string_view>& argv, const auto& between) {
    constexpr int n = 500'000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      ++now;
      const Reply r = master.execute_view(argv);
      between();
      if (r.is_error()) FAIL(redlock::sim::to_string(r));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-48s %10.0f calls/s  %6.0f ns/call\n", what, n / s, s / n * 1e9);
  };
  const std::vector<std::string_view> acquire{"EVALSHA", sha, "1", key, token, "30000"};
  const std::vector<std::string_view> acquire_other{"EVALSHA", sha, "1", key, other, "30000"};
  const std::vector<std::string_view> set_nx{"SET", key, token, "NX", "PX", "30000"};
  const std::vector<std::string> del{"DEL", key};
  measure("EVALSHA acquire, free key (then DEL)", acquire, [&] { master.execute(del); });
  master.execute({"SET", key, token, "PX", "999999999"});
  measure("EVALSHA acquire, own key (refresh)", acquire, [] {});
  measure("EVALSHA acquire, held by another (PTTL)", acquire_other, [] {});
  master.execute(del);
  measure("SET NX PX, free key (then DEL)", set_nx, [&] { master.execute(del); });
  const std::vector<std::string_view> rel{"EVALSHA", release, "1", key, token};
  const std::vector<std::string_view> set{"SET", key, token, "PX", "30000"};
  measure("EVALSHA release, own key (then SET)", rel, [&] { master.execute_view(set); });
}

TEST_CASE("extend_batch: each key on its own value and TTL; one flag per key; never recreated, never shortened") {
  Sim sim;
  const std::string a = scripts::lock_key("redlock:", "a"), b = scripts::lock_key("redlock:", "b"),
                    c = scripts::lock_key("redlock:", "c"), d = scripts::lock_key("redlock:", "d");
  REQUIRE(sim.cmd({"SET", a, "va", "PX", "1000"}) == S("OK"));
  REQUIRE(sim.cmd({"SET", b, "other", "PX", "1000"}) == S("OK"));  // another holder's value
  REQUIRE(sim.cmd({"SET", d, "vd", "PX", "9000"}) == S("OK"));
  sim.now += 400;
  // a: ours → 2000; b: not ours; c: gone (never recreated); d: ours, already
  // longer than asked (never shortened).
  CHECK(sim.evalsha(scripts::extend_batch_script, {a, b, c, d}, {"va", "2000", "vb", "2000", "vc", "2000", "vd", "3000"}) ==
        B("1001"));
  CHECK(sim.cmd({"PTTL", a}) == I(2000));
  CHECK(sim.cmd({"PTTL", b}) == I(600));
  CHECK(sim.cmd({"EXISTS", c}) == I(0));
  CHECK(sim.cmd({"PTTL", d}) == I(8600));
  // Each key has its own TTL.
  CHECK(sim.evalsha(scripts::extend_batch_script, {a, d}, {"va", "5000", "vd", "10000"}) == B("11"));
  CHECK(sim.cmd({"PTTL", a}) == I(5000));
  CHECK(sim.cmd({"PTTL", d}) == I(10000));
}
