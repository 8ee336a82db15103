// timer_queue.hpp — many timers on one of the runtime's.
//
// A program holding 100,000 leases has 100,000 watchdog timers. As uv
// timers each is a handle of about 220 bytes in libuv's pointer-linked
// heap, and restarting one (twice per extension) walks that heap: a third
// of the client's CPU in the leases benchmark went to uv_timer_start/stop.
// TimerQueue keeps its timers in one array heap (an index per timer, so a
// restart or stop is a sift in contiguous memory, the due times inline) —
// and a timer started with delay 0, which most of an operation's are ("on
// the next loop turn"), in a FIFO list instead: O(1) in and out. It holds
// one timer of the Runtime, armed for the earliest; it runs on any Runtime
// (uv, the simulator's, the unit tests' manual one).
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

  std::size_t armed() const noexcept { return heap_.size() + now_count_; }
  std::size_t timers() const noexcept { return timers_; }

 private:
  class Entry;
  friend class Entry;

  // Slot — one armed timer of the heap, its key inline (a comparison
  // reads no Entry).
  struct Slot {
    TimePoint due;
    std::uint64_t seq;
    Entry* entry;
  };
  static bool before(const Slot& a, const Slot& b) noexcept {
    return a.due < b.due || (a.due == b.due && a.seq < b.seq);
  }

  void arm(Entry* e, TimePoint due, bool now);
  void disarm(Entry* e);
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void place(std::size_t i, const Slot& s);
  void push_now(Entry* e);
  void drop_now(Entry* e);
  Entry* next_due(TimePoint now, std::uint64_t limit) const;
  void drain();
  void wake_for_top();
  void entry_gone();

  Runtime& runtime_;
  std::vector<Slot> heap_;
  Entry* now_head_ = nullptr;  // the FIFO of timers started with delay 0
  Entry* now_tail_ = nullptr;
  std::size_t now_count_ = 0;
  std::unique_ptr<Timer> wake_;  // the runtime's timer, for the top; none while no timer exists
  TimePoint wake_due_{};         // what wake_ was last armed for
  std::size_t timers_ = 0;
  std::uint64_t next_seq_ = 0;
  bool draining_ = false;
};

}  // namespace redlock::detail
