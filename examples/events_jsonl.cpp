// events_jsonl.cpp — an Observer that logs what a client does as JSON
// lines (one object per event, on stdout), while the program takes and
// releases a lock a few times.
//
//   REDLOCK_NODES=$(scripts/testbed.sh urls) ./events_jsonl [ROUNDS]
//   REDLOCK_CONFIG=redlock.json ./events_jsonl [ROUNDS]
//
// Kill or pause a master meanwhile to see its connection events. The
// observer runs on the client's loop thread: it formats and writes one
// line, nothing that blocks for long.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "redlock/redlock.hpp"

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

class JsonLines final : public redlock::Observer {
 public:
  void on_connection(const redlock::ConnectionEvent& e) override {
    emit({{"event", "connection"},
          {"node", e.address},
          {"subscriber", e.subscriber},
          {"from", redlock::connection_state_name(e.from)},
          {"to", redlock::connection_state_name(e.to)},
          {"reason", e.reason}});
  }
  void on_quarantine(const redlock::QuarantineEvent& e) override {
    emit({{"event", e.entered ? "quarantined" : "quarantine_over"},
          {"node", e.address},
          {"remaining_ms", e.remaining.count()},
          {"reason", e.reason}});
  }
  void on_round(const redlock::RoundEvent& e) override {
    json nodes = json::array();
    for (const redlock::NodeOutcome& n : *e.nodes) {
      nodes.push_back({{"node", n.address}, {"outcome", redlock::outcome_name(n.outcome)}, {"rtt_us", n.rtt.count()}});
    }
    emit({{"event", "round"},
          {"op", redlock::op_kind_name(e.op)},
          {"kind", redlock::lock_kind_name(e.kind)},
          {"resource", e.resource},
          {"ok", e.ok},
          {"code", e.ok ? json(nullptr) : json(redlock::errc_name(e.code))},
          {"attempt", e.attempt},
          {"elapsed_us", e.elapsed.count()},
          {"nodes", nodes}});
  }
  void on_lease(const redlock::LeaseEvent& e) override {
    emit({{"event", e.kind == redlock::LeaseEvent::Kind::extended ? "lease_extended" : "lease_lost"},
          {"resource", e.resource},
          {"validity_ms", e.validity.count()},
          {"reason", e.reason}});
  }
  void on_wake(const redlock::WakeEvent& e) override { emit({{"event", "woken"}, {"resource", e.resource}}); }

 private:
  void emit(json line) {
    line["at_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    std::lock_guard<std::mutex> lock(mu_);  // one client's events come from one thread; several clients may share this
    std::puts(line.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  }
  std::mutex mu_;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  // The masters: a config file (REDLOCK_CONFIG, as the CLI reads it) or
  // REDLOCK_NODES with the default options.
  const char* file = std::getenv("REDLOCK_CONFIG");
  auto config = file != nullptr && *file != '\0' ? redlock::load_config_file(file) : redlock::config_from_env();
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error().to_string().c_str());
    return 2;
  }
  config->options.observer = std::make_shared<JsonLines>();
  auto client = redlock::Client::create(*config);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().to_string().c_str());
    return 2;
  }
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    auto lock = (*client)->acquire("events-demo", {.ttl = 2s, .wait = 2s});
    if (!lock) {
      ++failures;
      continue;
    }
    std::this_thread::sleep_for(50ms);  // the work
    (void)(*client)->release(*lock);
  }
  return failures == 0 ? 0 : 1;
}
