// leader_lookout.hpp — who leads an election now, for the chaos nemesis
// (Stage::await_leader): it hurts the current leader, as the masters say.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "bed.hpp"
#include "redlock/redlock.hpp"

namespace redlock::chaos {

// LeaderLookout — a client of its own on the bed's masters (directly,
// never through a proxy; the quarantine as the workers have it) that
// watches the election `name` (Client::observe): the watch says when a
// leader appears, and each answer is confirmed by a reading of the masters
// (Client::leader) just before it is given, as the watch's may be a moment
// old. The workers are candidates "chaos-K" (worker --election). One
// thread at a time.
class LeaderLookout {
 public:
  LeaderLookout(ChaosBed& bed, bool quarantine, std::chrono::milliseconds node_timeout, std::string name);
  ~LeaderLookout();
  LeaderLookout(const LeaderLookout&) = delete;
  LeaderLookout& operator=(const LeaderLookout&) = delete;

  // leader: the client K whose "chaos-K" leads now, waiting up to `within`
  // for one; -1 when none came (or one of another name leads).
  int leader(std::chrono::milliseconds within);

 private:
  std::string name_;
  std::unique_ptr<Client> client_;
  LeaderWatch watch_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool leading_ = false;        // the watch's last reading had a leader
  std::uint64_t readings_ = 0;  // the watch's readings so far
};

}  // namespace redlock::chaos
