// timer_queue.cpp — see timer_queue.hpp.
#include "timer_queue.hpp"

#include <algorithm>
#include <utility>

namespace redlock::detail {

namespace {
constexpr std::size_t not_armed = static_cast<std::size_t>(-1);
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
    queue_.arm(this, queue_.runtime_.now() + std::max(delay, std::chrono::milliseconds{0}));
  }
  void stop() override {
    if (index != not_armed) queue_.disarm(this);
  }
  bool active() const override { return index != not_armed; }

  TimerQueue& queue_;
  std::function<void()> fire_;
  TimePoint due{};
  std::uint64_t seq = 0;
  std::size_t index = not_armed;
};

TimerQueue::~TimerQueue() {
  // Timers that outlive their queue would point at nothing: disarm them
  // (they must not be used any more; none should be left).
  for (Entry* e : heap_) e->index = not_armed;
  heap_.clear();
}

std::unique_ptr<Timer> TimerQueue::timer(std::function<void()> fire) {
  auto e = std::make_unique<Entry>(*this, std::move(fire));
  ++timers_;
  return e;
}

bool TimerQueue::before(const Entry* a, const Entry* b) const noexcept {
  return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

void TimerQueue::place(std::size_t i, Entry* e) {
  heap_[i] = e;
  e->index = i;
}

void TimerQueue::sift_up(std::size_t i) {
  Entry* e = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!before(e, heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, e);
}

void TimerQueue::sift_down(std::size_t i) {
  Entry* e = heap_[i];
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], e)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, e);
}

void TimerQueue::arm(Entry* e, TimePoint due) {
  e->due = due;
  e->seq = next_seq_++;
  if (e->index == not_armed) {
    heap_.push_back(e);
    e->index = heap_.size() - 1;
    sift_up(e->index);
  } else {
    const std::size_t i = e->index;
    sift_up(i);
    sift_down(e->index);
  }
  if (e->index == 0 && !draining_) wake_for_top();
}

void TimerQueue::disarm(Entry* e) {
  const std::size_t i = e->index;
  e->index = not_armed;
  Entry* last = heap_.back();
  heap_.pop_back();
  if (i < heap_.size()) {
    place(i, last);
    sift_up(i);
    sift_down(last->index);
  }
  // The runtime timer stays armed for the old top: an early wake finds
  // nothing due and re-arms for the new one.
}

void TimerQueue::drain() {
  draining_ = true;
  const TimePoint now = runtime_.now();
  // Timers started from here on (by the fires below) wait for a later
  // turn: they have a sequence number at or above this one.
  const std::uint64_t limit = next_seq_;
  while (!heap_.empty()) {
    Entry* top = heap_.front();
    if (top->due > now || top->seq >= limit) break;
    disarm(top);
    top->fire_();  // may destroy any timer, this one too, and start others
  }
  draining_ = false;
  if (timers_ == 0) {
    wake_.reset();  // the last timer went during the drain
    return;
  }
  wake_for_top();
}

void TimerQueue::wake_for_top() {
  if (heap_.empty()) return;  // a wake that may come finds nothing and stops
  if (wake_ == nullptr) wake_ = runtime_.timer([this] { drain(); });
  const TimePoint due = heap_.front()->due;
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
