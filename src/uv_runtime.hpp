// uv_runtime.hpp — the production Runtime: a uv loop, steady_clock, and the
// OS CSPRNG (src/token.hpp). Loop thread only, except Signal::raise.
#pragma once

#include <uv.h>

#include "runtime.hpp"

namespace redlock::detail {

class UvRuntime final : public Runtime {
 public:
  // UvRuntime keeps `loop`, which must outlive it. Timers and signals it
  // made may outlive the UvRuntime but not the loop: each frees its uv
  // handle in the handle's close callback.
  explicit UvRuntime(uv_loop_t* loop) noexcept : loop_(loop) {}

  TimePoint now() override { return Clock::now(); }
  std::chrono::system_clock::time_point wall_now() override { return std::chrono::system_clock::now(); }
  std::unique_ptr<Timer> timer(std::function<void()> fire) override;
  std::unique_ptr<Signal> signal(std::function<void()> fire) override;
  Result<std::string> random_token() override;
  std::uint64_t random_below(std::uint64_t bound) override;

  uv_loop_t* loop() const noexcept { return loop_; }

 private:
  uv_loop_t* loop_;
};

}  // namespace redlock::detail
