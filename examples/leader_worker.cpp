// leader_worker.cpp — a complete leader-elected worker. Run as many copies as
// you like; one leads at a time and writes its heartbeat to STORE under its
// term, which the store checks (a deposed leader's late write is refused).
//   REDLOCK_NODES=$(scripts/testbed.sh urls) ./leader_worker NAME STORE_URL [BEATS]
//   (or REDLOCK_CONFIG=redlock.json: a config file, docs/config.md)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>

#include "redlock/redlock.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: leader_worker NAME STORE_URL [BEATS]\n"), 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it happens, also into a pipe
  const char* file = std::getenv("REDLOCK_CONFIG");
  auto config = file != nullptr ? redlock::load_config_file(file) : redlock::config_from_env();
  auto store_at = redlock::parse_node_url(argv[2]);
  if (!config || !store_at)  // says what is wrong, never a password
    return std::fprintf(stderr, "%s\n", (!config ? config.error() : store_at.error()).to_string().c_str()), 2;
  auto client = redlock::Client::create(*config);
  auto store = redlock::FencedStore::connect(*store_at);
  if (!client || !store) return std::fprintf(stderr, "cannot connect\n"), 1;
  for (int beats = argc > 3 ? std::atoi(argv[3]) : 1 << 30; beats > 0;) {
    auto lead = (*client)->campaign(argv[1], {.value = "pid " + std::to_string(getpid()), .ttl = 2s});
    if (!lead) return std::fprintf(stderr, "%s\n", lead.error().to_string().c_str()), 1;
    std::printf("leader, term %llu\n", static_cast<unsigned long long>(lead->term()));
    for (; beats > 0 && lead->leading(); --beats, std::this_thread::sleep_for(200ms)) {
      auto w = (*store)->write(std::string(argv[1]) + ":beat", lead->term(), std::to_string(beats));
      if (w && !w->accepted) break;  // a newer term wrote: we are not the leader any more
    }
    std::printf("%s\n", lead->leading() ? "done" : "deposed; campaigning again");
  }
}
