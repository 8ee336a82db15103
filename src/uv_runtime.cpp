// uv_runtime.cpp — Timer and Signal on uv handles. Each handle is owned by
// its C++ object until that object is destroyed; then the handle is closed
// and freed in its close callback, and its data pointer is cleared first so
// that nothing fires for an object that is gone.
#include "uv_runtime.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>
#include <utility>

#include "token.hpp"

namespace redlock::detail {

namespace {
class UvTimer;
}

// Timers — an intrusive list of the live UvTimers, for fire_overdue.
struct UvRuntime::Timers {
  UvTimer* head = nullptr;
};

namespace {

class UvTimer final : public Timer {
 public:
  UvTimer(uv_loop_t* loop, std::shared_ptr<UvRuntime::Timers> list, std::function<void()> fire)
      : list_(std::move(list)), fire_(std::move(fire)) {
    uv_timer_init(loop, handle_);
    handle_->data = this;
    next_ = list_->head;
    if (next_ != nullptr) next_->prev_ = this;
    list_->head = this;
  }
  UvTimer(const UvTimer&) = delete;
  UvTimer& operator=(const UvTimer&) = delete;
  ~UvTimer() override {
    (prev_ != nullptr ? prev_->next_ : list_->head) = next_;
    if (next_ != nullptr) next_->prev_ = prev_;
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

  // fire_if_overdue: an active timer whose due time has passed fires on
  // the next loop turn (it re-checks its due time then).
  void fire_if_overdue(TimePoint now) {
    if (active() && due_ <= now) uv_timer_start(handle_, on_fire, 0, 0);
  }
  UvTimer* next() const noexcept { return next_; }

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
  std::shared_ptr<UvRuntime::Timers> list_;
  UvTimer* prev_ = nullptr;
  UvTimer* next_ = nullptr;
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

// arm_resume_watch arms `fd` (a CLOCK_REALTIME timerfd) far ahead with
// TFD_TIMER_CANCEL_ON_SET: a clock set or a resume from suspend makes it
// readable (its read fails with ECANCELED). False when it cannot be armed.
bool arm_resume_watch(int fd) {
  timespec now{};
  if (::clock_gettime(CLOCK_REALTIME, &now) != 0) return false;
  itimerspec far{};
  far.it_value.tv_sec = now.tv_sec + 10LL * 365 * 24 * 3600;
  return ::timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &far, nullptr) == 0;
}

}  // namespace

UvRuntime::UvRuntime(uv_loop_t* loop) : loop_(loop), timers_(std::make_shared<Timers>()) {}

// Handle — the poll handle on the CANCEL_ON_SET timerfd, and the fd (a poll
// handle does not own its fd; uv_fileno fails once it closes).
struct ResumeWatch::Handle {
  uv_poll_t poll;
  int fd;
};

ResumeWatch::ResumeWatch(UvRuntime& runtime) {
  const int fd = ::timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
  if (fd < 0) return;
  auto* h = new Handle{{}, fd};
  if (!arm_resume_watch(fd) || uv_poll_init(runtime.loop(), &h->poll, fd) != 0) {
    delete h;
    ::close(fd);
    return;
  }
  h->poll.data = &runtime;
  uv_poll_start(&h->poll, UV_READABLE, [](uv_poll_t* p, int, int) {
    auto* h = reinterpret_cast<Handle*>(p);
    std::uint64_t expirations = 0;
    while (::read(h->fd, &expirations, sizeof expirations) < 0 && errno == EINTR) {
    }
    arm_resume_watch(h->fd);  // re-armed: the next set or resume wakes us again
    if (auto* runtime = static_cast<UvRuntime*>(p->data)) runtime->fire_overdue();
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(&h->poll));
  handle_ = h;
}

ResumeWatch::~ResumeWatch() { close(); }

void ResumeWatch::close() noexcept {
  if (handle_ == nullptr) return;
  handle_->poll.data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->poll), [](uv_handle_t* p) {
    auto* h = reinterpret_cast<Handle*>(p);
    ::close(h->fd);
    delete h;
  });
  handle_ = nullptr;
}

void UvRuntime::fire_overdue() noexcept {
  const TimePoint t = now();
  for (UvTimer* timer = timers_->head; timer != nullptr; timer = timer->next()) timer->fire_if_overdue(t);
}

std::unique_ptr<Timer> UvRuntime::timer(std::function<void()> fire) {
  return std::make_unique<UvTimer>(loop_, timers_, std::move(fire));
}

std::unique_ptr<Signal> UvRuntime::signal(std::function<void()> fire) {
  return std::make_unique<UvSignal>(loop_, std::move(fire));
}

Result<std::string> UvRuntime::random_token() { return detail::random_token(); }
std::string UvRuntime::owner_suffix(std::string_view label) { return detail::owner_suffix(label); }

std::uint64_t UvRuntime::random_below(std::uint64_t bound) { return detail::random_below(bound); }

}  // namespace redlock::detail
