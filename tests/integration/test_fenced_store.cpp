// test_fenced_store.cpp — the resource side of fencing (redlock/fenced_store.hpp)
// against a real redis-server: a write is accepted at or above the highest
// fence and refused below it, fences are exact up to 2^53 and never rounded,
// keys and values are any bytes, errors name the store and no secret, and
// of two concurrent writers the higher fence always ends in the store.
#include <doctest/doctest.h>

#include <cstdint>
#include <latch>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "redlock/fenced_store.hpp"

using namespace redlock;
using namespace redlock::test;

namespace {

constexpr std::uint64_t two53 = std::uint64_t{1} << 53;

std::unique_ptr<FencedStore> store_at(const std::string& url) {
  auto store = FencedStore::connect(*parse_node_url(url));
  REQUIRE_MESSAGE(store.ok(), store.error().to_string());
  return std::move(*store);
}

FencedWrite written(FencedStore& store, std::string_view key, std::uint64_t fence, std::string_view value) {
  auto w = store.write(key, fence, value);
  REQUIRE_MESSAGE(w.ok(), w.error().to_string());
  return *w;
}

FencedValue read_back(FencedStore& store, std::string_view key) {
  auto v = store.read(key);
  REQUIRE_MESSAGE(v.ok(), v.error().to_string());
  return *v;
}

}  // namespace

TEST_CASE("a write is accepted at or above the highest fence, refused below it, and the refusal is counted") {
  RedisServer server;
  auto store = store_at(server.url());

  CHECK(read_back(*store, "report").highest == 0);  // never written
  CHECK(read_back(*store, "report").value.empty());

  FencedWrite w = written(*store, "report", 5, "first");
  CHECK(w.accepted);
  CHECK(w.highest == 5);
  w = written(*store, "report", 5, "again, same holder");  // equal: accepted
  CHECK(w.accepted);
  CHECK(w.highest == 5);
  w = written(*store, "report", 4, "stale");
  CHECK_FALSE(w.accepted);
  CHECK(w.highest == 5);
  FencedValue v = read_back(*store, "report");
  CHECK(v.highest == 5);
  CHECK(v.value == "again, same holder");
  CHECK(v.rejected == 1);

  w = written(*store, "report", 9, "next holder");
  CHECK(w.accepted);
  CHECK(w.highest == 9);
  CHECK_FALSE(written(*store, "report", 5, "the first holder, late").accepted);
  v = read_back(*store, "report");
  CHECK(v.highest == 9);
  CHECK(v.value == "next holder");
  CHECK(v.rejected == 2);
  CHECK(read_back(*store, "other").highest == 0);  // fences are per key
}

TEST_CASE("fences are exact up to 2^53; above it, or 0, nothing is written and nothing is rounded") {
  RedisServer server;
  auto store = store_at(server.url());

  CHECK(written(*store, "edge", two53 - 1, "below").accepted);
  FencedWrite w = written(*store, "edge", two53, "the last fence a lock can give");
  CHECK(w.accepted);
  CHECK(w.highest == two53);
  CHECK_FALSE(written(*store, "edge", two53 - 1, "stale").accepted);  // a double would not tell them apart
  for (const std::uint64_t bad : {std::uint64_t{0}, two53 + 1, std::numeric_limits<std::uint64_t>::max()}) {
    auto refused = store->write("edge", bad, "out of range");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::invalid_argument);
    CHECK_MESSAGE(refused.error().message.find("2^53") != std::string::npos, refused.error().message);
  }
  FencedValue v = read_back(*store, "edge");
  CHECK(v.highest == two53);
  CHECK(v.value == "the last fence a lock can give");
  CHECK(v.rejected == 1);

  // The script refuses on its own what a client of another language sends:
  // 2^53 + 1 reads as 2^53 in Lua, so only its text can be judged.
  const std::string script(fenced_store_script);
  for (const std::string raw : {"9007199254740993", "9007199254740999", "18446744073709551615", "0", "007", "-1",
                                "1.5", "1e3", " 7", ""}) {
    const Reply r = server.command({"EVAL", script, "1", "edge", raw, "raw"});
    CHECK_MESSAGE(r.type == REDIS_REPLY_ERROR, "fence '" << raw << "' was not refused");
    CHECK_MESSAGE(r.str.find("2^53") != std::string::npos, r.str);
  }
  CHECK(read_back(*store, "edge").value == "the last fence a lock can give");

  // A stored fence beyond 2^53 (a hash changed by hand) is an error, never
  // compared rounded.
  server.command({"HSET", "edge", "fence", "9007199254740993"});
  auto w2 = store->write("edge", two53, "equal once rounded");
  REQUIRE_FALSE(w2.ok());
  CHECK(w2.error().code == Errc::store);
  CHECK_MESSAGE(w2.error().message.find("2^53") != std::string::npos, w2.error().message);
  auto r2 = store->read("edge");
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error().code == Errc::store);
  CHECK(server.command({"HGET", "edge", "value"}).str == "the last fence a lock can give");
}

TEST_CASE("keys and values are any bytes") {
  RedisServer server;
  auto store = store_at(server.url());
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  const std::string key = std::string("res\0ource\r\n\xff", 13);
  const std::string prefix_key = std::string("res", 3);  // what a C string would make of `key`

  CHECK(written(*store, key, 3, all_bytes).accepted);
  CHECK(written(*store, prefix_key, 1, "").accepted);  // an empty value is a value
  FencedValue v = read_back(*store, key);
  CHECK(v.highest == 3);
  CHECK(v.value == all_bytes);
  CHECK(read_back(*store, prefix_key).highest == 1);
  CHECK(read_back(*store, prefix_key).value.empty());
  CHECK(server.command({"HGET", key, "value"}).str == all_bytes);
}

TEST_CASE("a store that is down, or goes down, is a clear error that names it and no secret") {
  const int port = free_port();  // nothing listens there
  auto down = FencedStore::connect(*parse_node_url("redis://:s3cret-pw@127.0.0.1:" + std::to_string(port)));
  REQUIRE_FALSE(down.ok());
  CHECK(down.error().code == Errc::store);
  CHECK_MESSAGE(down.error().message.find("127.0.0.1:" + std::to_string(port)) != std::string::npos,
                down.error().message);
  CHECK_MESSAGE(down.error().message.find("connect") != std::string::npos, down.error().message);
  CHECK(down.error().to_string().find("s3cret") == std::string::npos);

  RedisServer server({.password = "s3cret-pw"});
  const std::string at = "127.0.0.1:" + std::to_string(server.port());
  auto wrong = FencedStore::connect(*parse_node_url("redis://:not-it@" + at));
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == Errc::store);
  CHECK_MESSAGE(wrong.error().message.find("AUTH") != std::string::npos, wrong.error().message);
  CHECK(wrong.error().to_string().find("not-it") == std::string::npos);

  auto store = store_at("redis://:s3cret-pw@" + at + "/3");
  CHECK(written(*store, "k", 1, "v").accepted);
  CHECK(server.command({"EXISTS", "k"}).integer == 0);  // in db 3, not db 0
  server.kill();
  auto lost = store->write("k", 2, "v2");
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.error().code == Errc::store);
  CHECK_MESSAGE(lost.error().message.find(at) != std::string::npos, lost.error().message);
  CHECK_MESSAGE(lost.error().message.find("outcome unknown") != std::string::npos, lost.error().message);
  CHECK(lost.error().to_string().find("s3cret") == std::string::npos);
  auto unread = store->read("k");
  REQUIRE_FALSE(unread.ok());
  CHECK(unread.error().code == Errc::store);

  server.restart(true);  // back, empty: the next call connects again (AUTH, SELECT 3)
  CHECK(written(*store, "k", 2, "v2").accepted);
  CHECK(read_back(*store, "k").value == "v2");
}

TEST_CASE("a key of another type is an error naming it, and the key is left alone") {
  RedisServer server;
  auto store = store_at(server.url());
  server.command({"RPUSH", "queue", "job"});
  auto w = store->write("queue", 1, "v");
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == Errc::store);
  CHECK_MESSAGE(w.error().message.find("WRONGTYPE") != std::string::npos, w.error().message);
  auto r = store->read("queue");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::store);
  CHECK_MESSAGE(r.error().message.find("WRONGTYPE") != std::string::npos, r.error().message);
  CHECK(server.command({"LRANGE", "queue", "0", "-1"}).elements.size() == 1);
  CHECK(written(*store, "elsewhere", 1, "v").accepted);  // the connection is still good
}

TEST_CASE("the script the header exposes is the one the store runs, loaded by EVAL when the server lacks it") {
  RedisServer server;
  const Reply loaded = server.command({"SCRIPT", "LOAD", std::string(fenced_store_script)});
  REQUIRE(loaded.type == REDIS_REPLY_STRING);
  const std::string sha = loaded.str;
  REQUIRE(server.command({"SCRIPT", "FLUSH"}).type != REDIS_REPLY_ERROR);

  auto store = store_at(server.url());
  CHECK(written(*store, "k", 1, "v").accepted);  // NOSCRIPT, then EVAL of the text
  const Reply exists = server.command({"SCRIPT", "EXISTS", sha});
  REQUIRE(exists.elements.size() == 1);
  CHECK(exists.elements[0].integer == 1);  // the server now caches exactly the header's text
  CHECK(written(*store, "k", 2, "w").accepted);  // by EVALSHA

  // Another client speaks the documented contract: [1, FENCE] / [0, highest].
  Reply r = server.command({"EVALSHA", sha, "1", "k", "1", "late"});
  REQUIRE(r.elements.size() == 2);
  CHECK(r.elements[0].integer == 0);
  CHECK(r.elements[1].str == "2");
  r = server.command({"EVALSHA", sha, "1", "k", "2", "same holder"});
  REQUIRE(r.elements.size() == 2);
  CHECK(r.elements[0].integer == 1);
  CHECK(r.elements[1].str == "2");
  CHECK(read_back(*store, "k").value == "same holder");
}

TEST_CASE("two writers at once: the higher fence always ends in the store") {
  RedisServer server;
  constexpr int rounds = 20, writes = 100;
  for (int round = 0; round < rounds; ++round) {
    const std::string key = "contended" + std::to_string(round);
    // Which writer has the higher fence alternates, so neither thread's
    // start order decides.
    const std::uint64_t low = 10 + 2 * static_cast<std::uint64_t>(round), high = low + 1;
    const std::uint64_t fences[2] = {round % 2 == 0 ? low : high, round % 2 == 0 ? high : low};
    int accepted[2] = {0, 0}, rejected[2] = {0, 0};
    bool failed[2] = {false, false};
    std::latch start(2);
    std::vector<std::thread> writers;
    for (int i = 0; i < 2; ++i) {
      writers.emplace_back([&, i] {
        auto store = FencedStore::connect(*parse_node_url(server.url()));  // one connection per thread
        start.arrive_and_wait();
        for (int n = 0; store && n < writes; ++n) {
          auto w = (*store)->write(key, fences[i], "writer" + std::to_string(i) + ":" + std::to_string(n));
          if (!w) failed[i] = true;
          else ++(w->accepted ? accepted[i] : rejected[i]);
        }
        if (!store) failed[i] = true;
      });
    }
    for (auto& t : writers) t.join();
    REQUIRE_FALSE(failed[0]);
    REQUIRE_FALSE(failed[1]);
    const int winner = fences[0] > fences[1] ? 0 : 1;
    const int loser = 1 - winner;
    CHECK(accepted[winner] == writes);  // nothing is ever above the higher fence
    CHECK(rejected[winner] == 0);
    CHECK(accepted[loser] + rejected[loser] == writes);
    auto store = store_at(server.url());
    const FencedValue v = read_back(*store, key);
    CHECK(v.highest == fences[winner]);
    CHECK(v.value == "writer" + std::to_string(winner) + ":" + std::to_string(writes - 1));
    CHECK(v.rejected == static_cast<std::uint64_t>(rejected[loser]));
  }
}

TEST_CASE("unix sockets work, and rediss://, a cluster or sentinel address or a zero timeout is refused before anything is sent") {
  RedisServer server({.unix_socket = true});
  auto store = store_at("unix://" + server.unix_path());
  CHECK(written(*store, "k", 1, "over the socket").accepted);
  CHECK(server.command({"HGET", "k", "value"}).str == "over the socket");

  auto tls = FencedStore::connect(*parse_node_url("rediss://127.0.0.1:" + std::to_string(server.port())));
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.error().code == Errc::config);
  CHECK_MESSAGE(tls.error().message.find("rediss://") != std::string::npos, tls.error().message);
  for (const std::string& url : {"redis+cluster://127.0.0.1:" + std::to_string(server.port()),
                                 "redis+sentinel://127.0.0.1:" + std::to_string(server.port()) + "/main"}) {
    auto refused = FencedStore::connect(*parse_node_url(url));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::config);
    CHECK_MESSAGE(refused.error().message.find("cluster or sentinel") != std::string::npos, refused.error().message);
  }
  auto zero = FencedStore::connect(*parse_node_url(server.url()), {.timeout = std::chrono::milliseconds{0}});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().code == Errc::config);
}
