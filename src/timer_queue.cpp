// timer_queue.cpp — see timer_queue.hpp.
#include "timer_queue.hpp"

#include <algorithm>
#include <utility>

namespace redlock::detail {

namespace {
constexpr std::size_t not_armed = static_cast<std::size_t>(-1);
constexpr std::size_t in_now_list = static_cast<std::size_t>(-2);
}  // namespace

class TimerQueue::Entry final : public Timer {
 public:
  Entry(TimerQueue& queue, std::function<void()> fire) : queue_(queue), fire_(std::move(fire)) {}
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  ~Entry() override {
    stop();
    queue_.entry_gone();
  }

  void start(std::chrono::milliseconds delay) override {
    queue_.arm(this, queue_.runtime_.now() + std::max(delay, std::chrono::milliseconds{0}), delay.count() <= 0);
  }
  void stop() override {
    if (index != not_armed) queue_.disarm(this);
  }
  bool active() const override { return index != not_armed; }

  TimerQueue& queue_;
  std::function<void()> fire_;
  // index: the heap slot, in_now_list, or not_armed. due and seq are kept
  // here only for the FIFO's entries (the heap keeps its own inline).
  std::size_t index = not_armed;
  TimePoint due{};
  std::uint64_t seq = 0;
  Entry* prev = nullptr;  // the FIFO
  Entry* next = nullptr;
};

TimerQueue::~TimerQueue() {
  // Timers that outlive their queue would point at nothing: disarm them
  // (they must not be used any more; none should be left).
  for (const Slot& s : heap_) s.entry->index = not_armed;
  heap_.clear();
  for (Entry* e = now_head_; e != nullptr; e = e->next) e->index = not_armed;
  now_head_ = now_tail_ = nullptr;
  now_count_ = 0;
}

std::unique_ptr<Timer> TimerQueue::timer(std::function<void()> fire) {
  auto e = std::make_unique<Entry>(*this, std::move(fire));
  ++timers_;
  return e;
}

void TimerQueue::place(std::size_t i, const Slot& s) {
  heap_[i] = s;
  s.entry->index = i;
}

void TimerQueue::sift_up(std::size_t i) {
  const Slot s = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!before(s, heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, s);
}

void TimerQueue::sift_down(std::size_t i) {
  const Slot s = heap_[i];
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], s)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, s);
}

void TimerQueue::push_now(Entry* e) {
  e->index = in_now_list;
  e->prev = now_tail_;
  e->next = nullptr;
  (now_tail_ != nullptr ? now_tail_->next : now_head_) = e;
  now_tail_ = e;
  ++now_count_;
}

void TimerQueue::drop_now(Entry* e) {
  (e->prev != nullptr ? e->prev->next : now_head_) = e->next;
  (e->next != nullptr ? e->next->prev : now_tail_) = e->prev;
  e->prev = e->next = nullptr;
  e->index = not_armed;
  --now_count_;
}

void TimerQueue::arm(Entry* e, TimePoint due, bool now) {
  const std::uint64_t seq = next_seq_++;
  if (e->index != not_armed) disarm(e);
  if (now) {
    e->due = due;
    e->seq = seq;
    push_now(e);
    if (now_count_ == 1 && !draining_) wake_for_top();
    return;
  }
  heap_.push_back(Slot{due, seq, e});
  sift_up(heap_.size() - 1);
  if (e->index == 0 && !draining_) wake_for_top();
}

void TimerQueue::disarm(Entry* e) {
  if (e->index == in_now_list) return drop_now(e);
  const std::size_t i = e->index;
  e->index = not_armed;
  const Slot last = heap_.back();
  heap_.pop_back();
  if (i < heap_.size()) {
    place(i, last);
    sift_up(i);
    sift_down(last.entry->index);
  }
  // The runtime timer stays armed for the old earliest: an early wake
  // finds nothing due and re-arms for the new one.
}

// next_due: the armed timer to fire next in this drain — the earlier (due,
// then start) of the FIFO's head and the heap's top, if it is due by `now`
// and was started before the drain began; null when none is.
TimerQueue::Entry* TimerQueue::next_due(TimePoint now, std::uint64_t limit) const {
  Entry* best = nullptr;
  TimePoint due{};
  std::uint64_t seq = 0;
  if (now_head_ != nullptr) {
    best = now_head_;
    due = now_head_->due;
    seq = now_head_->seq;
  }
  if (!heap_.empty()) {
    const Slot& top = heap_.front();
    if (best == nullptr || top.due < due || (top.due == due && top.seq < seq)) {
      best = top.entry;
      due = top.due;
      seq = top.seq;
    }
  }
  if (best == nullptr || due > now || seq >= limit) return nullptr;
  return best;
}

void TimerQueue::drain() {
  draining_ = true;
  const TimePoint now = runtime_.now();
  // Timers started from here on (by the fires below) wait for a later
  // turn: their sequence numbers are at or above this one.
  const std::uint64_t limit = next_seq_;
  while (Entry* e = next_due(now, limit)) {
    disarm(e);
    e->fire_();  // may destroy any timer, this one too, and start others
  }
  draining_ = false;
  if (timers_ == 0) {
    wake_.reset();  // the last timer went during the drain
    return;
  }
  wake_for_top();
}

void TimerQueue::wake_for_top() {
  TimePoint due{};
  if (now_head_ != nullptr) {
    due = now_head_->due;
    if (!heap_.empty()) due = std::min(due, heap_.front().due);
  } else if (!heap_.empty()) {
    due = heap_.front().due;
  } else {
    return;  // a wake that may come finds nothing and stops
  }
  if (wake_ == nullptr) wake_ = runtime_.timer([this] { drain(); });
  if (wake_->active() && wake_due_ == due) return;
  wake_due_ = due;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(due - runtime_.now());
  wake_->start(std::max(left, std::chrono::milliseconds{0}));
}

void TimerQueue::entry_gone() {
  --timers_;
  if (timers_ == 0 && !draining_) wake_.reset();  // idle: no handle kept open
}

}  // namespace redlock::detail
