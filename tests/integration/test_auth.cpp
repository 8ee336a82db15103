// test_auth.cpp — how the client reaches a master: password and ACL AUTH,
// SELECT, unix sockets, IPv6, and EVALSHA after the script cache is flushed.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

TEST_CASE("AUTH with a password") {
  ServerOptions so;
  so.password = "s3cret";
  RedisServer server(so);
  const std::string base = "127.0.0.1:" + std::to_string(server.port());
  auto good = client_for({"redis://:s3cret@" + base});
  auto lock = good->try_acquire("auth");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(server.command({"EXISTS", "redlock:{auth}:lock"}).integer == 1);

  auto bad = client_for({"redis://:wrong@" + base});
  auto refused = bad->try_acquire("auth2");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().nodes[0].outcome == Outcome::error);
  CHECK(refused.error().nodes[0].error.find("AUTH") != std::string::npos);
  CHECK(refused.error().message.find(base) != std::string::npos);

  auto none = client_for({"redis://" + base});
  auto noauth = none->try_acquire("auth3");
  REQUIRE_FALSE(noauth.ok());
  CHECK_MESSAGE(noauth.error().nodes[0].error.find("NOAUTH") != std::string::npos, noauth.error().nodes[0].error);
}

TEST_CASE("AUTH as an ACL user") {
  ServerOptions so;
  so.password = "admin-pw";
  so.acl_users = {{"locker", "lock-pw"}};
  RedisServer server(so);
  const std::string base = "127.0.0.1:" + std::to_string(server.port());
  auto client = client_for({"redis://locker:lock-pw@" + base});
  auto lock = client->try_acquire("acl");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(client->release(*lock)->released);

  auto wrong = client_for({"redis://locker:nope@" + base});
  auto refused = wrong->try_acquire("acl");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().nodes[0].error.find("WRONGPASS") != std::string::npos);
}

TEST_CASE("SELECT db puts the lock in that database") {
  RedisServer server;
  auto client = client_for({server.url() + "/3"});
  auto lock = client->try_acquire("in-db3");
  REQUIRE(lock.ok());
  // db 3 holds the lock, the data-loss marker, the run id and the replication id it was written by
  CHECK(server.command({"INFO", "keyspace"}).str.find("db3:keys=4") != std::string::npos);
  CHECK(server.command({"EXISTS", "redlock:{in-db3}:lock"}).integer == 0);  // not in db 0
}

TEST_CASE("unix socket") {
  ServerOptions so;
  so.unix_socket = true;
  RedisServer server(so);
  auto client = client_for({"unix://" + server.unix_path()});
  auto lock = client->try_acquire("over-unix");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(lock->nodes[0].address == "unix://" + server.unix_path());
  CHECK(client->release(*lock)->released);
}

TEST_CASE("IPv6 loopback") {
  ServerOptions so;
  so.extra_args = {"--bind", "127.0.0.1", "::1"};
  RedisServer server(so);
  auto client = client_for({"redis://[::1]:" + std::to_string(server.port())});
  auto lock = client->try_acquire("over-v6");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(lock->nodes[0].address == "[::1]:" + std::to_string(server.port()));
  CHECK(client->release(*lock)->released);
}

TEST_CASE("EVALSHA after SCRIPT FLUSH still works: the script is reloaded") {
  RedisGroup group(3);
  auto client = client_for(group, patient);  // every master's answer counts below
  auto first = client->try_acquire("flush");
  REQUIRE(first.ok());
  REQUIRE(client->release(*first)->released);
  // The release was decided at the majority: the last master may run it
  // only now, and a FLUSH before it would turn it into NOSCRIPT → EVAL,
  // with the next SET already behind it (finding the old key: held).
  REQUIRE(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }));
  for (std::size_t i = 0; i < group.size(); ++i) group[i].command({"SCRIPT", "FLUSH"});
  auto again = client->try_acquire("flush");
  REQUIRE_MESSAGE(again.ok(), again.error().to_string());
  CHECK(count_outcome(again->nodes, Outcome::ok) + count_outcome(again->nodes, Outcome::pending) == 3);
  auto rel = client->release(*again);
  REQUIRE(rel.ok());
  CHECK(rel->released);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }));
}

TEST_CASE("a server error reply is an `error` outcome with the server's text, not a crash") {
  RedisServer server;
  auto client = client_for({server.url()});
  // A master that refuses writes answers the script with an error reply.
  server.command({"CONFIG", "SET", "maxmemory", "1"});
  server.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  auto lock = client->try_acquire("oom");
  REQUIRE_FALSE(lock.ok());
  CHECK(lock.error().code == Errc::no_quorum);
  CHECK(lock.error().nodes[0].outcome == Outcome::error);
  CHECK(lock.error().nodes[0].error.find("OOM") != std::string::npos);
  CHECK(server.command({"EXISTS", "redlock:{oom}:lock"}).integer == 0);
}

namespace {

// The ACL rule of docs/security.md for a lock user (default prefix), with
// `drop` taken out of its command list.
std::vector<std::string> lock_user_acl(const std::string& user, const std::string& drop = "") {
  std::vector<std::string> argv = {"ACL", "SETUSER", user, "reset", "on", ">lock-pw", "~redlock:*", "~redlock-marker",
                                   "~{redlock-marker}:*", "&redlock:*"};
  for (const char* c : {"+ping", "+info", "+select", "+get", "+set", "+evalsha", "+eval", "+script|load", "+script|exists",
                        "+subscribe", "+unsubscribe", "+publish", "+del", "+pexpire", "+pttl", "+time"}) {
    if (drop != c) argv.emplace_back(c);
  }
  return argv;
}

}  // namespace

TEST_CASE("a user with exactly the documented ACL rule can do everything; one command less is a clear error") {
  ServerOptions so;
  RedisServer server(so);
  const std::string base = "127.0.0.1:" + std::to_string(server.port());
  REQUIRE(server.command(lock_user_acl("locker")).str == "OK");

  auto client = client_for({"redis://locker:lock-pw@" + base + "/2"});
  AcquireOptions fenced;
  fenced.fence = true;
  auto lock = client->acquire("acl-all", fenced);
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(lock->fence > 0);
  // A semaphore's scripts call nothing beyond the rule.
  AcquireOptions permit;
  permit.permits = 2;
  auto slot = client->acquire("acl-all", permit);
  REQUIRE_MESSAGE(slot.ok(), slot.error().to_string());
  CHECK(client->release(*slot)->released);
  auto status = client->status("acl-all");
  REQUIRE_MESSAGE(status.ok(), status.error().to_string());
  CHECK(status->nodes.at(0).token == lock->token);
  {
    // The rule has no ZCARD: a fair queue is not shown, the holding still
    // is; with +zcard +zrange (docs/security.md) the queue shows too.
    auto db0 = client_for({"redis://locker:lock-pw@" + base}, patient);  // its one master must answer
    REQUIRE(server.command({"SET", "redlock:{acl-queue}:lock", "holder", "PX", "30000"}).str == "OK");
    REQUIRE(server.command({"ZADD", "redlock:{acl-queue}:queue", "1", "0123abcd4567ef01"}).integer == 1);
    // Its place does not lapse during the test (docs/design.md, "Places that lapse").
    REQUIRE(server.command({"ZADD", "redlock:{acl-queue}:expiry", "99999999999999", "0123abcd4567ef01"}).integer == 1);
    auto unread = db0->status("acl-queue");
    REQUIRE_MESSAGE(unread.ok(), unread.error().to_string());
    CHECK(unread->nodes.at(0).state == NodeHolding::State::held);
    CHECK(unread->nodes.at(0).token == "holder");
    CHECK(unread->nodes.at(0).queued == 0);
    REQUIRE(server.command({"ACL", "SETUSER", "locker", "+zcard", "+zrange"}).str == "OK");
    auto read = db0->status("acl-queue");
    REQUIRE_MESSAGE(read.ok(), read.error().to_string());
    CHECK(read->nodes.at(0).token == "holder");
    CHECK(read->nodes.at(0).queued == 1);
    CHECK(read->queue_head == "0123abcd4567ef01");
    REQUIRE(server.command({"ACL", "SETUSER", "locker", "-zcard", "-zrange"}).str == "OK");  // the rule alone
  }
  {
    // An election's scripts call nothing beyond the rule either: campaign,
    // proclaim, a reading, a watch told on the news channel, resign.
    Readings told;
    auto watch = client->observe("acl-leader", told.callback());
    REQUIRE(watch.ok());
    REQUIRE(told.next(0));
    auto lead = client->campaign("acl-leader", {.identity = "acl", .value = "v1"});
    REQUIRE_MESSAGE(lead.ok(), lead.error().to_string());
    REQUIRE(lead->proclaim("v2").ok());
    auto who = client->leader("acl-leader");
    REQUIRE_MESSAGE(who.ok(), who.error().to_string());
    REQUIRE(who->leader);
    CHECK(who->leader->value == "v2");
    REQUIRE(lead->resign().ok());
    bool heard_none = false;
    for (std::size_t i = 1; !heard_none; ++i) {
      auto r = told.next(i);
      REQUIRE(r);
      REQUIRE_MESSAGE(r->ok(), r->error().to_string());
      heard_none = !(*r)->leader && i > 1;
    }
  }
  auto nodes = client->nodes();
  REQUIRE(nodes.ok());
  CHECK(nodes->nodes.at(0).error.empty());
  // A waiter woken by the release's message (SUBSCRIBE, PUBLISH from the script).
  AcquireOptions wait;
  wait.ttl = 5000ms;
  wait.wait = 3000ms;
  auto waiter = client->acquire_async("acl-all", wait);
  auto extended = client->extend(*lock, 5000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  CHECK(client->release(*extended)->released);
  auto second = waiter.get();
  REQUIRE_MESSAGE(second.ok(), second.error().to_string());
  CHECK(client->release(*second)->released);

  // The CLI does the same things with the same rule.
  const char* cli = std::getenv("REDLOCK_CLI");
  REQUIRE(cli != nullptr);
  const std::string run = std::string(cli) + " --no-quarantine --nodes redis://locker:lock-pw@" + base +
                          " run acl-cli -- true >/dev/null 2>&1";
  CHECK(std::system(run.c_str()) == 0);

  // Without DEL (called by the release script): the acquire works, the
  // release does not, and the error says a permission is missing.
  REQUIRE(server.command(lock_user_acl("no-del", "+del")).str == "OK");
  auto limited = client_for({"redis://no-del:lock-pw@" + base});
  auto taken = limited->acquire("acl-less");
  REQUIRE_MESSAGE(taken.ok(), taken.error().to_string());
  auto refused = limited->release(*taken);
  REQUIRE(refused.ok());
  CHECK_FALSE(refused->released);
  INFO(refused->nodes.at(0).error);
  CHECK(refused->nodes.at(0).error.find("can't run this command") != std::string::npos);
  CHECK(refused->nodes.at(0).error.find("of the release script") != std::string::npos);
  REQUIRE(server.command({"EXISTS", "redlock:{acl-less}:lock"}).integer == 1);

  // Without INFO or EVALSHA the handshake itself fails, and says so.
  for (const std::string missing : {"info", "evalsha"}) {
    REQUIRE(server.command(lock_user_acl("no-" + missing, "+" + missing)).str == "OK");
    auto blind = client_for({"redis://no-" + missing + ":lock-pw@" + base});
    std::string why;
    CHECK(eventually([&] {
      auto report = blind->nodes();
      why = report.ok() ? report->nodes.at(0).error : std::string();
      return why.find("NOPERM") != std::string::npos;
    }));
    INFO(why);
    CHECK(why.find("'" + missing + "'") != std::string::npos);
    CHECK_FALSE(blind->try_acquire("acl-blind").ok());
  }
}

TEST_CASE("fair order needs the rule's fair permissions: without them a clear error and nothing left; with them queue, turn, try, leave") {
  ServerOptions so;
  RedisServer server(so);
  const std::string base = "127.0.0.1:" + std::to_string(server.port());
  REQUIRE(server.command(lock_user_acl("locker")).str == "OK");
  auto client = client_for({"redis://locker:lock-pw@" + base});
  AcquireOptions fair;
  fair.fair = true;
  fair.ttl = 10000ms;
  fair.wait = 2000ms;

  // The rule alone: the fair script is refused, and the error says a
  // permission is missing (Redis 7 answers ERR …, not NOPERM, for a script).
  auto refused = client->acquire("acl-fair", fair);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::no_quorum);
  INFO(refused.error().to_string());
  CHECK(refused.error().nodes.at(0).outcome == Outcome::error);
  CHECK(refused.error().nodes.at(0).error.find("can't run this command") != std::string::npos);
  CHECK(refused.error().nodes.at(0).error.find("fair_acquire script") != std::string::npos);
  CHECK(server.command({"EXISTS", "redlock:{acl-fair}:lock"}).integer == 0);
  CHECK(server.command({"EXISTS", "redlock:{acl-fair}:queue"}).integer == 0);

  // With the fair permissions docs/security.md adds, everything works.
  REQUIRE(server.command({"ACL", "SETUSER", "locker", "+zadd", "+zrem", "+zrange", "+zrank", "+exists"}).str ==
          "OK");
  auto holder = client->acquire("acl-fair", fair);
  REQUIRE_MESSAGE(holder.ok(), holder.error().to_string());
  // A try on the held lock is told no and joins nothing.
  AcquireOptions try_fair = fair;
  try_fair.wait = 0ms;
  auto tried = client->acquire("acl-fair", try_fair);
  REQUIRE_FALSE(tried.ok());
  CHECK(tried.error().code == Errc::held);
  CHECK(server.command({"EXISTS", "redlock:{acl-fair}:queue"}).integer == 0);
  // A waiter that gives up leaves the queue (fair_leave: ZREM, EXISTS).
  AcquireOptions short_wait = fair;
  short_wait.wait = 300ms;
  auto gave_up = client->acquire("acl-fair", short_wait);
  REQUIRE_FALSE(gave_up.ok());
  CHECK(gave_up.error().code == Errc::held);
  // (The leave is sent as the acquire ends: it may land just after.)
  CHECK(eventually([&] { return server.command({"ZCARD", "redlock:{acl-fair}:queue"}).integer == 0; }));
  // A queued waiter gets the lock when the holder releases (fair_release
  // names it on the channel).
  auto waiter = client->acquire_async("acl-fair", fair);
  REQUIRE(eventually([&] { return server.command({"ZCARD", "redlock:{acl-fair}:queue"}).integer == 1; }));
  auto released = client->release(*holder);
  REQUIRE(released.ok());
  CHECK(released->released);
  auto next = waiter.get();
  REQUIRE_MESSAGE(next.ok(), next.error().to_string());
  CHECK(server.command({"ZCARD", "redlock:{acl-fair}:queue"}).integer == 0);
  CHECK(client->release(*next)->released);
  // A semaphore in fair order needs nothing more: a permit taken, a
  // waiter queued, served by the permit's release, and gone from the queue.
  AcquireOptions fair_permit = fair;
  fair_permit.permits = 1;
  auto permit = client->acquire("acl-fair-sem", fair_permit);
  REQUIRE_MESSAGE(permit.ok(), permit.error().to_string());
  auto permit_waiter = client->acquire_async("acl-fair-sem", fair_permit);
  REQUIRE(eventually([&] { return server.command({"ZCARD", "redlock:{acl-fair-sem}:permits:queue"}).integer == 1; }));
  CHECK(client->release(*permit)->released);
  auto next_permit = permit_waiter.get();
  REQUIRE_MESSAGE(next_permit.ok(), next_permit.error().to_string());
  CHECK(server.command({"ZCARD", "redlock:{acl-fair-sem}:permits:queue"}).integer == 0);
  CHECK(client->release(*next_permit)->released);
}

TEST_CASE("read locks need the rule's read permissions: without them a clear error and nothing left; with them readers, and a writer's intent") {
  ServerOptions so;
  RedisServer server(so);
  const std::string base = "127.0.0.1:" + std::to_string(server.port());
  REQUIRE(server.command(lock_user_acl("locker")).str == "OK");
  auto client = client_for({"redis://locker:lock-pw@" + base});
  AcquireOptions read;
  read.shared = true;
  read.ttl = 10000ms;
  auto refused = client->acquire("acl-rw", read);
  REQUIRE_FALSE(refused.ok());
  INFO(refused.error().to_string());
  CHECK(refused.error().nodes.at(0).error.find("can't run this command") != std::string::npos);
  CHECK(refused.error().nodes.at(0).error.find("read_acquire script") != std::string::npos);
  CHECK(server.command({"EXISTS", "redlock:{acl-rw}:lock", "redlock:{acl-rw}:readers"}).integer == 0);

  // With the read permissions docs/security.md adds, everything works.
  REQUIRE(server.command({"ACL", "SETUSER", "locker", "+zadd", "+zrem", "+zrange", "+zscore", "+zremrangebyscore"})
              .str == "OK");
  auto reader = client->acquire("acl-rw", read);
  REQUIRE_MESSAGE(reader.ok(), reader.error().to_string());
  auto extended = client->extend(*reader, 10000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  // A writer that waits stamps its intent (write_acquire), and takes the
  // lock once the reader has released (read_release, then write_leave).
  AcquireOptions write;
  write.ttl = 10000ms;
  write.wait = 5000ms;
  auto writer = client->acquire_async("acl-rw", write);
  REQUIRE(eventually([&] { return server.command({"ZCARD", "redlock:{acl-rw}:writers"}).integer == 1; }));
  CHECK(client->release(*extended)->released);
  auto won = writer.get();
  REQUIRE_MESSAGE(won.ok(), won.error().to_string());
  CHECK(client->release(*won)->released);
  CHECK(eventually([&] { return server.command({"EXISTS", "redlock:{acl-rw}:writers"}).integer == 0; }));
}

TEST_CASE("the password from a file or the environment, not the URL; redlock run does not pass it on") {
  ServerOptions so;
  so.password = "file-pw";
  RedisServer server(so);
  char tmpl[] = "/tmp/redlock-pw-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "file-pw\n", 8) == 8);
  ::close(fd);
  const std::string file = tmpl;
  const char* cli = std::getenv("REDLOCK_CLI");
  REQUIRE(cli != nullptr);
  const std::string base = std::string(cli) + " --no-quarantine --nodes " + server.url() + " ";
  CHECK(shell_status(base + "--password-file " + file + " acquire pw-file --ttl 5000ms") == 0);
  CHECK(shell_status("REDLOCK_PASSWORD_FILE=" + file + " " + base + "acquire pw-env-file --ttl 5000ms") == 0);
  CHECK(shell_status("REDLOCK_PASSWORD=file-pw " + base + "acquire pw-env --ttl 5000ms") == 0);
  CHECK(shell_status(base + "acquire pw-none --ttl 5000ms") == 69);  // NOAUTH: no master can answer (EX_UNAVAILABLE)
  CHECK(shell_status(base + "--password-file /nonexistent/pw acquire pw-x --ttl 5000ms") == 2);  // usage
  CHECK(server.keys("redlock:{pw-*").size() == 3);
  // The command of `redlock run` sees neither the password nor the file's name in use.
  const std::string seen = file + ".env";
  CHECK(shell_status("REDLOCK_PASSWORD=file-pw " + base + "run pw-run -- sh -c 'env > " + seen + "'") == 0);
  std::ifstream env_file(seen);
  const std::string env((std::istreambuf_iterator<char>(env_file)), std::istreambuf_iterator<char>());
  CHECK(env.find("REDLOCK_RESOURCE=pw-run") != std::string::npos);
  CHECK(env.find("file-pw") == std::string::npos);
  std::remove(seen.c_str());
  std::remove(file.c_str());
}
