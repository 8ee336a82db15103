// test_lease.cpp — leases against real redis-servers: the watchdog keeps a
// lock, the lost signal comes before anyone else can hold it, RAII release,
// reentrancy, and fencing tokens (monotonic over 10,000 handoffs under
// faults; a holder paused past its validity is fenced off).
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <latch>
#include <limits>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "helpers.hpp"
#include "support/process.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Clock = redlock::BootClock;

namespace {

// A lease TTL short enough to see many extensions in a short test:
// node_timeout 50 ms + drift (2 ms + 1 %) + min_validity must stay below it.
constexpr auto short_ttl = 300ms;

}  // namespace

TEST_CASE("a lease held for 5 x TTL stays held, nobody else gets it, and it is free at once after release") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto other = client_for(group);
  auto lease = holder->lock("job", {.acquire = {.ttl = short_ttl}});
  REQUIRE(lease.ok());
  const std::string token = lease->token();
  const auto until = Clock::now() + 5 * short_ttl;
  int refused = 0;
  while (Clock::now() < until) {  // the other client tries all along
    auto attempt = other->try_acquire("job", short_ttl);
    CHECK_FALSE(attempt.ok());
    if (!attempt.ok()) CHECK(attempt.error().code == Errc::held);
    ++refused;
    CHECK(lease->valid());
  }
  CHECK(refused > 10);
  CHECK(lease->extensions() >= 10);  // one every validity/3 (~95 ms)
  CHECK_FALSE(lease->lost().has_value());
  CHECK_FALSE(lease->stop_token().stop_requested());
  // The key still holds our token on a majority (what an extension
  // promises: a master whose extension came late on a loaded machine may
  // have let its copy expire, and that is allowed).
  std::size_t holding = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    holding += group[i].command({"GET", "redlock:{job}:lock"}).str == token ? 1 : 0;
  }
  CHECK(holding >= 2);
  auto released = lease->release();
  REQUIRE(released.ok());
  CHECK(released->released);
  CHECK(lease->empty());
  auto next = other->try_acquire("job", short_ttl);
  CHECK(next.ok());
}

TEST_CASE("a holder whose majority is paused is told it lost the lease before anyone else can take it") {
  RedisGroup group(5);
  auto holder = client_for(group);
  auto other = client_for(group);
  std::atomic<long long> lost_at{0};
  std::mutex mu;
  std::optional<Error> lost_error;
  LeaseOptions opts{.acquire = {.ttl = 500ms}};
  opts.on_lost = [&](const Error& e) {
    lost_at = Clock::now().time_since_epoch().count();
    std::lock_guard<std::mutex> lock(mu);
    lost_error = e;
  };
  auto lease = holder->lock("guarded", opts);
  REQUIRE(lease.ok());

  // The second client tries all along; note when it first succeeds.
  std::atomic<bool> stop{false};
  std::atomic<long long> other_at{0};
  std::thread contender([&] {
    while (!stop) {
      auto l = other->try_acquire("guarded", 500ms);
      if (l.ok()) {
        other_at = Clock::now().time_since_epoch().count();
        return;
      }
    }
  });
  for (std::size_t i : {0u, 1u, 2u}) group[i].pause();
  const auto paused_at = Clock::now();
  // The outage lasts one TTL; then the masters come back.
  std::this_thread::sleep_until(paused_at + 500ms);
  for (std::size_t i : {0u, 1u, 2u}) group[i].resume();
  REQUIRE(eventually([&] { return other_at.load() != 0; }, 5000ms));
  stop = true;
  contender.join();

  REQUIRE(lost_at.load() != 0);
  CHECK(lost_at.load() < other_at.load());
  CHECK(lease->stop_token().stop_requested());
  CHECK_FALSE(lease->valid());
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(lost_error.has_value());
  CHECK(lost_error->code == Errc::lost);
  CHECK(lost_error->message.find("guarded") != std::string::npos);
  CHECK(lease->lost().has_value());
}

TEST_CASE("a lease that may not extend any more is lost at its deadline, naming the cap") {
  RedisGroup group(3);
  auto client = client_for(group);
  std::atomic<bool> lost{false};
  LeaseOptions opts{.acquire = {.ttl = short_ttl}, .max_extensions = 1};
  opts.on_lost = [&](const Error&) { lost = true; };
  auto lease = client->lock("capped", opts);
  REQUIRE(lease.ok());
  std::stop_callback on_stop(lease->stop_token(), [] {});
  REQUIRE(eventually([&] { return lost.load(); }, 3000ms));
  CHECK(lease->extensions() == 1);
  REQUIRE(lease->lost().has_value());
  CHECK(lease->lost()->message.find("max_extensions (1) reached") != std::string::npos);
  CHECK_FALSE(lease->valid());
}

TEST_CASE("destroying a lease releases it; with the masters gone the destructor returns within its bound") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  {
    auto lease = client->lock("scoped");
    REQUIRE(lease.ok());
    CHECK_FALSE(other->try_acquire("scoped").ok());
  }
  CHECK(other->try_acquire("scoped").ok());

  auto lease = client->lock("unreachable", {.acquire = {.ttl = 2000ms}});
  REQUIRE(lease.ok());
  for (std::size_t i = 0; i < group.size(); ++i) group[i].pause();
  const auto before = Clock::now();
  {
    auto dropped = std::move(*lease);
  }  // destructor: release with no master answering
  // Bounded by the release's retries (600 ms with these options); allow
  // for a slow (sanitized) build, never for a hang.
  CHECK(Clock::now() - before < 2000ms);
  for (std::size_t i = 0; i < group.size(); ++i) group[i].resume();
}

TEST_CASE("with_lock runs the function under a lease, hands it the stop token and releases afterwards") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  auto r = client->with_lock("report", {.acquire = {.ttl = short_ttl}}, [&](std::stop_token token) {
    CHECK_FALSE(token.stop_requested());
    CHECK_FALSE(other->try_acquire("report").ok());
    return 42;
  });
  REQUIRE(r.ok());
  CHECK(*r == 42);
  CHECK(other->try_acquire("report").ok());  // released on return

  auto busy = client->with_lock("report", {}, [](std::stop_token) { FAIL("must not run"); });
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == Errc::held);
}

TEST_CASE("with_lock: a lease lost while the function runs requests its stop token and turns the result into the loss") {
  RedisGroup group(3);
  auto client = client_for(group);
  // No extensions: the lease runs out while fn waits for its stop token.
  auto r = client->with_lock("short-job", {.acquire = {.ttl = short_ttl}, .auto_extend = false}, [](std::stop_token token) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock<std::mutex> lock(mu);
    const bool stopped = cv.wait_for(lock, token, 5s, [] { return false; });  // returns when stop is requested
    CHECK(token.stop_requested());
    return stopped ? 1 : 0;
  });
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::lost);
  CHECK(r.error().message.find("auto_extend is off") != std::string::npos);
}

namespace {

// LoopStop — the client's loop thread held up, as when the whole process
// is stopped (SIGSTOP, a long GC pause, a suspended VM): a lease of its
// own runs out and its on_lost blocks the loop until the test lets go.
class LoopStop {
 public:
  explicit LoopStop(Client& client) {
    LeaseOptions opts{.acquire = {.ttl = 200ms}, .auto_extend = false};
    opts.on_lost = [this](const Error&) {
      std::unique_lock<std::mutex> lock(mu_);
      stopped_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, 20s, [this] { return resumed_; });
    };
    auto lease = client.lock("loop-stop", opts);
    REQUIRE(lease.ok());
    lease_ = std::move(*lease);
  }
  // wait: until the loop thread is held up.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, 5s, [this] { return stopped_; }));
  }
  void resume() {
    std::lock_guard<std::mutex> lock(mu_);
    resumed_ = true;
    cv_.notify_all();
  }
  ~LoopStop() { resume(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false, resumed_ = false;
  Lease lease_;
};

}  // namespace

TEST_CASE("a lease whose deadline passed while its loop was stopped is lost for lost(), release() and the stop token at once") {
  RedisGroup group(3);
  auto client = client_for(group);
  std::mutex mu;
  std::vector<std::string> told;
  LeaseOptions opts{.acquire = {.ttl = 1200ms}};  // its first extension is due after about 375 ms
  opts.on_lost = [&](const Error& e) {
    std::lock_guard<std::mutex> lock(mu);
    told.push_back(e.message);
  };
  auto lease = client->lock("paused-lease", opts);
  REQUIRE(lease.ok());
  LoopStop loop(*client);
  loop.wait();
  std::this_thread::sleep_until(lease->deadline());  // the fault: time passes while nothing runs
  CHECK_FALSE(lease->valid());
  const std::stop_token token = lease->stop_token();
  CHECK_FALSE(token.stop_requested());  // nothing has looked yet
  const std::optional<Error> lost = lease->lost();
  REQUIRE(lost.has_value());
  CHECK(lost->code == Errc::lost);
  CHECK(lost->message.find("validity deadline passed") != std::string::npos);
  CHECK(token.stop_requested());
  CHECK(lease->lost()->message == lost->message);
  auto released = lease->release();  // the loop is still stopped: not answered, but lost
  REQUIRE_FALSE(released.ok());
  CHECK(released.error().code == Errc::lost);
  CHECK(released.error().message == lost->message);
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(told.empty());  // on_lost runs on the loop, which has not run since
  }
  loop.resume();
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !told.empty();
  }, 3000ms));
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(told.size() == 1);
  CHECK(told[0] == lost->message);
}

TEST_CASE("with_lock: a function stopped past the lease's deadline returns Errc::lost, not its value") {
  RedisGroup group(3);
  auto client = client_for(group);
  const auto start = Clock::now();
  std::optional<LoopStop> loop;
  bool stop_seen = true;
  auto r = client->with_lock("paused-job", {.acquire = {.ttl = 1200ms}}, [&](std::stop_token token) {
    loop.emplace(*client);
    loop->wait();
    std::this_thread::sleep_until(start + 1200ms);  // past the deadline, the loop stopped throughout
    stop_seen = token.stop_requested();
    return 42;
  });
  CHECK_FALSE(stop_seen);  // nothing but with_lock itself could have noticed
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::lost);
  CHECK(r.error().message.find("paused-job") != std::string::npos);
}

TEST_CASE("reentrant leases: the same owner re-enters with no network round; others contend; the last hold releases") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  LeaseOptions opts{.acquire = {.ttl = 2000ms}, .reentrant = true};
  auto first = client->lock("row", opts);
  REQUIRE(first.ok());
  // No master answers now: only a local re-entry can succeed.
  for (std::size_t i = 0; i < group.size(); ++i) group[i].pause();
  auto second = client->lock("row", opts);
  for (std::size_t i = 0; i < group.size(); ++i) group[i].resume();
  REQUIRE(second.ok());
  CHECK(second->token() == first->token());
  CHECK(first->holds() == 2);

  LeaseOptions stranger = opts;
  stranger.owner = "someone-else";
  auto third = client->lock("row", stranger);
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().code == Errc::held);
  // Another thread is another owner, too.
  std::thread([&] {
    auto l = client->lock("row", opts);
    CHECK_FALSE(l.ok());
  }).join();

  auto dropped = second->release();
  REQUIRE(dropped.ok());
  CHECK_FALSE(dropped->released);  // one hold is left
  CHECK(first->holds() == 1);
  CHECK_FALSE(other->try_acquire("row").ok());
  auto last = first->release();
  REQUIRE(last.ok());
  CHECK(last->released);
  CHECK(other->try_acquire("row").ok());
}

TEST_CASE("a client closed under a live lease: the lease is lost and can still be dropped safely") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto lease = client->lock("orphan");
  REQUIRE(lease.ok());
  const std::stop_token token = lease->stop_token();
  client.reset();
  CHECK(token.stop_requested());
  REQUIRE(lease->lost().has_value());
  CHECK(lease->lost()->message.find("client was closed") != std::string::npos);
  auto r = lease->release();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::closed);
}

TEST_CASE("fencing tokens strictly increase over 10000 handoffs, with a master killed, restarted, paused, resumed") {
  ServerOptions persistent;
  persistent.appendfsync_always = true;  // fencing's assumption: acknowledged counter writes survive
  RedisGroup group(5, persistent);
  constexpr int handoffs = 10000;
  constexpr int contenders = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < contenders; ++i) {
    clients.push_back(client_for(group, [](Options& o) {
      o.retry_delay = 1ms;
      o.retry_jitter = 1ms;
    }));
  }
  std::mutex mu;
  std::uint64_t last_fence = 0;
  int granted = 0, violations = 0, failures = 0;
  std::atomic<bool> done{false};
  auto contend = [&](Client& client) {
    while (!done) {
      auto lease = client.lock("fenced", {.acquire = {.ttl = 1000ms, .wait = 5000ms, .fence = true}, .auto_extend = false});
      if (!lease.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        ++failures;
        continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (lease->fence() <= last_fence) ++violations;
      last_fence = std::max(last_fence, lease->fence());
      if (++granted >= handoffs) done = true;
    }
  };
  std::vector<std::thread> threads;
  for (auto& c : clients) threads.emplace_back(contend, std::ref(*c));
  // The nemesis: once a quarter of the handoffs are done, kill master 0 and
  // bring it back with its data; at half, pause master 1; at three
  // quarters, resume it.
  auto at = [&](int n) { return eventually([&] { std::lock_guard<std::mutex> lock(mu); return granted >= n || done; }, 120000ms); };
  CHECK(at(handoffs / 4));
  group[0].kill();
  group[0].restart(/*wipe=*/false);
  CHECK(at(handoffs / 2));
  group[1].pause();
  CHECK(at(3 * handoffs / 4));
  group[1].resume();
  for (auto& t : threads) t.join();
  CHECK(granted >= handoffs);
  CHECK(violations == 0);
  CHECK(last_fence >= static_cast<std::uint64_t>(handoffs));
  MESSAGE("granted " << granted << ", failed attempts " << failures << ", last fence " << last_fence);
}

namespace {

// Writer — examples/fenced_writer as a child process, driven over pipes
// (support::Process).
class Writer {
 public:
  Writer(const std::string& nodes, const std::string& store, const std::string& resource)
      : process_(options(nodes, store, resource)) {}
  std::string ask(const std::string& line) {
    process_.write_input(line + "\n");
    const std::optional<std::string> reply = process_.read_line(20s);
    REQUIRE_MESSAGE(reply.has_value(), "fenced_writer did not answer '" << line << "'");
    return *reply;
  }
  void stop_process() { REQUIRE(process_.pause()); }
  void continue_process() { REQUIRE(process_.resume()); }
  // quit asks the writer to exit and returns its exit status.
  int quit() {
    process_.write_input("quit\n");
    const std::optional<int> code = process_.wait(20s);
    REQUIRE_MESSAGE(code.has_value(), "fenced_writer did not quit");
    return *code;
  }

 private:
  static support::ProcessOptions options(const std::string& nodes, const std::string& store,
                                         const std::string& resource) {
    const char* path = std::getenv("REDLOCK_FENCED_WRITER");
    REQUIRE_MESSAGE(path != nullptr, "REDLOCK_FENCED_WRITER is not set (meson sets it)");
    support::ProcessOptions o;
    o.argv = {path, "--nodes", nodes, "--store", store, "--resource", resource, "--ttl", "400"};
    o.in = support::Stream::pipe();
    o.out = support::Stream::pipe();
    return o;
  }

  support::Process process_;
};

}  // namespace

TEST_CASE("a holder paused (SIGSTOP) past its validity writes with its old fence and is refused") {
  RedisGroup group(3);
  RedisServer store_server;
  Writer writer(group.url_list(), store_server.address(), "doc");
  const std::string taken = writer.ask("acquire");
  REQUIRE(taken.find("\"acquired\": true") != std::string::npos);
  CHECK(taken.find("\"valid\": true") != std::string::npos);
  writer.stop_process();  // paused right after checking its lock

  // Meanwhile the lock expires and another client takes it, with a higher
  // fence, and writes.
  auto client = client_for(group);
  Result<Lease> next = make_error(Errc::internal, "not tried");
  REQUIRE(eventually([&] {
    next = client->lock("doc", {.acquire = {.ttl = 2000ms, .fence = true}});
    return next.ok();
  }, 5000ms));
  auto store = FencedStore::connect(*parse_node_url(store_server.url()));
  REQUIRE_MESSAGE(store.ok(), store.error().to_string());
  const auto w = (*store)->write("store:doc", next->fence(), "from the new holder");
  REQUIRE_MESSAGE(w.ok(), w.error().to_string());
  CHECK(w->accepted);

  writer.continue_process();
  const std::string late = writer.ask("write from the paused holder");
  CHECK(late.find("\"accepted\": false") != std::string::npos);
  CHECK(late.find("\"highest\": " + std::to_string(next->fence())) != std::string::npos);
  const auto now = (*store)->read("store:doc");
  REQUIRE(now.ok());
  CHECK(now->highest == next->fence());
  CHECK(now->value == "from the new holder");
  CHECK(now->rejected == 1);
  CHECK(writer.quit() == 0);
}

// ---- misuse on the loop thread (issue 15) --------------------------------------------

namespace {

// connected_clients reads INFO clients of one master.
long long connected_clients(const RedisServer& server) {
  const std::string info = server.command({"INFO", "clients"}).str;
  const std::size_t at = info.find("connected_clients:");
  return at == std::string::npos ? -1 : std::atoll(info.c_str() + at + 18);
}

// drop_everywhere deletes a lease's key on every master: its next extension
// is refused for good, and it is lost. It waits until every master holds
// the key first: the acquire returned once a majority answered, and a SET
// still on its way to the last master would set the key again after the
// DEL (then the release deletes it there, and two of three gone is not
// "gone everywhere").
void drop_everywhere(RedisGroup& group, const std::string& resource) {
  const std::string key = "redlock:{" + resource + "}:lock";
  REQUIRE(eventually([&] {
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (group[i].command({"EXISTS", key}).integer != 1) return false;
    }
    return true;
  }));
  for (std::size_t i = 0; i < group.size(); ++i) group[i].command({"DEL", key});
}

}  // namespace

TEST_CASE("with_lock: a lock deleted under the function (its release finds it gone) is reported lost") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto r = client->with_lock("deleted-job", {.acquire = {.ttl = 5000ms}}, [&](std::stop_token) {
    drop_everywhere(group, "deleted-job");
    return 7;
  });
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::lost);
  CHECK(r.error().message.find("no longer held") != std::string::npos);
}

TEST_CASE("with_lock: a lock gone from a majority is lost, even when its release still deletes it elsewhere") {
  RedisGroup group(3);
  // The release waits for every master's answer (it ends as soon as the
  // last one comes): an answer it did not wait for would leave the count
  // unsure, and an unsure count is not a loss.
  auto client = client_for(group, [](Options& o) { o.release_settle = 5000ms; });
  const std::string key = "redlock:{partly-deleted}:lock";
  auto r = client->with_lock("partly-deleted", {.acquire = {.ttl = 5000ms}}, [&](std::stop_token) {
    // On every master first (the last may answer after the majority), then
    // gone from two of three: no majority holds it any more.
    REQUIRE(eventually([&] {
      for (std::size_t i = 0; i < group.size(); ++i) {
        if (group[i].command({"EXISTS", key}).integer != 1) return false;
      }
      return true;
    }));
    group[0].command({"DEL", key});
    group[1].command({"DEL", key});
    return 7;
  });
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::lost);
  CHECK(r.error().message.find("gone from 2 of 3") != std::string::npos);
  CHECK(group[2].command({"EXISTS", key}).integer == 0);  // what was left was released
}

TEST_CASE("destroying the Client inside on_lost neither throws nor deadlocks: the loop thread shuts down by itself") {
  RedisGroup group(3);
  const long long before = connected_clients(group[0]);
  std::unique_ptr<Client> client = client_for(group);
  std::atomic<bool> destroyed{false};
  LeaseOptions opts{.acquire = {.ttl = short_ttl}};
  opts.on_lost = [&](const Error&) {
    client.reset();  // on the client's own loop thread
    destroyed = true;
  };
  auto lease = client->lock("doomed", opts);
  REQUIRE(lease.ok());
  drop_everywhere(group, "doomed");
  REQUIRE(eventually([&] { return destroyed.load(); }, 3000ms));
  CHECK(client == nullptr);
  REQUIRE(lease->lost().has_value());
  CHECK(lease->stop_token().stop_requested());
  // The detached loop thread closed every connection (and its loop: the
  // asserts of this build check that no handle was left on it).
  CHECK(eventually([&] { return connected_clients(group[0]) <= before; }, 3000ms));
  auto r = lease->release();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::closed);
}

TEST_CASE("a blocking Client call on the client's loop thread fails at once with invalid_argument, and the client lives on") {
  RedisGroup group(3);
  auto client = client_for(group);
  std::mutex mu;
  std::vector<Error> refusals;
  std::atomic<bool> told{false};
  // A second lease, released on the loop thread: refused like the rest,
  // though its release is started.
  Result<Lease> second = client->lock("released-on-loop", {.acquire = {.ttl = 5000ms}});
  REQUIRE(second.ok());
  LeaseOptions opts{.acquire = {.ttl = short_ttl}};
  opts.on_lost = [&](const Error&) {
    std::vector<Error> seen;
    if (Result<ReleaseResult> r = second->release(); !r.ok()) seen.push_back(r.error());
    auto keep = [&](auto r) {
      if (!r.ok()) seen.push_back(r.error());
    };
    keep(client->try_acquire("elsewhere"));
    keep(client->acquire("elsewhere", {.wait = 1000ms}));
    keep(client->lock("elsewhere"));
    keep(client->release("elsewhere", "some-token"));
    keep(client->status("elsewhere"));
    keep(client->nodes());
    keep(client->acquire_many({"a", "b"}));
    auto future = client->acquire_async("elsewhere");
    // Ready at once: waiting for it here must not block the loop.
    if (future.wait_for(0s) == std::future_status::ready) keep(future.get());
    auto lease_future = client->lock_async("elsewhere");
    if (lease_future.wait_for(0s) == std::future_status::ready) keep(lease_future.get());
    std::lock_guard<std::mutex> lock(mu);
    refusals = std::move(seen);
    told = true;
  };
  auto lease = client->lock("watched", opts);
  REQUIRE(lease.ok());
  drop_everywhere(group, "watched");
  REQUIRE(eventually([&] { return told.load(); }, 3000ms));
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(refusals.size() == 10);
    for (const Error& e : refusals) {
      CHECK(e.code == Errc::invalid_argument);
      CHECK(e.message.find("loop thread") != std::string::npos);
    }
  }
  CHECK(lease->lost().has_value());
  // Nothing was started by the refused calls, and the client still works.
  auto after = client->try_acquire("elsewhere");
  CHECK(after.ok());
  // The refused Lease::release still released: the lock is free.
  CHECK(eventually([&] { return client->try_acquire("released-on-loop").ok(); }, 3000ms));
}

// ---- reentrancy (issue 15) ------------------------------------------------------------

TEST_CASE("threads of one reentrant owner calling lock() at once all join the one lease being taken") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  // Someone else holds it for a moment: the owner's first lock() waits, and
  // the owner's other threads come while it is still taking it.
  auto blocker = other->acquire("pooled", {.ttl = 2000ms});
  REQUIRE(blocker.ok());
  constexpr int threads = 6;
  const LeaseOptions opts{.acquire = {.ttl = 2000ms, .wait = 5000ms}, .reentrant = true, .owner = "job-42"};
  std::vector<std::optional<Result<Lease>>> leases(threads);
  std::vector<std::thread> workers;
  std::latch started(threads);
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      started.count_down();
      leases[i].emplace(client->lock("pooled", opts));
    });
  }
  // Every worker is at its lock() (the first ones already waiting behind
  // the blocker); whoever comes later joins the lease by plain re-entry.
  started.wait();
  REQUIRE(other->release(*blocker).ok());
  for (auto& t : workers) t.join();
  std::string token;
  for (auto& l : leases) {
    REQUIRE(l.has_value());
    REQUIRE_MESSAGE(l->ok(), l->error().to_string());
    if (token.empty()) token = (*l)->token();
    CHECK((*l)->token() == token);
  }
  CHECK((*leases[0])->holds() == threads);
  CHECK_FALSE(other->try_acquire("pooled").ok());
  for (int i = 0; i < threads - 1; ++i) {
    auto r = (*leases[i])->release();
    REQUIRE(r.ok());
    CHECK_FALSE(r->released);
  }
  auto last = (*leases[threads - 1])->release();
  REQUIRE(last.ok());
  CHECK(last->released);
  CHECK(other->try_acquire("pooled").ok());
}

TEST_CASE("a reentrant inner lock() that asks for more than the held lease gives is refused, never given less") {
  RedisGroup group(3);
  auto client = client_for(group);
  const LeaseOptions outer{.acquire = {.ttl = 2000ms}, .reentrant = true, .owner = "request-7"};
  auto held = client->lock("account", outer);
  REQUIRE(held.ok());

  auto refused = [&](LeaseOptions inner, const std::string& says) {
    auto r = client->lock("account", inner);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK_MESSAGE(r.error().message.find(says) != std::string::npos, r.error().message);
    CHECK(held->holds() == 1);
  };
  LeaseOptions fenced = outer;
  fenced.acquire.fence = true;
  refused(fenced, "fencing token");
  LeaseOptions longer = outer;
  longer.acquire.ttl = 5000ms;
  refused(longer, "ttl of 5000 ms");
  LeaseOptions defaulted = outer;
  defaulted.acquire.ttl = 0ms;  // Options::default_ttl, 10 s
  refused(defaulted, "ttl of 10000 ms");
  LeaseOptions told = outer;
  told.on_lost = [](const Error&) {};
  refused(told, "on_lost");

  // Asking for less is fine: a shorter ttl, no extension.
  LeaseOptions shorter = outer;
  shorter.acquire.ttl = 1000ms;
  shorter.auto_extend = false;
  auto inner = client->lock("account", shorter);
  REQUIRE(inner.ok());
  CHECK(inner->token() == held->token());
  CHECK(held->holds() == 2);
  REQUIRE(inner->release().ok());

  // An unextended lease cannot give extension; a fenced one gives its fence.
  const LeaseOptions still{.acquire = {.ttl = 2000ms, .fence = true}, .auto_extend = false, .reentrant = true, .owner = "o2"};
  auto quiet = client->lock("ledger", still);
  REQUIRE(quiet.ok());
  CHECK(quiet->fence() > 0);
  LeaseOptions extended = still;
  extended.auto_extend = true;
  auto no = client->lock("ledger", extended);
  REQUIRE_FALSE(no.ok());
  CHECK(no.error().message.find("auto_extend") != std::string::npos);
  auto yes = client->lock("ledger", still);
  REQUIRE(yes.ok());
  CHECK(yes->fence() == quiet->fence());
}

// ---- fences at the edge of their range (issue 15) -----------------------------------

TEST_CASE("fences are exact up to 2^53 and a counter at or beyond it is refused, never rounded") {
  RedisGroup group(3);
  auto client = client_for(group);
  constexpr std::uint64_t two53 = std::uint64_t{1} << 53;
  const std::string counter = "redlock:{edge}:fence";
  auto set_counter = [&](const std::string& value) {
    for (std::size_t i = 0; i < group.size(); ++i) REQUIRE(group[i].command({"SET", counter, value}).str == "OK");
  };
  auto fenced = [&] { return client->acquire("edge", {.fence = true}); };

  for (const std::uint64_t start : {two53 - 3, two53 - 2, two53 - 1}) {
    set_counter(std::to_string(start));
    auto lock = fenced();
    REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
    CHECK(lock->fence == start + 1);  // exact: 2^53 - 2, 2^53 - 1, 2^53
    for (std::size_t i = 0; i < group.size(); ++i) {  // the last master may answer after the majority
      CHECK(eventually([&] { return group[i].command({"GET", counter}).str == std::to_string(start + 1); }));
    }
    REQUIRE(client->release(*lock).ok());
    // Released everywhere before the counter is set again (the last master
    // may run the delete after the majority answered).
    REQUIRE(eventually([&] { return group.keys_everywhere("redlock:{edge}:lock") == 0; }));
  }

  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  for (const std::string& beyond : {std::to_string(two53), std::to_string(two53 + 1), std::to_string(max - 1),
                                   std::to_string(max), std::string("1e300"), std::string("12.5")}) {
    set_counter(beyond);
    auto lock = fenced();
    REQUIRE_FALSE(lock.ok());
    CHECK(lock.error().code == Errc::no_quorum);
    CHECK_MESSAGE(lock.error().message.find("2^53") != std::string::npos, lock.error().message);
    for (std::size_t i = 0; i < group.size(); ++i) {
      CHECK(group[i].command({"GET", counter}).str == beyond);                  // untouched
      CHECK(group[i].command({"EXISTS", "redlock:{edge}:lock"}).integer == 0);  // nothing left held
    }
  }

  // One master out of range is one error: the other two still decide, and
  // their counters give the fence.
  set_counter("41");
  group[2].command({"SET", counter, std::to_string(max - 1)});
  auto lock = fenced();
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(lock->fence == 42);
}

// ---- AsyncClient leases ------------------------------------------------------------

namespace {

// ExtensionCounter calls `then` (on the loop) at the `n`-th lease extension.
struct ExtensionCounter final : Observer {
  int n = 0;
  std::function<void()> then;
  void on_lease(const LeaseEvent& e) override {
    if (e.kind == LeaseEvent::Kind::extended && --n == 0 && then) then();
  }
};

}  // namespace

TEST_CASE("AsyncClient::lock: a lease extended on the loop, held against others, released with its result later") {
  RedisGroup group(3);
  auto other = client_for(group);
  auto counter = std::make_shared<ExtensionCounter>();
  counter->n = 3;
  AsyncBed bed(group, [&](Options& o) { o.observer = counter; });
  AsyncClient& c = *bed.client;
  std::optional<AsyncLease> lease;
  bool called_back = false, released = false;
  c.lock("async-lease", {.acquire = {.ttl = 300ms}}, [&](Result<AsyncLease> r) {
    REQUIRE_MESSAGE(r.ok(), r.error().to_string());
    lease.emplace(std::move(*r));
    called_back = true;
    CHECK(lease->valid());
    CHECK(lease->resource() == "async-lease");
  });
  CHECK_FALSE(called_back);  // never on the caller's stack
  // At the third extension (well past the 300 ms TTL): still ours.
  bool on_stack = true;
  counter->then = [&] {
    CHECK(lease->extensions() == 3);
    CHECK(lease->valid());
    CHECK_FALSE(other->try_acquire("async-lease").ok());
    lease->release([&](Result<ReleaseResult> r) {
      CHECK_FALSE(on_stack);
      REQUIRE(r.ok());
      released = r->released;
      CHECK(lease->empty());
      c.close();
    });
    on_stack = false;
  };
  bed.run();
  CHECK(called_back);
  CHECK(released);
  CHECK(other->try_acquire("async-lease").ok());
  CHECK(bed.closed_clean());
}

TEST_CASE("AsyncClient::lock: on_lost on the loop when a majority is gone; a lease destroyed is released") {
  RedisGroup group(3);
  AsyncBed bed(group);
  AsyncClient& c = *bed.client;
  std::optional<AsyncLease> lease;
  std::optional<Error> lost;
  std::optional<Result<Lock>> again;
  LeaseOptions opts{.acquire = {.ttl = 300ms}};
  opts.on_lost = [&](const Error& e) {
    lost = e;
    CHECK(lease->stop_token().stop_requested());
    CHECK(lease->lost().has_value());
    group[0].resume();
    group[1].resume();
    // Destroying an AsyncLease starts its release: the same resource is
    // free for a new acquire at once (a lost lease's keys may still be
    // there until their TTL: the new acquire waits for them).
    lease.reset();
    c.acquire("lost-lease", {.ttl = 1000ms, .wait = 2000ms}, [&](Result<Lock> r) {
      again = std::move(r);
      c.close();
    });
  };
  c.lock("lost-lease", std::move(opts), [&](Result<AsyncLease> r) {
    REQUIRE(r.ok());
    lease.emplace(std::move(*r));
    group[0].pause();
    group[1].pause();
  });
  bed.run();
  REQUIRE(lost.has_value());
  CHECK(lost->code == Errc::lost);
  REQUIRE(again.has_value());
  CHECK(again->ok());
  CHECK(bed.closed_clean());
}

TEST_CASE("AsyncClient::lock: reentrant and bad options are refused on a later turn; an empty lease releases nothing") {
  RedisGroup group(3);
  AsyncBed bed(group);
  AsyncClient& c = *bed.client;
  std::vector<std::string> said;
  auto record = [&](Result<AsyncLease> r) { said.push_back(r.ok() ? "ok" : r.error().to_string()); };
  c.lock("r", {.reentrant = true}, record);
  c.lock("r", {.extend_at = 1.5}, record);
  CHECK(said.empty());
  AsyncLease empty;
  std::optional<Errc> empty_code;
  empty.release([&](Result<ReleaseResult> r) { empty_code = r.ok() ? Errc::internal : r.error().code; });
  CHECK(empty_code == Errc::not_held);
  c.close();
  c.lock("r", {}, record);  // after close
  bed.run();
  REQUIRE(said.size() == 3);
  INFO(said[0] << " | " << said[1] << " | " << said[2]);
  CHECK(said[0].find("redlock.invalid_argument") != std::string::npos);
  CHECK(said[0].find("reentrant") != std::string::npos);
  CHECK(said[1].find("extend_at") != std::string::npos);
  CHECK(said[2].find("redlock.closed") != std::string::npos);
  CHECK(bed.closed_clean());
}

TEST_CASE("AsyncClient::lock: a lease held when the client closes is lost, and its release reports closed") {
  RedisGroup group(3);
  AsyncBed bed(group);
  AsyncClient& c = *bed.client;
  std::optional<AsyncLease> lease;
  std::optional<Error> lost;
  std::optional<Errc> release_code;
  LeaseOptions opts{.acquire = {.ttl = 5000ms}};
  opts.on_lost = [&](const Error& e) { lost = e; };
  c.lock("closing", std::move(opts), [&](Result<AsyncLease> r) {
    REQUIRE(r.ok());
    lease.emplace(std::move(*r));
    c.close([&] {
      lease->release([&](Result<ReleaseResult> rel) { release_code = rel.ok() ? Errc::internal : rel.error().code; });
    });
  });
  bed.run();
  REQUIRE(lost.has_value());
  CHECK(lost->message.find("client was closed") != std::string::npos);
  CHECK(release_code == Errc::closed);
  CHECK(bed.closed_clean());
}

TEST_CASE("batched extensions: 120 leases share script calls, and a lease whose key another value took is lost alone") {
  RedisGroup group(3);
  auto holder = client_for(group, [](Options& o) { o.extend_batch_window = 20ms; });
  auto evalsha_calls = [&](std::size_t i) { return command_calls(group[i], "evalsha"); };
  constexpr int leases_n = 120;
  std::vector<Lease> leases;
  std::atomic<int> lost_signals{0};
  for (int i = 0; i < leases_n; ++i) {
    LeaseOptions o{.acquire = {.ttl = short_ttl}};
    o.on_lost = [&](const Error&) { ++lost_signals; };
    auto lease = holder->lock("many-" + std::to_string(i), o);
    REQUIRE(lease.ok());
    leases.push_back(std::move(*lease));
  }
  const long long calls_before = evalsha_calls(0);
  int extensions_before = 0;
  for (const Lease& l : leases) extensions_before += l.extensions();

  // Lease 7's key now holds another value on two of the three masters: no
  // majority can extend it any more; the batches it shares must say so for
  // it alone.
  const std::string key7 = "redlock:{many-7}:lock";
  for (std::size_t i = 0; i < 2; ++i) REQUIRE(group[i].command({"SET", key7, "someone-else", "PX", "60000"}).str == "OK");
  const auto until = Clock::now() + 4 * short_ttl;
  while (Clock::now() < until && !leases[7].lost()) std::this_thread::sleep_for(5ms);
  // The others keep being extended for a while longer.
  const auto hold_end = Clock::now() + 3 * short_ttl;
  while (Clock::now() < hold_end) std::this_thread::sleep_for(10ms);

  REQUIRE(leases[7].lost().has_value());
  CHECK(leases[7].lost()->code == Errc::lost);
  INFO(leases[7].lost()->message);
  CHECK(lost_signals.load() == 1);
  int extensions = 0;
  for (int i = 0; i < leases_n; ++i) {
    if (i == 7) continue;
    CHECK(leases[i].valid());
    CHECK_FALSE(leases[i].lost().has_value());
    extensions += leases[i].extensions();
  }
  extensions -= extensions_before;
  const long long calls = evalsha_calls(0) - calls_before;
  INFO("extensions " << extensions << ", EVALSHA calls on master 0 " << calls);
  CHECK(extensions >= 5 * (leases_n - 1));  // ~ every 95 ms for 4–7 TTLs of 300 ms
  // Each master saw one call per batch, not one per lease: at least four
  // leases per call on average (about 20 with a 20 ms window and one
  // extension per lease every ~95 ms).
  CHECK(calls * 4 <= extensions);
  // The key another value took is left as it is.
  CHECK(group[0].command({"GET", key7}).str == "someone-else");
  for (Lease& l : leases) (void)l.release();
}
