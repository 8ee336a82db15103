// leader_watch.hpp — an observation of one election on the client's loop
// (AsyncClient::observe, Client::observe; election.hpp: LeaderWatch).
//
// A LeaderWatcher reads the election (Reports::leader) when it starts, on
// every message of the election's news channel (a proclaim, a resign), when
// that channel's subscription is confirmed or comes back (messages may have
// been missed), when the leader's lock would run out unless extended (a dead
// leader publishes nothing), and on a safety net; and tells its callback each
// reading that differs from the last told. Loop thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "redlock/election.hpp"
#include "runtime.hpp"
#include "transport.hpp"

namespace redlock::detail {

class Reports;

// WatchLink — what a LeaderWatch handle shares with its watcher: `stopped`
// (any thread; the watcher tells nothing once it is set) and `teardown`,
// which ends the watcher on its loop — from the handle's thread for a
// Client's watch (it posts to the loop), on the loop for an AsyncClient's;
// cleared once the watcher has ended (the client closing), so a handle that
// outlives its client's close calls nothing.
struct WatchLink {
  std::atomic<bool> stopped{false};
  std::mutex mu;
  std::function<void()> teardown;  // (mu)
};

// LeaderWatcher — one enum and one transition function, step(Event).
//   idle           made, not started
//   reading        a reading is on its way
//   reading_again  one is on its way and news came meanwhile: read again
//                  once it is back (what it read may be older than the news)
//   waiting        the timer is set for the next reading (the leader's lock
//                  expiry, the safety net, or a backoff after an error)
//   ended          no more readings, no more calls; the channel unwatched
class LeaderWatcher final : public WakeListener, public std::enable_shared_from_this<LeaderWatcher> {
 public:
  // `retry`: the first backoff after a failed reading; `safety_net`: the
  // longest time between two readings.
  // `id`: its key in `reports` (a stop seen here first ends it there).
  LeaderWatcher(Reports& reports, std::uint64_t id, Runtime& runtime, Transport& transport, std::string name,
                std::string channel,
                std::chrono::milliseconds retry, std::chrono::milliseconds safety_net,
                std::shared_ptr<WatchLink> link, LeaderWatchCallback callback);
  LeaderWatcher(const LeaderWatcher&) = delete;
  LeaderWatcher& operator=(const LeaderWatcher&) = delete;

  void start() { step({.kind = Kind::start}); }
  // end: no more readings, no more calls, the channel unwatched; with
  // `closed`, the callback is told Errc::closed first (once).
  void end(bool closed) { step({.kind = Kind::end, .closed = closed}); }
  void on_wake(Why, std::string_view) override { step({.kind = Kind::wake}); }

 private:
  enum class State : std::uint8_t { idle, reading, reading_again, waiting, ended };
  // Event — every input: start; wake (news on the channel, or its
  // subscription confirmed or back); timer; read (a reading came back,
  // `reading`); end (`closed`: the client's close).
  enum class Kind : std::uint8_t { start, wake, timer, read, end };
  struct Event {
    Kind kind;
    std::optional<Result<LeaderStatus>> reading{};
    bool closed = false;
  };
  void step(Event e);
  // The steps' actions (called only from step).
  void begin();
  void read();
  void on_read(const Result<LeaderStatus>& r);
  void finish(bool closed);
  // tell: `r` to the callback unless it says what the last told said;
  // call: to the callback, whatever it says.
  void tell(const Result<LeaderStatus>& r);
  void call(const Result<LeaderStatus>& r);

  Reports& reports_;
  std::uint64_t id_;
  Transport& transport_;
  std::string name_, channel_;
  std::chrono::milliseconds retry_, safety_net_, backoff_{0};
  std::shared_ptr<WatchLink> link_;
  LeaderWatchCallback callback_;
  std::unique_ptr<Timer> timer_;
  State state_ = State::idle;
  // How it hears of news, fixed at the start: subscribed to the channel, or
  // polling (wake-ups off, or no subscriber possible).
  bool watching_ = false, polling_ = false;
  // What was told last: nothing yet, an error, or a reading (leader or none).
  enum class Told : std::uint8_t { nothing, error, reading } told_ = Told::nothing;
  std::optional<std::tuple<std::uint64_t, std::string, std::string, std::string>> last_;  // term, token, identity, value
  std::uint64_t highest_term_ = 0;
};

}  // namespace redlock::detail
