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

  // eval runs `body` by EVAL: the first `numkeys` of `keys_then_args` are
  // KEYS, the rest ARGV.
  Reply eval(const std::string& body, std::vector<std::string> keys_then_args = {}, int numkeys = 0) {
    std::vector<std::string> argv{"EVAL", body, std::to_string(numkeys)};
    argv.insert(argv.end(), keys_then_args.begin(), keys_then_args.end());
    return cmd(argv);
  }

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

TEST_CASE("inspect: the fair queue's length and head before the holding; a queue of another type is named") {
  Sim sim;
  const std::string queue = scripts::queue_key_of(lock);
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence, queue}, {}) == B("-2 0"));  // no queue: as before
  REQUIRE(sim.cmd({"ZADD", queue, "2", "bbbbbbbbbbbbbbbb", "1", "aaaaaaaaaaaaaaaa"}) == I(2));
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence, queue}, {}) == B("queue 2 aaaaaaaaaaaaaaaa -2 0"));
  REQUIRE(sim.cmd({"SET", lock, "Qccc two words", "PX", "5000"}) == S("OK"));
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence, queue}, {}) ==
        B("queue 2 aaaaaaaaaaaaaaaa 5000 0 Qccc two words"));
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence}, {}) == B("5000 0 Qccc two words"));  // no KEYS[3]
  REQUIRE(sim.cmd({"ZADD", queue, "0", "not an id"}) == I(1));  // a head with blanks is not named
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence, queue}, {}) == B("queue 3 ? 5000 0 Qccc two words"));
  REQUIRE(sim.cmd({"SET", queue, "a string"}) == S("OK"));
  CHECK(sim.evalsha(scripts::inspect_script, {lock, fence, queue}, {}) == B("wrongtype unknown " + queue));
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

TEST_CASE("marker: a clean start (BORN_MS 0, server key = this run id) reads clean; without that proof it is void") {
  Sim sim;
  const std::string key(scripts::marker_key), server(scripts::marker_server_key);
  // As scripts/testbed.sh writes it on a master it has just started empty.
  REQUIRE(sim.cmd({"SET", key, "ab12 0 0"}) == S("OK"));
  REQUIRE(sim.cmd({"SET", server, "r1"}) == S("OK"));
  sim.now += 2500;
  const Reply clean = sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "3000", "r1"});
  CHECK(clean.elements.at(0) == B("clean"));
  CHECK(clean.elements.at(1) == B("ab12"));
  CHECK(clean.elements.at(2) == B("3000"));
  CHECK(sim.cmd({"GET", key}) == B("ab12 3000 0"));  // the declared ms rises; BORN_MS stays 0
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "1000", "r1"}).elements.at(0) == B("clean"));
  // Another server with that marker (restarted from its AOF, a promoted replica): replaced.
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"cd34", "3000", "r2"}) ==
        A({B("replaced"), B("cd34"), B("3000"), B("0")}));
  CHECK(sim.cmd({"GET", key}) == B("cd34 3000 " + std::to_string(sim.now)));
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "3000", "r2"}).elements.at(0) == B("found"));
  // No server key: adopted, and the clean start is void (written now).
  REQUIRE(sim.cmd({"SET", key, "ee56 0 0"}) == S("OK"));
  REQUIRE(sim.cmd({"DEL", server}) == I(1));
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "3000", "r3"}) ==
        A({B("found"), B("ee56"), B("3000"), B("0")}));
  CHECK(sim.cmd({"GET", key}) == B("ee56 3000 " + std::to_string(sim.now)));
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "3000", "r3"}).elements.at(0) == B("found"));
  // No run id known: found (the restart quarantine stays), the marker kept.
  REQUIRE(sim.cmd({"SET", key, "ee56 0 0"}) == S("OK"));
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "3000", ""}).elements.at(0) == B("found"));
  CHECK(sim.cmd({"GET", key}) == B("ee56 3000 0"));
}

TEST_CASE("marker: the replid key names the history the marker was written in; another history reads replaced") {
  Sim sim;
  const std::string key(scripts::marker_key), server(scripts::marker_server_key), replid(scripts::marker_replid_key);
  const std::string h1(40, 'a'), h2(40, 'b');
  REQUIRE(sim.evalsha(scripts::marker_script, {key, server, replid}, {"ab12", "3000", "r1", h1}).elements.at(0) ==
          B("created"));
  CHECK(sim.cmd({"GET", replid}) == B(h1));
  CHECK(sim.evalsha(scripts::marker_script, {key, server, replid}, {"ffff", "3000", "r1", h1}).elements.at(0) ==
        B("found"));
  // The same run id with another replid: demoted, resynced and promoted again.
  CHECK(sim.evalsha(scripts::marker_script, {key, server, replid}, {"cd34", "3000", "r1", h2}) ==
        A({B("replaced"), B("cd34"), B("3000"), B("0")}));
  CHECK(sim.cmd({"GET", replid}) == B(h2));
  CHECK(sim.evalsha(scripts::marker_script, {key, server, replid}, {"ffff", "3000", "r1", h2}).elements.at(0) ==
        B("found"));
  // No replid key (an older client wrote the marker) or no replid known: adopted or skipped, nothing lost.
  REQUIRE(sim.cmd({"DEL", replid}) == I(1));
  CHECK(sim.evalsha(scripts::marker_script, {key, server, replid}, {"ffff", "3000", "r1", h1}).elements.at(0) ==
        B("found"));
  CHECK(sim.cmd({"GET", replid}) == B(h1));
  CHECK(sim.evalsha(scripts::marker_script, {key, server, replid}, {"ffff", "3000", "r1", ""}).elements.at(0) ==
        B("found"));
  CHECK(sim.cmd({"GET", replid}) == B(h1));
  // Only two keys (the form before the replid key): no replid check at all.
  CHECK(sim.evalsha(scripts::marker_script, {key, server}, {"ffff", "3000", "r1", h2}).elements.at(0) == B("found"));
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

TEST_CASE("two masters share the Lua interpreter, not their scripts or keys") {
  Sim a, b;
  const std::string sha = redlock::detail::sha1_hex(scripts::extend_script);
  const Reply noscript{Reply::Type::error, 0, "NOSCRIPT No matching script. Please use EVAL.", {}};
  CHECK(a.cmd({"SCRIPT", "LOAD", std::string(scripts::extend_script)}) == B(sha));
  CHECK(b.cmd({"EVALSHA", sha, "1", lock, "v1", "1000"}) == noscript);  // loaded on a only
  // A script's redis.call reaches the master that runs it.
  CHECK(a.cmd({"SET", lock, "va", "PX", "5000"}) == S("OK"));
  CHECK(b.cmd({"SET", lock, "vb", "PX", "5000"}) == S("OK"));
  CHECK(a.cmd({"EVALSHA", sha, "1", lock, "va", "8000"}) == I(1));
  CHECK(b.cmd({"SCRIPT", "LOAD", std::string(scripts::extend_script)}) == B(sha));
  CHECK(b.cmd({"EVALSHA", sha, "1", lock, "va", "8000"}) == I(0));  // b holds vb
  CHECK(b.cmd({"EVALSHA", sha, "1", lock, "vb", "9000"}) == I(1));
  CHECK(a.cmd({"PTTL", lock}) == I(8000));
  CHECK(b.cmd({"PTTL", lock}) == I(9000));
  // SCRIPT FLUSH and a restart of one leave the other's scripts.
  CHECK(a.cmd({"SCRIPT", "FLUSH"}) == S("OK"));
  CHECK(a.cmd({"EVALSHA", sha, "1", lock, "va", "8000"}) == noscript);
  b.master.restart(true);
  CHECK(b.cmd({"EVALSHA", sha, "1", lock, "vb", "9000"}) == noscript);
  CHECK(a.cmd({"EVAL", std::string(scripts::extend_script), "1", lock, "va", "8000"}) == I(1));
  CHECK(b.cmd({"EVALSHA", sha, "1", lock, "vb", "9000"}) == noscript);  // a's EVAL loaded it on a only
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

TEST_CASE("sorted sets: ZADD, ZRANGE, ZREM, ZCARD, ZRANK, ZSCORE as Redis 7 answers them") {
  Sim sim;
  CHECK(sim.cmd({"ZCARD", "q"}) == I(0));
  CHECK(sim.cmd({"ZRANGE", "q", "0", "-1"}) == A({}));
  CHECK(sim.cmd({"ZRANK", "q", "a"}) == nil);
  CHECK(sim.cmd({"ZSCORE", "q", "a"}) == nil);
  CHECK(sim.cmd({"ZREM", "q", "a"}) == I(0));
  CHECK(sim.cmd({"ZADD", "q", "XX", "1", "a"}) == I(0));  // XX on nothing makes no key
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));

  CHECK(sim.cmd({"ZADD", "q", "3", "c", "1", "b", "3", "a"}) == I(3));
  // By score, then member bytewise (a before c at 3; "\xff" after ASCII).
  CHECK(sim.cmd({"ZRANGE", "q", "0", "-1"}) == A({B("b"), B("a"), B("c")}));
  CHECK(sim.cmd({"ZRANGE", "q", "0", "-1", "WITHSCORES"}) == A({B("b"), B("1"), B("a"), B("3"), B("c"), B("3")}));
  CHECK(sim.cmd({"ZRANGE", "q", "-1", "-1", "WITHSCORES"}) == A({B("c"), B("3")}));
  CHECK(sim.cmd({"ZRANGE", "q", "0", "0"}) == A({B("b")}));
  CHECK(sim.cmd({"ZRANGE", "q", "-100", "1"}) == A({B("b"), B("a")}));
  CHECK(sim.cmd({"ZRANGE", "q", "2", "100"}) == A({B("c")}));
  CHECK(sim.cmd({"ZRANGE", "q", "3", "5"}) == A({}));
  CHECK(sim.cmd({"ZRANGE", "q", "2", "1"}) == A({}));
  CHECK(sim.cmd({"ZRANGE", "q", "0", "1", "REV"}) == A({B("c"), B("a")}));
  CHECK(sim.cmd({"ZCARD", "q"}) == I(3));
  CHECK(sim.cmd({"ZRANK", "q", "a"}) == I(1));
  CHECK(sim.cmd({"ZRANK", "q", "zz"}) == nil);
  CHECK(sim.cmd({"ZSCORE", "q", "c"}) == B("3"));

  // NX keeps a member's score; without it the score moves; CH counts changes.
  CHECK(sim.cmd({"ZADD", "q", "NX", "0", "c", "2", "d"}) == I(1));
  CHECK(sim.cmd({"ZSCORE", "q", "c"}) == B("3"));
  CHECK(sim.cmd({"ZADD", "q", "0", "c"}) == I(0));
  CHECK(sim.cmd({"ZRANK", "q", "c"}) == I(0));
  CHECK(sim.cmd({"ZADD", "q", "CH", "0", "c", "9", "d", "2.5", "e"}) == I(2));
  CHECK(sim.cmd({"ZADD", "q", "GT", "CH", "1", "d", "10", "e"}) == I(1));
  CHECK(sim.cmd({"ZSCORE", "q", "d"}) == B("9"));
  CHECK(sim.cmd({"ZADD", "q", "2.5", "f", "-inf", "g"}) == I(2));
  CHECK(sim.cmd({"ZSCORE", "q", "f"}) == B("2.5"));
  CHECK(sim.cmd({"ZSCORE", "q", "g"}) == B("-inf"));
  CHECK(sim.cmd({"ZRANGE", "q", "0", "-1"}) == A({B("g"), B("c"), B("b"), B("f"), B("a"), B("d"), B("e")}));

  CHECK(sim.cmd({"ZREM", "q", "a", "zz", "b"}) == I(2));
  CHECK(sim.cmd({"ZCARD", "q"}) == I(5));
  CHECK(sim.cmd({"ZREM", "q", "c", "d", "e", "f", "g"}) == I(5));
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));  // an emptied set's key is gone

  // Bad arguments, as Redis answers them.
  CHECK(sim.cmd({"ZADD", "q", "x", "a"}) == E("ERR value is not a valid float"));
  CHECK(sim.cmd({"ZADD", "q", "nan", "a"}) == E("ERR value is not a valid float"));
  CHECK(sim.cmd({"ZADD", "q", " 1", "a"}) == E("ERR value is not a valid float"));
  CHECK(sim.cmd({"ZADD", "q", "1", "a", "2"}) == E("ERR syntax error"));
  CHECK(sim.cmd({"ZADD", "q", "NX"}) == E("ERR wrong number of arguments for 'zadd' command"));
  CHECK(sim.cmd({"ZADD", "q", "NX", "XX", "1", "a"}) == E("ERR XX and NX options at the same time are not compatible"));
  CHECK(is_error_starting(sim.cmd({"ZADD", "q", "NX", "GT", "1", "a"}), "ERR GT, LT, and/or NX"));
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));  // nothing was made by a refused ZADD
  CHECK(sim.cmd({"ZRANGE", "q", "a", "1"}) == E("ERR value is not an integer or out of range"));
  CHECK(sim.cmd({"ZRANGE", "q", "0", "1", "BOGUS"}) == E("ERR syntax error"));
  CHECK(sim.cmd({"ZRANK", "q"}) == E("ERR wrong number of arguments for 'zrank' command"));
}

TEST_CASE("sorted sets: ZREMRANGEBYSCORE as Redis 7 answers it (closed, open and infinite ends)") {
  Sim sim;
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "-inf", "+inf"}) == I(0));
  CHECK(sim.cmd({"ZADD", "q", "1", "a", "2", "b", "3", "c", "4", "d"}) == I(4));
  CHECK(sim.cmd({"zremrangebyscore", "q", "-inf", "1"}) == I(1));  // any case; the end is in
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "(2", "(4"}) == I(1));   // open ends: c alone
  CHECK(sim.cmd({"ZRANGE", "q", "0", "-1"}) == A({B("b"), B("d")}));
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "5", "1"}) == I(0));  // an empty range
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "x", "1"}) == E("ERR min or max is not a float"));
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "0", "(nan"}) == E("ERR min or max is not a float"));
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "0"}) ==
        E("ERR wrong number of arguments for 'zremrangebyscore' command"));
  CHECK(sim.cmd({"ZREMRANGEBYSCORE", "q", "2", "inf"}) == I(2));
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));  // an emptied set's key is gone
  CHECK(sim.cmd({"SET", "s", "v"}) == S("OK"));
  CHECK(is_error_starting(sim.cmd({"ZREMRANGEBYSCORE", "s", "0", "1"}), "WRONGTYPE"));
  CHECK(is_error_starting(sim.cmd({"ZREMRANGEBYSCOREX", "s", "0", "1"}), "ERR unknown command"));
}

TEST_CASE("sorted sets: typed keys (WRONGTYPE), expiry, PTTL, PEXPIRE, DEL, FLUSHALL, restart, keys()") {
  Sim sim;
  REQUIRE(sim.cmd({"ZADD", "q", "1", "a"}) == I(1));
  REQUIRE(sim.cmd({"SET", "s", "v"}) == S("OK"));
  const Reply wrong = E("WRONGTYPE Operation against a key holding the wrong kind of value");
  CHECK(sim.cmd({"GET", "q"}) == wrong);
  CHECK(sim.cmd({"INCR", "q"}) == wrong);
  CHECK(sim.cmd({"SET", "q", "x", "GET"}) == wrong);
  CHECK(sim.cmd({"ZCARD", "q"}) == I(1));  // SET … GET refused: the set stays
  for (const std::vector<std::string>& z : std::vector<std::vector<std::string>>{{"ZADD", "s", "1", "a"},
                                                                                 {"ZRANGE", "s", "0", "-1"},
                                                                                 {"ZREM", "s", "a"},
                                                                                 {"ZCARD", "s"},
                                                                                 {"ZRANK", "s", "a"},
                                                                                 {"ZSCORE", "s", "a"}}) {
    CHECK_MESSAGE(sim.cmd(z) == wrong, z[0]);
  }
  CHECK(sim.cmd({"GET", "s"}) == B("v"));

  // PEXPIRE / PTTL / expiry on the master's clock, as for strings.
  CHECK(sim.cmd({"PTTL", "q"}) == I(-1));
  CHECK(sim.cmd({"PEXPIRE", "q", "100"}) == I(1));
  CHECK(sim.cmd({"ZADD", "q", "2", "b"}) == I(1));  // ZADD keeps the TTL
  CHECK(sim.cmd({"PTTL", "q"}) == I(100));
  CHECK(sim.master.pttl("q") == 100);
  sim.now += 99;
  CHECK(sim.cmd({"ZCARD", "q"}) == I(2));
  sim.now += 1;
  CHECK(sim.cmd({"ZCARD", "q"}) == I(0));
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));
  CHECK(sim.cmd({"ZADD", "q", "1", "a"}) == I(1));  // a new set, without the old TTL
  CHECK(sim.cmd({"PTTL", "q"}) == I(-1));

  // keys() shows a set's members in order; EXISTS / DEL count it.
  REQUIRE(sim.cmd({"ZADD", "q", "0", "z"}) == I(1));
  CHECK(sim.master.keys() == std::vector<std::pair<std::string, std::string>>{{"q", "zset{z:0,a:1}"}, {"s", "v"}});
  CHECK(sim.cmd({"EXISTS", "q", "s"}) == I(2));
  CHECK(sim.cmd({"SET", "q", "str"}) == S("OK"));  // SET replaces a set
  CHECK(sim.cmd({"GET", "q"}) == B("str"));
  CHECK(sim.cmd({"ZADD", "q2", "1", "a"}) == I(1));
  CHECK(sim.cmd({"DEL", "q", "q2"}) == I(2));
  CHECK(sim.master.key_count() == 1);

  REQUIRE(sim.cmd({"ZADD", "q", "1", "a"}) == I(1));
  sim.master.restart(true);
  CHECK(sim.cmd({"ZRANGE", "q", "0", "-1"}) == A({B("a")}));
  sim.master.restart(false);
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));
  REQUIRE(sim.cmd({"ZADD", "q", "1", "a"}) == I(1));
  CHECK(sim.cmd({"FLUSHALL"}) == S("OK"));
  CHECK(sim.cmd({"EXISTS", "q"}) == I(0));
}

TEST_CASE("fair_acquire, a try (ARGV[7] 1): takes a free lock nobody queues for; else is told so and joins no queue") {
  Sim sim;
  const std::string queue = scripts::queue_key_of(lock), turn = scripts::turn_key_of(lock),
                    expiry = scripts::expiry_key_of(lock);
  const auto attempt = [&](const std::string& value, const std::string& waiter, const std::string& try_only) {
    return sim.evalsha(scripts::fair_acquire_script, {lock, queue, turn, expiry},
                       {value, "1000", waiter, "0", "250", "5000", try_only});
  };
  CHECK(attempt("Qh1", "h", "1") == A({I(1), I(0), I(-2), I(0)}));  // free, nobody queued: taken
  CHECK(attempt("Qt1", "t", "1") == A({I(0), I(0), I(1000), I(-1)}));  // held: told the TTL, not queued
  CHECK(sim.cmd({"EXISTS", queue}) == I(0));
  CHECK(attempt("Qa1", "a", "0") == A({I(0), I(1), I(1000), I(0)}));  // a waiter joins
  CHECK(sim.evalsha(scripts::fair_release_script, {lock, queue, expiry}, {"Qh1", channel, "h"}) == I(1));
  // Free, but a waits: the try does not pass it, and starts no turn.
  CHECK(attempt("Qt2", "t", "1") == A({I(0), I(0), I(-2), I(-1)}));
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1"}) == A({B("a")}));
  CHECK(sim.cmd({"EXISTS", lock}) == I(0));
  CHECK(sim.cmd({"EXISTS", turn}) == I(0));
}

TEST_CASE("fair_acquire of a semaphore: the head takes any free permit; its take names the next where another is free") {
  Sim sim;
  const std::string permits = "redlock:{pool}:permits", channel_p = "redlock:{pool}:permits:released";
  const std::vector<std::string> slot{"redlock:{pool}:permit0:lock", "redlock:{pool}:permit1:lock"};
  const std::string queue = scripts::queue_key_of(permits), turn = scripts::turn_key_of(permits),
                    expiry = scripts::expiry_key_of(permits);
  // One queue for the semaphore, apart from the lock's of the same name;
  // a permit's key names the same.
  CHECK(queue == "redlock:{pool}:permits:queue");
  CHECK(scripts::queue_key_of(slot[1]) == queue);
  CHECK(scripts::expiry_key_of(slot[0]) == "redlock:{pool}:permits:expiry");
  CHECK(scripts::queue_key_of("redlock:{pool}:lock") == "redlock:{pool}:queue");
  const auto fair = [&](const std::string& value, const std::string& waiter, const std::string& ticket,
                        const std::string& p = "2", const std::string& try_only = "0") {
    // ttl 1000, grace 250, a place's life 5000, P, start at permit 0
    return sim.evalsha(scripts::fair_acquire_script, {permits, queue, turn, expiry, slot[0], slot[1]},
                       {value, "1000", waiter, ticket, "250", "5000", try_only, p, "0", channel_p});
  };
  // Nobody queued: the first two take a permit each at once, the permit in
  // the fifth item.
  CHECK(fair("Qh1", "h", "0") == A({I(1), I(0), I(-2), I(0), I(0)}));
  CHECK(sim.cmd({"GET", permits}) == B("2"));
  CHECK(fair("Qg1", "g", "0") == A({I(1), I(0), I(-2), I(0), I(1)}));
  // Every permit held: a and b join, told the soonest PTTL; a try joins
  // nothing.
  CHECK(fair("Qa1", "a", "0") == A({I(0), I(1), I(1000), I(0), I(-1)}));
  CHECK(fair("Qb1", "b", "0") == A({I(0), I(2), I(1000), I(1), I(-1)}));
  CHECK(fair("Qt1", "t", "0", "2", "1") == A({I(0), I(0), I(1000), I(-1), I(-1)}));
  // Another P is refused, nothing written.
  const Reply other = fair("Qx1", "x", "0", "3");
  CHECK(is_error_starting(other, "semaphore redlock:{pool}:permits has 2 permits; this client asked for 3"));
  CHECK(sim.cmd({"ZCARD", queue}) == I(2));
  // Both permits freed by releases that were not fair (no announcement):
  // b, not the head, may not take one — it starts a's turn.
  sim.cmd({"DEL", slot[0], slot[1]});
  CHECK(fair("Qb2", "b", "2") == A({I(0), I(2), I(-2), I(1), I(-1)}));
  CHECK(sim.cmd({"EXISTS", turn}) == I(1));
  // The head takes permit 0; permit 1 is still free, so its take names b.
  sim.published.clear();
  CHECK(fair("Qa2", "a", "1") == A({I(1), I(1), I(-2), I(0), I(0)}));
  CHECK(sim.published == std::vector<std::pair<std::string, std::string>>{{channel_p, "turn b -"}});
  // b takes the last; nobody is left to name.
  sim.published.clear();
  CHECK(fair("Qb3", "b", "2") == A({I(1), I(2), I(-2), I(0), I(1)}));
  CHECK(sim.published.empty());
  CHECK(sim.cmd({"EXISTS", queue}) == I(0));
  // A fair release of a permit names the semaphore's queue's head; a
  // leave where a permit is free names the next.
  CHECK(fair("Qc1", "c", "0") == A({I(0), I(1), I(1000), I(0), I(-1)}));
  CHECK(fair("Qd1", "d", "0") == A({I(0), I(2), I(1000), I(1), I(-1)}));
  sim.published.clear();
  CHECK(sim.evalsha(scripts::fair_release_script, {slot[0], queue, expiry}, {"Qa2", channel_p, "a"}) == I(1));
  CHECK(sim.published == std::vector<std::pair<std::string, std::string>>{{channel_p, "turn c d"}});
  sim.published.clear();
  CHECK(sim.evalsha(scripts::fair_leave_script, {slot[0], queue, expiry, slot[1]}, {"c", channel_p}) == I(1));
  CHECK(sim.published == std::vector<std::pair<std::string, std::string>>{{channel_p, "turn d -"}});
}

TEST_CASE("fair scripts: two waiters queue in ticket order; the release names them; the leave names the next") {
  Sim sim;
  const std::string queue = scripts::queue_key_of(lock), turn = scripts::turn_key_of(lock),
                    expiry = scripts::expiry_key_of(lock);
  const auto fair_acquire = [&](const std::string& value, const std::string& waiter, const std::string& ticket) {
    // ttl 1000, grace 250, a place's life 5000
    return sim.evalsha(scripts::fair_acquire_script, {lock, queue, turn, expiry}, {value, "1000", waiter, ticket, "250", "5000"});
  };
  // Free, nobody queued: the first round takes it at once.
  CHECK(fair_acquire("Qh1", "h", "0") == A({I(1), I(0), I(-2), I(0)}));
  // Held: a waiter's first round joins at one above the last queued (1: nobody).
  CHECK(fair_acquire("Qa1", "a", "0") == A({I(0), I(1), I(1000), I(0)}));
  CHECK(fair_acquire("Qa2", "a", "1") == A({I(0), I(1), I(1000), I(0)}));  // again at its ticket: no change
  CHECK(fair_acquire("Qb1", "b", "0") == A({I(0), I(2), I(1000), I(1)}));
  CHECK(fair_acquire("Qb2", "b", "2") == A({I(0), I(2), I(1000), I(1)}));
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1", "WITHSCORES"}) == A({B("a"), B("1"), B("b"), B("2")}));
  CHECK(sim.cmd({"PTTL", queue}) == I(5000));  // the queue lives as long as the last place stamped in it
  CHECK(sim.cmd({"PTTL", expiry}) == I(5000));
  CHECK(sim.cmd({"ZRANGE", expiry, "0", "-1", "WITHSCORES"}) ==
        A({B("a"), B(std::to_string(sim.now + 5000)), B("b"), B(std::to_string(sim.now + 5000))}));
  // A third joins behind, and gives up: it leaves (the lock is held: nobody is named).
  CHECK(fair_acquire("Qc1", "c", "0") == A({I(0), I(3), I(1000), I(2)}));
  const std::size_t published = sim.published.size();
  CHECK(sim.evalsha(scripts::fair_leave_script, {lock, queue, expiry}, {"c", channel}) == I(1));
  CHECK(sim.published.size() == published);
  // A later round at a ticket puts a waiter exactly there (where a first
  // round put it lower, or it was lost), unless it is the head.
  CHECK(fair_acquire("Qb3", "b", "4") == A({I(0), I(4), I(1000), I(1)}));
  CHECK(sim.cmd({"ZSCORE", queue, "b"}) == B("4"));
  CHECK(fair_acquire("Qb4", "b", "2") == A({I(0), I(2), I(1000), I(1)}));

  // The holder's release names the next two.
  CHECK(sim.evalsha(scripts::fair_release_script, {lock, queue, expiry}, {"Qh1", channel, "h"}) == I(1));
  REQUIRE(sim.published.size() == published + 1);
  CHECK(sim.published.back() == std::pair<std::string, std::string>{channel, "turn a b"});
  // b is not the head: the free lock stays free, and the turn key starts a's grace.
  CHECK(fair_acquire("Qb5", "b", "2") == A({I(0), I(2), I(-2), I(1)}));
  CHECK(sim.cmd({"GET", turn}) == B("a " + std::to_string(sim.now + 250)));
  CHECK(sim.cmd({"PTTL", turn}) == I(1000));  // 4 x grace: a later check still finds the turn
  CHECK(sim.cmd({"EXISTS", lock}) == I(0));
  // a comes within its grace and takes it, leaving the queue.
  sim.now += 100;
  CHECK(fair_acquire("Qa3", "a", "1") == A({I(1), I(1), I(-2), I(0)}));
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1"}) == A({B("b")}));

  // a releases: b is named alone; b gives up instead: the leave names nobody (empty queue).
  CHECK(sim.evalsha(scripts::fair_release_script, {lock, queue, expiry}, {"Qa3", channel, "a"}) == I(1));
  CHECK(sim.published.back() == std::pair<std::string, std::string>{channel, "turn b -"});
  CHECK(sim.evalsha(scripts::fair_leave_script, {lock, queue, expiry}, {"b", channel}) == I(1));
  CHECK(sim.cmd({"EXISTS", queue}) == I(0));
  CHECK(sim.evalsha(scripts::fair_leave_script, {lock, queue, expiry}, {"b", channel}) == I(0));

  // A head that never comes loses its place after the grace.
  CHECK(fair_acquire("Qx2", "x", "5") == A({I(1), I(5), I(-2), I(0)}));  // free, x at the head: taken
  CHECK(fair_acquire("Qd2", "d", "6") == A({I(0), I(6), I(1000), I(0)}));
  CHECK(fair_acquire("Qe2", "e", "7") == A({I(0), I(7), I(1000), I(1)}));
  CHECK(sim.evalsha(scripts::fair_release_script, {lock, queue, expiry}, {"Qx2", channel, "x"}) == I(1));
  CHECK(sim.published.back() == std::pair<std::string, std::string>{channel, "turn d e"});
  CHECK(fair_acquire("Qe3", "e", "7") == A({I(0), I(7), I(-2), I(1)}));  // d's grace starts
  sim.now += 250;
  CHECK(fair_acquire("Qe4", "e", "7") == A({I(0), I(7), I(-2), I(1)}));  // not yet past it
  sim.now += 1;
  CHECK(fair_acquire("Qe5", "e", "7") == A({I(1), I(7), I(-2), I(0)}));  // d taken out: e's turn
  CHECK(sim.cmd({"ZCARD", queue}) == I(0));
  CHECK(sim.cmd({"GET", lock}) == B("Qe5"));
}

TEST_CASE("fair scripts: a waiter that sends no more rounds lapses after its life; a try then takes the free lock") {
  Sim sim;
  const std::string queue = scripts::queue_key_of(lock), turn = scripts::turn_key_of(lock),
                    expiry = scripts::expiry_key_of(lock);
  // ttl 1000, grace 250, a place's life 2000 (ARGV[6])
  const auto fair_acquire = [&](const std::string& value, const std::string& waiter, const std::string& ticket,
                                const std::string& try_only = "0") {
    return sim.evalsha(scripts::fair_acquire_script, {lock, queue, turn, expiry},
                       {value, "1000", waiter, ticket, "250", "2000", try_only});
  };
  REQUIRE(fair_acquire("Qh1", "h", "0") == A({I(1), I(0), I(-2), I(0)}));
  REQUIRE(fair_acquire("Qd1", "d", "0") == A({I(0), I(1), I(1000), I(0)}));  // d joins, then is killed
  sim.now += 1000;  // the holder's TTL runs out: free, nobody released
  CHECK(fair_acquire("Qt1", "t", "0", "1") == A({I(0), I(0), I(-2), I(-1)}));  // d's place still holds
  CHECK(sim.cmd({"ZCARD", queue}) == I(1));
  sim.now += 999;
  CHECK(fair_acquire("Qt2", "t", "0", "1") == A({I(0), I(0), I(-2), I(-1)}));
  sim.now += 1;  // 2000 after d's last round: its place lapsed
  CHECK(fair_acquire("Qt3", "t", "0", "1") == A({I(1), I(0), I(-2), I(0)}));
  CHECK(sim.cmd({"EXISTS", queue}) == I(0));
  CHECK(sim.cmd({"EXISTS", expiry}) == I(0));
  CHECK(sim.cmd({"EXISTS", turn}) == I(0));  // no turn was ever started for d

  // A live waiter keeps its place by its rounds, whatever the time: each
  // stamps it a life ahead; and both keys live a life past the last stamp.
  REQUIRE(sim.cmd({"SET", lock, "Qz1", "PX", "60000"}) == S("OK"));  // held for long
  CHECK(fair_acquire("Qa1", "a", "0") == A({I(0), I(1), I(60000), I(0)}));
  CHECK(fair_acquire("Qb1", "b", "0") == A({I(0), I(2), I(60000), I(1)}));
  for (int round = 0; round < 5; ++round) {
    sim.now += 1500;
    const Reply r = fair_acquire("Qa" + std::to_string(round + 2), "a", "1");
    CHECK(r.elements.at(0) == I(0));
    CHECK(r.elements.at(3) == I(0));
  }
  // b sent nothing for 7500: gone.
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1"}) == A({B("a")}));
  CHECK(sim.cmd({"PTTL", queue}) == I(2000));
  CHECK(sim.cmd({"PTTL", expiry}) == I(2000));
  // A place that lapsed but whose waiter comes back (a long pause) is
  // taken at its ticket again: in front of anyone who came after it.
  CHECK(fair_acquire("Qc1", "c", "0").elements.at(1) == I(2));
  CHECK(fair_acquire("Qb2", "b", "2").elements.at(3) == I(1));  // equal tickets: by id, b before c
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1"}) == A({B("a"), B("b"), B("c")}));
  // A queued member without a stamp (written by a version without stamps)
  // counts as lapsed: the release names the live ones only.
  REQUIRE(sim.cmd({"ZADD", queue, "0", "nostamp"}) == I(1));
  CHECK(sim.evalsha(scripts::fair_release_script, {lock, queue, expiry}, {"Qz1", channel, "z"}) == I(1));
  CHECK(sim.published.back() == std::pair<std::string, std::string>{channel, "turn a b"});
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1"}) == A({B("a"), B("b"), B("c")}));
  // b and c come on; a does not: its turn starts; then its place lapses,
  // and b's turn starts.
  sim.now += 1000;
  CHECK(fair_acquire("Qb3", "b", "2") == A({I(0), I(2), I(-2), I(1)}));
  CHECK(fair_acquire("Qc2", "c", "2") == A({I(0), I(2), I(-2), I(2)}));
  sim.now += 1000;
  CHECK(fair_acquire("Qc3", "c", "2") == A({I(0), I(2), I(-2), I(1)}));
  CHECK(sim.cmd({"GET", turn}) == B("b " + std::to_string(sim.now + 250)));
  // b gives up: the leave names the next live waiter.
  CHECK(sim.evalsha(scripts::fair_leave_script, {lock, queue, expiry}, {"b", channel}) == I(1));
  CHECK(sim.published.back() == std::pair<std::string, std::string>{channel, "turn c -"});
  CHECK(fair_acquire("Qc4", "c", "2") == A({I(1), I(2), I(-2), I(0)}));
  CHECK(sim.cmd({"EXISTS", queue}) == I(0));
  CHECK(sim.cmd({"EXISTS", expiry}) == I(0));
}

TEST_CASE("fair_acquire: a waiter whose first round's reply was lost keeps the ticket that round gave it") {
  Sim sim;
  const std::string queue = scripts::queue_key_of(lock), turn = scripts::turn_key_of(lock),
                    expiry = scripts::expiry_key_of(lock);
  const auto fair_acquire = [&](const std::string& value, const std::string& waiter, const std::string& ticket) {
    return sim.evalsha(scripts::fair_acquire_script, {lock, queue, turn, expiry},
                       {value, "1000", waiter, ticket, "250", "2000", "0"});
  };
  REQUIRE(fair_acquire("Qh1", "h", "0") == A({I(1), I(0), I(-2), I(0)}));
  REQUIRE(fair_acquire("Qa1", "a", "0") == A({I(0), I(1), I(1000), I(0)}));  // its reply is lost
  REQUIRE(fair_acquire("Qb1", "b", "0") == A({I(0), I(2), I(1000), I(1)}));
  // a, without a ticket, sends another first round: it is still queued
  // here at 1, and stays there (not behind b at 3).
  CHECK(fair_acquire("Qa2", "a", "0") == A({I(0), I(1), I(1000), I(0)}));
  CHECK(sim.cmd({"ZRANGE", queue, "0", "-1", "WITHSCORES"}) == A({B("a"), B("1"), B("b"), B("2")}));
  // And as the head of a free lock, that round takes it.
  sim.now += 1000;
  CHECK(fair_acquire("Qa3", "a", "0") == A({I(1), I(1), I(-2), I(0)}));
  CHECK(sim.cmd({"ZRANGE", expiry, "0", "-1"}) == A({B("b")}));
}

TEST_CASE("inspect: with the expiry set, only live waiters count and head the queue; lapsed ones are counted apart") {
  Sim sim;
  const std::string queue = scripts::queue_key_of(lock), expiry = scripts::expiry_key_of(lock);
  const auto inspect = [&] { return sim.evalsha(scripts::inspect_script, {lock, fence, queue, expiry}, {}); };
  CHECK(inspect() == B("-2 0"));
  REQUIRE(sim.cmd({"ZADD", queue, "1", "aaaaaaaaaaaaaaaa", "2", "bbbbbbbbbbbbbbbb", "3", "cccccccccccccccc"}) == I(3));
  REQUIRE(sim.cmd({"ZADD", expiry, std::to_string(sim.now + 10), "aaaaaaaaaaaaaaaa", std::to_string(sim.now + 20),
                   "bbbbbbbbbbbbbbbb"}) == I(2));
  CHECK(inspect() == B("lapsed 1 queue 2 aaaaaaaaaaaaaaaa -2 0"));  // c has no stamp
  sim.now += 10;
  CHECK(inspect() == B("lapsed 2 queue 1 bbbbbbbbbbbbbbbb -2 0"));
  REQUIRE(sim.cmd({"SET", lock, "Qx", "PX", "5000"}) == S("OK"));
  sim.now += 10;
  CHECK(inspect() == B("lapsed 3 4990 0 Qx"));  // nobody serves that queue
  CHECK(sim.cmd({"ZCARD", queue}) == I(3));     // inspect changes nothing
  REQUIRE(sim.cmd({"SET", expiry, "a string"}) == S("OK"));
  CHECK(inspect() == B("wrongtype unknown " + expiry));
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
    return sim.eval(body, std::move(keys_then_args), numkeys);
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

// KEYS and ARGV keep their tables from call to call (tools/sim/master.cpp,
// ArgTable): a call must see exactly its own arguments, whatever the
// calls before it had or wrote into them.
TEST_CASE("Lua: KEYS and ARGV hold each call's arguments only, whatever an earlier call left") {
  Sim sim;
  const auto eval = [&sim](const std::string& body, std::vector<std::string> keys_then_args = {}, int numkeys = 0) {
    return sim.eval(body, std::move(keys_then_args), numkeys);
  };
  const std::string shape = "return {#KEYS, #ARGV, tostring(KEYS[1]), tostring(KEYS[2]), tostring(KEYS[3]), "
                            "tostring(ARGV[1]), tostring(ARGV[2]), tostring(ARGV[3]), tostring(next(KEYS, #KEYS)), "
                            "tostring(next(ARGV, #ARGV))}";
  CHECK(eval(shape, {"a", "b", "c", "x", "y", "z"}, 3) ==
        A({I(3), I(3), B("a"), B("b"), B("c"), B("x"), B("y"), B("z"), B("nil"), B("nil")}));
  CHECK(eval(shape, {"d", "w"}, 1) ==
        A({I(1), I(1), B("d"), B("nil"), B("nil"), B("w"), B("nil"), B("nil"), B("nil"), B("nil")}));
  // Writes past the arguments (the array's rest, a key of the hash part)
  // and over them are gone at the next call.
  CHECK(eval("KEYS[2] = 'k2' KEYS[7] = 'k7' KEYS.extra = 1 ARGV[1] = 'over' ARGV[3] = 'a3' return 1", {"e", "v"},
             1) == I(1));
  CHECK(eval(shape, {"f", "u"}, 1) ==
        A({I(1), I(1), B("f"), B("nil"), B("nil"), B("u"), B("nil"), B("nil"), B("nil"), B("nil")}));
  CHECK(eval("return tostring(KEYS.extra) .. tostring(KEYS[7])", {"g"}, 1) == B("nilnil"));
  // A script that replaces the global gets the kept table back next time.
  CHECK(eval("KEYS = {'mine', 'too'} return #KEYS", {"h"}, 1) == I(2));
  CHECK(eval(shape, {"i", "j", "t"}, 2) ==
        A({I(2), I(1), B("i"), B("j"), B("nil"), B("t"), B("nil"), B("nil"), B("nil"), B("nil")}));
  // GET from a script: missing, a string, and another type (WRONGTYPE).
  CHECK(eval("return redis.call('GET', KEYS[1]) == false", {"missing"}, 1) == I(1));
  CHECK(sim.cmd({"SET", "s", "a value longer than fifteen bytes"}) == S("OK"));
  CHECK(eval("return redis.call('get', KEYS[1])", {"s"}, 1) == B("a value longer than fifteen bytes"));
  CHECK(sim.cmd({"ZADD", "z", "1", "m"}) == I(1));
  CHECK(eval("return redis.pcall('GET', KEYS[1]).err", {"z"}, 1) ==
        B("WRONGTYPE Operation against a key holding the wrong kind of value"));
  CHECK(is_error_starting(eval("return redis.call('GET', 'a', 'b')"), "ERR wrong number of arguments for 'get'"));
}

// execute_into writes a reply into one whose buffers it reuses (the
// network's message, from one command to the next): whatever that held —
// a longer array, nested arrays, text — must be gone, the reply exactly
// what execute_view answers to the same command on a master in the same
// state. Also redis.call's reply inside a script, reused the same way.
TEST_CASE("execute_into: each reply as execute_view gives it, whatever the reused reply held before") {
  Sim fresh, reused;  // the same commands, in the same order, on two masters
  const std::string shaped = "local n = tonumber(ARGV[1]) "
                             "if n == 0 then return redis.status_reply('FINE') end "
                             "if n == 1 then return redis.error_reply('MY error text that is long') end "
                             "if n == 2 then return {1, 'two', {3, {'four', false, 5}}, 'a string past fifteen bytes'} end "
                             "if n == 3 then return {7} end "
                             "if n == 4 then return 'short' end "
                             "if n == 5 then return redis.call('GET', KEYS[1]) end "
                             "if n == 6 then return {redis.call('SET', KEYS[1], ARGV[2], 'PX', 60000), "
                             "redis.call('PTTL', KEYS[1]), redis.call('TIME')[1] ~= nil} end "
                             "if n == 7 then return redis.pcall('ZADD', KEYS[1], 'x', 'm') end "
                             "return nil";
  const std::string sha = redlock::detail::sha1_hex(shaped);
  REQUIRE(fresh.cmd({"SCRIPT", "LOAD", shaped}) == B(sha));
  REQUIRE(reused.cmd({"SCRIPT", "LOAD", shaped}) == B(sha));
  Reply out;
  const auto both = [&](std::vector<std::string> argv) {
    const Reply want = fresh.master.execute(argv);
    std::vector<std::string_view> views(argv.begin(), argv.end());
    reused.master.execute_into(views, out);
    CHECK(out == want);
    return want;
  };
  const std::vector<std::vector<std::string>> commands = {
      {"EVALSHA", sha, "1", "k", "2"},                                  // nested arrays, long strings
      {"EVALSHA", sha, "1", "k", "3"},                                  // a shorter array over them
      {"EVALSHA", sha, "1", "k", "0"},                                  // a status over an array
      {"EVALSHA", sha, "1", "k", "2"},                                  // an array again
      {"EVALSHA", sha, "1", "k", "1"},                                  // an error
      {"EVALSHA", sha, "1", "k", "5"},                                  // GET of a missing key: nil
      {"EVALSHA", sha, "1", "k", "6", "a value longer than fifteen"},  // SET, PTTL, TIME from the script
      {"EVALSHA", sha, "1", "k", "5"},                                  // GET of it
      {"GET", "k"},
      {"EVALSHA", sha, "1", "k", "4"},
      {"GET", "missing"},
      {"EVALSHA", sha, "1", "k", "7"},  // redis.pcall's error (not a float)
      {"EVALSHA", sha, "1", "k", "9"},  // nil
      {"ZADD", "z", "1", "m"},
      {"GET", "z"},  // WRONGTYPE
      {"EVALSHA", sha.substr(0, 39) + "X", "0"},  // NOSCRIPT
      {"EVALSHA", sha, "x"},                       // numkeys not an integer
      {"SET", "k", "v", "NX"},                     // a refused SET NX: nil
      {"PTTL", "k"},
      {"EVALSHA", sha, "1", "k", "2"},
  };
  for (const auto& argv : commands) both(argv);
  CHECK(both({"EVALSHA", sha, "1", "k", "6", "w"}) == A({S("OK"), I(60000), I(1)}));
}

// KEYS and ARGV are kept per count of arguments: what a script leaves in
// the table of one count is gone by the next call with that count, after
// calls with other counts in between.
TEST_CASE("Lua: KEYS and ARGV kept per count: a table left dirty is not seen again by any count") {
  Sim sim;
  const std::string shape = "return {#KEYS, #ARGV, tostring(next(KEYS, #KEYS)), tostring(next(ARGV, #ARGV)), "
                            "tostring(KEYS[1]), tostring(ARGV[1])}";
  CHECK(sim.eval("KEYS[4] = 'k' ARGV.x = 1 return 1", {"a", "b"}, 1) == I(1));
  CHECK(sim.eval(shape, {"c", "d", "e", "f"}, 2) == A({I(2), I(2), B("nil"), B("nil"), B("c"), B("e")}));
  CHECK(sim.eval(shape, {"g", "h"}, 1) == A({I(1), I(1), B("nil"), B("nil"), B("g"), B("h")}));
  const std::string empty = "return {#KEYS, #ARGV, tostring(next(KEYS)), tostring(next(ARGV))}";
  CHECK(sim.eval(empty, {}, 0) == A({I(0), I(0), B("nil"), B("nil")}));
  CHECK(sim.eval("KEYS[1] = 'over' ARGV[2] = 'y' return 1", {}, 0) == I(1));
  CHECK(sim.eval(empty, {}, 0) == A({I(0), I(0), B("nil"), B("nil")}));
  CHECK(sim.eval(shape, {"i", "j"}, 1) == A({I(1), I(1), B("nil"), B("nil"), B("i"), B("j")}));
  // A script that clears its arguments and fills the tables with other
  // keys (the table rehashes, its last argument's key gone): the check
  // after the call must not raise (it runs outside any pcall: an abort).
  const std::string refill = "for i = 1, #KEYS do KEYS[i] = nil end for i = 1, #ARGV do ARGV[i] = nil end "
                             "for i = 1, 40 do KEYS['h' .. i] = i ARGV['h' .. i] = i end return 1";
  CHECK(sim.eval(refill, {"k", "a"}, 1) == I(1));
  CHECK(sim.eval(shape, {"l", "m"}, 1) == A({I(1), I(1), B("nil"), B("nil"), B("l"), B("m")}));
}

// tonumber reads plain decimal integers directly and everything else as
// Lua 5.1's own does (strtod: spaces, hex, exponents; a base; errors).
TEST_CASE("Lua: tonumber answers as Lua 5.1's, its shortcut for decimal integers included") {
  Sim sim;
  const auto eval = [&sim](const std::string& body) { return sim.cmd({"EVAL", body, "0"}); };
  const auto number = [&eval](const std::string& arguments) {
    return eval("local n = tonumber(" + arguments +
                ") if n == nil then return 'nil' end return string.format('%.17g', n)");
  };
  CHECK(number("'1700000000123'") == B("1700000000123"));
  CHECK(number("'-42'") == B("-42"));
  CHECK(number("'007'") == B("7"));
  CHECK(number("'-0'") == B("-0"));
  CHECK(number("'999999999999999'") == B("999999999999999"));        // 15 digits: the shortcut's most
  CHECK(number("'9007199254740993'") == B("9007199254740992"));       // 16: strtod rounds to a double
  CHECK(number("'123456789012345678901'") == B("1.2345678901234568e+20"));
  CHECK(number("' 12 '") == B("12"));
  CHECK(number("'0x10'") == B("16"));
  CHECK(number("'1e3'") == B("1000"));
  CHECK(number("'2.5'") == B("2.5"));
  CHECK(number("'+5'") == B("5"));
  CHECK(number("'12\\0 junk'") == B("12"));  // strtod stops at the NUL, as Lua 5.1's conversion does
  for (const char* none : {"''", "'-'", "'--1'", "'12a'", "'a'", "nil", "{}", "'1 2'"}) CHECK(number(none) == B("nil"));
  CHECK(number("7.5") == B("7.5"));
  CHECK(number("'10', 2") == B("2"));
  CHECK(number("'zz', 36") == B("1295"));
  CHECK(number("'12', nil") == B("12"));
  CHECK(number("'2', 2") == B("nil"));
  CHECK(is_error_starting(eval("return tonumber()"),
                          "ERR user_script:1: bad argument #1 to 'tonumber' (value expected)"));
  CHECK(is_error_starting(eval("return tonumber('1', 99)"),
                          "ERR user_script:1: bad argument #2 to 'tonumber' (base out of range)"));
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

namespace {

// info_of: one field of the master's INFO `section` (the field must be there).
std::string info_of(Sim& sim, const std::string& section, const std::string& name) {
  const std::string info = sim.master.execute({"INFO", section}).str;
  const std::size_t at = info.find("\r\n" + name + ":");
  REQUIRE(at != std::string::npos);
  const std::size_t begin = at + name.size() + 3;
  return info.substr(begin, info.find("\r\n", begin) - begin);
}

}  // namespace

TEST_CASE("fail_over: a lagging replica — new run_id, a long uptime, the keys written after it synced missing") {
  Sim sim;
  const auto info_field = [&sim](const std::string& name) { return info_of(sim, "server", name); };
  const Reply marker = sim.evalsha(scripts::marker_script, {"redlock-marker", "{redlock-marker}:server"},
                                   {"e1", "1000", sim.master.run_id()});
  REQUIRE(marker.elements.at(0) == B("created"));
  REQUIRE(sim.cmd({"SET", "old", "1", "PX", "60000"}) == S("OK"));
  REQUIRE(sim.cmd({"SET", "extended", "1", "PX", "60000"}) == S("OK"));
  sim.now += 500;
  const long long synced = sim.now;
  sim.now += 1;
  REQUIRE(sim.cmd({"SET", "new", "1", "PX", "60000"}) == S("OK"));
  REQUIRE(sim.cmd({"PEXPIRE", "extended", "90000"}) == I(1));  // a later write: the replica lacks it
  const std::string before = sim.master.run_id();
  sim.master.fail_over(synced, 7200 * 1000);
  CHECK(sim.master.run_id() != before);
  CHECK(info_field("run_id") == sim.master.run_id());
  CHECK(std::stoll(info_field("uptime_in_seconds")) >= 7200);  // not a fresh start
  std::vector<std::string> keys;
  for (const auto& [key, value] : sim.master.keys()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"old", "redlock-marker", "{redlock-marker}:server"});
  // The marker is the primary's: a client that passes the new run id sees
  // it was written by another server.
  const Reply after = sim.evalsha(scripts::marker_script, {"redlock-marker", "{redlock-marker}:server"},
                                  {"e2", "1000", sim.master.run_id()});
  CHECK(after.elements.at(0) == B("replaced"));
}

TEST_CASE("resync: demoted, resynced and promoted again — the same run_id and uptime, a new master_replid, later writes missing") {
  Sim sim;
  const auto replication = [&sim](const std::string& name) { return info_of(sim, "replication", name); };
  const std::vector<std::string> marker_keys = {"redlock-marker", "{redlock-marker}:server", "{redlock-marker}:replid"};
  const std::string history = replication("master_replid");
  CHECK(history.size() == 40);
  REQUIRE(sim.evalsha(scripts::marker_script, marker_keys, {"e1", "1000", sim.master.run_id(), history}).elements.at(0) ==
          B("created"));
  REQUIRE(sim.cmd({"SET", "old", "1", "PX", "60000"}) == S("OK"));
  sim.now += 500;
  const long long synced = sim.now;
  sim.now += 1;
  REQUIRE(sim.cmd({"SET", "new", "1", "PX", "60000"}) == S("OK"));
  const std::string run_id = sim.master.run_id();
  sim.master.resync(synced);
  CHECK(sim.master.run_id() == run_id);
  CHECK(replication("master_replid") != history);
  CHECK(replication("master_replid").size() == 40);
  CHECK(sim.cmd({"EXISTS", "old"}) == I(1));
  CHECK(sim.cmd({"EXISTS", "new"}) == I(0));
  // Only the history tells: the marker written under the old one reads
  // `replaced` for a client that passes the new one.
  const Reply after =
      sim.evalsha(scripts::marker_script, marker_keys, {"e1", "1000", sim.master.run_id(), replication("master_replid")});
  CHECK(after.elements.at(0) == B("replaced"));
}

TEST_CASE("leader_proclaim: only where the lock holds the token; a late older proclaim keeps the newer value") {
  Sim sim;
  const std::string record = scripts::leader_key_of(lock);
  const std::string news = scripts::leader_channel_of(lock);
  auto proclaim = [&](const std::string& token, const std::string& term, const std::string& rev, const std::string& value) {
    return sim.evalsha(scripts::leader_proclaim_script, {lock, record}, {token, term, rev, "id", value, news});
  };
  auto read = [&] { return sim.evalsha(scripts::leader_read_script, {lock, record}, {}); };
  CHECK(proclaim("t1", "3", "1", "v") == I(0));  // no lock: no record
  CHECK(sim.cmd({"GET", record}) == nil);
  CHECK(read() == B("-2 -1 0 0 "));
  REQUIRE(sim.cmd({"SET", lock, "t1", "PX", "1000"}) == S("OK"));
  CHECK(proclaim("t1", "3", "1", "v1") == I(1));
  const std::string since = std::to_string(sim.now);
  CHECK(sim.cmd({"GET", record}) == B("3 1 " + since + " 2 2 t1idv1"));
  REQUIRE(sim.published.size() == 1);
  CHECK(sim.published[0] == std::pair<std::string, std::string>{news, "3"});
  sim.now += 250;
  CHECK(read() == B("750 250 2 " + std::to_string(("3 1 " + since + " 2 2 t1idv1").size()) + " t13 1 " + since +
                    " 2 2 t1idv1"));
  CHECK(proclaim("t1", "3", "3", "v3") == I(1));
  CHECK(proclaim("t1", "3", "2", "v2") == I(1));  // late: counted, but the newer value stays
  CHECK(sim.cmd({"GET", record}) == B("3 3 " + since + " 2 2 t1idv3"));  // and SINCE is the term's first
  // Another token, or a lower term, is refused; a record of a higher term stays.
  CHECK(proclaim("t2", "4", "1", "x") == I(0));
  REQUIRE(sim.cmd({"SET", record, "9 1 5 2 2 t9idv9"}) == S("OK"));
  CHECK(proclaim("t1", "3", "4", "v4") == I(0));
  CHECK(sim.cmd({"GET", record}) == B("9 1 5 2 2 t9idv9"));
  // Someone else's value at the record's name is overwritten by the holder.
  REQUIRE(sim.cmd({"SET", record, "not a record"}) == S("OK"));
  CHECK(proclaim("t1", "3", "5", "v5") == I(1));
  CHECK(sim.cmd({"GET", record}) == B("3 5 " + std::to_string(sim.now) + " 2 2 t1idv5"));
}

TEST_CASE("leader_resign: deletes only its own record and says so on the channel; leader_read names a wrong type") {
  Sim sim;
  const std::string record = scripts::leader_key_of(lock);
  const std::string news = scripts::leader_channel_of(lock);
  REQUIRE(sim.cmd({"SET", record, "3 1 5 2 2 t1idv1"}) == S("OK"));
  CHECK(sim.evalsha(scripts::leader_resign_script, {record}, {"t2", news}) == I(0));
  CHECK(sim.cmd({"GET", record}) == B("3 1 5 2 2 t1idv1"));
  CHECK(sim.published.empty());
  CHECK(sim.evalsha(scripts::leader_resign_script, {record}, {"t1", news}) == I(1));
  CHECK(sim.cmd({"GET", record}) == nil);
  REQUIRE(sim.published.size() == 1);
  CHECK(sim.published[0] == std::pair<std::string, std::string>{news, "0"});
  CHECK(sim.evalsha(scripts::leader_resign_script, {record}, {"t1", news}) == I(0));  // twice: nothing more
  REQUIRE(sim.cmd({"ZADD", record, "1", "m"}) == I(1));
  CHECK(sim.evalsha(scripts::leader_read_script, {lock, record}, {}) == B("wrongtype " + record));
}
