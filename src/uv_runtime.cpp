// uv_runtime.cpp — Timer and Signal on uv handles. Each handle is owned by
// its C++ object until that object is destroyed; then the handle is closed
// and freed in its close callback, and its data pointer is cleared first so
// that nothing fires for an object that is gone.
#include "uv_runtime.hpp"

#include <utility>

#include "token.hpp"

namespace redlock::detail {

namespace {

class UvTimer final : public Timer {
 public:
  UvTimer(uv_loop_t* loop, std::function<void()> fire) : fire_(std::move(fire)) {
    uv_timer_init(loop, handle_);
    handle_->data = this;
  }
  UvTimer(const UvTimer&) = delete;
  UvTimer& operator=(const UvTimer&) = delete;
  ~UvTimer() override {
    handle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(handle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  }

  // A uv timer counts from the loop's cached time: the start of this loop
  // turn, in whole ms of a coarse clock. Under load that is many ms ago, and
  // the timer fires before `delay` has passed on the steady clock that the
  // engine's deadlines use (a waiter's "last attempt at the deadline" came
  // early and was followed by one more). So the due time is kept, and a
  // fire before it re-arms for the rest.
  void start(std::chrono::milliseconds delay) override {
    delay = std::max(delay, std::chrono::milliseconds{0});
    due_ = Clock::now() + delay;
    uv_timer_start(handle_, on_fire, static_cast<std::uint64_t>(delay.count()), 0);
  }
  void stop() override { uv_timer_stop(handle_); }
  bool active() const override { return uv_is_active(reinterpret_cast<const uv_handle_t*>(handle_)) != 0; }

 private:
  static void on_fire(uv_timer_t* h) {
    auto* self = static_cast<UvTimer*>(h->data);
    if (self == nullptr) return;
    if (const TimePoint now = Clock::now(); now < self->due_) {
      const auto rest = std::chrono::ceil<std::chrono::milliseconds>(self->due_ - now);
      uv_timer_start(h, on_fire, static_cast<std::uint64_t>(rest.count()), 0);
      return;
    }
    self->fire_();
  }

  uv_timer_t* handle_ = new uv_timer_t;
  TimePoint due_{};
  std::function<void()> fire_;
};

class UvSignal final : public Signal {
 public:
  UvSignal(uv_loop_t* loop, std::function<void()> fire) : fire_(std::move(fire)) {
    uv_async_init(loop, handle_, [](uv_async_t* h) {
      if (auto* self = static_cast<UvSignal*>(h->data)) self->fire_();
    });
    handle_->data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(handle_));
  }
  UvSignal(const UvSignal&) = delete;
  UvSignal& operator=(const UvSignal&) = delete;
  ~UvSignal() override {
    handle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(handle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
  }

  void raise() override { uv_async_send(handle_); }

 private:
  uv_async_t* handle_ = new uv_async_t;
  std::function<void()> fire_;
};

}  // namespace

std::unique_ptr<Timer> UvRuntime::timer(std::function<void()> fire) {
  return std::make_unique<UvTimer>(loop_, std::move(fire));
}

std::unique_ptr<Signal> UvRuntime::signal(std::function<void()> fire) {
  return std::make_unique<UvSignal>(loop_, std::move(fire));
}

Result<std::string> UvRuntime::random_token() { return detail::random_token(); }

std::uint64_t UvRuntime::random_below(std::uint64_t bound) { return detail::random_below(bound); }

}  // namespace redlock::detail
