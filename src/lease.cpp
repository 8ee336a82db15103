// lease.cpp — the Lease and AsyncLease handles: what a caller holds of a
// lease (src/lease_state.hpp) kept by its client's LeaseService.
#include "redlock/lease.hpp"

#include <future>
#include <utility>

#include "lease_service.hpp"

namespace redlock {

// ---- Lease -------------------------------------------------------------------------

namespace {

const std::string empty_string;

// lost_before_release: the loss of a lease released after it was lost —
// by the watchdog, or by its deadline passing while nothing ran — is what
// a release reports (once the release itself is done: whatever is left of
// the key goes). Errc::lost, as lost() says.
std::optional<Error> lost_before_release(detail::LeaseState& s) {
  if (!s.lose_if_expired(detail::Clock::now())) return std::nullopt;
  std::lock_guard lock(s.mu);
  return s.lost_error();
}

// Release — a release begun: its outcome known at once (`now`), or its
// result to come (`later`, with `lost` overriding it, as it does at once).
struct Release {
  std::optional<Result<ReleaseResult>> now;
  std::future<Result<ReleaseResult>> later;
  std::optional<Error> lost;
};

Release begin_release(const std::shared_ptr<detail::LeaseState>& s, const char* member) {
  Release out;
  out.lost = lost_before_release(*s);
  {
    std::lock_guard lock(s->mu);
    if (s->released) {
      out.now = make_error(Errc::not_held, "lease on " + std::string(s->resource()) + " already released");
      return out;
    }
    if (--s->holds > 0) {
      out.now = ReleaseResult{};  // a reentrant hold: the count only
      return out;
    }
    s->released = true;
  }
  detail::LeaseHost& host = *s->host;
  auto promise = std::make_shared<std::promise<Result<ReleaseResult>>>();
  out.later = promise->get_future();
  bool posted = false;
  {
    std::lock_guard<std::mutex> lock(host.mu);
    if (const detail::LeaseCold* c = s->cold(); c != nullptr && !c->owner.empty()) {
      auto it = host.reentrant.find({std::string(s->resource()), c->owner});
      if (it != host.reentrant.end() && !it->second.acquiring && it->second.lease.lock() == s) {
        host.reentrant.erase(it);
      }
    }
    if (host.post) {
      host.post([s, promise, lost = out.lost](detail::LeaseService& leases) {
        leases.release(s, [promise, lost](Result<ReleaseResult> r) {
          if (lost) return promise->set_value(*lost);
          promise->set_value(std::move(r));
        });
      });
      posted = true;
    }
  }
  if (!posted) {
    out.now = make_error(Errc::closed, "the client is gone; the lock on " + std::string(s->resource()) + " expires by its TTL");
  } else if (std::this_thread::get_id() == host.loop_thread) {
    // Never wait on the loop thread itself: the release could not run.
    out.now = make_error(Errc::invalid_argument,
                         std::string("Lease::") + member + " called on the client's own loop thread (inside on_lost?): "
                         "the release of " + std::string(s->resource()) +
                         " was started but not waited for; call it from another thread to hear its outcome");
  }
  return out;
}

Result<ReleaseResult> release_state(const std::shared_ptr<detail::LeaseState>& s) {
  Release r = begin_release(s, "release");
  if (r.now) return std::move(*r.now);
  if (r.later.wait_for(s->host->release_bound) == std::future_status::ready) return r.later.get();
  if (r.lost) return std::move(*r.lost);
  return make_error(Errc::no_quorum, "release of " + std::string(s->resource()) + " not confirmed within " +
                                         std::to_string(s->host->release_bound.count()) + " ms");
}

}  // namespace

Lease::Lease() noexcept = default;
Lease::Lease(std::shared_ptr<detail::LeaseState> state) noexcept : LeaseView(std::move(state)) {}
Lease::Lease(Lease&& other) noexcept = default;

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) (void)release_state(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Lease::~Lease() {
  if (state_ == nullptr) return;
  try {
    (void)release_state(state_);
  } catch (...) {  // never throw from a destructor (bad_alloc in a message, say)
  }
}

bool LeaseView::valid() const noexcept {
  if (state_ == nullptr) return false;
  std::lock_guard lock(state_->mu);
  return !state_->released && !state_->lost && detail::Clock::now() < state_->deadline();
}

const std::string& LeaseView::resource() const noexcept { return state_ ? state_->resource_string() : empty_string; }
const std::vector<std::string>& LeaseView::resources() const noexcept {
  static const std::vector<std::string> none;
  return state_ ? state_->resources() : none;
}
const std::string& LeaseView::token() const noexcept { return state_ ? state_->token_string() : empty_string; }
std::uint64_t LeaseView::fence() const noexcept { return state_ ? state_->fence() : 0; }
int LeaseView::attempts() const noexcept { return state_ ? state_->attempts : 0; }
bool LeaseView::shared() const noexcept { return state_ != nullptr && state_->shared(); }

std::optional<std::uint32_t> LeaseView::permit() const noexcept {
  if (state_ == nullptr || state_->permit() == detail::no_permit) return std::nullopt;
  return state_->permit();
}

BootClock::time_point LeaseView::deadline() const noexcept {
  if (state_ == nullptr) return {};
  return state_->deadline();
}

milliseconds LeaseView::remaining() const noexcept {
  const auto left = deadline() - BootClock::now();
  return left > BootClock::duration::zero() ? std::chrono::duration_cast<milliseconds>(left)
                                                            : milliseconds{0};
}

int LeaseView::extensions() const noexcept {
  if (state_ == nullptr) return 0;
  std::lock_guard lock(state_->mu);
  return state_->extensions;
}

int LeaseView::holds() const noexcept {
  if (state_ == nullptr) return 0;
  std::lock_guard lock(state_->mu);
  return state_->holds;
}

std::stop_token LeaseView::stop_token() const noexcept {
  if (state_ == nullptr) return {};
  try {
    return state_->stop_token();
  } catch (...) {  // no memory for the stop state: a token that is never requested
    return {};
  }
}

std::optional<Error> LeaseView::lost() const {
  if (state_ == nullptr) return std::nullopt;
  state_->lose_if_expired(detail::Clock::now());
  std::lock_guard lock(state_->mu);
  if (!state_->lost) return std::nullopt;
  return state_->lost_error();
}

Result<ReleaseResult> Lease::release() {
  if (state_ == nullptr) return make_error(Errc::not_held, "empty lease: nothing to release");
  auto state = std::move(state_);
  return release_state(state);
}

std::future<Result<ReleaseResult>> Lease::release_async() {
  Release r;
  if (state_ == nullptr) {
    r.now = make_error(Errc::not_held, "empty lease: nothing to release");
  } else {
    const std::shared_ptr<detail::LeaseState> state = std::move(state_);
    r = begin_release(state, "release_async");
  }
  if (!r.now) return std::move(r.later);
  std::promise<Result<ReleaseResult>> ready;
  ready.set_value(std::move(*r.now));
  return ready.get_future();
}

// ---- AsyncLease ----------------------------------------------------------------------

namespace {

// release_async: stop the watchdog and release, on the loop thread the
// caller is on. `done` may be empty.
void release_async(std::shared_ptr<detail::LeaseState> s, std::function<void(Result<ReleaseResult>)> done) {
  auto tell = [&done](Error e) {
    if (done) done(std::move(e));
  };
  if (s == nullptr) return tell(make_error(Errc::not_held, "empty lease: nothing to release"));
  std::optional<Error> lost = lost_before_release(*s);
  {
    std::lock_guard lock(s->mu);
    if (s->released) return tell(make_error(Errc::not_held, "lease on " + std::string(s->resource()) + " already released"));
    s->released = true;
  }
  std::function<void(detail::LeaseHost::Task)> post;
  {
    std::lock_guard<std::mutex> lock(s->host->mu);
    post = s->host->post;
  }
  if (!post) return tell(make_error(Errc::closed, "the client is closed; the lock on " + std::string(s->resource()) + " expires by its TTL"));
  post([s, lost = std::move(lost), done = std::move(done)](detail::LeaseService& leases) mutable {
    leases.release(s, [lost = std::move(lost), done = std::move(done)](Result<ReleaseResult> r) {
      if (!done) return;
      if (lost) return done(std::move(*lost));
      done(std::move(r));
    });
  });
}

}  // namespace

AsyncLease::AsyncLease() noexcept = default;
AsyncLease::AsyncLease(std::shared_ptr<detail::LeaseState> state) noexcept : LeaseView(std::move(state)) {}
AsyncLease::AsyncLease(AsyncLease&& other) noexcept = default;

AsyncLease& AsyncLease::operator=(AsyncLease&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) release_async(std::move(state_), {});
    state_ = std::move(other.state_);
  }
  return *this;
}

AsyncLease::~AsyncLease() {
  if (state_ == nullptr) return;
  try {
    release_async(std::move(state_), {});
  } catch (...) {  // never throw from a destructor
  }
}

void AsyncLease::release(std::function<void(Result<ReleaseResult>)> done) {
  release_async(std::move(state_), std::move(done));
}

}  // namespace redlock

