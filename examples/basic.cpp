// basic.cpp — a complete program around the plain calls: take a lock
// across N Redis masters with acquire(), do the work while it is valid,
// release() it; every error printed. (The README's snippet, with a Lease,
// is examples/readme.cpp.) Every client of a lock must be given the same
// masters: on the local bed, all five.
//
//   REDLOCK_NODES=$(scripts/testbed.sh urls) ./basic
//   ./basic redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003,redis://127.0.0.1:7004,redis://127.0.0.1:7005
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "redlock/redlock.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  // The masters: comma-separated URLs, from the command line or REDLOCK_NODES.
  const char* urls = argc > 1 ? argv[1] : std::getenv("REDLOCK_NODES");
  if (urls == nullptr) {
    std::fprintf(stderr, "usage: basic URL,URL,...   (or set REDLOCK_NODES)\n");
    return 2;
  }
  redlock::Config config;
  auto nodes = redlock::parse_node_list(urls);
  if (!nodes) {  // e.g. `redlock.config: nodes[1]: "redis://h:99999": port out of range`
    std::fprintf(stderr, "%s\n", nodes.error().to_string().c_str());
    return 2;
  }
  config.nodes = *nodes;

  // A Client owns the connections and a loop thread; every call blocks.
  auto client = redlock::Client::create(config);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().to_string().c_str());
    return 2;
  }

  // Take the lock for 10 s, retrying for up to 2 s while someone else has it.
  auto lock = (*client)->acquire("nightly-report", {.ttl = 10s, .wait = 2s});
  if (!lock) {
    // e.g. "redlock.held: …" — the message names each node and its outcome.
    std::fprintf(stderr, "not locked: %s\n", lock.error().to_string().c_str());
    return 1;
  }
  std::printf("locked %s for %lld ms\n", lock->resource.c_str(),
              static_cast<long long>(lock->validity.count()));

  // The work. Act as owner only while lock->valid(): after validity_deadline
  // another client may hold the lock.
  if (lock->valid()) std::printf("writing the nightly report...\n");

  // Release: deletes the key on every node where our token still is.
  auto released = (*client)->release(*lock);
  if (!released) std::fprintf(stderr, "unlock: %s\n", released.error().to_string().c_str());
  return released && released->released ? 0 : 1;
}
