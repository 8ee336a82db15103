// world.cpp — the event queue, the clocks and the SimRuntime.
//
// The queue is a 4-ary heap (half the levels of a binary one, a node's
// children side by side) of 24-byte nodes (time, order, and the index of
// a plain event: a function pointer and two words, no closure): the hot
// paths — replies, deliveries, timers — allocate nothing per event. Closures (post) are for setup and faults.
#include "world.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace redlock::sim {

namespace {

std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// key: the heap's order (a min-heap on (at, order)) as one number, so
// that a comparison is a compare and a borrow, not two branches that a
// sift cannot predict (times are never negative).
__extension__ using u128 = unsigned __int128;

template <class E>
u128 key(const E& e) {
  if constexpr (requires { e.key; }) {
    return e.key;  // a heap node carries it
  } else {
    return (static_cast<u128>(static_cast<std::uint64_t>(e.at)) << 64) | e.order;
  }
}

template <class E>
bool later(const E& a, const E& b) {
  return key(a) > key(b);
}

}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (auto& s : s_) s = splitmix(seed);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::uint64_t Rng::below(std::uint64_t bound) {
  if (bound == 0) return 0;
  // Lemire's multiply-shift; the tiny bias is irrelevant here and the
  // result is the same everywhere.
  __extension__ using u128 = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<u128>(next()) * bound) >> 64);
}

std::int64_t Rng::between(std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
}

double Rng::unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

SimClock::SimClock(Nanos origin, double rate) : now_{0, origin, rate} { pieces_.push_back(now_); }

void SimClock::set_rate(Nanos t, double rate) {
  const Nanos at = local(t);
  if (pieces_.back().start == t) {
    pieces_.back() = {t, at, rate};
  } else {
    pieces_.push_back({t, at, rate});
  }
  now_ = pieces_.back();
}

void SimClock::step(Nanos t, Nanos delta) {
  const Nanos at = local(t) + delta;
  const double r = rate();
  if (pieces_.back().start == t) {
    pieces_.back() = {t, at, r};
  } else {
    pieces_.push_back({t, at, r});
  }
  now_ = pieces_.back();
}

Nanos SimClock::true_at(Nanos target) const {
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    const Piece& p = pieces_[i];
    if (target <= p.local) return p.start;  // reached at the piece's start (or jumped over)
    const Nanos need = static_cast<Nanos>(std::ceil(static_cast<double>(target - p.local) / p.rate));
    if (i + 1 == pieces_.size() || p.start + need < pieces_[i + 1].start) return p.start + need;
  }
  return never;  // not reached
}

Nanos SimClock::true_delay(Nanos local_delay) const {
  return static_cast<Nanos>(std::ceil(static_cast<double>(local_delay) / rate()));
}

World::World(std::uint64_t seed) : seed_(seed), rng_(seed ^ 0x5eed0001) {
  heap_.reserve(4096);
  events_.reserve(4096);
}

World::~World() = default;

Rng World::make_rng(std::uint64_t stream) const { return Rng(seed_ * 0x9e3779b97f4a7c15ULL + stream); }

void World::push(const Event& e) {
  std::uint32_t body;
  if (!free_events_.empty()) {
    body = free_events_.back();
    free_events_.pop_back();
    events_[body] = e;
  } else {
    body = static_cast<std::uint32_t>(events_.size());
    events_.push_back(e);
  }
  // Sift up from the new leaf: parents that come later move down.
  const Node node{key(e), body};
  std::size_t i = heap_.size();
  heap_.push_back(node);
  while (i > 0) {
    const std::size_t parent = (i - 1) / arity;
    if (!later(heap_[parent], node)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = node;
}

// pop_front removes the root: the last node sinks from the top into the
// hole, past every child that comes first.
void World::pop_front() {
  const Node last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) return;
  std::size_t i = 0;
  while (true) {
    const std::size_t first = i * arity + 1;
    if (first >= n) break;
    std::size_t best = first;
    auto best_key = key(heap_[first]);
    if (first + arity <= n) {
      // Four children (nearly every step): the earliest of each pair, then
      // of the two — two compares deep, not three in a row.
      const auto k1 = key(heap_[first + 1]), k2 = key(heap_[first + 2]), k3 = key(heap_[first + 3]);
      const bool l01 = k1 < best_key, l23 = k3 < k2;
      const auto m01 = l01 ? k1 : best_key, m23 = l23 ? k3 : k2;
      const std::size_t b01 = l01 ? first + 1 : first, b23 = l23 ? first + 3 : first + 2;
      const bool right = m23 < m01;
      best = right ? b23 : b01;
      best_key = right ? m23 : m01;
    } else {
      for (std::size_t c = first + 1; c < n; ++c) {
        const auto k = key(heap_[c]);
        const bool less = k < best_key;
        best = less ? c : best;
        best_key = less ? k : best_key;
      }
    }
    if (key(last) < best_key) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = last;
}

std::uint64_t World::schedule(Nanos at, Process* owner, void (*fn)(void*, std::uint64_t, std::uint64_t), void* obj,
                              std::uint64_t arg) {
  Event e;
  e.at = std::max(at, now_);
  e.order = next_order_++;
  e.id = ++next_id_;
  e.owner = owner;
  e.fn = fn;
  e.obj = obj;
  e.arg = arg;
  push(e);
  return e.id;
}

void World::requeue(Event e, Nanos at) {
  e.at = std::max(at, now_);
  e.order = next_order_++;
  push(e);
}

std::uint64_t World::post(Nanos at, Process* owner, std::function<void()> task) {
  std::uint32_t slot;
  if (!free_tasks_.empty()) {
    slot = free_tasks_.back();
    free_tasks_.pop_back();
    tasks_[slot] = std::move(task);
  } else {
    slot = static_cast<std::uint32_t>(tasks_.size());
    tasks_.push_back(std::move(task));
  }
  return schedule(at, owner, &World::run_task, this, slot);
}

void World::run_task(void* world, std::uint64_t slot, std::uint64_t) {
  auto* self = static_cast<World*>(world);
  std::function<void()> task = std::move(self->tasks_[slot]);
  self->tasks_[slot] = nullptr;
  self->free_tasks_.push_back(static_cast<std::uint32_t>(slot));
  task();
}

std::uint32_t World::add_slot(void* object) {
  if (!free_slots_.empty()) {
    const std::uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    slots_[s] = object;
    return s;
  }
  slots_.push_back(object);
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

void World::clear_slot(std::uint32_t slot) {
  slots_[slot] = nullptr;
  free_slots_.push_back(slot);
}

bool World::step() {
  if (heap_.empty()) return false;
  const std::uint32_t body = heap_.front().body;
  pop_front();
  const Event e = events_[body];
  free_events_.push_back(body);
  now_ = e.at;
  if (e.owner != nullptr && e.owner->paused()) {
    e.owner->keep(e);
    return true;
  }
  ++events_run_;
  e.fn(e.obj, e.arg, e.id);
  if (e.owner != nullptr) e.owner->finish_turn();
  return true;
}

bool World::run_until(Nanos t) {
  stopped_ = false;
  while (!heap_.empty() && heap_.front().at() <= t) {
    step();
    if (stopped_) return false;
  }
  now_ = std::max(now_, t);
  return true;
}

Process::Process(World& world, std::string name, Nanos steady_origin, Nanos wall_origin)
    : world_(world),
      name_(std::move(name)),
      steady_(steady_origin - world.now()),
      wall_(wall_origin - world.now()) {}

void Process::resume() {
  if (!paused_) return;
  paused_ = false;
  std::vector<Event> kept = std::move(kept_);
  kept_.clear();
  for (const Event& e : kept) world_.requeue(e, world_.now());
}

void Process::forget_hook(TurnHook* hook) { std::erase(hooks_, hook); }

void Process::finish_turn() {
  // A hook may write and so register hooks again: run until none is left.
  while (!hooks_.empty()) {
    running_.swap(hooks_);
    for (TurnHook* h : running_) h->end_turn();
    running_.clear();
  }
}

namespace {

// Armed — one pending event of a timer or signal that may be destroyed
// before it comes: the event names the object's world slot and the id it
// was armed with; a stale event (stopped, re-armed, or the object gone)
// finds another id, or an empty slot, and does nothing.
class Armed {
 protected:
  Armed(Process& process, std::function<void()> fire)
      : process_(process), fire_(std::move(fire)), slot_(process.world().add_slot(this)) {}
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;
  ~Armed() { process_.world().clear_slot(slot_); }

  void arm(Nanos at) { armed_ = process_.world().schedule(at, &process_, &Armed::on_event, &process_.world(), slot_); }

  Process& process_;
  std::uint64_t armed_ = 0;  // the pending event's id; 0: none

 private:
  static void on_event(void* world, std::uint64_t slot, std::uint64_t id) {
    auto* self = static_cast<Armed*>(static_cast<World*>(world)->slot(static_cast<std::uint32_t>(slot)));
    if (self == nullptr || self->armed_ != id) return;
    self->armed_ = 0;
    self->fire_();  // may destroy self
  }

  std::function<void()> fire_;
  std::uint32_t slot_;
};

// SimTimer — a Timer on its process's loop turns.
class SimTimer final : public detail::Timer, private Armed {
 public:
  SimTimer(Process& process, std::function<void()> fire) : Armed(process, std::move(fire)) {}

  void start(std::chrono::milliseconds delay) override {
    const Nanos local = std::max<long long>(delay.count(), 0) * ns_per_ms;
    // A zero delay is the next loop iteration, which takes a little time:
    // code that re-arms 0 ms until a deadline (a busy loop) then advances
    // instead of livelocking the simulation.
    arm(process_.world().now() + (local == 0 ? loop_iteration : process_.steady().true_delay(local)));
  }
  void stop() override { armed_ = 0; }
  bool active() const override { return armed_ != 0; }
};

// SimSignal — raise() runs fire on the process's next turn, once per batch.
class SimSignal final : public detail::Signal, private Armed {
 public:
  SimSignal(Process& process, std::function<void()> fire) : Armed(process, std::move(fire)) {}

  void raise() override {
    if (armed_ == 0) arm(process_.world().now());
  }
};

}  // namespace

detail::TimePoint SimRuntime::to_time_point(Nanos local) {
  return detail::TimePoint(std::chrono::duration_cast<detail::Clock::duration>(std::chrono::nanoseconds(local)));
}

Nanos SimRuntime::from_time_point(detail::TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

detail::TimePoint SimRuntime::now() { return to_time_point(process_.steady_now()); }

std::chrono::system_clock::time_point SimRuntime::wall_now() {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(process_.wall_now())));
}

std::unique_ptr<detail::Timer> SimRuntime::timer(std::function<void()> fire) {
  return std::make_unique<SimTimer>(process_, std::move(fire));
}

std::unique_ptr<detail::Signal> SimRuntime::signal(std::function<void()> fire) {
  return std::make_unique<SimSignal>(process_, std::move(fire));
}

Result<std::string> SimRuntime::random_token() {
  // Unique per call by construction (a world-wide counter in the first 16
  // digits), the rest drawn from the seeded stream: a replay draws the same.
  World& w = process_.world();
  std::string out(32, '0');
  const std::uint64_t halves[2] = {w.unique(), w.rng().next()};
  for (std::size_t h = 0; h < 2; ++h) {  // each as %016llx writes it
    for (std::size_t i = 0; i < 16; ++i) out[h * 16 + i] = "0123456789abcdef"[(halves[h] >> (60 - 4 * i)) & 0xf];
  }
  return out;
}

std::uint64_t SimRuntime::random_below(std::uint64_t bound) { return process_.world().rng().below(bound); }

}  // namespace redlock::sim
