// consumer.cpp — a program outside the project, built against an installed
// libredlock (tests/packaging/test_install.sh builds it once with
// pkg-config and once with CMake's find_package): it takes a fenced lock
// on the given masters, writes to a fenced store (a separate redis) with
// its fence, releases the lock, and prints the versions it was compiled
// against and runs with.
//
//   consumer redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 redis://127.0.0.1:7004
#include <chrono>
#include <cstdio>
#include <string>

#include "redlock/redlock.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer URL,URL,... STORE_URL\n");
    return 2;
  }
  redlock::Config config;
  auto nodes = redlock::parse_node_list(argv[1]);
  if (!nodes) {
    std::fprintf(stderr, "consumer: %s\n", nodes.error().to_string().c_str());
    return 2;
  }
  config.nodes = *nodes;
  config.options.quarantine = false;  // the test's masters are fresh
  auto client = redlock::Client::create(config);
  if (!client) {
    std::fprintf(stderr, "consumer: %s\n", client.error().to_string().c_str());
    return 1;
  }
  auto lock = (*client)->acquire("consumer", {.ttl = 5s, .wait = 2s, .fence = true});
  if (!lock) {
    std::fprintf(stderr, "consumer: not locked: %s\n", lock.error().to_string().c_str());
    return 1;
  }
  auto store_address = redlock::parse_node_url(argv[2]);
  if (!store_address) {
    std::fprintf(stderr, "consumer: %s\n", store_address.error().to_string().c_str());
    return 2;
  }
  auto store = redlock::FencedStore::connect(*store_address);
  auto written = store ? (*store)->write("consumer", lock->fence, "written under the lock")
                       : redlock::Result<redlock::FencedWrite>(store.error());
  if (!written || !written->accepted) {
    std::fprintf(stderr, "consumer: fenced write not accepted: %s\n",
                 written ? "a higher fence is there" : written.error().to_string().c_str());
    return 1;
  }
  auto released = (*client)->release(*lock);
  if (!released || !released->released) {
    std::fprintf(stderr, "consumer: not released: %s\n",
                 released ? "the masters still hold it" : released.error().to_string().c_str());
    return 1;
  }
  std::printf("consumer: locked \"consumer\" on %zu masters, wrote with fence %llu, released; headers %s, library %s\n",
              config.nodes.size(), static_cast<unsigned long long>(lock->fence), REDLOCK_VERSION_STRING,
              std::string(redlock::version()).c_str());
  return std::string(redlock::version()) == REDLOCK_VERSION_STRING ? 0 : 1;
}
