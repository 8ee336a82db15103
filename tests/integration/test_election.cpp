// test_election.cpp — leader election (redlock/election.hpp) against five
// real masters: a campaign elects one leader at a time, terms only grow,
// observers read the leader a majority backs (identity, term, value) and
// "no leader" otherwise, proclaim changes the value, resign hands over at
// once, and a leader whose lock is gone is deposed — told, stop token
// requested — and never read as leader again.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "cli_harness.hpp"
#include "helpers.hpp"
#include "redlock/fenced_store.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace redlock::test::cli_harness;
using namespace std::chrono_literals;

namespace {

LeaderStatus read_leader(Client& c, const std::string& name) {
  auto st = c.leader(name);
  REQUIRE_MESSAGE(st.ok(), st.error().to_string());
  return *st;
}

Leadership elected(Client& c, const std::string& name, CampaignOptions opts) {
  auto l = c.campaign(name, std::move(opts));
  REQUIRE_MESSAGE(l.ok(), l.error().to_string());
  return std::move(*l);
}

}  // namespace

TEST_CASE("a campaign elects; observers read its identity, term and value; a second candidate waits") {
  RedisGroup g(5);
  auto a = client_for(g), b = client_for(g, [](Options& o) { o.owner = "b-label"; }), watcher = client_for(g);

  CHECK_FALSE(read_leader(*watcher, "sched").leader);
  CHECK_FALSE(read_leader(*watcher, "sched").last);

  Leadership lead = elected(*a, "sched", {.identity = "node-a", .value = "10.0.0.1:80", .ttl = 5s});
  CHECK(lead.leading());
  CHECK(lead.term() >= 1);
  const LeaderStatus st = read_leader(*watcher, "sched");
  REQUIRE(st.leader);
  CHECK(st.leader->identity == "node-a");
  CHECK(st.leader->value == "10.0.0.1:80");
  CHECK(st.leader->term == lead.term());
  CHECK(st.leader->token == lead.lease().token());
  CHECK(st.expires_in > 0ms);
  CHECK(st.expires_in <= 5s);
  CHECK(st.quorum == 3);
  CHECK(st.answered == 5);
  // The leader holds the lock of the name: status shows it.
  auto held = watcher->status("sched");
  REQUIRE(held.ok());
  CHECK(held->token == lead.lease().token());

  // Another candidate that may wait 300 ms is told "held".
  auto other = b->campaign("sched", {.value = "b", .wait = 300ms});
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == Errc::held);

  // A candidate waiting for good is elected once the leader resigns, at a
  // higher term, under its owner's name when it gives no identity.
  auto next = std::async(std::launch::async, [&] { return b->campaign("sched", {.value = "b"}); });
  CHECK(next.wait_for(200ms) == std::future_status::timeout);
  const std::uint64_t first_term = lead.term();
  REQUIRE(lead.resign().ok());
  CHECK(lead.empty());
  auto second = next.get();
  REQUIRE_MESSAGE(second.ok(), second.error().to_string());
  CHECK(second->term() > first_term);
  CHECK(second->identity().ends_with(":b-label"));
  const LeaderStatus now = read_leader(*watcher, "sched");
  REQUIRE(now.leader);
  CHECK(now.leader->term == second->term());
  CHECK(now.leader->value == "b");
}

TEST_CASE("proclaim changes the leader's value; resign leaves no leader and no record") {
  RedisGroup g(5);
  auto a = client_for(g), watcher = client_for(g);
  Leadership lead = elected(*a, "svc", {.identity = "a", .value = "v1"});
  REQUIRE(lead.proclaim("v2").ok());
  CHECK(lead.value() == "v2");
  LeaderStatus st = read_leader(*watcher, "svc");
  REQUIRE(st.leader);
  CHECK(st.leader->value == "v2");
  CHECK(st.leader->term == lead.term());
  // Values and identities are bytes: NUL, newline, non-UTF-8, blanks.
  const std::string odd("a b\n\0\xff", 6);
  REQUIRE(lead.proclaim(odd).ok());
  st = read_leader(*watcher, "svc");
  REQUIRE(st.leader);
  CHECK(st.leader->value == odd);
  // Too large: refused before anything is sent; the old value stays.
  auto big = lead.proclaim(std::string(max_leader_value_size + 1, 'x'));
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code == Errc::invalid_argument);
  CHECK(lead.value() == odd);

  REQUIRE(lead.resign().ok());
  st = read_leader(*watcher, "svc");
  CHECK_FALSE(st.leader);
  CHECK_FALSE(st.last);  // the record went with the resign
  CHECK(lead.proclaim("v3").error().code == Errc::not_held);
  CHECK(lead.resign().error().code == Errc::not_held);
}

TEST_CASE("resign: a release that frees the lock on no majority is an error, not a resignation") {
  RedisGroup g(5);
  auto a = client_for(g), watcher = client_for(g);
  Leadership lead = elected(*a, "stuck", {.identity = "a", .ttl = 10s});
  // Three masters refuse every script now (the release and the record's
  // deletion among them): the lock stays there.
  for (std::size_t i = 0; i < 3; ++i) g[i].command({"ACL", "SETUSER", "default", "-evalsha", "-eval"});
  const Result<void> r = lead.resign();
  for (std::size_t i = 0; i < 3; ++i) g[i].command({"ACL", "SETUSER", "default", "+@all"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::no_quorum);
  CHECK(r.error().message.find("not freed on a majority") != std::string::npos);
  CHECK(r.error().nodes.size() == 5);
  CHECK(lead.empty());
  // And it is so: the masters still back it as the leader.
  const LeaderStatus st = read_leader(*watcher, "stuck");
  REQUIRE(st.leader);
  CHECK(st.leader->identity == "a");
}

TEST_CASE("a leader whose lock is gone is deposed: told, its stop token requested, read as the last leader only") {
  RedisGroup g(5);
  auto a = client_for(g), watcher = client_for(g);
  std::promise<Error> told;
  Leadership lead = elected(*a, "dep", {.identity = "a",
                                        .value = "v",
                                        .ttl = 900ms,
                                        .on_deposed = [&told](const Error& e) { told.set_value(e); }});
  // Somebody deletes the lock everywhere (an operator, a bug): the next
  // extension finds it gone and the leadership is lost.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"DEL", "redlock:{dep}:lock"});
  auto why = told.get_future();
  REQUIRE(why.wait_for(5s) == std::future_status::ready);
  CHECK(why.get().code == Errc::lost);
  CHECK(lead.stop_token().stop_requested());
  CHECK_FALSE(lead.leading());
  REQUIRE(lead.deposed());
  const LeaderStatus st = read_leader(*watcher, "dep");
  CHECK_FALSE(st.leader);
  REQUIRE(st.last);
  CHECK(st.last->identity == "a");
  CHECK(st.last->term == lead.term());
  CHECK(lead.proclaim("x").error().code == Errc::lost);
}

TEST_CASE("a plain holder of the name is no leader; a record no majority backs is only the last leader") {
  RedisGroup g(5);
  auto a = client_for(g), watcher = client_for(g);
  auto plain = a->acquire("mixed", {.ttl = 5s});
  REQUIRE(plain.ok());
  LeaderStatus st = read_leader(*watcher, "mixed");
  CHECK_FALSE(st.leader);
  CHECK_FALSE(st.last);
  // A record naming the holder's token on two masters only (a minority):
  // "TERM REV SINCE TOKLEN IDLEN " then token, identity, value.
  const std::string& token = plain->token;
  const std::string record = "7 1 0 " + std::to_string(token.size()) + " 1 " + token + "xval";
  for (std::size_t i = 0; i < 2; ++i) g[i].command({"SET", "redlock:{mixed}:leader", record});
  st = read_leader(*watcher, "mixed");
  CHECK_FALSE(st.leader);
  REQUIRE(st.last);
  CHECK(st.last->term == 7);
  CHECK(st.last->identity == "x");
  CHECK(st.last->value == "val");
  // On three it is a leader (the lock holds its token there).
  g[2].command({"SET", "redlock:{mixed}:leader", record});
  st = read_leader(*watcher, "mixed");
  REQUIRE(st.leader);
  CHECK(st.leader->term == 7);
  // Garbage in the record on the others is no record, not an error.
  g[3].command({"SET", "redlock:{mixed}:leader", "99999999999999999999 1 0 1 1 ab"});
  g[4].command({"SET", "redlock:{mixed}:leader", "1 1 0 500 1 short"});
  st = read_leader(*watcher, "mixed");
  REQUIRE(st.leader);
  CHECK(st.leader->term == 7);
  // A list at the record's name: that master cannot tell; the rest can.
  g[4].command({"DEL", "redlock:{mixed}:leader"});
  g[4].command({"RPUSH", "redlock:{mixed}:leader", "x"});
  st = read_leader(*watcher, "mixed");
  CHECK(st.answered == 4);
  REQUIRE(st.leader);
}

TEST_CASE("without a majority of masters the leader is unknown, not absent") {
  RedisGroup g(5);
  auto a = client_for(g), watcher = client_for(g);
  Leadership lead = elected(*a, "dark", {.identity = "a"});
  for (std::size_t i = 0; i < 3; ++i) g[i].kill();
  auto st = watcher->leader("dark");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == Errc::no_quorum);
  CHECK(st.error().message.find("2 of 5 masters answered, 3 needed") != std::string::npos);
}

TEST_CASE("campaign refuses what it cannot use, and a cancelled wait ends it") {
  RedisGroup g(3);
  auto a = client_for(g), b = client_for(g);
  auto bad = a->campaign("x", {.identity = std::string(max_identity_size + 1, 'i')});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == Errc::invalid_argument);
  CHECK(a->campaign("x", {.wait = -1ms}).error().code == Errc::invalid_argument);
  CHECK(a->campaign("bad}name", {}).error().code == Errc::invalid_argument);
  CHECK(a->leader("bad}name").error().code == Errc::invalid_argument);

  Leadership lead = elected(*a, "x", {});
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] { return b->campaign("x", {.cancel = stop.get_token()}); });
  CHECK(waiting.wait_for(200ms) == std::future_status::timeout);
  stop.request_stop();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  auto r = waiting.get();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::cancelled);
  CHECK(lead.leading());
}

TEST_CASE("examples/leader_worker: one copy leads; killed, the other takes over at a higher term; the store keeps it") {
  RedisGroup g(5);
  RedisServer store_server;
  TempDir tmp;
  const EnvVars env{{"REDLOCK_CONFIG", config_file(tmp, g)}};
  Child first(program("REDLOCK_LEADER_EXAMPLE"), {"beat", store_server.url()}, env);
  REQUIRE(first.wait_for("leader, term"));
  Child second(program("REDLOCK_LEADER_EXAMPLE"), {"beat", store_server.url(), "3"}, env);
  auto store = FencedStore::connect(*parse_node_url(store_server.url()));
  REQUIRE(store.ok());
  REQUIRE(eventually([&] { return (*store)->read("beat:beat")->highest >= 1; }));
  const std::uint64_t first_term = (*store)->read("beat:beat")->highest;
  CHECK(second.out_so_far().find("leader") == std::string::npos);  // it waits
  first.signal(SIGKILL);
  (void)first.wait();
  // The lease's TTL is 2 s: the second leads within about that.
  ProcResult r = second.wait(std::chrono::seconds(30));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("leader, term") != std::string::npos);
  CHECK(r.out.find("done") != std::string::npos);
  const FencedValue v = *(*store)->read("beat:beat");
  CHECK(v.highest > first_term);
  CHECK(v.value == "1");  // its last beat, under its term
}

namespace {

// no_safety_net: a watch whose only reasons to read again are messages and
// the leader's lock expiry (its safety net is 10 minutes).
void no_safety_net(Options& o) { o.wake_safety_net = 60s; }

}  // namespace

TEST_CASE("observe: told the first reading, then each election, new value and resignation as it is published") {
  RedisGroup g(5);
  auto a = client_for(g), b = client_for(g), watcher = client_for(g, no_safety_net);
  Readings r;
  auto watch = watcher->observe("obs", r.callback());
  REQUIRE(watch.ok());
  auto first = r.next(0);
  REQUIRE(first);
  REQUIRE(first->ok());
  CHECK_FALSE((*first)->leader);

  Leadership lead = elected(*a, "obs", {.identity = "a", .value = "v1", .ttl = 30s});
  auto elected_seen = r.next(1);
  REQUIRE(elected_seen);
  REQUIRE(elected_seen->ok());
  REQUIRE((*elected_seen)->leader);
  CHECK((*elected_seen)->leader->identity == "a");
  CHECK((*elected_seen)->leader->term == lead.term());

  REQUIRE(lead.proclaim("v2").ok());
  auto value_seen = r.next(2);
  REQUIRE(value_seen);
  REQUIRE((*value_seen)->leader);
  CHECK((*value_seen)->leader->value == "v2");

  const std::uint64_t old_term = lead.term();
  auto next = std::async(std::launch::async, [&] { return b->campaign("obs", {.identity = "b"}); });
  REQUIRE(lead.resign().ok());
  // "no leader" (the resign's message), then b — or b at once, if its
  // election came first: never a term below one told.
  std::uint64_t highest = 0;
  for (std::size_t i = 3;; ++i) {
    auto seen = r.next(i);
    REQUIRE(seen);
    REQUIRE(seen->ok());
    if (!(*seen)->leader) continue;
    CHECK((*seen)->leader->term >= highest);
    highest = (*seen)->leader->term;
    if ((*seen)->leader->identity == "b") break;
  }
  auto b_lead = next.get();
  REQUIRE(b_lead.ok());
  CHECK(highest == b_lead->term());
  CHECK(highest > old_term);

  // Stopped: nothing more is told. A second watch hears what the first would have.
  watch->stop();
  CHECK_FALSE(watch->active());
  const std::size_t told = r.size();
  Readings other;
  auto second = watcher->observe("obs", other.callback());
  REQUIRE(second.ok());
  REQUIRE(other.next(0));
  REQUIRE(b_lead->proclaim("last").ok());
  auto last = other.next(1);
  REQUIRE(last);
  REQUIRE((*last)->leader);
  CHECK((*last)->leader->value == "last");
  CHECK(r.size() == told);
}

TEST_CASE("observe: a leader that dies is seen gone when its lock runs out, though it publishes nothing") {
  RedisGroup g(5);
  RedisServer store;
  TempDir tmp;
  auto watcher = client_for(g, no_safety_net);
  Readings r;
  auto watch = watcher->observe("beat", r.callback());
  REQUIRE(watch.ok());
  REQUIRE(r.next(0));
  Child worker(program("REDLOCK_LEADER_EXAMPLE"), {"beat", store.url()}, {{"REDLOCK_CONFIG", config_file(tmp, g)}});
  REQUIRE(worker.wait_for("leader, term"));
  std::size_t n = 1;
  auto seen = r.next(n);
  REQUIRE(seen);
  REQUIRE((*seen)->leader);
  const std::uint64_t term = (*seen)->leader->term;
  CHECK((*seen)->leader->value.starts_with("pid "));
  worker.signal(SIGKILL);
  (void)worker.wait();
  // Its lease's TTL is 2 s: the watch reads again when it would run out.
  seen = r.next(++n, 10s);
  REQUIRE(seen);
  REQUIRE(seen->ok());
  CHECK_FALSE((*seen)->leader);
  REQUIRE((*seen)->last);
  CHECK((*seen)->last->term == term);
}

TEST_CASE("observe: an error is told once; the client's close ends the watch with Errc::closed") {
  RedisGroup g(3);
  auto watcher = client_for(g, [](Options& o) {
    o.retry_delay = 20ms;
    o.wake_safety_net = 200ms;  // the watch's safety net: 2 s
  });
  Readings r;
  auto watch = watcher->observe("dark", r.callback());
  REQUIRE(watch.ok());
  REQUIRE(r.next(0));
  CHECK(watcher->observe("bad}name", r.callback()).error().code == Errc::invalid_argument);
  // Two of three masters gone: unknown, told once however often it reads.
  g[0].kill();
  g[1].kill();
  // (No message comes from masters that died: the safety net reads.)
  auto down = r.next(1);
  REQUIRE(down);
  REQUIRE_FALSE(down->ok());
  CHECK(down->error().code == Errc::no_quorum);
  watcher.reset();
  auto closed = r.next(2);
  REQUIRE(closed);
  REQUIRE_FALSE(closed->ok());
  CHECK(closed->error().code == Errc::closed);
  CHECK(r.size() == 3);
  CHECK_FALSE(watch->active());
}

TEST_CASE("redlock leader: the leader in JSON and words, exit 0; none: 1; bytes escaped; --watch one line per change") {
  RedisGroup g(5);
  auto a = client_for(g);
  ProcResult none = cli(op({"leader", "sched", "--json"}, g));
  CHECK(none.exit_code == 1);
  json j = json::parse(none.out);
  CHECK(j["leader"].is_null());
  CHECK(j["known"] == true);
  CHECK(j["quorum"] == 3);

  const std::string odd("id\n\xff", 4);
  Leadership lead = elected(*a, "sched", {.identity = odd, .value = "10.0.0.1:80"});
  ProcResult led = cli(op({"leader", "sched", "--json"}, g));
  CHECK(led.exit_code == 0);
  j = json::parse(led.out);
  CHECK(j["leader"]["term"] == lead.term());
  CHECK(j["leader"]["value"] == "10.0.0.1:80");
  CHECK(j["leader"]["token"] == lead.lease().token());
  CHECK(j["leader"]["identity"].get<std::string>().find("\\xff") != std::string::npos);  // escaped, not raw
  ProcResult human = cli(op({"leader", "sched"}, g));
  INFO("human: " << human.out);
  CHECK(human.exit_code == 0);
  CHECK(human.out.find("led by \"id\\x0a\\xff\", term " + std::to_string(lead.term())) != std::string::npos);
  CHECK(cli(op({"leader", "sched", "--interval", "1s"}, g)).exit_code == 2);
  CHECK(cli(op({"leader", "bad}name"}, g)).exit_code == 2);

  Child watch(program("REDLOCK_CLI"), op({"leader", "sched", "--watch", "--json"}, g));
  auto line = watch.read_line();
  REQUIRE(line);
  CHECK(json::parse(*line)["leader"]["term"] == lead.term());
  REQUIRE(lead.proclaim("v2").ok());
  line = watch.read_line();
  REQUIRE(line);
  CHECK(json::parse(*line)["leader"]["value"] == "v2");
  REQUIRE(lead.resign().ok());
  line = watch.read_line();
  REQUIRE(line);
  CHECK(json::parse(*line)["leader"].is_null());
  watch.signal(SIGTERM);
  ProcResult end = watch.wait();
  CHECK(end.exit_code == 0);
  // Two of five masters answer: unknown, exit 69.
  for (std::size_t i = 0; i < 3; ++i) g[i].kill();
  ProcResult dark = cli(op({"leader", "sched", "--json"}, g));
  CHECK(dark.exit_code == 69);
  CHECK(json::parse(dark.out)["known"] == false);
}

TEST_CASE("Client::campaign_async: a future of the leadership; one never read resigns when it goes") {
  RedisGroup g(5);
  auto a = client_for(g), b = client_for(g), watcher = client_for(g);

  std::future<Result<Leadership>> first = a->campaign_async("futures", {.identity = "a", .ttl = 10s});
  Result<Leadership> lead = first.get();
  REQUIRE_MESSAGE(lead.ok(), lead.error().to_string());
  CHECK(lead->leading());
  CHECK(lead->identity() == "a");

  // A second candidate's future stays pending while the first leads…
  std::future<Result<Leadership>> second = b->campaign_async("futures", {.identity = "b", .ttl = 10s});
  CHECK(second.wait_for(200ms) == std::future_status::timeout);
  const std::uint64_t first_term = lead->term();
  REQUIRE(lead->resign().ok());
  // …and is elected on the resign, far within the first's 10 s TTL.
  REQUIRE(second.wait_for(5s) == std::future_status::ready);
  {
    Result<Leadership> next = second.get();
    REQUIRE_MESSAGE(next.ok(), next.error().to_string());
    CHECK(next->term() > first_term);
    CHECK(read_leader(*watcher, "futures").leader->identity == "b");
  }  // resigns

  // A future dropped unread: its leadership, once elected, resigns when the
  // future's state goes — on the loop thread, without waiting there: the
  // record deleted, then the lock released, long before the 10 s TTL.
  (void)a->campaign_async("dropped", {.identity = "a-dropped", .ttl = 10s});
  REQUIRE(eventually(
      [&] {
        auto st = watcher->status("dropped");
        if (!st.ok() || st->free_nodes != 5) return false;
        std::size_t fenced = 0;  // the fence counter moved: it was elected
        for (const NodeHolding& n : st->nodes) fenced += n.fence >= 1;
        return fenced >= 3;
      },
      5s));
  const LeaderStatus gone = read_leader(*watcher, "dropped");
  CHECK_FALSE(gone.leader);
  CHECK_FALSE(gone.last);  // no record left on any master

  // On a bad name the future is ready at once with the refusal.
  std::future<Result<Leadership>> bad = a->campaign_async("", {});
  REQUIRE(bad.wait_for(0s) == std::future_status::ready);
  CHECK(bad.get().error().code == Errc::invalid_argument);
}

TEST_CASE("AsyncClient::campaign: elected in a callback; a waiting one elected on the resign; a bounded one told held") {
  RedisGroup g(5);
  AsyncBed bed(g);
  auto watcher = client_for(g);
  std::optional<AsyncLeadership> first, second;
  std::optional<Errc> third;
  std::uint64_t first_term = 0;
  bool proclaimed = false, resigned = false;
  bed.client->campaign("async", {.identity = "one", .value = "v1"}, [&](Result<AsyncLeadership> r) {
    CHECK(r.ok());
    if (!r) return bed.client->close();
    first.emplace(std::move(*r));
    first_term = first->term();
    CHECK(first->leading());
    CHECK(first->identity() == "one");
    bed.client->campaign("async", {.identity = "two"}, [&](Result<AsyncLeadership> r2) {
      CHECK(r2.ok());
      if (!r2) return bed.client->close();
      second.emplace(std::move(*r2));
      CHECK(second->term() > first_term);
      second->proclaim("v2", [&](Result<void> p) {
        CHECK(p.ok());
        proclaimed = p.ok();
        bed.client->close();
      });
    });
    bed.client->campaign("async", {.wait = 100ms}, [&](Result<AsyncLeadership> r3) {
      CHECK_FALSE(r3.ok());
      if (!r3) third = r3.error().code;
      first->resign([&](Result<void> done) {
        CHECK(done.ok());
        resigned = done.ok();
      });
    });
  });
  bed.run();
  CHECK(third == Errc::held);
  CHECK(resigned);
  CHECK(proclaimed);
  REQUIRE(first);
  CHECK(first->empty());
  REQUIRE(second);
  REQUIRE(second->deposed());  // the client closed under it
  CHECK(second->deposed()->code == Errc::lost);
  // Its lock and record stay until the TTL: read as the leader meanwhile.
  const LeaderStatus st = read_leader(*watcher, "async");
  REQUIRE(st.leader);
  CHECK(st.leader->identity == "two");
  CHECK(st.leader->value == "v2");
  second.reset();  // a resign with the client closed: nothing to send it with
  CHECK(bed.closed_clean());
}

TEST_CASE("AsyncClient::campaign: the close ends a campaign that backs off, with Errc::closed") {
  RedisGroup g(3);
  AsyncBed bed(g, [](Options& o) { o.retry_delay = 5000ms; });  // a backoff far longer than the test
  g[0].kill();
  g[1].kill();  // no quorum: the campaign backs off
  std::optional<Errc> ended;
  bed.client->campaign("dark", {}, [&](Result<AsyncLeadership> r) {
    CHECK_FALSE(r.ok());
    if (!r) ended = r.error().code;
  });
  auto closer = bed.client->observe("dark", [&](const Result<LeaderStatus>& r) {
    // The first reading (unknown: no quorum) comes after the campaign's
    // first round failed: close then.
    if (!r) bed.client->close();
  });
  REQUIRE(closer.ok());
  bed.run();
  CHECK(ended == Errc::closed);
  CHECK(bed.closed_clean());
}

TEST_CASE("AsyncClient::observe: a watch ended by the close leaves no handle on the loop") {
  // (Its channel, unwatched as the client closes, lingers: that timer goes
  // with the close, not with the client's memory.)
  RedisGroup g(3);
  AsyncBed bed(g);
  bool told = false;
  auto w = bed.client->observe("exp", [&](const Result<LeaderStatus>& r) {
    if (!r || told) return;
    told = true;
    bed.client->close();
  });
  REQUIRE(w.ok());
  bed.run();
  CHECK(told);
  CHECK_FALSE(w->active());
  CHECK(bed.closed_clean());
}
