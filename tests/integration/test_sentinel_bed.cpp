// test_sentinel_bed.cpp — what the sentinels do that src/sentinel_watch.cpp
// relies on, seen on real sentinels (the SentinelBed fixture,
// tests/support/redis_sentinel.hpp): a +switch-master payload is
// "NAME old-ip old-port new-ip new-port"; a RESP2 connection that has
// SUBSCRIBEd takes no SENTINEL get-master-addr-by-name; every sentinel
// publishes the switch, also one that did not lead it; the promoted and the
// demoted server drop their client connections. And the bed stops every
// process it started, by pid.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "redis_sentinel.hpp"

using namespace redlock::test;

namespace {

bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

// Connection — a plain RESP2 hiredis connection (5 s timeout).
class Connection {
 public:
  explicit Connection(int port) {
    struct timeval tv{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    REQUIRE(c_ != nullptr);
    REQUIRE(c_->err == 0);
    redisSetTimeout(c_, tv);
  }
  ~Connection() { redisFree(c_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // command: the reply's text ("-" before an error, "(array)" for an
  // array), or "(connection error) …".
  std::string command(const char* text) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, text));
    if (r == nullptr) return std::string("(connection error) ") + c_->errstr;
    std::string out = (r->type == REDIS_REPLY_ERROR ? "-" : "") + std::string(r->str != nullptr ? r->str : "(array)");
    freeReplyObject(r);
    return out;
  }
  // next_payload: the payload of the next message on a subscribed connection.
  std::string next_payload() {
    void* raw = nullptr;
    if (redisGetReply(c_, &raw) != REDIS_OK || raw == nullptr) return std::string("(no message) ") + c_->errstr;
    auto* r = static_cast<redisReply*>(raw);
    std::string out = r->type == REDIS_REPLY_ARRAY && r->elements == 3 ? std::string(r->element[2]->str, r->element[2]->len)
                                                                        : "(not a message)";
    freeReplyObject(r);
    return out;
  }

 private:
  redisContext* c_ = nullptr;
};

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
    Connection leader(bed.sentinel_port(0));
    Connection follower(bed.sentinel_port(1));
    CHECK(leader.command("SUBSCRIBE +switch-master") == "(array)");
    CHECK(follower.command("SUBSCRIBE +switch-master") == "(array)");
    // RESP2: a subscribed connection takes no SENTINEL command; the watch asks
    // for the primary on a connection of its own.
    const std::string refused = leader.command("SENTINEL get-master-addr-by-name m1");
    CHECK(refused.find("-ERR Can't execute 'sentinel|get-master-addr-by-name'") == 0);

    // A client of each data server, connected before the switch.
    Connection old_primary_client(bed.server(0).port());
    Connection new_primary_client(bed.server(1).port());
    CHECK(old_primary_client.command("PING") == "PONG");
    CHECK(new_primary_client.command("PING") == "PONG");

    const auto t = std::chrono::steady_clock::now();
    REQUIRE(bed.fail_over() == 1);
    std::fprintf(stderr, "sentinel_bed: fail_over %.2f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());

    // Every sentinel publishes the switch, the one that did not lead it too:
    // "NAME old-ip old-port new-ip new-port".
    const std::string expected = "m1 127.0.0.1 " + std::to_string(bed.server(0).port()) + " 127.0.0.1 " +
                                 std::to_string(bed.server(1).port());
    CHECK(leader.next_payload() == expected);
    CHECK(follower.next_payload() == expected);

    // The sentinels' REPLICAOF comes with CLIENT KILL TYPE normal (and pubsub):
    // both servers dropped their clients.
    CHECK(old_primary_client.command("PING").find("(connection error)") == 0);
    CHECK(new_primary_client.command("PING").find("(connection error)") == 0);
  }
  for (pid_t pid : pids) CHECK_MESSAGE(gone(pid), "pid ", pid, " still there");
}
