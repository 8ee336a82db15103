// mutex.cpp — redlock::Mutex: a lease behind the standard Lockable names.
#include "redlock/mutex.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace redlock {

namespace {

// A round of lock() with no wait of its own waits this long, then tries
// again: lock() has no deadline, the round only bounds one call.
constexpr milliseconds default_round{60000};

// curable: a failure that a later round may not meet (someone else holds
// the lock now, too few masters answer now).
bool curable(Errc code) noexcept {
  switch (code) {
    case Errc::held:
    case Errc::no_quorum:
    case Errc::validity_too_short:
    case Errc::too_late:
    case Errc::lost:
    case Errc::not_held:
      return true;
    case Errc::invalid_argument:
    case Errc::config:
    case Errc::closed:
    case Errc::internal:
    case Errc::cancelled:
    case Errc::store:
      return false;
  }
  return false;
}

[[noreturn]] void violated(const std::string& resource, const Error& e) noexcept {
  std::fputs("redlock: Mutex::lock() of ", stderr);
  std::fwrite(resource.data(), 1, resource.size(), stderr);
  std::fputs(" cannot succeed (a BasicLockable's lock() cannot report it; use try_lock_for): ", stderr);
  const std::string_view code = errc_name(e.code);
  std::fwrite(code.data(), 1, code.size(), stderr);
  std::fputs(": ", stderr);
  for (const char c : e.message) std::fputc(c == '\n' || c == '\r' ? ' ' : c, stderr);
  std::fputs("\n", stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace

Mutex::Mutex(Client& client, std::string resource, LeaseOptions options)
    : client_(client), resource_(std::move(resource)), options_(std::move(options)) {}

Mutex::~Mutex() = default;  // a held lease is released by ~Lease

Result<Lease> Mutex::take(milliseconds wait) {
  if (options_.reentrant) {
    return make_error(Errc::invalid_argument, "reentrant: a Mutex is not recursive (as a std::mutex)");
  }
  LeaseOptions o = options_;
  o.acquire.wait = std::max(wait, milliseconds{0});
  return client_.lock(resource_, std::move(o));
}

void Mutex::lock() {
  local_.lock();
  const milliseconds round = options_.acquire.wait.count() > 0 ? options_.acquire.wait : default_round;
  for (;;) {
    Result<Lease> r = take(round);
    if (r) {
      lease_ = std::move(*r);
      return;
    }
    if (!curable(r.error().code)) violated(resource_, r.error());
    remember(r.error());
  }
}

bool Mutex::try_lock() { return try_lock_within(milliseconds{0}); }

bool Mutex::try_lock_within(milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  if (!local_.try_lock_until(until)) {
    remember(make_error(Errc::held, resource_ + " is held by another thread of this process (the same Mutex)"));
    return false;
  }
  const auto left = std::chrono::ceil<milliseconds>(until - std::chrono::steady_clock::now());
  Result<Lease> r = take(wait.count() == 0 ? milliseconds{0} : std::max(left, milliseconds{0}));
  if (!r) {
    remember(r.error());
    local_.unlock();
    return false;
  }
  lease_ = std::move(*r);
  return true;
}

void Mutex::unlock() {
  Result<ReleaseResult> r = lease_.release();
  if (!r) remember(r.error());
  local_.unlock();
}

void Mutex::remember(const Error& e) {
  std::lock_guard<std::mutex> lock(error_mu_);
  last_error_ = e;
}

std::optional<Error> Mutex::last_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return last_error_;
}

}  // namespace redlock
