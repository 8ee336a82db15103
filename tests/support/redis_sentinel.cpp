// redis_sentinel.cpp — see redis_sentinel.hpp. Every wait polls a server's
// or a sentinel's own answer every 50 ms under a bound; no blind sleeps.
#include "redis_sentinel.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace redlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kStartAttempts = 5;        // a new port per attempt (lost port races)
constexpr auto kPollInterval = 50ms;
constexpr auto kStartBound = 10s;        // one sentinel answering
constexpr auto kSyncBound = 10s;         // a replica in sync
constexpr auto kSentinelsBound = 15s;    // sentinels agreeing (hellos every 2 s)
constexpr auto kFailoverBound = 20s;
constexpr auto kProbeTimeout = 200ms;    // readiness probe

// ---- replies -------------------------------------------------------------------

// info_field: one field of server s's INFO section; an error reply throws.
std::string info_field(const RedisServer& s, const std::string& section, const std::string& name) {
  const Reply r = s.command({"INFO", section});
  if (r.type == REDIS_REPLY_ERROR) throw std::runtime_error(s.address() + ": INFO " + section + ": " + r.str);
  return info_field(r, name);
}

// field: a value of a flat key/value array (SENTINEL replicas' entries).
std::string field(const Reply& entry, std::string_view key) {
  for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
    if (entry.elements[i].str == key) return entry.elements[i + 1].str;
  }
  return {};
}

// ---- text and waits ------------------------------------------------------------

// conf_quote: a sentinel.conf argument (sdssplitargs: "…" with \" \\ \xHH).
std::string conf_quote(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20 || ch >= 0x7f) {
      out += {'\\', 'x', hex[ch >> 4], hex[ch & 15]};
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

// await: poll_until (redis_server.hpp) every kPollInterval, its errors saying "SentinelBed".
void await(const std::string& what, Clock::time_point deadline, const std::function<std::string()>& unmet) {
  poll_until("SentinelBed", what, deadline, unmet, kPollInterval);
}

}  // namespace

// ---- one sentinel ----------------------------------------------------------------

class SentinelBed::Sentinel {
 public:
  Sentinel(const SentinelOptions& opts, int primary_port) : password_(opts.sentinel_password) {
    dir_ = make_temp_dir("redlock-sentinel");
    try {
      start(opts, primary_port);
    } catch (...) {
      process_.reset();
      std::error_code ec;
      fs::remove_all(dir_, ec);
      throw;
    }
  }
  ~Sentinel() {
    process_.reset();  // SIGKILL by pid, reaped
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  bool running() const { return process_ && process_->running(); }
  void kill() { process_.reset(); }
  std::string address() const { return "sentinel 127.0.0.1:" + std::to_string(port_); }

  Reply command(const std::vector<std::string>& argv) const {
    if (!process_) throw std::runtime_error(address() + ": killed");
    return command_at(port_, "", password_, argv);
  }

 private:
  std::string conf_text(const SentinelOptions& opts, int primary_port) const {
    const std::string name = conf_quote(opts.name);
    std::string c;
    c += "port " + std::to_string(port_) + "\n";
    c += "bind 127.0.0.1\n";
    c += "dir " + conf_quote(dir_) + "\n";
    c += "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(primary_port) + " " +
         std::to_string(opts.quorum) + "\n";
    c += "sentinel down-after-milliseconds " + name + " " + std::to_string(opts.down_after.count()) + "\n";
    c += "sentinel failover-timeout " + name + " " + std::to_string(opts.failover_timeout.count()) + "\n";
    c += "sentinel resolve-hostnames no\n";
    // requirepass also authenticates this sentinel to the others (no sentinel-pass set).
    if (!opts.sentinel_password.empty()) c += "requirepass " + conf_quote(opts.sentinel_password) + "\n";
    if (!opts.data.password.empty()) c += "sentinel auth-pass " + name + " " + conf_quote(opts.data.password) + "\n";
    return c;
  }

  // start: a lost port race (bind failed) is retried on another port.
  void start(const SentinelOptions& opts, int primary_port) {
    const std::string exe = redis_server_binary();
    const std::string conf = dir_ + "/sentinel.conf";
    const std::string log = dir_ + "/sentinel.log";
    std::string last_error;
    for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
      port_ = free_port();
      {
        std::ofstream out(conf, std::ios::trunc);
        out << conf_text(opts, primary_port);
        if (!out.flush()) throw std::runtime_error("SentinelBed: cannot write " + conf);
      }
      std::error_code ec;
      fs::remove(log, ec);  // a retry's log starts empty
      support::ProcessOptions po;
      po.argv = {exe, conf, "--sentinel"};
      po.out = support::Stream::file(log);  // no logfile set: the log goes to stdout
      po.err = support::Stream::file(log);
      process_ = std::make_unique<support::Process>(std::move(po));

      // Ready once our pid answers INFO as a sentinel; an exit ends the wait.
      const auto deadline = Clock::now() + kStartBound;
      std::string probe;
      std::optional<int> exit_code;
      bool ready = false;
      while (!ready && Clock::now() < deadline) {
        try {
          const Reply r = command_at(port_, "", password_, {"INFO", "server"}, kProbeTimeout);
          if (r.type != REDIS_REPLY_STRING) {
            probe = "INFO: " + reply_text(r);
          } else if (info_field(r, "process_id") != std::to_string(pid())) {
            probe = "port answered by another process";
          } else if (info_field(r, "redis_mode") != "sentinel") {
            probe = "redis_mode is " + info_field(r, "redis_mode");
          } else {
            ready = true;
          }
        } catch (const std::runtime_error& e) {
          probe = e.what();
        }
        if (!ready && (exit_code = process_->wait(kPollInterval))) break;
      }
      if (ready) {
        if (opts.quick_periods) debug_periods();
        return;
      }
      const std::string log_text = read_file_from(log);
      process_.reset();
      if (!exit_code)
        throw std::runtime_error(address() + ": not ready after 10 s (" + probe + "); log tail:\n" + tail_lines(log_text));
      last_error = address() + ": redis-server --sentinel " + exit_text(*exit_code) + " during start; log tail:\n" +
                   tail_lines(log_text);
      if (log_text.find("Address already in use") == std::string::npos) break;  // only a lost port race is retried
    }
    throw std::runtime_error(last_error);
  }

  // debug_periods: SENTINEL DEBUG (7.0+; runtime only, not in the conf).
  void debug_periods() const {
    const Reply r = command({"SENTINEL", "DEBUG", "publish-period", "100", "info-period", "500", "ask-period", "250"});
    if (r.type == REDIS_REPLY_ERROR) throw std::runtime_error(address() + ": SENTINEL DEBUG: " + r.str);
  }

  std::string password_;
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<support::Process> process_;  // null once killed
};

// ---- SentinelBed ------------------------------------------------------------------

SentinelBed::SentinelBed(SentinelOptions opts) : opts_(std::move(opts)) {
  if (opts_.sentinels < 1 || opts_.sentinels > 3) throw std::invalid_argument("SentinelBed: sentinels must be 1..3");
  if (opts_.quorum < 1 || static_cast<std::size_t>(opts_.quorum) > opts_.sentinels)
    throw std::invalid_argument("SentinelBed: quorum must be 1..sentinels");
  if (opts_.name.empty()) throw std::invalid_argument("SentinelBed: empty master name");

  ServerOptions data = opts_.data;
  // 7.0 waits 5 s before a diskless sync by default; a demoted primary
  // authenticates to the new one with masterauth.
  data.extra_args.insert(data.extra_args.end(), {"--repl-diskless-sync-delay", "0"});
  if (!data.password.empty()) data.extra_args.insert(data.extra_args.end(), {"--masterauth", data.password});
  servers_.push_back(std::make_unique<RedisServer>(data));
  servers_.push_back(std::make_unique<RedisServer>(data));
  const Reply r = server(1).command({"REPLICAOF", "127.0.0.1", std::to_string(server(0).port())});
  if (r.type == REDIS_REPLY_ERROR) throw std::runtime_error("SentinelBed: " + server(1).address() + ": REPLICAOF: " + r.str);
  await_replica_in_sync(1, 0, Clock::now() + kSyncBound);

  for (std::size_t i = 0; i < opts_.sentinels; ++i)
    sentinels_.push_back(std::make_unique<Sentinel>(opts_, server(0).port()));
  await_sentinels(0, 1, true, Clock::now() + kSentinelsBound);
}

SentinelBed::~SentinelBed() {
  sentinels_.clear();  // first, so that none reconfigures a server being killed
  servers_.clear();
}

RedisServer& SentinelBed::server(std::size_t i) { return *servers_.at(i); }
std::size_t SentinelBed::sentinels() const { return sentinels_.size(); }
int SentinelBed::sentinel_port(std::size_t i) const { return sentinels_.at(i)->port(); }
pid_t SentinelBed::sentinel_pid(std::size_t i) const { return sentinels_.at(i)->pid(); }
void SentinelBed::kill_sentinel(std::size_t i) { sentinels_.at(i)->kill(); }

std::string SentinelBed::url() const {
  std::string out = "redis+sentinel://";
  if (!opts_.data.password.empty()) out += ":" + percent_encode(opts_.data.password) + "@";
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    out += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinels_[i]->port());
  out += "/" + percent_encode(opts_.name);
  if (!opts_.sentinel_password.empty()) out += "?sentinel_password=" + percent_encode(opts_.sentinel_password);
  return out;
}

Reply SentinelBed::sentinel_command(std::size_t i, const std::vector<std::string>& argv) const {
  return sentinels_.at(i)->command(argv);
}

std::size_t SentinelBed::first_live_sentinel() const {
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (sentinels_[i]->running()) return i;
  }
  throw std::runtime_error("SentinelBed: every sentinel was killed");
}

std::size_t SentinelBed::index_of_port(int port) const {
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->port() == port) return i;
  }
  throw std::runtime_error("SentinelBed: port " + std::to_string(port) + " is none of the bed's servers");
}

std::size_t SentinelBed::primary() const {
  const Sentinel& s = *sentinels_[first_live_sentinel()];
  const Reply r = s.command({"SENTINEL", "get-master-addr-by-name", opts_.name});
  if (r.type != REDIS_REPLY_ARRAY || r.elements.size() != 2)
    throw std::runtime_error(s.address() + ": SENTINEL get-master-addr-by-name " + opts_.name + ": " + reply_text(r));
  return index_of_port(std::atoi(r.elements[1].str.c_str()));
}

void SentinelBed::await_replica_in_sync(std::size_t replica, std::size_t primary, Deadline deadline) {
  RedisServer& r = server(replica);
  RedisServer& p = server(primary);
  const std::string what = r.address() + " replica of " + p.address();
  const std::string primary_port = std::to_string(p.port());
  await(what + " (master_link_status:up)", deadline, [&]() -> std::string {
    const Reply info = r.command({"INFO", "replication"});
    if (info_field(info, "role") == "slave" && info_field(info, "master_port") == primary_port &&
        info_field(info, "master_link_status") == "up")
      return {};
    return "role:" + info_field(info, "role") + " master_port:" + info_field(info, "master_port") +
           " master_link_status:" + info_field(info, "master_link_status");
  });
  // After a diskless sync 7.0 streams nothing to a replica before its first
  // ACK (up to 1 s): a message published now must have reached it.
  p.command({"PUBLISH", "redlock-test:sentinel-bed", "synced"});
  const long long sent = std::atoll(info_field(p, "replication", "master_repl_offset").c_str());
  if (sent <= 0) throw std::runtime_error("SentinelBed: " + p.address() + ": master_repl_offset " + std::to_string(sent));
  await(what + " (slave_repl_offset >= " + std::to_string(sent) + ")", deadline, [&]() -> std::string {
    const std::string got = info_field(r, "replication", "slave_repl_offset");
    return std::atoll(got.c_str()) >= sent ? std::string() : "slave_repl_offset:" + got;
  });
}

// await_sentinels: every live sentinel names `primary`, lists `replica` as a
// connected replica (heard_from_replica: whose INFO said it is linked to
// `primary`, so SENTINEL FAILOVER finds it a good candidate), and lists the
// other live sentinels, connected.
void SentinelBed::await_sentinels(std::size_t primary, std::size_t replica, bool heard_from_replica,
                                  Deadline deadline) {
  const std::string primary_port = std::to_string(server(primary).port());
  const std::string replica_port = std::to_string(server(replica).port());
  std::vector<std::string> live_ports;
  for (const auto& s : sentinels_) {
    if (s->running()) live_ports.push_back(std::to_string(s->port()));
  }
  const std::string what = "sentinels naming " + server(primary).address() + " with replica " + server(replica).address();
  await(what, deadline, [&]() -> std::string {
    for (const auto& s : sentinels_) {
      if (!s->running()) continue;
      const Reply addr = s->command({"SENTINEL", "get-master-addr-by-name", opts_.name});
      if (addr.type != REDIS_REPLY_ARRAY || addr.elements.size() != 2 || addr.elements[0].str != "127.0.0.1" ||
          addr.elements[1].str != primary_port)
        return s->address() + " names " + reply_text(addr);
      const Reply replicas = s->command({"SENTINEL", "replicas", opts_.name});
      const auto it = std::find_if(replicas.elements.begin(), replicas.elements.end(), [&](const Reply& e) {
        return field(e, "ip") == "127.0.0.1" && field(e, "port") == replica_port;
      });
      if (it == replicas.elements.end()) return s->address() + " replicas: " + reply_text(replicas);
      if (field(*it, "flags") != "slave") return s->address() + " replica flags " + field(*it, "flags");
      if (heard_from_replica &&
          (field(*it, "master-link-status") != "ok" || field(*it, "master-port") != primary_port))
        return s->address() + " replica master-link-status " + field(*it, "master-link-status") + " master-port " +
               field(*it, "master-port");
      if (live_ports.size() < 2) continue;
      const Reply others = s->command({"SENTINEL", "sentinels", opts_.name});
      for (const auto& port : live_ports) {
        if (port == std::to_string(s->port())) continue;
        // Connected ("sentinel", no "disconnected"): it can be asked for votes.
        const bool known = std::any_of(others.elements.begin(), others.elements.end(), [&](const Reply& e) {
          return field(e, "ip") == "127.0.0.1" && field(e, "port") == port && field(e, "flags") == "sentinel";
        });
        if (!known) return s->address() + " has no connected sentinel on port " + port + ": " + reply_text(others);
      }
    }
    return {};
  });
}

// unmet_named_everywhere: "" once every live sentinel names server
// `chosen` and it says role:master; else what is not so yet.
std::string SentinelBed::unmet_named_everywhere(std::size_t chosen) {
  const std::string port = std::to_string(server(chosen).port());
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    const Reply addr = s->command({"SENTINEL", "get-master-addr-by-name", opts_.name});
    if (addr.type != REDIS_REPLY_ARRAY || addr.elements.size() != 2 || addr.elements[1].str != port)
      return s->address() + " names " + reply_text(addr);
  }
  const std::string role = info_field(server(chosen), "replication", "role");
  return role == "master" ? std::string() : server(chosen).address() + " role:" + role;
}

std::size_t SentinelBed::fail_over() {
  const std::size_t from = primary();
  const std::size_t to = 1 - from;
  const Sentinel& s = *sentinels_[first_live_sentinel()];
  const Reply r = s.command({"SENTINEL", "FAILOVER", opts_.name});
  if (r.type == REDIS_REPLY_ERROR)
    throw std::runtime_error("SentinelBed: " + s.address() + ": SENTINEL FAILOVER " + opts_.name + ": " + r.str);
  const Deadline deadline = Clock::now() + kFailoverBound;
  await("fail_over: every sentinel naming " + server(to).address() + ", role:master", deadline,
        [&] { return unmet_named_everywhere(to); });

  RedisServer& old = server(from);
  const std::string new_port = std::to_string(server(to).port());
  if (opts_.demote_old_primary) {
    Reply demoted;
    try {
      if (info_field(old, "replication", "role") == "master") demoted = old.command({"REPLICAOF", "127.0.0.1", new_port});
    } catch (const std::runtime_error&) {
      // A sentinel demoting it at this moment kills normal clients (its
      // SLAVEOF comes with CLIENT KILL TYPE normal): the wait below tells.
    }
    if (demoted.type == REDIS_REPLY_ERROR)
      throw std::runtime_error("SentinelBed: " + old.address() + ": REPLICAOF: " + demoted.str);
  }
  await_replica_in_sync(from, to, deadline);
  await_sentinels(to, from, false, deadline);
  return to;
}

std::size_t SentinelBed::kill_primary() {
  const std::size_t from = primary();
  const std::size_t to = 1 - from;
  server(from).kill();
  await("kill_primary: every sentinel naming " + server(to).address() + ", role:master", Clock::now() + kFailoverBound,
        [&] { return unmet_named_everywhere(to); });
  return to;
}

void SentinelBed::rejoin(std::size_t i) {
  if (server(i).running()) throw std::runtime_error("SentinelBed: rejoin: " + server(i).address() + " is running");
  const std::size_t p = primary();
  server(i).restart(true);
  const Reply r = server(i).command({"REPLICAOF", "127.0.0.1", std::to_string(server(p).port())});
  if (r.type == REDIS_REPLY_ERROR) throw std::runtime_error("SentinelBed: " + server(i).address() + ": REPLICAOF: " + r.str);
  await_replica_in_sync(i, p, Clock::now() + kSyncBound);
  await_sentinels(p, i, false, Clock::now() + kSentinelsBound);
}

}  // namespace redlock::test
