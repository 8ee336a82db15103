// lease_state.cpp — the record of one held lease (src/lease_state.hpp).
#include "lease_state.hpp"

#include <algorithm>
#include <utility>

#include "slab_pool.hpp"

namespace redlock::detail {

std::string lease_options_problem(const LeaseOptions& opts) {
  if (!(opts.extend_at > 0.0 && opts.extend_at < 1.0)) {
    return "extend_at: " + std::to_string(opts.extend_at) + " (must be between 0 and 1, exclusive)";
  }
  if (opts.max_extensions < 0) return "max_extensions: must be >= 0";
  if (opts.max_hold < milliseconds{0}) return "max_hold: must be >= 0";
  if (opts.acquire.permits > 0 && opts.reentrant) return "acquire.permits: not with reentrant (each holder takes a permit)";
  if (opts.acquire.shared && opts.reentrant) return "acquire.shared: not with reentrant (each reader holds its own entry)";
  return {};
}

static_assert(sizeof(LeaseState) <= 184, "a held lease's record grew: docs/benchmarks.md counts on about 200 bytes");

LeaseState::~LeaseState() {
  if (!inline_fits()) delete[] heap_;
  delete cold_.load(std::memory_order_relaxed);
}

void LeaseState::set_names(std::string_view resource, std::string_view token) {
  resource_size_ = static_cast<std::uint16_t>(resource.size());
  token_size_ = static_cast<std::uint16_t>(token.size());
  char* out = inline_;
  if (!inline_fits()) out = heap_ = new char[resource.size() + token.size()];
  std::copy(resource.begin(), resource.end(), out);
  std::copy(token.begin(), token.end(), out + resource.size());
}

LeaseCold& LeaseState::cold_locked() const {
  LeaseCold* c = cold_.load(std::memory_order_relaxed);
  if (c == nullptr) {
    c = new LeaseCold;
    cold_.store(c, std::memory_order_release);
  }
  return *c;
}

const std::vector<std::string>& LeaseState::more() const noexcept {
  static const std::vector<std::string> none;
  const LeaseCold* c = cold();
  return c != nullptr ? c->more : none;
}

const std::vector<std::string>& LeaseState::resources() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (c.all == nullptr) {
    auto list = std::make_unique<std::vector<std::string>>();
    list->reserve(1 + c.more.size());
    list->emplace_back(resource());
    list->insert(list->end(), c.more.begin(), c.more.end());
    c.all = std::move(list);
  }
  return *c.all;  // never changed once made
}

const std::string& LeaseState::resource_string() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (c.resource == nullptr) c.resource = std::make_unique<std::string>(resource());
  return *c.resource;
}

const std::string& LeaseState::token_string() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (c.token == nullptr) c.token = std::make_unique<std::string>(token());
  return *c.token;
}

std::stop_token LeaseState::stop_token() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (!c.stop.stop_possible()) {
    c.stop = std::stop_source();
    if (lost) c.stop.request_stop();
  }
  return c.stop.get_token();
}

bool LeaseState::lose_locked(const Error& e) {
  if (lost || released) return false;
  cold_locked().lost = std::make_unique<Error>(e);
  lost = true;
  return true;
}

bool LeaseState::lose_if_expired(TimePoint now) {
  std::stop_source signal{std::nostopstate};
  {
    std::lock_guard lock(mu);
    if (lost) return true;
    if (released || now < deadline()) return false;
    const auto late = std::chrono::floor<milliseconds>(now - deadline()).count();
    lose_locked(make_error(Errc::lost, "lease on " + std::string(resource()) + " lost: validity deadline passed " +
                                           std::to_string(late) +
                                           " ms ago, before the client's loop could act (the process or its "
                                           "loop thread was stopped)"));
    signal = cold()->stop;
  }
  if (signal.stop_possible()) signal.request_stop();
  return true;
}

std::shared_ptr<LeaseState> make_lease(Lock taken, LeaseOptions opts, std::string owner,
                                       std::shared_ptr<LeaseHost> host, std::vector<std::string> more) {
  auto state = std::allocate_shared<LeaseState>(SlabAllocator<LeaseState>{});
  state->set_names(taken.resource, taken.token);
  state->attempts = taken.attempts;
  state->ttl = taken.ttl;
  state->set_deadline(taken.validity_deadline);
  state->host = std::move(host);
  state->auto_extend = opts.auto_extend;
  state->fenced = opts.acquire.fence;
  state->extend_at = static_cast<float>(opts.extend_at);
  if (taken.fence != 0 || opts.max_extensions > 0 || opts.max_hold.count() > 0 || opts.on_lost || !owner.empty() ||
      !more.empty() || taken.permit || taken.shared) {
    LeaseCold& c = state->cold_locked();  // not shared yet
    c.fence = taken.fence;
    c.taken = taken.validity_deadline - taken.validity;  // about when the round began
    c.max_extensions = opts.max_extensions;
    c.max_hold = opts.max_hold;
    c.on_lost = std::move(opts.on_lost);
    c.owner = std::move(owner);
    c.more = std::move(more);
    if (taken.permit) c.permit = static_cast<std::uint8_t>(*taken.permit);
    c.shared = taken.shared;
  }
  return state;
}

}  // namespace redlock::detail
