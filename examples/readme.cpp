// readme.cpp — the README's example, verbatim between the markers (a unit
// test compares the two), wrapped in main() so it compiles in every build.
#include <cstdio>

// README:begin
#include "redlock/redlock.hpp"
using namespace std::chrono_literals;
// README:end

int main() {
  // README:begin
  redlock::Config config;  // the same masters and prefix in every client of the lock
  config.nodes = *redlock::parse_node_list(
      "redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003,"
      "redis://127.0.0.1:7004,redis://127.0.0.1:7005");
  auto client = redlock::Client::create(config);            // Result<unique_ptr<Client>>
  auto lease = (*client)->lock("nightly-report", {.acquire = {.ttl = 10s, .wait = 2s, .fence = true}});
  if (!lease) { std::puts(lease.error().to_string().c_str()); return 1; }
  // … work while lease->valid(): a watchdog keeps extending it; if it is lost,
  // lease->stop_token() is requested first. Send lease->fence() with each write.
  auto released = lease->release();  // or let the lease go out of scope
  // README:end
  return released && released->released ? 0 : 1;
}
