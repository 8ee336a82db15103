// world.hpp — the deterministic simulator's time and randomness (issue 13):
// one thread, one event queue on true (simulated) time, seeded generators
// that fix everything, and the processes whose own clocks drift, step and
// pause. A client's engine, node sessions and watchdogs run on a
// SimRuntime (a detail::Runtime over its Process), the same code that runs
// on a uv loop in production.
//
// Time: `Nanos` is true time in nanoseconds since the world began. Every
// process reads its own clocks (a monotonic one and a wall one), each a
// piecewise-linear function of true time: a rate (drift) and steps.
//
// A loop turn: every event belongs to one process (or to the world itself:
// the network and the faults). Running one event is one loop turn of its
// process; at its end the process's turn hooks run (the simulated wires
// flush what was written during the turn as one batch). A paused process
// runs no events: the ones that come due are kept, in order, and run when
// it resumes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime.hpp"

namespace redlock::sim {

using Nanos = std::int64_t;  // true time, ns since the world began
inline constexpr Nanos ns_per_ms = 1'000'000;
inline constexpr Nanos never = INT64_MAX;

constexpr Nanos ms(double m) { return static_cast<Nanos>(m * 1e6); }
// loop_iteration: the true time a 0 ms timer takes to fire (one more turn
// of the loop).
inline constexpr Nanos loop_iteration = 5'000;

// Rng — xoshiro256** seeded by splitmix64: fast, and the same sequence for
// the same seed on every platform (no std:: distributions, whose output is
// implementation-defined).
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  // below: uniform in [0, bound); 0 when bound is 0.
  std::uint64_t below(std::uint64_t bound);
  // between: uniform in [lo, hi] (hi ≥ lo).
  std::int64_t between(std::int64_t lo, std::int64_t hi);
  double unit();  // [0, 1)
  bool chance(double p) { return unit() < p; }

 private:
  std::uint64_t s_[4];
};

// SimClock — one clock of one process: local reading as a function of true
// time, piecewise linear (rate changes and steps start new pieces; the
// history is kept so that the checker can map a local deadline back onto
// true time after the fact).
class SimClock {
 public:
  explicit SimClock(Nanos origin = 0, double rate = 1.0);
  // local: the reading at true time `t` (t ≥ the last change).
  Nanos local(Nanos t) const { return now_.local + static_cast<Nanos>(static_cast<double>(t - now_.start) * now_.rate); }
  double rate() const { return now_.rate; }
  void set_rate(Nanos t, double rate);
  void step(Nanos t, Nanos delta);
  // true_at: the first true time at which the reading is ≥ `target`, over
  // the history so far (extrapolated at the current rate). For clocks that
  // never step backwards (a process's monotonic clock).
  Nanos true_at(Nanos target) const;
  // true_delay: how much true time `local_delay` of this clock takes now.
  Nanos true_delay(Nanos local_delay) const;

 private:
  struct Piece {
    Nanos start;  // true time
    Nanos local;  // reading at start
    double rate;
  };
  std::vector<Piece> pieces_;
  Piece now_;  // pieces_.back(), kept in the clock: read on every clock reading
};

class Process;
class World;

// Event — one thing due at a true time. `id` names it for timers (kept
// when a paused process's event is put back); `order` breaks ties, FIFO.
struct Event {
  Nanos at = 0;
  std::uint64_t order = 0;
  std::uint64_t id = 0;
  Process* owner = nullptr;  // nullptr: the world's own
  void (*fn)(void* obj, std::uint64_t arg, std::uint64_t id) = nullptr;
  void* obj = nullptr;
  std::uint64_t arg = 0;
};

// TurnHook — something that acts at the end of its process's loop turn.
class TurnHook {
 public:
  virtual void end_turn() = 0;

 protected:
  ~TurnHook() = default;
};

// World — the event queue and true time. Not thread-safe: one thread.
class World {
 public:
  explicit World(std::uint64_t seed);
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World();

  Nanos now() const { return now_; }
  std::uint64_t seed() const { return seed_; }
  // rng: the stream for everything the processes draw (jitter, backoff,
  // network delays). Fault schedules draw from their own streams (make_rng)
  // so that adding a draw in one place does not reshuffle the others.
  Rng& rng() { return rng_; }
  Rng make_rng(std::uint64_t stream) const;

  // schedule: `fn(obj, arg, id)` at true time `at` (not before now), as a
  // loop turn of `owner`. Returns the event's id.
  std::uint64_t schedule(Nanos at, Process* owner, void (*fn)(void*, std::uint64_t, std::uint64_t), void* obj,
                         std::uint64_t arg = 0);
  // post: a closure at `at` (setup, faults, workloads; not for hot paths).
  std::uint64_t post(Nanos at, Process* owner, std::function<void()> task);

  // run_until runs every event due at or before `t`, then sets now to t.
  // Returns false when stopped early by stop().
  bool run_until(Nanos t);
  // step runs the next event; false when none is left.
  bool step();
  void stop() { stopped_ = true; }
  std::size_t queued() const { return heap_.size(); }
  std::uint64_t events_run() const { return events_run_; }

  // unique: a number never returned before in this world (token counters).
  std::uint64_t unique() { return ++unique_; }

  // For Process: put an event back on the queue at `at` (keeps its id).
  void requeue(Event e, Nanos at);

  // Slots: objects that events may outlive (timers) register here; an
  // event names the slot, and finds it empty once the object is gone.
  std::uint32_t add_slot(void* object);
  void clear_slot(std::uint32_t slot);
  void* slot(std::uint32_t slot) const { return slots_[slot]; }

 private:
  // Node — the heap's entry: the event's time and order as one 128-bit
  // key (time above, order below: compared as one number), and where its
  // body lies (events_), so that sifting moves 32 bytes, not 56.
  __extension__ using Key = unsigned __int128;
  struct Node {
    Key key;
    std::uint32_t body;
    Nanos at() const { return static_cast<Nanos>(static_cast<std::uint64_t>(key >> 64)); }
  };
  static constexpr std::size_t arity = 4;  // children per heap node
  void push(const Event& e);
  void pop_front();
  static void run_task(void* world, std::uint64_t slot, std::uint64_t id);

  std::uint64_t seed_;
  Rng rng_;
  Nanos now_ = 0;
  std::uint64_t next_order_ = 0;
  std::uint64_t next_id_ = 0;
  std::uint64_t events_run_ = 0;
  std::uint64_t unique_ = 0;
  bool stopped_ = false;
  std::vector<Node> heap_;
  std::vector<Event> events_;  // the bodies, by Node::body
  std::vector<std::uint32_t> free_events_;
  std::vector<std::function<void()>> tasks_;  // post()'s closures, by slot
  std::vector<std::uint32_t> free_tasks_;
  std::vector<void*> slots_;
  std::vector<std::uint32_t> free_slots_;
};

// Process — one simulated process: its clocks, its pause, its loop turns.
class Process {
 public:
  // steady_origin / wall_origin: the clocks' readings at true time now.
  Process(World& world, std::string name, Nanos steady_origin, Nanos wall_origin);
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  World& world() { return world_; }
  const std::string& name() const { return name_; }
  SimClock& steady() { return steady_; }
  SimClock& wall() { return wall_; }
  const SimClock& steady() const { return steady_; }
  Nanos steady_now() const { return steady_.local(world_.now()); }
  Nanos wall_now() const { return wall_.local(world_.now()); }

  bool paused() const { return paused_; }
  void pause() { paused_ = true; }
  // resume: the events that came due while paused run now, in their order.
  void resume();

  // at_turn_end: `hook` runs once at the end of the current turn.
  void at_turn_end(TurnHook* hook) { hooks_.push_back(hook); }
  // forget_hook: `hook` is going away (its pending end_turn is dropped).
  void forget_hook(TurnHook* hook);  // (not while its turn ends)

  // For World.
  void keep(const Event& e) { kept_.push_back(e); }
  void finish_turn();

 private:
  World& world_;
  std::string name_;
  SimClock steady_;
  SimClock wall_;
  bool paused_ = false;
  std::vector<Event> kept_;
  std::vector<TurnHook*> hooks_;
  std::vector<TurnHook*> running_;  // the hooks of the turn ending now
};

// SimRuntime — detail::Runtime on a Process: now() reads its monotonic
// clock, wall_now() its wall clock, timers fire on its loop turns (late
// while it is paused), random_token is unique per call and fixed by the
// seed.
class SimRuntime final : public detail::Runtime {
 public:
  explicit SimRuntime(Process& process) : process_(process) {}

  detail::TimePoint now() override;
  std::chrono::system_clock::time_point wall_now() override;
  std::unique_ptr<detail::Timer> timer(std::function<void()> fire) override;
  std::unique_ptr<detail::Signal> signal(std::function<void()> fire) override;
  Result<std::string> random_token() override;
  std::uint64_t random_below(std::uint64_t bound) override;

  Process& process() { return process_; }
  // to_time_point / from_time_point: the engine's TimePoint and this
  // process's monotonic reading in ns.
  static detail::TimePoint to_time_point(Nanos local);
  static Nanos from_time_point(detail::TimePoint t);

 private:
  Process& process_;
};

}  // namespace redlock::sim
