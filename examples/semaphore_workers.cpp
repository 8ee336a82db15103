// semaphore_workers.cpp — a counting semaphore across N Redis masters: W worker
// threads share P permits of "encoders" (at most P encode at once, even
// across processes and machines), each holding its permit as a Lease that
// its watchdog keeps extended while the work runs.
//
//   REDLOCK_NODES=$(scripts/testbed.sh urls) ./semaphore_workers [PERMITS [WORKERS]]
//   REDLOCK_CONFIG=redlock.json ./semaphore_workers        (a config file instead, docs/config.md)
//
// Prints which permit each worker held, and how many held one at once at
// most (in this process); exits 1 if that ever exceeded PERMITS.
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
  const int permits = argc > 1 ? std::atoi(argv[1]) : 2;
  const int workers = argc > 2 ? std::atoi(argv[2]) : 5;
  if (permits < 1 || permits > 100 || workers < 1) {
    std::fprintf(stderr, "usage: REDLOCK_NODES=URL,URL,... semaphore_workers [PERMITS (1-100) [WORKERS]]\n");
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

  std::atomic<int> holding{0}, most{0}, failed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      // Every user of "encoders" gives the same number of permits.
      redlock::LeaseOptions opts;
      opts.acquire.ttl = 3s;
      opts.acquire.wait = 30s;
      opts.acquire.permits = static_cast<std::uint32_t>(permits);
      auto lease = (*client)->lock("encoders", opts);
      if (!lease) {
        std::fprintf(stderr, "worker %d: %s\n", w, lease.error().to_string().c_str());
        ++failed;
        return;
      }
      const int now = ++holding;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::printf("worker %d holds permit %u\n", w, *lease->permit());
      std::this_thread::sleep_for(100ms);  // the work; lease->stop_token() says if it is lost
      --holding;
      if (auto released = lease->release(); !released) {
        std::fprintf(stderr, "worker %d: release: %s\n", w, released.error().to_string().c_str());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::printf("at most %d of %d permits held at once\n", most.load(), permits);
  return failed == 0 && most <= permits ? 0 : 1;
}
