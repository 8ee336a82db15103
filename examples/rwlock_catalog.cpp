// rwlock_catalog.cpp — a read-write lock across N Redis masters: R reader
// threads read "catalog" together, W writer threads change it one at a
// time and never while anyone reads (also across processes and machines).
// A waiting writer stops new readers, so a stream of readers cannot starve
// it.
//
//   REDLOCK_NODES=$(scripts/testbed.sh urls) ./rwlock_catalog [READERS [WRITERS]]
//   REDLOCK_CONFIG=redlock.json ./rwlock_catalog        (a config file instead, docs/config.md)
//
// Prints how many read at once at most, and how often a writer met anyone
// (in this process); exits 1 if it ever did.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "redlock/redlock.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  const int readers = argc > 1 ? std::atoi(argv[1]) : 4;
  const int writers = argc > 2 ? std::atoi(argv[2]) : 2;
  if (readers < 0 || writers < 0 || readers + writers < 1) {
    std::fprintf(stderr, "usage: REDLOCK_NODES=URL,URL,... rwlock_catalog [READERS [WRITERS]]\n");
    return 2;
  }
  const char* file = std::getenv("REDLOCK_CONFIG");
  auto config = file != nullptr && *file != '\0' ? redlock::load_config_file(file) : redlock::config_from_env();
  if (!config) {  // names what is wrong, never a password
    std::fprintf(stderr, "%s\n", config.error().to_string().c_str());
    return 2;
  }
  auto client = redlock::Client::create(*config);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().to_string().c_str());
    return 2;
  }

  std::atomic<int> reading{0}, writing{0}, most_readers{0}, clashes{0}, failed{0};
  const auto work = [&](int id, bool shared) {
    for (int round = 0; round < 3; ++round) {
      redlock::AcquireOptions opts;
      opts.ttl = 3s;
      opts.wait = 30s;
      opts.shared = shared;  // a reader; without it, a writer
      auto lock = (*client)->acquire("catalog", opts);
      if (!lock) {
        std::fprintf(stderr, "%s %d: %s\n", shared ? "reader" : "writer", id, lock.error().to_string().c_str());
        ++failed;
        return;
      }
      if (shared) {
        const int now = ++reading;
        for (int seen = most_readers.load(); now > seen && !most_readers.compare_exchange_weak(seen, now);) {
        }
        if (writing > 0) ++clashes;
      } else {
        if (++writing > 1 || reading > 0) ++clashes;
      }
      std::this_thread::sleep_for(30ms);  // the work, while lock->valid()
      (shared ? reading : writing)--;
      if (auto released = (*client)->release(*lock); !released) {
        std::fprintf(stderr, "release: %s\n", released.error().to_string().c_str());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r) threads.emplace_back(work, r, true);
  for (int w = 0; w < writers; ++w) threads.emplace_back(work, w, false);
  for (std::thread& t : threads) t.join();
  std::printf("at most %d readers at once; a writer met another holder %d times\n", most_readers.load(), clashes.load());
  return failed == 0 && clashes == 0 ? 0 : 1;
}
