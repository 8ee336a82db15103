// test_sentinel_bed.cpp — what the sentinels do that src/sentinel_watch.cpp
// relies on, seen on real sentinels (the SentinelBed fixture,
// tests/support/redis_sentinel.hpp): a +switch-master payload is
// "NAME old-ip old-port new-ip new-port"; a RESP2 connection that has
// SUBSCRIBEd takes no SENTINEL get-master-addr-by-name; every sentinel
// publishes the switch, also one that did not lead it; the promoted and the
// demoted server drop their client connections. And the bed stops every
// process it started, by pid.
#include <doctest/doctest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "redis_sentinel.hpp"

using namespace redlock::test;

namespace {

bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

}  // namespace

TEST_CASE("sentinels: +switch-master from every sentinel, no SENTINEL command once subscribed, clients dropped; "
          "the bed stops every process by pid") {
  SentinelOptions o;
  o.sentinels = 2;
  std::vector<pid_t> pids;
  {
    SentinelBed bed(o);
    for (std::size_t i = 0; i < bed.sentinels(); ++i) pids.push_back(bed.sentinel_pid(i));
    for (std::size_t i = 0; i < 2; ++i) pids.push_back(bed.server(i).pid());
    REQUIRE(bed.primary() == 0);

    // Subscribed to +switch-master on each sentinel (fail_over asks sentinel 0).
    RawConnection leader(bed.sentinel_port(0));
    RawConnection follower(bed.sentinel_port(1));
    CHECK(leader.command({"SUBSCRIBE", "+switch-master"}) == "[subscribe +switch-master 1]");
    CHECK(follower.command({"SUBSCRIBE", "+switch-master"}) == "[subscribe +switch-master 1]");
    // RESP2: a subscribed connection takes no SENTINEL command; the watch asks
    // for the primary on a connection of its own.
    const std::string refused = leader.command({"SENTINEL", "get-master-addr-by-name", "m1"});
    CHECK(refused.find("-ERR Can't execute 'sentinel|get-master-addr-by-name'") == 0);

    // A client of each data server, connected before the switch.
    RawConnection old_primary_client(bed.server(0).port());
    RawConnection new_primary_client(bed.server(1).port());
    CHECK(old_primary_client.command({"PING"}) == "PONG");
    CHECK(new_primary_client.command({"PING"}) == "PONG");

    const auto t = std::chrono::steady_clock::now();
    REQUIRE(bed.fail_over() == 1);
    std::fprintf(stderr, "sentinel_bed: fail_over %.2f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());

    // Every sentinel publishes the switch, the one that did not lead it too:
    // "NAME old-ip old-port new-ip new-port".
    const std::string expected = "m1 127.0.0.1 " + std::to_string(bed.server(0).port()) + " 127.0.0.1 " +
                                 std::to_string(bed.server(1).port());
    CHECK(leader.next() == "[message +switch-master " + expected + "]");
    CHECK(follower.next() == "[message +switch-master " + expected + "]");

    // The sentinels' REPLICAOF comes with CLIENT KILL TYPE normal (and pubsub):
    // both servers dropped their clients.
    CHECK(old_primary_client.command({"PING"}).find("(connection error)") == 0);
    CHECK(new_primary_client.command({"PING"}).find("(connection error)") == 0);
  }
  for (pid_t pid : pids) CHECK_MESSAGE(gone(pid), "pid ", pid, " still there");
}
