// floor.cpp — the raw floor of the redlock benchmarks (bench/CONTRACT.md).
//
// What this machine can do for one parallel round trip to N masters, with no
// library logic at all: one hiredis async connection per master on one libuv
// loop (a minimal poll adapter of our own, see below), and per pair
//
//   acquire  SET key token NX PX 10000            to all N at once,
//            decided at the first majority of +OK (or when a majority can no
//            longer say yes); later replies are ignored when they come;
//   release  EVALSHA <release sha> 1 key token channel   to all N at once, decided at
//            the first majority of :1 (same rule).
//
// The release script is the library's own (GET, compare, DEL, PUBLISH on
// the channel in ARGV[2]), loaded once per connection at start (SCRIPT LOAD).
// The poll adapter flushes writes once per loop turn, as the library's does.
//
// No per-node deadline, no validity/drift arithmetic, no retry, no rollback of
// failed attempts, no reconnect: a node that disconnects stays gone (the run
// fails once fewer than a majority are connected). Tokens are 128-bit hex
// from a seeded mt19937_64 (not getrandom per call).
//
// Scenarios:
//   latency     one worker, acquire + release of ONE key in a loop for S s;
//   throughput  C workers (default 64), each on its own key, all pipelined on
//               the same N connections, for S s; cpu_us_per_op from getrusage
//               (user + sys of this process over the run) / pairs;
//   handoff     unsupported: the floor has no way to wait for a held lock; a
//               handoff time would only measure whatever retry policy we
//               invented here, not a limit of the machine;
//   memory      unsupported: the floor keeps no per-lock state in the client
//               (a lock is a key on the masters), so there is nothing to
//               measure that would bound a library's per-lock memory.
//
// Settings: TTL 10000 ms; keys "bench:floor:<pid>-<random>:<worker>" so runs
// never share keys. Only hiredis API present in both 0.14 and 1.x is used.
//
// Output: exactly one JSON line on stdout (bench/CONTRACT.md); diagnostics on
// stderr. Exit 0 on success, 1 when the nodes are unreachable or the run
// failed, 2 on a usage error.

#include <CLI/CLI.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "run_seconds.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The library's release script, word for word (src/scripts.hpp): the same
// server work per release, wake-up PUBLISH included.
constexpr const char* kReleaseScript =
    "\nif redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  if ARGV[2] then redis.call('PUBLISH', ARGV[2], ARGV[1]) end\n"
    "  return 1\n"
    "end\n"
    "return 0\n";
constexpr const char* kTtlMs = "10000";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "floor: %s\nRun with --help for more information.\n", msg.c_str());
  std::exit(2);
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "floor: %s\n", msg.c_str());
  std::exit(1);
}

struct Endpoint {
  std::string host;
  int port = 0;
};

bool is_loopback_host(const std::string& h) {
  if (h == "localhost") return true;
  unsigned a, b, c, d;
  char tail;
  if (std::sscanf(h.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return false;
  return a == 127 && b < 256 && c < 256 && d < 256;
}

// shown: a node URL as an error may show it — without what stands before
// an '@' (the floor takes no password, but one given by mistake is never
// printed).
std::string shown(const std::string& url) {
  const auto at = url.rfind('@');
  if (at == std::string::npos) return url;
  const auto scheme = url.find("://");
  return (scheme != std::string::npos && scheme < at ? url.substr(0, scheme + 3) : std::string()) + "***@" +
         url.substr(at + 1);
}

Endpoint parse_url(const std::string& url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) usage_error("node URL must be redis://127.0.0.1:PORT, got '" + shown(url) + "'");
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  auto colon = rest.rfind(':');
  Endpoint e;
  e.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  std::string port = colon == std::string::npos ? "6379" : rest.substr(colon + 1);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 1 || p > 65535) usage_error("bad port in '" + shown(url) + "'");
  if (!is_loopback_host(e.host)) usage_error("loopback only: '" + shown(url) + "'");
  if (e.host == "localhost") e.host = "127.0.0.1";
  e.port = static_cast<int>(p);
  return e;
}

// ---- a minimal hiredis <-> libuv poll adapter ---------------------------------
// hiredis 0.14's adapters/libuv.h drops poll errors (status < 0), so a refused
// connect would hang. Here an error is handed to hiredis, which then reads
// SO_ERROR (connecting) or the failing read (connected) and reports it.
//
// The floor gets every I/O economy the library has, so that it stays a floor:
// the poll handle is touched only when its events change, and on a connected
// context a command does not ask for writability (an epoll_ctl on and another
// off per command) but starts a prepare handle, which writes hiredis's buffer
// right before the loop polls — one write() per connection per loop turn.
// Only a socket that takes less than the whole buffer waits for writability.
struct PollAdapter {
  uv_poll_t handle{};
  uv_prepare_t flush{};
  redisAsyncContext* ac = nullptr;
  int events = 0;
  int open_handles = 2;
  bool flush_armed = false;
  bool flushing = false;
};

void poll_cb(uv_poll_t* h, int status, int events) {
  auto* p = static_cast<PollAdapter*>(h->data);
  if (p->ac == nullptr) return;
  if (status < 0) {
    if (!(p->ac->c.flags & REDIS_CONNECTED)) {
      redisAsyncHandleWrite(p->ac);
    } else {
      redisAsyncHandleRead(p->ac);
    }
    return;
  }
  if (p->ac != nullptr && (events & UV_READABLE)) redisAsyncHandleRead(p->ac);
  if (p->ac != nullptr && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
}

void poll_set(PollAdapter* p, int events) {
  if (events == p->events) return;
  p->events = events;
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, poll_cb);
  } else {
    uv_poll_stop(&p->handle);
  }
}

void flush_cb(uv_prepare_t* h) {
  auto* p = static_cast<PollAdapter*>(h->data);
  uv_prepare_stop(h);
  p->flush_armed = false;
  if (p->ac == nullptr) return;
  p->flushing = true;
  redisAsyncHandleWrite(p->ac);  // calls delWrite (all written) or addWrite (the rest)
  p->flushing = false;
}

void ev_add_read(void* d) { auto* p = static_cast<PollAdapter*>(d); poll_set(p, p->events | UV_READABLE); }
void ev_del_read(void* d) { auto* p = static_cast<PollAdapter*>(d); poll_set(p, p->events & ~UV_READABLE); }
void ev_add_write(void* d) {
  auto* p = static_cast<PollAdapter*>(d);
  if (p->flushing || (p->events & UV_WRITABLE) || p->ac == nullptr || !(p->ac->c.flags & REDIS_CONNECTED)) {
    poll_set(p, p->events | UV_WRITABLE);  // connecting, or a full socket
  } else if (!p->flush_armed) {
    p->flush_armed = true;
    uv_prepare_start(&p->flush, flush_cb);
  }
}
void ev_del_write(void* d) { auto* p = static_cast<PollAdapter*>(d); poll_set(p, p->events & ~UV_WRITABLE); }
void ev_cleanup(void* d) {
  auto* p = static_cast<PollAdapter*>(d);
  p->ac = nullptr;
  auto closed = [](uv_handle_t* h) {
    auto* adapter = static_cast<PollAdapter*>(h->data);
    if (--adapter->open_handles == 0) delete adapter;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&p->flush), closed);
}

bool attach(redisAsyncContext* ac, uv_loop_t* loop) {
  auto* p = new PollAdapter;
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  uv_prepare_init(loop, &p->flush);
  p->handle.data = p;
  p->flush.data = p;
  p->ac = ac;
  ac->ev.data = p;
  ac->ev.addRead = ev_add_read;
  ac->ev.delRead = ev_del_read;
  ac->ev.addWrite = ev_add_write;
  ac->ev.delWrite = ev_del_write;
  ac->ev.cleanup = ev_cleanup;
  return true;
}

// ---- the bench ------------------------------------------------------------------

struct Node {
  Endpoint ep;
  redisAsyncContext* ac = nullptr;  // nullptr once disconnected (hiredis frees it)
  bool connected = false;
  std::string error;
};

struct Worker;

enum class Kind { script_load, acquire, release };

// One command fanned out to every node. Lives until every node has answered
// (or its callback ran with NULL at teardown), whatever was decided before.
struct Op {
  Kind kind;
  Worker* worker = nullptr;  // nullptr for script_load
  int outstanding = 0;       // callbacks still to come
  int yes = 0;
  int no = 0;
  bool decided = false;
  bool success = false;
};

struct Worker {
  int index = 0;
  std::string key;
  std::string channel;  // the release's wake-up channel, like the library's
  std::string token;
  Clock::time_point t0;
  bool acquired_ok = false;
  bool busy = false;
};

struct Bench {
  uv_loop_t* loop = nullptr;
  std::vector<Node> nodes;
  int quorum = 0;
  std::string sha;
  int scripts_loaded = 0;
  bool startup_done = false;
  bool stopping = false;

  std::vector<std::unique_ptr<Worker>> workers;
  int busy_workers = 0;
  Clock::time_point start, deadline, end;
  std::vector<uint32_t> samples;
  uint64_t errors = 0;
  std::mt19937_64 rng{std::random_device{}()};
  std::string fatal;
};

Bench g;

void decide(Op* op);
void start_pair(Worker* w);

int alive_nodes() {
  int n = 0;
  for (auto& node : g.nodes) n += node.ac != nullptr ? 1 : 0;
  return n;
}

void abort_run(const std::string& why) {
  if (g.fatal.empty()) g.fatal = why;
  g.stopping = true;
  uv_stop(g.loop);
}

void on_connect(const redisAsyncContext* ac, int status) {
  auto* node = static_cast<Node*>(ac->data);
  if (status != REDIS_OK) {
    node->error = ac->errstr;
    node->ac = nullptr;  // hiredis frees the context after this callback
    std::fprintf(stderr, "floor: %s:%d: connect failed: %s\n", node->ep.host.c_str(), node->ep.port,
                 node->error.c_str());
    if (alive_nodes() < g.quorum) abort_run("fewer than a majority of the nodes are reachable");
    return;
  }
  node->connected = true;
}

void on_disconnect(const redisAsyncContext* ac, int status) {
  auto* node = static_cast<Node*>(ac->data);
  node->ac = nullptr;
  if (g.stopping) return;
  node->error = status == REDIS_OK ? "disconnected" : ac->errstr;
  std::fprintf(stderr, "floor: %s:%d: connection lost: %s\n", node->ep.host.c_str(), node->ep.port,
               node->error.c_str());
  if (alive_nodes() < g.quorum) abort_run("fewer than a majority of the nodes are connected");
}

bool reply_is_yes(Kind kind, const redisReply* r) {
  if (r == nullptr) return false;
  switch (kind) {
    case Kind::script_load:
      return r->type == REDIS_REPLY_STRING;
    case Kind::acquire:
      return r->type == REDIS_REPLY_STATUS && r->len == 2 && std::memcmp(r->str, "OK", 2) == 0;
    case Kind::release:
      return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }
  return false;
}

void on_reply(redisAsyncContext*, void* r, void* privdata) {
  auto* op = static_cast<Op*>(privdata);
  auto* reply = static_cast<redisReply*>(r);
  bool yes = reply_is_yes(op->kind, reply);
  if (op->kind == Kind::script_load && yes) {
    std::string sha(reply->str, reply->len);
    if (g.sha.empty()) g.sha = sha;
    else if (g.sha != sha) abort_run("SCRIPT LOAD returned different digests");
  } else if (op->kind == Kind::script_load && reply != nullptr) {
    std::fprintf(stderr, "floor: SCRIPT LOAD failed: %.*s\n", static_cast<int>(reply->len), reply->str);
  }
  if (yes) ++op->yes; else ++op->no;
  --op->outstanding;
  if (!op->decided) decide(op);
  if (op->outstanding == 0) delete op;
}

// Sends one command to every connected node; a node that is gone counts as a
// "no" at once (never enough to decide: the run aborts below a majority).
void fan_out(Op* op, int argc, const char** argv, const size_t* argvlen) {
  int failed = 0;
  op->outstanding = static_cast<int>(g.nodes.size());
  for (auto& node : g.nodes) {
    if (node.ac == nullptr ||
        redisAsyncCommandArgv(node.ac, on_reply, op, argc, argv, argvlen) != REDIS_OK) {
      ++failed;
    }
  }
  op->outstanding -= failed;
  op->no += failed;
  if (!op->decided) decide(op);
  if (op->outstanding == 0) delete op;
}

void new_token(Worker* w) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, static_cast<uint64_t>(g.rng()),
                static_cast<uint64_t>(g.rng()));
  w->token.assign(buf, 32);
}

void send_acquire(Worker* w) {
  auto* op = new Op{Kind::acquire, w};
  const char* argv[] = {"SET", w->key.c_str(), w->token.c_str(), "NX", "PX", kTtlMs};
  const size_t len[] = {3, w->key.size(), w->token.size(), 2, 2, std::strlen(kTtlMs)};
  fan_out(op, 6, argv, len);
}

void send_release(Worker* w) {
  auto* op = new Op{Kind::release, w};
  const char* argv[] = {"EVALSHA", g.sha.c_str(), "1", w->key.c_str(), w->token.c_str(), w->channel.c_str()};
  const size_t len[] = {7, g.sha.size(), 1, w->key.size(), w->token.size(), w->channel.size()};
  fan_out(op, 6, argv, len);
}

void start_pair(Worker* w) {
  w->busy = true;
  new_token(w);
  w->t0 = Clock::now();
  send_acquire(w);
}

void worker_idle(Worker* w) {
  w->busy = false;
  if (--g.busy_workers == 0) {
    g.end = Clock::now();
    g.stopping = true;
    uv_stop(g.loop);
  }
}

void decide(Op* op) {
  const int n = static_cast<int>(g.nodes.size());
  if (op->yes >= g.quorum) {
    op->decided = op->success = true;
  } else if (op->no > n - g.quorum) {
    op->decided = true;
  } else {
    return;
  }
  if (g.stopping && op->kind != Kind::script_load) return;  // teardown: callbacks with NULL
  switch (op->kind) {
    case Kind::script_load:
      if (!op->success) abort_run("SCRIPT LOAD did not succeed on a majority");
      g.startup_done = true;
      uv_stop(g.loop);
      return;
    case Kind::acquire:
      op->worker->acquired_ok = op->success;
      send_release(op->worker);
      return;
    case Kind::release: {
      Worker* w = op->worker;
      auto now = Clock::now();
      if (!w->acquired_ok || !op->success) {
        ++g.errors;
      } else {
        g.samples.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now - w->t0).count()));
      }
      if (now < g.deadline) {
        start_pair(w);
      } else {
        worker_idle(w);
      }
      return;
    }
  }
}

uint64_t percentile(const std::vector<uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void teardown() {
  g.stopping = true;
  for (auto& node : g.nodes) {
    if (node.ac != nullptr) {
      redisAsyncContext* ac = node.ac;
      redisAsyncFree(ac);  // pending callbacks run with NULL; on_disconnect clears node.ac
      node.ac = nullptr;
    }
  }
  uv_run(g.loop, UV_RUN_DEFAULT);  // close callbacks of the poll handles
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  std::string nodes_arg, scenario, samples_path, ignored_locks;
  double seconds = 3.0;
  long concurrency = 64;
  CLI::App app{"floor: the raw floor of the benchmarks, hiredis + libuv and no library logic; prints one JSON line "
               "(bench/CONTRACT.md).",
               "floor"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--nodes", nodes_arg, "The masters")->type_name("redis://127.0.0.1:PORT,...")->required();
  app.add_option("--scenario", scenario, "What to measure (handoff, memory: reported as unsupported)")
      ->type_name("NAME")
      ->required()
      ->check(CLI::IsMember({"latency", "throughput", "handoff", "memory"}));
  app.add_option("--seconds", seconds, "Measure this long")
      ->type_name("S")
      ->check(bench::run_seconds(0, 3600, true))
      ->capture_default_str();
  app.add_option("--concurrency", concurrency, "throughput: workers, each on its own key")
      ->type_name("C")
      ->check(CLI::Range(1L, 100000L))
      ->capture_default_str();
  app.add_option("--samples", samples_path, "Write every sample (µs) here, one a line")->type_name("FILE");
  app.add_option("--locks", ignored_locks, "Ignored: the floor has no memory scenario")->type_name("N");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fputs("floor: ", stderr);
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (scenario == "handoff") {
    std::printf("{\"system\":\"floor\",\"scenario\":\"handoff\",\"unsupported\":\"the floor has no way to "
                "wait for a held lock; a handoff time would only measure the retry policy invented for it\"}\n");
    return 0;
  }
  if (scenario == "memory") {
    std::printf("{\"system\":\"floor\",\"scenario\":\"memory\",\"unsupported\":\"the floor keeps no "
                "per-lock state in the client (a lock is only a key on the masters)\"}\n");
    return 0;
  }
  if (scenario == "latency") concurrency = 1;

  size_t pos = 0;
  while (pos <= nodes_arg.size()) {
    auto comma = nodes_arg.find(',', pos);
    if (comma == std::string::npos) comma = nodes_arg.size();
    std::string url = nodes_arg.substr(pos, comma - pos);
    if (!url.empty()) {
      Node node;
      node.ep = parse_url(url);
      g.nodes.push_back(std::move(node));
    }
    pos = comma + 1;
  }
  if (g.nodes.empty()) usage_error("--nodes names no node");
  g.quorum = static_cast<int>(g.nodes.size()) / 2 + 1;

  uv_loop_t loop;
  uv_loop_init(&loop);
  g.loop = &loop;

  // Connect every node, then SCRIPT LOAD on each (queued behind the connect).
  for (auto& node : g.nodes) {
    redisAsyncContext* ac = redisAsyncConnect(node.ep.host.c_str(), node.ep.port);
    if (ac == nullptr) fail("out of memory");
    if (ac->err) {
      std::fprintf(stderr, "floor: %s:%d: %s\n", node.ep.host.c_str(), node.ep.port, ac->errstr);
      redisAsyncFree(ac);
      continue;
    }
    ac->data = &node;
    if (!attach(ac, &loop)) fail("uv_poll_init failed");
    node.ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
  }
  if (alive_nodes() < g.quorum) fail("fewer than a majority of the nodes are reachable");
  {
    auto* op = new Op{Kind::script_load};
    const char* av[] = {"SCRIPT", "LOAD", kReleaseScript};
    const size_t len[] = {6, 4, std::strlen(kReleaseScript)};
    fan_out(op, 3, av, len);
  }
  uv_timer_t startup_timer;
  uv_timer_init(&loop, &startup_timer);
  uv_timer_start(&startup_timer, [](uv_timer_t*) { abort_run("no majority answered SCRIPT LOAD within 5 s"); },
                 5000, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_timer_stop(&startup_timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&startup_timer), nullptr);
  if (!g.fatal.empty() || !g.startup_done) {
    std::string why = g.fatal.empty() ? "startup failed" : g.fatal;
    teardown();
    fail(why + " (nodes: " + nodes_arg + ")");
  }

  // The run.
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "bench:floor:%d-%08" PRIx64 ":", static_cast<int>(getpid()),
                static_cast<uint64_t>(g.rng() & 0xffffffffu));
  for (long i = 0; i < concurrency; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = static_cast<int>(i);
    w->key = std::string(prefix) + std::to_string(i);
    w->channel = w->key + ":released";
    g.workers.push_back(std::move(w));
  }
  g.samples.reserve(1 << 20);
  double cpu0 = cpu_seconds();
  g.start = Clock::now();
  g.deadline = g.start + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  g.busy_workers = static_cast<int>(g.workers.size());
  for (auto& w : g.workers) start_pair(w.get());
  uv_run(&loop, UV_RUN_DEFAULT);
  double cpu1 = cpu_seconds();
  std::string fatal = g.fatal;
  teardown();
  uv_loop_close(&loop);
  if (!fatal.empty()) fail("run failed: " + fatal);

  double elapsed = std::chrono::duration<double>(g.end - g.start).count();
  uint64_t ops = g.samples.size();
  std::vector<uint32_t> sorted = g.samples;
  std::sort(sorted.begin(), sorted.end());

  if (!samples_path.empty()) {
    FILE* f = std::fopen(samples_path.c_str(), "w");
    if (f == nullptr) fail("cannot write " + samples_path + ": " + std::strerror(errno));
    for (uint32_t s : g.samples) std::fprintf(f, "%u\n", s);
    std::fclose(f);
  }

  std::string out = "{\"system\":\"floor\",\"scenario\":\"" + scenario + "\"";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                ",\"ops\":%" PRIu64 ",\"seconds\":%.3f,\"ops_per_s\":%.1f,\"p50_us\":%" PRIu64
                ",\"p90_us\":%" PRIu64 ",\"p99_us\":%" PRIu64 ",\"p999_us\":%" PRIu64,
                ops, elapsed, elapsed > 0 ? static_cast<double>(ops) / elapsed : 0.0, percentile(sorted, 0.50),
                percentile(sorted, 0.90), percentile(sorted, 0.99), percentile(sorted, 0.999));
  out += buf;
  if (scenario == "throughput") {
    std::snprintf(buf, sizeof buf, ",\"concurrency\":%ld,\"cpu_us_per_op\":%.3f", concurrency,
                  ops > 0 ? (cpu1 - cpu0) * 1e6 / static_cast<double>(ops) : 0.0);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ",\"errors\":%" PRIu64 "}", g.errors);
  out += buf;
  std::puts(out.c_str());
  if (ops == 0) {
    std::fprintf(stderr, "floor: no pair completed\n");
    return 1;
  }
  return 0;
}
