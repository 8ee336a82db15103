// lease_state.hpp — what a Lease shares with its client's loop.
//
// LeaseState is shared (shared_ptr) by the Lease handles of the user's
// threads and by its watchdog on the loop thread (LeaseService); its
// mutable fields are guarded by its lock. LeaseHost is the client's side
// of the link: it posts work to the client's lease service for as long as
// the client lives (the client clears it before it closes), and it keeps
// the reentrancy registry.
//
// Lock order: LeaseHost::mu before LeaseState::mu, never the other way.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>
#include <thread>

#include "redlock/lease.hpp"
#include "extend_batch.hpp"
#include "lease_wheel.hpp"
#include "runtime.hpp"

namespace redlock::detail {

class LeaseService;

// Reentry — one (resource, owner) of the reentrancy registry: the lease
// that owner holds, or `acquiring` while one of its threads is taking it
// (the owner's other threads wait for that outcome instead of contending
// with their own owner).
struct Reentry {
  std::weak_ptr<struct LeaseState> lease;
  bool acquiring = false;
};

struct LeaseHost {
  using Task = std::function<void(LeaseService&)>;
  using ReentryKey = std::pair<std::string, std::string>;  // resource, owner
  std::mutex mu;
  // post runs a task on the loop thread, with the client's lease service;
  // empty once the client is gone.
  std::function<void(Task)> post;                               // guarded by mu
  std::thread::id loop_thread;                                  // set once, before any lease exists
  milliseconds release_bound{0};                                // how long a release may block a caller
  milliseconds default_ttl{0};                                  // Options::default_ttl, for re-entry checks
  std::map<ReentryKey, Reentry> reentrant;                      // guarded by mu
  std::condition_variable_any reentry_settled;                  // an `acquiring` entry got its outcome
};

// LeaseLock — a lease's own lock, four bytes (a program may hold 100,000
// leases; a std::mutex is 40). What it guards is a few loads and stores:
// a thread that finds it taken sleeps on the word (a futex), and an
// unlock with nobody asleep makes no system call.
class LeaseLock {
 public:
  void lock() noexcept {
    while (word_.exchange(1, std::memory_order_acquire) != 0) word_.wait(1, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    word_.store(0, std::memory_order_release);
    word_.notify_one();
  }

 private:
  std::atomic<int> word_{0};
};

// LeaseCold — what most leases never use, made only when one does: at
// make_lease (a fence, caps, an on_lost, an owner, more resources), or
// later under the lease's lock (the loss, the stop source, the API's
// copies of the names), or on the loop (the last failed extension).
struct LeaseCold {
  // Fixed when the lease is taken.
  std::uint64_t fence = 0;
  TimePoint taken{};  // about when the acquire round began (for max_hold)
  int max_extensions = 0;
  milliseconds max_hold{0};
  LostCallback on_lost;
  std::string owner;  // reentrant leases: their owner
  // more: the other resources of a multi-resource lease (sorted, after the first).
  std::vector<std::string> more;
  std::uint8_t permit = no_permit;  // a semaphore's lease: its permit
  bool shared = false;              // a read lock's lease: its entry among the readers

  // Made later, under the lease's lock; never changed once made (the
  // strings and the list are handed out by reference).
  std::unique_ptr<Error> lost;
  std::stop_source stop{std::nostopstate};
  std::unique_ptr<std::vector<std::string>> all;
  std::unique_ptr<std::string> resource, token;

  // Loop thread only: the last extension's failure, while no later one succeeded.
  std::unique_ptr<Error> last_failure;
  // on_lost and the telemetry have heard of the loss (loop thread, under
  // the lease's lock; the loss may be recorded on another thread).
  bool told = false;
};

// LeaseState — one held lease, and its watchdog: the record shared (by
// shared_ptr) by the Lease handles of the user's threads and by the loop
// while its watchdog runs. A program may hold 100,000 leases, so the
// record is one allocation of about 200 bytes (docs/benchmarks.md,
// "Many leases"): the names inline, the watchdog's timer an
// entry of its service's LeaseWheel (intrusive), a four-byte lock, and all
// that most leases never use behind one pointer (LeaseCold).
//
// Threads: `mu` guards released, lost, holds, extensions and the making of
// `cold`; the deadline is atomic (written by the loop under mu, read by
// anyone); the watchdog's fields (the wheel entry, stopped, extending,
// extend_planned, cap, self) are the loop's alone.
struct LeaseState final : Extendee, WheelEntry {
  LeaseState() = default;
  LeaseState(const LeaseState&) = delete;
  LeaseState& operator=(const LeaseState&) = delete;
  ~LeaseState();

  // Fixed when the lease is taken: host (null in the simulator: no Lease
  // handles), ttl, attempts (the acquire's rounds), extend_at,
  // auto_extend, fenced (taken with a fencing token), the names.
  std::shared_ptr<LeaseHost> host;
  // self: the loop's hold on the record while its watchdog runs or an
  // extension is in flight (LeaseService; loop thread only).
  std::shared_ptr<LeaseState> self;
  milliseconds ttl{0};

 private:
  std::atomic<Clock::rep> deadline_{0};
  mutable std::atomic<LeaseCold*> cold_{nullptr};  // owned; made once, freed with the record

 public:
  int attempts = 0;
  float extend_at = 1.0f / 3.0f;
  int extensions = 0;  // (mu)
  int holds = 1;       // (mu)
  mutable LeaseLock mu;

 private:
  std::uint16_t resource_size_ = 0;  // resource names are at most 1024 bytes, tokens 128
  std::uint16_t token_size_ = 0;

 public:
  bool auto_extend = true;
  bool fenced = false;
  bool released = false;  // the last hold was given back: nothing more happens (mu)
  bool lost = false;      // cold()->lost says why (mu)
  // The watchdog's (loop thread only): stopped, an extension in flight,
  // the wheel entry is the next extension (else the deadline), and why it
  // no longer extends (Cap::none: it does).
  bool stopped = false;
  bool extending = false;
  bool extend_planned = false;
  enum class Cap : std::uint8_t { none, auto_extend_off, max_extensions, max_hold };
  Cap cap = Cap::none;

 private:
  // The names, resource then token: inline when they fit (a 32-byte name
  // and a 32-digit token do), else on the heap.
  union {
    char inline_[64];
    char* heap_;
  };

 public:
  std::string_view resource() const noexcept { return {text(), resource_size_}; }
  std::string_view token() const noexcept { return {text() + resource_size_, token_size_}; }
  // set_names: the resource and the token (once, before the lease is shared).
  void set_names(std::string_view resource, std::string_view token);

  // The rarely used part (null: none of it). cold_locked makes it if need
  // be (mu held, or before the lease is shared).
  LeaseCold* cold() const noexcept { return cold_.load(std::memory_order_acquire); }
  LeaseCold& cold_locked() const;
  std::uint64_t fence() const noexcept { return cold() ? cold()->fence : 0; }
  std::uint8_t permit() const noexcept { return cold() ? cold()->permit : no_permit; }
  bool shared() const noexcept { return cold() != nullptr && cold()->shared; }
  const std::vector<std::string>& more() const noexcept;
  bool multi() const noexcept { return !more().empty(); }

  TimePoint deadline() const noexcept {
    return TimePoint{Clock::duration{deadline_.load(std::memory_order_acquire)}};
  }
  void set_deadline(TimePoint t) noexcept { deadline_.store(t.time_since_epoch().count(), std::memory_order_release); }

  // resources: every resource, sorted; resource_string / token_string:
  // the names as strings (each made on first use; mu must not be held).
  const std::vector<std::string>& resources() const;
  const std::string& resource_string() const;
  const std::string& token_string() const;
  // stop_token: requested once the lease is lost (mu must not be held).
  std::stop_token stop_token() const;
  // lose_locked: record the loss (mu held); false if already lost or
  // released. The caller requests the stop source after letting go of mu.
  bool lose_locked(const Error& e);
  // lose_if_expired: from any thread, the loss of a lease whose deadline
  // has passed at `now` though the loop has not declared it yet (the
  // process, or its loop thread, was stopped): recorded at once and the
  // stop token requested, so that every reader agrees with valid(); the
  // watchdog tells on_lost when the loop runs again. True while lost (mu
  // must not be held).
  bool lose_if_expired(TimePoint now);
  // lost_error: why it was lost (mu held; lost must be true).
  const Error& lost_error() const noexcept { return *cold()->lost; }

  // Extendee: every lease extends through its service's batcher (one of
  // several resources with a key per resource in the same round).
  std::string_view extend_resource() const override { return resource(); }
  std::span<const std::string> extend_more() const override { return more(); }
  std::string_view extend_token() const override { return token(); }
  std::uint8_t extend_permit() const override { return permit(); }
  bool extend_shared() const override { return shared(); }
  milliseconds extend_ttl() const override { return ttl; }
  TimePoint extend_deadline() const override { return deadline(); }

 private:
  const char* text() const noexcept { return inline_fits() ? inline_ : heap_; }
  bool inline_fits() const noexcept { return std::size_t{resource_size_} + token_size_ <= sizeof inline_; }
};

// lease_options_problem: what is wrong with `opts` (extend_at outside
// (0, 1), negative caps); empty when nothing is.
std::string lease_options_problem(const LeaseOptions& opts);

// make_lease: the state of a lease just taken as `taken`; `more`: the
// other resources of a multi-resource lease (sorted, after taken.resource).
// `host` may be null (the simulator: no Lease handles).
std::shared_ptr<LeaseState> make_lease(Lock taken, LeaseOptions opts, std::string owner,
                                       std::shared_ptr<LeaseHost> host, std::vector<std::string> more = {});

}  // namespace redlock::detail
