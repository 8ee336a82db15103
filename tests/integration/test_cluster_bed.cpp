// test_cluster_bed.cpp — what Redis Cluster nodes answer that a cluster
// client relies on, seen on real nodes (the ClusterBed fixture,
// tests/support/redis_cluster.hpp): the CLUSTER SLOTS reply's shape; -MOVED
// for a slot owned elsewhere; mid-migration -ASK from the source for a
// missing key, -MOVED from the target without ASKING and the command run
// after ASKING (one command only), -TRYAGAIN for a multi-key command whose
// keys are split; MIGRATE keeping the PTTL; a slot reassigned without its
// keys losing them on the old owner; failovers. And the bed stops every
// process it started, by pid.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "redis_cluster.hpp"

using namespace redlock::test;

namespace {

bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// cmd: the reply_text (redis_server.hpp) of s.command(argv).
std::string cmd(const RedisServer& s, const std::vector<std::string>& argv) { return reply_text(s.command(argv)); }

}  // namespace

TEST_CASE("cluster: CLUSTER SLOTS shape, MOVED, ASK/ASKING/TRYAGAIN mid-migration, MIGRATE keeps PTTL, "
          "keys lost by a reassignment; the bed stops every process by pid") {
  std::vector<pid_t> pids;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ClusterBed bed;
    std::fprintf(stderr, "cluster_bed: 3 primaries up in %.2f s\n", seconds_since(t0));
    REQUIRE(bed.size() == 3);
    for (std::size_t i = 0; i < bed.size(); ++i) pids.push_back(bed.node(i).pid());
    const std::string p0 = bed.node(0).address(), p1 = bed.node(1).address(), p2 = bed.node(2).address();
    CHECK(bed.url() == "redis+cluster://" + p0 + "," + p1 + "," + p2);

    // (a) CLUSTER SLOTS: one entry per contiguous range, [start end [ip port
    // id metadata]…], primary first; 7.0 adds a 4th field, the node's
    // networking metadata (a map as a flat array: empty without hostnames).
    // redis-cli splits 16384 slots 0-5460, 5461-10922, 10923-16383 over the
    // nodes in the order given.
    const Reply slots = bed.node(0).command({"CLUSTER", "SLOTS"});
    MESSAGE("CLUSTER SLOTS: ", reply_text(slots));
    REQUIRE(slots.type == REDIS_REPLY_ARRAY);
    REQUIRE(slots.elements.size() == 3);
    const long long starts[] = {0, 5461, 10923}, ends[] = {5460, 10922, 16383};
    for (std::size_t i = 0; i < 3; ++i) {
      const Reply& range = slots.elements[i];
      REQUIRE(range.elements.size() == 3);  // no replicas
      CHECK(range.elements[0].type == REDIS_REPLY_INTEGER);
      CHECK(range.elements[0].integer == starts[i]);
      CHECK(range.elements[1].integer == ends[i]);
      const Reply& who = range.elements[2];
      REQUIRE(who.elements.size() == 4);
      CHECK(who.elements[0].type == REDIS_REPLY_STRING);
      CHECK(who.elements[0].str == "127.0.0.1");
      CHECK(who.elements[1].type == REDIS_REPLY_INTEGER);
      CHECK(who.elements[1].integer == bed.node(i).port());
      CHECK(who.elements[2].str == bed.node_id(i));
      CHECK(who.elements[2].str.size() == 40);
      CHECK(who.elements[3].type == REDIS_REPLY_ARRAY);
      CHECK(who.elements[3].elements.empty());
      CHECK(bed.owner(static_cast<int>(starts[i])) == i);
    }

    // A node that never got a MEET does not know its own IP: in CLUSTER
    // SLOTS it names itself with an empty host string (a client then uses
    // the address it reached that node at).
    {
      ServerOptions lone;
      lone.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
                         std::to_string(free_port())};
      RedisServer single(lone);
      pids.push_back(single.pid());
      CHECK(cmd(single, {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}) == "OK");
      const Reply own = single.command({"CLUSTER", "SLOTS"});
      MESSAGE("CLUSTER SLOTS of a node that never met another: ", reply_text(own));
      REQUIRE(own.elements.size() == 1);
      REQUIRE(own.elements[0].elements.size() == 3);
      CHECK(own.elements[0].elements[2].elements.at(0).type == REDIS_REPLY_STRING);
      CHECK(own.elements[0].elements[2].elements.at(0).str.empty());
      CHECK(own.elements[0].elements[2].elements.at(1).integer == single.port());
    }

    // (b) A key of a slot owned elsewhere: -MOVED <slot> <ip>:<port>.
    const int slot = 100;  // node 0's
    const std::string a = ClusterBed::key_in_slot(slot, "a"), b = ClusterBed::key_in_slot(slot, "b"),
                      missing = ClusterBed::key_in_slot(slot, "m");
    CHECK(bed.key_slot(a) == slot);
    CHECK(bed.key_slot(b) == slot);
    CHECK(bed.key_slot("{" + a + "}.suffix") == slot);
    CHECK(cmd(bed.node(1), {"GET", a}) == "-MOVED 100 " + p0);
    CHECK(cmd(bed.node(0), {"SET", a, "va", "PX", "60000"}) == "OK");
    CHECK(cmd(bed.node(0), {"SET", b, "vb"}) == "OK");

    // (c) Mid-migration, slot 100 from node 0 to node 1, key a moved, key b
    // not yet (start_migration + move_key: what migrate(…, false) does,
    // stopping before b).
    bed.start_migration(slot, 1);
    bed.move_key(a, 1);
    CHECK(bed.owner(slot) == 0);  // still the source's until SETSLOT NODE
    // The source serves the keys it still has and sends the others (moved,
    // or never there) to the target with -ASK.
    CHECK(cmd(bed.node(0), {"GET", b}) == "vb");
    CHECK(cmd(bed.node(0), {"GET", a}) == "-ASK 100 " + p1);
    CHECK(cmd(bed.node(0), {"GET", missing}) == "-ASK 100 " + p1);
    CHECK(cmd(bed.node(0), {"SET", missing, "x"}) == "-ASK 100 " + p1);
    // The target answers -MOVED to the source without ASKING; ASKING lets
    // exactly the next command through (one-shot), on the same connection.
    CHECK(cmd(bed.node(1), {"GET", a}) == "-MOVED 100 " + p0);
    // Nodes not in the migration send the slot to the source.
    CHECK(cmd(bed.node(2), {"GET", a}) == "-MOVED 100 " + p0);
    {
      RawConnection target(bed.node(1).port());
      const auto replies = target.pipeline({{"ASKING"}, {"GET", a}, {"GET", a}, {"ASKING"}, {"PTTL", a}});
      std::string joined;
      for (const auto& r : replies) joined += (joined.empty() ? "" : " | ") + r;
      MESSAGE("target pipeline ASKING, GET, GET, ASKING, PTTL: ", joined);
      REQUIRE(replies.size() == 5);
      CHECK(replies[0] == "OK");
      CHECK(replies[1] == "va");
      CHECK(replies[2] == "-MOVED 100 " + p0);  // ASKING was spent
      CHECK(replies[3] == "OK");
      // (d) MIGRATE keeps the TTL (DUMP/RESTORE with the remaining PTTL).
      const long long pttl = std::stoll(replies[4]);
      CHECK(pttl > 50000);
      CHECK(pttl <= 60000);
      // A multi-key command with a key missing on the importing target:
      // -TRYAGAIN, with ASKING too.
      const auto eval = target.pipeline({{"ASKING"}, {"EVAL", "return redis.call('GET', KEYS[1])", "2", a, b}});
      CHECK(eval.at(1) == "-TRYAGAIN Multiple keys request during rehashing of slot");
      // A write of a key that is nowhere yet runs on the target after ASKING.
      const auto set = target.pipeline({{"ASKING"}, {"SET", missing, "new"}});
      CHECK(set.at(1) == "OK");
    }
    // The source: keys split between it and the target → -TRYAGAIN
    // (all missing would be -ASK).
    const std::string tryagain = cmd(bed.node(0), {"EVAL", "return redis.call('GET', KEYS[1])", "2", a, b});
    CHECK(tryagain == "-TRYAGAIN Multiple keys request during rehashing of slot");
    CHECK(cmd(bed.node(0), {"MGET", a, missing}) == "-ASK 100 " + p1);

    // finish_migration moves b and assigns the slot: every node sends it to node 1.
    bed.finish_migration(slot, 1);
    CHECK(bed.owner(slot) == 1);
    CHECK(cmd(bed.node(1), {"MGET", a, b, missing}) == "[va vb new]");
    CHECK(cmd(bed.node(0), {"GET", a}) == "-MOVED 100 " + p1);
    CHECK(cmd(bed.node(2), {"GET", a}) == "-MOVED 100 " + p1);
    CHECK(cmd(bed.node(0), {"CLUSTER", "COUNTKEYSINSLOT", "100"}) == "0");

    // migrate(…, false): the keys there now move, the slot stays in the ASK state.
    const int slot2 = 6000;  // node 1's
    const std::string c = ClusterBed::key_in_slot(slot2, "c");
    CHECK(cmd(bed.node(1), {"SET", c, "vc"}) == "OK");
    bed.migrate(slot2, 2, false);
    CHECK(cmd(bed.node(1), {"GET", c}) == "-ASK 6000 " + p2);
    CHECK(cmd(bed.node(2), {"GET", c}) == "-MOVED 6000 " + p1);
    {
      RawConnection target(bed.node(2).port());
      CHECK(target.pipeline({{"ASKING"}, {"GET", c}}).at(1) == "vc");
    }
    bed.finish_migration(slot2, 2);
    CHECK(cmd(bed.node(2), {"GET", c}) == "vc");
    CHECK(cmd(bed.node(1), {"GET", c}) == "-MOVED 6000 " + p2);

    // (e) reassign_without_keys: slot 11000 (node 2's, with a key) given to
    // node 0 by SETSLOT NODE + BUMPEPOCH on node 0 alone: the old owner
    // drops its keys of the slot; nothing moved them.
    const int slot3 = 11000;  // node 2's
    const std::string d = ClusterBed::key_in_slot(slot3, "d");
    CHECK(cmd(bed.node(2), {"SET", d, "vd"}) == "OK");
    const auto t1 = std::chrono::steady_clock::now();
    bed.reassign_without_keys(slot3, 0);
    std::fprintf(stderr, "cluster_bed: reassign_without_keys %.2f s\n", seconds_since(t1));
    CHECK(bed.owner(slot3) == 0);
    CHECK(cmd(bed.node(0), {"GET", d}) == "(nil)");
    CHECK(cmd(bed.node(2), {"GET", d}) == "-MOVED 11000 " + p0);
    CHECK(cmd(bed.node(2), {"CLUSTER", "COUNTKEYSINSLOT", "11000"}) == "0");
    CHECK(bed.node(2).keys("d*").empty());  // KEYS is not slot-checked
  }
  // (f) Every node SIGKILLed by pid and reaped.
  for (pid_t pid : pids) CHECK_MESSAGE(gone(pid), "pid ", pid, " still there");
  std::fprintf(stderr, "cluster_bed: case 1 %.2f s\n", seconds_since(t0));
}

TEST_CASE("cluster with replicas: CLUSTER SLOTS lists replicas; graceful failover; a killed primary's replica "
          "takes over") {
  std::vector<pid_t> pids;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ClusterOptions o;
    o.replicas = 1;
    o.data.password = "pw:1";
    ClusterBed bed(o);
    std::fprintf(stderr, "cluster_bed: 3 primaries + 3 replicas up in %.2f s\n", seconds_since(t0));
    REQUIRE(bed.size() == 6);
    for (std::size_t i = 0; i < bed.size(); ++i) pids.push_back(bed.node(i).pid());
    CHECK(bed.url() == "redis+cluster://:pw%3A1@" + bed.node(0).address() + "," + bed.node(1).address() + "," +
                           bed.node(2).address());
    const Reply slots = bed.node(4).command({"CLUSTER", "SLOTS"});
    MESSAGE("CLUSTER SLOTS with replicas: ", reply_text(slots));
    REQUIRE(slots.elements.size() == 3);
    for (std::size_t s = 0; s < 3; ++s) {
      const Reply& range = slots.elements[s];
      REQUIRE(range.elements.size() == 4);  // start, end, primary, replica
      CHECK(range.elements[2].elements.at(1).integer == bed.node(s).port());
      CHECK(range.elements[3].elements.at(1).integer == bed.node(3 + s).port());
      CHECK(range.elements[3].elements.at(2).str == bed.node_id(3 + s));
      CHECK(bed.primary(s) == s);
    }
    // A replica sends its keys to the primary with -MOVED (no READONLY).
    const std::string k = ClusterBed::key_in_slot(100);
    CHECK(cmd(bed.node(3), {"GET", k}) == "-MOVED 100 " + bed.node(0).address());
    CHECK(cmd(bed.node(0), {"SET", k, "v"}) == "OK");
    CHECK(cmd(bed.node(0), {"WAIT", "1", "2000"}) == "1");

    auto t = std::chrono::steady_clock::now();
    bed.failover(3);
    std::fprintf(stderr, "cluster_bed: failover %.2f s\n", seconds_since(t));
    CHECK(bed.primary(0) == 3);
    CHECK(bed.owner(100) == 3);
    CHECK(cmd(bed.node(3), {"GET", k}) == "v");
    CHECK(cmd(bed.node(0), {"GET", k}) == "-MOVED 100 " + bed.node(3).address());

    t = std::chrono::steady_clock::now();
    CHECK(bed.kill_primary(1) == 4);
    std::fprintf(stderr, "cluster_bed: kill_primary %.2f s\n", seconds_since(t));
    CHECK(!bed.node(1).running());
    CHECK(bed.owner(6000) == 4);
    CHECK(bed.url() == "redis+cluster://:pw%3A1@" + bed.node(2).address() + "," + bed.node(3).address() + "," +
                           bed.node(4).address());
  }
  for (pid_t pid : pids) CHECK_MESSAGE(gone(pid), "pid ", pid, " still there");
  std::fprintf(stderr, "cluster_bed: case 2 %.2f s\n", seconds_since(t0));
}
