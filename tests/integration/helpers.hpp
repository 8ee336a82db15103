// helpers.hpp — shared setup for the integration tests: a Client (or an
// AsyncClient on a private loop) over a RedisGroup, and small waits that
// poll a server-side condition with a bound instead of sleeping blindly.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <uv.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"
#include "redlock/redlock.hpp"

namespace redlock::test {

// config_for builds a Config over the given URLs; `tune` adjusts options.
// The servers of a test were all started moments ago, so restart quarantine
// is off unless a test turns it on: it would otherwise (rightly) refuse them.
// Locks carry their per-node outcomes (Options::node_outcomes): tests read them.
inline Config config_for(const std::vector<std::string>& urls, const std::function<void(Options&)>& tune = {}) {
  std::string list;
  for (const auto& u : urls) list += (list.empty() ? "" : ",") + u;
  auto nodes = parse_node_list(list);
  if (!nodes) throw std::runtime_error(nodes.error().to_string());
  Config config;
  config.nodes = *nodes;
  config.options.quarantine = false;
  config.options.node_outcomes = true;
  if (tune) tune(config.options);
  return config;
}

// client_for builds a Client over the given URLs (see config_for).
inline std::unique_ptr<Client> client_for(const std::vector<std::string>& urls,
                                          const std::function<void(Options&)>& tune = {}) {
  auto client = Client::create(config_for(urls, tune));
  if (!client) throw std::runtime_error(client.error().to_string());
  return std::move(*client);
}

inline std::unique_ptr<Client> client_for(const RedisGroup& group, const std::function<void(Options&)>& tune = {}) {
  return client_for(group.urls(), tune);
}

// clients_for: `n` Clients over the group, each tuned alike.
inline std::vector<std::unique_ptr<Client>> clients_for(const RedisGroup& group, std::size_t n,
                                                        const std::function<void(Options&)>& tune = {}) {
  std::vector<std::unique_ptr<Client>> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(client_for(group, tune));
  return out;
}

// AsyncBed — an AsyncClient (see config_for) on a private loop that the
// test runs itself.
struct AsyncBed {
  uv_loop_t loop;
  std::unique_ptr<AsyncClient> client;
  explicit AsyncBed(const RedisGroup& group, const std::function<void(Options&)>& tune = {}) {
    uv_loop_init(&loop);
    auto made = AsyncClient::create(&loop, config_for(group.urls(), tune));
    if (!made) throw std::runtime_error(made.error().to_string());
    client = std::move(*made);
  }
  AsyncBed(const AsyncBed&) = delete;
  AsyncBed& operator=(const AsyncBed&) = delete;
  void run() { uv_run(&loop, UV_RUN_DEFAULT); }
  // closed_clean: frees the client (closed by the test, its loop run to
  // the end) and closes the loop; true when no handle was left.
  bool closed_clean() {
    client.reset();
    return uv_loop_close(&loop) == 0;
  }
};

// shell_status runs `line` with sh (output discarded) and returns its exit
// status, -1 when it did not exit normally.
inline int shell_status(const std::string& line) {
  const int rc = std::system((line + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// eventually polls `cond` every 5 ms until it holds or `bound` passes.
inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds bound = std::chrono::milliseconds{3000}) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return cond();
}

// holding: how many masters of the group hold `token` in the lock key of
// `resource` (the default prefix).
inline std::size_t holding(RedisGroup& group, const std::string& resource, const std::string& token) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const auto reply = group[i].command({"GET", "redlock:{" + resource + "}:lock"});
    n += reply.type == REDIS_REPLY_STRING && reply.str == token ? 1 : 0;
  }
  return n;
}

// ready_everywhere: every one of the client's `n` masters has finished its
// handshake and answers (a PING each; quarantine off). A test that pauses
// masters after its first acquire needs it: that acquire was decided by a
// majority, and a master paused while still in its handshake holds the
// client's commands unwritten — they fail at the connect deadline instead
// of being run late (docs/design.md, "Nothing before the handshake").
inline bool ready_everywhere(Client& client, std::size_t n) {
  return eventually([&] {
    const Result<NodesReport> report = client.nodes();
    return report.ok() && report->usable() == n;
  });
}

// no_polling: polling so slow that a test's wait is over long before it
// would retry: only a notification (or the holder's TTL) can explain an
// acquisition.
inline void no_polling(Options& o) {
  using namespace std::chrono_literals;
  o.retry_delay = 60000ms;
  o.retry_jitter = 0ms;
  o.wake_safety_net = 60000ms;
}

// patient: a node timeout of 1 s, not 50 ms, for a client whose check needs
// every running master's answer (a loaded machine — CI, ASan — can take
// longer than 50 ms to answer, or to reload a flushed script). (The stall
// timeout must stay above it.)
inline void patient(Options& o) {
  o.node_timeout = std::chrono::milliseconds{1000};
  o.stall_timeout = std::chrono::milliseconds{3000};
}

// info_field: one field of `server`'s INFO `section` ("" when absent).
inline std::string info_field(const RedisServer& server, const std::string& section, const std::string& name) {
  const Reply info = server.command({"INFO", section});
  const std::string key = "\n" + name + ":";
  const std::size_t at = ("\n" + info.str).find(key);
  if (at == std::string::npos) return {};
  const std::size_t begin = at + key.size() - 1;
  return info.str.substr(begin, info.str.find_first_of("\r\n", begin) - begin);
}

// follow: make `replica` a replica of `primary`; true once it has synced
// and takes `primary`'s stream. After a diskless sync a primary streams
// nothing to a replica before its first acknowledgement (up to a second
// later), so until then a WAIT for it answers 0: a message published now
// (PUBLISH is replicated, and writes no key) must have reached it.
[[nodiscard]] inline bool follow(RedisServer& replica, const RedisServer& primary) {
  const std::chrono::milliseconds bound{10000};
  if (replica.command({"REPLICAOF", "127.0.0.1", std::to_string(primary.port())}).type == REDIS_REPLY_ERROR) return false;
  if (!eventually([&] { return info_field(replica, "replication", "master_link_status") == "up"; }, bound)) return false;
  primary.command({"PUBLISH", "redlock-test:follow", "synced"});
  const long long sent = std::strtoll(info_field(primary, "replication", "master_repl_offset").c_str(), nullptr, 10);
  return sent > 0 && eventually([&] {
    return std::strtoll(info_field(replica, "replication", "slave_repl_offset").c_str(), nullptr, 10) >= sent;
  }, bound);
}

// zcard_everywhere: the sorted set `key` has `n` members on every master.
inline bool zcard_everywhere(RedisGroup& group, const std::string& key, long long n) {
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (group[i].command({"ZCARD", key}).integer != n) return false;
  }
  return true;
}

// Readings — what a watch's callback was told, in order, awaited by the test.
struct Readings {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Result<LeaderStatus>> seen;

  LeaderWatchCallback callback() {
    return [this](const Result<LeaderStatus>& r) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(r);
      cv.notify_all();
    };
  }
  // next: the reading after the first `n` (waits up to `bound` for it).
  std::optional<Result<LeaderStatus>> next(std::size_t n, std::chrono::milliseconds bound = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, bound, [&] { return seen.size() > n; })) return std::nullopt;
    return seen[n];
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size();
  }
};

// zcard_on_majority: the sorted set `key` has `n` members on a majority of
// the masters. A fair waiter is queued only where it did not take the lock:
// a master that a holder's win went without (a late handshake on a loaded
// machine) has the lock free, and there the head takes it each round, and
// each round rolls it back (a minority).
inline bool zcard_on_majority(RedisGroup& group, const std::string& key, long long n) {
  std::size_t have = 0;
  for (std::size_t i = 0; i < group.size(); ++i) have += group[i].command({"ZCARD", key}).integer == n ? 1 : 0;
  return have > group.size() / 2;
}

// queued_everywhere: `n` waiters in the fair queue of `resource` on every
// master (src/keys.hpp: {prefix}{{resource}}:queue, a sorted set);
// permits_queued_everywhere: in the fair queue of the semaphore `resource`
// ({prefix}{{resource}}:permits:queue); permits_queued_on_majority: there,
// on a majority.
inline bool queued_everywhere(RedisGroup& group, const std::string& resource, long long n) {
  return zcard_everywhere(group, "redlock:{" + resource + "}:queue", n);
}
inline bool permits_queued_everywhere(RedisGroup& group, const std::string& resource, long long n) {
  return zcard_everywhere(group, "redlock:{" + resource + "}:permits:queue", n);
}
inline bool permits_queued_on_majority(RedisGroup& group, const std::string& resource, long long n) {
  return zcard_on_majority(group, "redlock:{" + resource + "}:permits:queue", n);
}

// subscribers counts the pub/sub subscribers of `channel` on a master.
inline long long subscribers(RedisServer& server, const std::string& channel) {
  const Reply r = server.command({"PUBSUB", "NUMSUB", channel});
  return r.elements.size() == 2 ? r.elements[1].integer : -1;
}

// listening: every master has a subscriber on `channel` — a release
// published from then on reaches the waiter (src/keys.hpp: a lock's
// channel is {prefix}{{resource}}:released).
inline bool listening(RedisGroup& group, const std::string& channel) {
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (subscribers(group[i], channel) < 1) return false;
  }
  return true;
}

// command_calls: how often `command` (lower case) ran on the server
// (INFO commandstats), the calls scripts make included.
inline long long command_calls(RedisServer& server, const std::string& command) {
  const std::string info = server.command({"INFO", "commandstats"}).str;
  const std::string field = "cmdstat_" + command + ":calls=";
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

inline std::size_t count_outcome(const std::vector<NodeOutcome>& nodes, Outcome o) {
  std::size_t n = 0;
  for (const auto& node : nodes) n += node.outcome == o ? 1 : 0;
  return n;
}

}  // namespace redlock::test
