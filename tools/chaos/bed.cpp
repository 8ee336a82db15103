// bed.cpp — masters, counter and fault intervals of one chaos scenario.
#include "bed.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "skewclock.hpp"

namespace redlock::chaos {

namespace {
std::string skew_file(const std::string& dir, std::size_t i) { return dir + "/skew-" + std::to_string(i); }

// The library's data-loss marker (docs/design.md §5): one per master, never
// a lock key. "redlock:*" does not match it today; the name is checked
// anyway, so a changed prefix or pattern cannot turn it into a leak.
constexpr std::string_view kMarkerKey = "redlock-marker";
}  // namespace

ChaosBed::ChaosBed(const BedOptions& options) {
  if (!options.skew_lib.empty()) {
    char tmpl[] = "/tmp/redlock-chaos-skew-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    skew_dir_ = tmpl;
  }
  if (options.tls) certs_ = std::make_unique<test::TestCerts>();
  for (std::size_t i = 0; i < options.nodes; ++i) {
    test::ServerOptions so;
    so.appendfsync_always = options.appendfsync_always;
    if (certs_ != nullptr) {
      tls_ports_.push_back(test::free_port());
      so.extra_args = certs_->server_args(tls_ports_.back(), false);
    }
    if (!skew_dir_.empty()) {
      skewclock::Control(skew_file(skew_dir_, i)).set(skewclock::Settings{});
      so.env = {{"LD_PRELOAD", options.skew_lib}, {"SKEWCLOCK_FILE", skew_file(skew_dir_, i)}};
    }
    masters_.push_back(std::make_unique<test::RedisServer>(so));
    if (!options.proxy_bin.empty()) {
      faultproxy::FaultProxyOptions po;
      po.binary = options.proxy_bin;
      po.target = certs_ != nullptr ? "127.0.0.1:" + std::to_string(tls_ports_.back()) : masters_.back()->address();
      po.listen = {"127.0.0.1:0", "127.0.0.2:0"};
      po.extra_args = {"--keep-in-flight"};
      proxies_.push_back(std::make_unique<faultproxy::FaultProxyProcess>(po));
    }
  }
  counter_ = std::make_unique<test::RedisServer>();
  last_touched_.assign(options.nodes, 0);
}

ChaosBed::~ChaosBed() {
  proxies_.clear();
  masters_.clear();  // stop the servers before their settings files go
  std::error_code ignored;
  if (!skew_dir_.empty()) std::filesystem::remove_all(skew_dir_, ignored);
}

void ChaosBed::skew(std::size_t i, long offset_ms, double rate) {
  if (skew_dir_.empty()) throw std::logic_error("skew: the bed was started without the clock-skew shim");
  skewclock::Control control(skew_file(skew_dir_, i));
  skewclock::Settings s;
  s.offset_ms = offset_ms;
  s.rate = rate;
  control.set(s);
  control.wait_applied(std::chrono::seconds{2});
  open("skew" + std::to_string(i), "clock node " + std::to_string(i + 1) + ": " + std::to_string(offset_ms) +
                                       " ms, rate " + std::to_string(rate));
}

void ChaosBed::unskew(std::size_t i) {
  skewclock::Control control(skew_file(skew_dir_, i));
  control.set(skewclock::Settings{});
  control.wait_applied(std::chrono::seconds{2});
  close("skew" + std::to_string(i));
}

std::string ChaosBed::urls(int group) const {
  std::string out;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    const std::string scheme = certs_ != nullptr ? "rediss://" : "redis://";
    const std::string direct = certs_ != nullptr ? "rediss://127.0.0.1:" + std::to_string(tls_ports_[i]) : masters_[i]->url();
    const std::string url =
        proxies_.empty() ? direct : scheme + proxies_[i]->listener(static_cast<std::size_t>(group));
    out += (out.empty() ? "" : ",") + url;
  }
  return out;
}

std::string ChaosBed::direct_urls() const {
  std::string out;
  for (const auto& m : masters_) out += (out.empty() ? "" : ",") + m->url();
  return out;
}

void ChaosBed::proxy(std::size_t i, const std::string& listener, const std::string& settings) {
  proxies_.at(i)->control().set(listener, settings);
  open("proxy" + std::to_string(i) + "/" + listener,
       "node " + std::to_string(i + 1) + (listener == "*" ? "" : " group " + listener) + ": " + settings);
}

void ChaosBed::unproxy(std::size_t i, const std::string& listener) {
  proxies_.at(i)->control().clear(listener);
  close("proxy" + std::to_string(i) + "/" + listener);
}

void ChaosBed::open(const std::string& key, const std::string& what) {
  Event e;
  e.type = EventType::fault;
  e.t = monotonic_ns();
  e.error = what;
  open_.emplace_back(key, faults_.size());
  faults_.push_back(e);
}

void ChaosBed::close(const std::string& key) {
  auto it = std::find_if(open_.begin(), open_.end(), [&](const auto& p) { return p.first == key; });
  if (it == open_.end()) return;
  faults_[it->second].deadline = monotonic_ns();  // a fault's `deadline` is its end
  open_.erase(it);
}

void ChaosBed::kill(std::size_t i) {
  masters_.at(i)->kill();
  last_touched_[i] = monotonic_ns();
  open("node" + std::to_string(i), "kill node " + std::to_string(i + 1));
}

void ChaosBed::pause(std::size_t i) {
  masters_.at(i)->pause();
  open("node" + std::to_string(i), "pause node " + std::to_string(i + 1));
}

void ChaosBed::resume(std::size_t i) {
  masters_.at(i)->resume();
  close("node" + std::to_string(i));
}

void ChaosBed::restart(std::size_t i, bool wipe) {
  const std::string key = "node" + std::to_string(i);
  const bool was_down = std::any_of(open_.begin(), open_.end(), [&](const auto& p) { return p.first == key; });
  if (!was_down) open(key, (wipe ? "wipe+restart node " : "restart node ") + std::to_string(i + 1));
  masters_.at(i)->restart(wipe);
  last_touched_[i] = monotonic_ns();
  close(key);
}

void ChaosBed::flushall(std::size_t i) {
  const std::string key = "flush" + std::to_string(i);
  open(key, "flushall node " + std::to_string(i + 1));
  const test::Reply r = masters_.at(i)->command({"FLUSHALL"});
  close(key);
  if (r.str != "OK") throw std::runtime_error("FLUSHALL on node " + std::to_string(i + 1) + ": " + r.str);
}

void ChaosBed::pause_process(support::Process& worker, const std::string& what) {
  worker.pause();
  open("pid" + std::to_string(worker.pid()), what);
}

void ChaosBed::resume_process(support::Process& worker) {
  worker.resume();
  close("pid" + std::to_string(worker.pid()));
}

void ChaosBed::kill_process(support::Process& worker, const std::string& what) {
  worker.kill();
  const std::string key = "killed pid" + std::to_string(worker.pid());
  open(key, what);
  close(key);
}

void ChaosBed::heal_all() {
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    auto& m = *masters_[i];
    if (!m.running()) {
      m.restart(false);
    } else {
      m.resume();  // a no-op unless paused
    }
    close("node" + std::to_string(i));
    if (!skew_dir_.empty()) unskew(i);
    if (!proxies_.empty()) proxies_[i]->control().clear("*");
  }
  while (!open_.empty()) close(open_.front().first);
}

std::size_t ChaosBed::leaked_keys(std::chrono::milliseconds grace) {
  const std::int64_t now = monotonic_ns();
  std::size_t n = 0;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    const bool recent = last_touched_[i] != 0 &&
                        (grace == std::chrono::milliseconds::max() ||
                         now - last_touched_[i] < std::chrono::nanoseconds(grace).count());
    if (recent) continue;
    // (A semaphore's permits key keeps its P for good, as a fence counter
    // keeps its fence and an election its last record: not lock keys.)
    for (const std::string& key : masters_[i]->keys("redlock:*")) {
      n += key != kMarkerKey && !key.ends_with("}:permits") && !key.ends_with("}:fence") &&
                   !key.ends_with("}:leader")
               ? 1
               : 0;
    }
  }
  return n;
}

std::int64_t ChaosBed::counter_value(const std::string& resource) {
  const test::Reply r = counter_->command({"GET", "counter:" + resource});
  return r.str.empty() ? 0 : std::stoll(r.str);
}

std::int64_t ChaosBed::counter_total() {
  // One call, however many resources: the sum is taken inside the server.
  const test::Reply r = counter_->command(
      {"EVAL",
       "local n = 0 for _, k in ipairs(redis.call('KEYS', 'counter:*')) do n = n + redis.call('GET', k) end return n",
       "0"});
  if (r.type != REDIS_REPLY_INTEGER) throw std::runtime_error("counter redis: " + r.str);
  return r.integer;
}

}  // namespace redlock::chaos
