// timer_queue.hpp — many timers on one of the runtime's.
//
// A program holding 100,000 leases has 100,000 watchdog timers. As uv
// timers each is a handle of about 220 bytes in libuv's pointer-linked
// heap, and restarting one (twice per extension) walks that heap: a third
// of the client's CPU in the leases benchmark went to uv_timer_start/stop.
// TimerQueue keeps its timers in one array heap (an index per timer, so a
// restart or stop is a sift in contiguous memory) and holds one timer of
// the Runtime, armed for the earliest; it runs on any Runtime (uv, the
// simulator's, the unit tests' manual one).
//
// Its timers keep the Timer contract (src/runtime.hpp): fire runs on a
// later loop turn, never inside start(), never before the delay has passed
// on the runtime's clock; destroying one (inside its own fire too) cancels
// it. A timer started inside a fire — even with delay 0 — fires on a later
// turn, not in the same drain. The queue must outlive its timers; once the
// last of them is destroyed it gives its runtime timer back, so that an
// idle queue keeps no handle open on the loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime.hpp"

namespace redlock::detail {

class TimerQueue {
 public:
  explicit TimerQueue(Runtime& runtime) noexcept : runtime_(runtime) {}
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;
  ~TimerQueue();

  std::unique_ptr<Timer> timer(std::function<void()> fire);

  std::size_t armed() const noexcept { return heap_.size(); }
  std::size_t timers() const noexcept { return timers_; }

 private:
  class Entry;
  friend class Entry;

  void arm(Entry* e, TimePoint due);
  void disarm(Entry* e);
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void place(std::size_t i, Entry* e);
  bool before(const Entry* a, const Entry* b) const noexcept;
  void drain();
  void wake_for_top();
  void entry_gone();

  Runtime& runtime_;
  std::vector<Entry*> heap_;
  std::unique_ptr<Timer> wake_;  // the runtime's timer, for the top; none while no timer exists
  TimePoint wake_due_{};         // what wake_ was last armed for
  std::size_t timers_ = 0;
  std::uint64_t next_seq_ = 0;
  bool draining_ = false;
};

}  // namespace redlock::detail
