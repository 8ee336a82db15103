// test_lease_wheel.cpp — the lease watchdogs' timing wheel
// (src/lease_wheel): fire order and ticks, re-arms and disarms (inside
// fires too), far dues through every level with few wakes, the runtime
// timer given back when idle, take_all, and a seeded run against a
// reference model.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lease_wheel.hpp"
#include "test_runtime.hpp"

using namespace redlock::detail;
using redlock::test::ManualRuntime;
using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {

// CountingRuntime — ManualRuntime, counting what the wheel does with its
// runtime timer: how many exist, how often one is started and fires. `late`
// delays every start, as a loop that slept would.
class CountingRuntime final : public Runtime {
 public:
  ManualRuntime manual;
  int timers_alive = 0;
  int starts = 0;
  int wakes = 0;
  milliseconds late{0};

  TimePoint now() override { return manual.now(); }
  std::chrono::system_clock::time_point wall_now() override { return manual.wall_now(); }
  std::unique_ptr<Timer> timer(std::function<void()> fire) override {
    return std::make_unique<CountedTimer>(*this, std::move(fire));
  }
  std::unique_ptr<Signal> signal(std::function<void()> fire) override { return manual.signal(std::move(fire)); }
  redlock::Result<std::string> random_token() override { return manual.random_token(); }
  std::uint64_t random_below(std::uint64_t bound) override { return manual.random_below(bound); }

 private:
  struct CountedTimer final : Timer {
    CountedTimer(CountingRuntime& rt, std::function<void()> fire)
        : runtime(rt), inner(rt.manual.timer([this, fire = std::move(fire)] {
            ++runtime.wakes;
            fire();  // may destroy this timer: nothing after it
          })) {
      ++runtime.timers_alive;
    }
    ~CountedTimer() override { --runtime.timers_alive; }
    void start(milliseconds delay) override {
      ++runtime.starts;
      inner->start(delay + runtime.late);
    }
    void stop() override { inner->stop(); }
    bool active() const override { return inner->active(); }

    CountingRuntime& runtime;
    std::unique_ptr<Timer> inner;
  };
};

// Item — a lease record's stand-in: derives from its entry.
struct Item : WheelEntry {
  std::string name;
  std::function<void(Item&)> on_fire;  // besides being logged
};

// Log — the wheel's fire context: which item fired, and when (ms after t0).
struct Log {
  Runtime& rt;
  TimePoint t0;
  std::vector<std::pair<std::string, long long>> fired;

  static void fire(void* context, WheelEntry* entry, TimePoint /*now*/) {
    auto& log = *static_cast<Log*>(context);
    auto& item = *static_cast<Item*>(entry);
    CHECK_FALSE(item.armed());  // disarmed before its fire runs
    log.fired.emplace_back(item.name, std::chrono::duration_cast<milliseconds>(log.rt.now() - log.t0).count());
    if (item.on_fire) item.on_fire(item);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, at] : fired) out.push_back(name);
    return out;
  }
};

using Fired = std::vector<std::pair<std::string, long long>>;

}  // namespace

TEST_CASE("entries fire at the first whole tick at or after their due, FIFO within a tick, never early") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}}, c{{}, "c", {}}, d{{}, "d", {}}, e{{}, "e", {}};
  wheel.arm(&a, log.t0 + milliseconds{10});
  wheel.arm(&c, log.t0 + microseconds{5300});  // tick 6
  wheel.arm(&b, log.t0 + milliseconds{10});
  wheel.arm(&d, log.t0 + microseconds{300});  // sub-ms: tick 1, not 0
  wheel.arm(&e, log.t0 + microseconds{9001});  // tick 10, armed after a and b
  CHECK(wheel.armed() == 5);
  CHECK(a.armed());
  CHECK(rt.manual.armed() == 1);  // one runtime timer for all of them
  rt.manual.advance(milliseconds{0});
  CHECK(log.fired.empty());
  rt.manual.advance(milliseconds{5});
  CHECK(log.fired == Fired{{"d", 1}});
  rt.manual.advance(milliseconds{5});
  CHECK(log.fired == Fired{{"d", 1}, {"c", 6}, {"a", 10}, {"b", 10}, {"e", 10}});
  CHECK(wheel.armed() == 0);
  CHECK(rt.wakes == 3);
}

TEST_CASE("FIFO within a tick holds for entries armed far apart in time (one on a higher level then)") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}}, c{{}, "c", {}}, d{{}, "d", {}};
  wheel.arm(&a, log.t0 + milliseconds{1000});  // 1000 ticks ahead: level 1
  wheel.arm(&d, log.t0 + milliseconds{745});  // wakes the wheel at 745
  rt.manual.advance(milliseconds{745});
  wheel.arm(&b, log.t0 + milliseconds{1000});  // 255 ahead, but placed with a, by its tick
  rt.manual.advance(milliseconds{100});
  wheel.arm(&c, log.t0 + milliseconds{1000});
  rt.manual.advance(milliseconds{155});
  CHECK(log.fired == Fired{{"d", 745}, {"a", 1000}, {"b", 1000}, {"c", 1000}});
}

TEST_CASE("a due in the past fires on the next turn or the next tick, never inside arm") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}};
  rt.manual.advance(milliseconds{7});
  wheel.arm(&a, log.t0 - hours{1});  // idle wheel: its current tick catches up first
  CHECK(log.fired.empty());
  rt.manual.advance(milliseconds{1});
  CHECK(log.fired == Fired{{"a", 8}});
  // The wheel has just run tick 8: a due at it goes to the next one.
  wheel.arm(&b, rt.now());
  rt.manual.advance(milliseconds{0});
  CHECK(log.fired.size() == 1);
  rt.manual.advance(milliseconds{1});
  CHECK(log.fired == Fired{{"a", 8}, {"b", 9}});
}

TEST_CASE("re-arming moves an entry earlier or later, to the back of its tick; disarm cancels") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}}, c{{}, "c", {}}, d{{}, "d", {}};
  wheel.arm(&a, log.t0 + milliseconds{500});
  wheel.arm(&b, log.t0 + milliseconds{20});
  wheel.arm(&c, log.t0 + milliseconds{40});
  wheel.arm(&d, log.t0 + milliseconds{5});
  wheel.arm(&a, log.t0 + milliseconds{5});  // earlier, after d
  wheel.arm(&b, log.t0 + milliseconds{600});  // later
  wheel.disarm(&c);
  wheel.disarm(&c);  // not armed: no-op
  CHECK_FALSE(c.armed());
  CHECK(wheel.armed() == 3);
  rt.manual.advance(milliseconds{5});
  CHECK(log.fired == Fired{{"d", 5}, {"a", 5}});
  rt.manual.advance(milliseconds{594});
  CHECK(log.fired.size() == 2);
  rt.manual.advance(milliseconds{1});
  CHECK(log.fired == Fired{{"d", 5}, {"a", 5}, {"b", 600}});
  rt.manual.advance(milliseconds{1000});
  CHECK(log.fired.size() == 3);
}

TEST_CASE("inside a fire: re-arming at the current time waits for a later turn; disarming or moving an entry of the same tick") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}}, c{{}, "c", {}}, d{{}, "d", {}};
  int again = 0;
  a.on_fire = [&](Item& self) {
    if (++again < 3) wheel.arm(&self, rt.now());
    wheel.disarm(&b);  // due at this tick, not fired yet
    wheel.arm(&c, rt.now() + milliseconds{3});
  };
  wheel.arm(&a, log.t0 + milliseconds{5});
  wheel.arm(&b, log.t0 + milliseconds{5});
  wheel.arm(&c, log.t0 + milliseconds{5});
  wheel.arm(&d, log.t0 + milliseconds{5});
  rt.manual.advance(milliseconds{5});
  CHECK(log.fired == Fired{{"a", 5}, {"d", 5}});  // a did not fire again in the same drain
  rt.manual.advance(milliseconds{1});
  CHECK(log.fired == Fired{{"a", 5}, {"d", 5}, {"a", 6}});
  rt.manual.advance(milliseconds{10});
  CHECK(log.fired == Fired{{"a", 5}, {"d", 5}, {"a", 6}, {"a", 7}, {"c", 10}});
  CHECK(wheel.armed() == 0);
  CHECK(rt.timers_alive == 0);
}

TEST_CASE("a loop that slept: one wake runs every tick passed, in order; arms inside it wait for a later turn") {
  CountingRuntime rt;
  rt.late = milliseconds{30'000};
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}}, c{{}, "c", {}}, d{{}, "d", {}};
  a.on_fire = [&](Item&) { wheel.arm(&d, log.t0 + milliseconds{400}); };  // passed, not yet run
  wheel.arm(&c, log.t0 + milliseconds{20'000});
  wheel.arm(&a, log.t0 + milliseconds{3});
  wheel.arm(&b, log.t0 + milliseconds{700});
  rt.manual.advance(milliseconds{30'003});
  CHECK(log.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(rt.wakes == 1);
  CHECK(d.armed());
  CHECK(d.tick == 30'004);  // after the tick the wake ran to
  rt.manual.advance(milliseconds{30'001});  // its wake is late too
  CHECK(log.names() == std::vector<std::string>{"a", "b", "c", "d"});
}

TEST_CASE("far dues through every level fire exactly at their tick, with few wakes") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  const std::vector<long long> ticks = {
      1, 255, 256, 257, 300, 65'535, 65'536, 70'000, 1LL << 24, 5LL * 3'600'000, 30LL * 86'400'000,
      1LL << 32, 60LL * 86'400'000, 200LL * 86'400'000};
  std::vector<Item> items(ticks.size());
  for (std::size_t i = 0; i < ticks.size(); ++i) {
    items[i].name = std::to_string(ticks[i]);
    wheel.arm(&items[i], log.t0 + milliseconds{ticks[i]} - nanoseconds{1});  // just before: its tick all the same
  }
  CHECK(rt.starts == 1);
  rt.manual.advance(milliseconds{201LL * 86'400'000});
  Fired want;
  for (long long t : ticks) want.emplace_back(std::to_string(t), t);
  CHECK(log.fired == want);
  // A wake per level an entry comes down (and per 2^32 boundary a far one
  // waits at), at most, some shared: 27 here; one per 256 ms would be 67 million.
  CHECK(rt.wakes <= 30);
  CHECK(rt.timers_alive == 0);
}

TEST_CASE("one entry 30 s out wakes the runtime a few times, not every 256 ms") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}};
  rt.manual.advance(milliseconds{123});  // an epoch not at the start of a range
  wheel.arm(&a, rt.now() + milliseconds{30'000});
  rt.manual.advance(milliseconds{29'999});
  CHECK(log.fired.empty());
  rt.manual.advance(milliseconds{1});
  CHECK(log.fired == Fired{{"a", 30'123}});
  CHECK(rt.wakes <= 3);
}

TEST_CASE("an entry whose tick is past a 2^32 boundary waits there, then comes down, not late") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}};
  const long long boundary = 1LL << 32;
  rt.manual.advance(milliseconds{boundary - 200});  // idle: nothing runs
  wheel.arm(&a, log.t0 + milliseconds{boundary + 500});
  wheel.arm(&b, log.t0 + milliseconds{boundary - 1});
  rt.manual.advance(milliseconds{699});
  CHECK(log.fired == Fired{{"b", boundary - 1}});
  rt.manual.advance(milliseconds{1});
  CHECK(log.fired == Fired{{"b", boundary - 1}, {"a", boundary + 500}});
}

TEST_CASE("arming many entries in one turn restarts the runtime timer rarely") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  std::vector<Item> items(10'000);
  std::vector<WheelEntry*> taken;
  for (std::size_t i = 0; i < items.size(); ++i) {
    wheel.arm(&items[i], log.t0 + milliseconds{100 + 3 * static_cast<long long>(i)});
  }
  CHECK(rt.starts == 1);  // later and later: the first arm's wake covers them all
  wheel.take_all(taken);
  CHECK(taken.size() == items.size());
  rt.starts = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    wheel.arm(&items[i], log.t0 + milliseconds{30'000 - 3 * static_cast<long long>(i)});
  }
  // Earlier and earlier: a start only when a slot visited earlier becomes
  // the first — once per level-1 slot (256 ticks each: 117 of them from
  // 30,000 down), then once per level-0 tick below 256 (85) — not per arm.
  CHECK(rt.starts == 117 + 85);
  CHECK(rt.manual.armed() == 1);
  wheel.take_all(taken);
}

TEST_CASE("the runtime timer is given back when the last entry goes, and made again on the next arm") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  LeaseWheel wheel(rt, &Log::fire, &log);
  Item a{{}, "a", {}}, b{{}, "b", {}};
  CHECK(rt.timers_alive == 0);
  wheel.arm(&a, log.t0 + milliseconds{10});
  CHECK(rt.timers_alive == 1);
  CHECK(rt.manual.armed() == 1);
  wheel.disarm(&a);
  CHECK(rt.timers_alive == 0);
  CHECK(rt.manual.armed() == 0);
  wheel.arm(&a, log.t0 + milliseconds{10});
  wheel.arm(&a, log.t0 + milliseconds{20});  // a move: the timer is kept
  CHECK(rt.timers_alive == 1);
  rt.manual.advance(milliseconds{20});
  CHECK(log.fired == Fired{{"a", 20}});
  CHECK(rt.timers_alive == 0);  // fired the last: given back after the wake
  // Re-armed inside its fire: the timer stays; disarmed there as the last: gone.
  a.on_fire = [&](Item& self) { wheel.arm(&self, rt.now() + milliseconds{5}); };
  wheel.arm(&a, rt.now());
  wheel.arm(&b, rt.now() + milliseconds{3});
  b.on_fire = [&](Item&) { wheel.disarm(&a); };
  rt.manual.advance(milliseconds{3});
  CHECK(log.names() == std::vector<std::string>{"a", "a", "b"});
  CHECK(wheel.armed() == 0);
  CHECK(rt.timers_alive == 0);
  CHECK(rt.manual.armed() == 0);
}

TEST_CASE("take_all disarms and returns every entry; destroying a wheel unlinks its entries without firing") {
  CountingRuntime rt;
  Log log{rt, rt.now(), {}};
  std::vector<Item> items(6);
  const std::vector<long long> dues = {1, 2, 300, 70'000, 1LL << 30, 1LL << 40};
  {
    LeaseWheel wheel(rt, &Log::fire, &log);
    for (std::size_t i = 0; i < items.size(); ++i) wheel.arm(&items[i], log.t0 + milliseconds{dues[i]});
    rt.manual.advance(milliseconds{1});
    std::vector<WheelEntry*> out;
    wheel.take_all(out);
    CHECK(out.size() == 5);
    for (std::size_t i = 1; i < items.size(); ++i) CHECK(std::count(out.begin(), out.end(), &items[i]) == 1);
    for (const Item& item : items) CHECK_FALSE(item.armed());
    CHECK(wheel.armed() == 0);
    CHECK(rt.timers_alive == 0);
    rt.manual.advance(milliseconds{1LL << 41});
    CHECK(log.fired.size() == 1);
    for (std::size_t i = 0; i < items.size(); ++i) wheel.arm(&items[i], rt.now() + milliseconds{dues[i]});
  }
  for (const Item& item : items) CHECK_FALSE(item.armed());
  CHECK(rt.timers_alive == 0);
  // Inside a fire, take_all takes the entries of the tick not yet fired too.
  LeaseWheel wheel(rt, &Log::fire, &log);
  std::vector<WheelEntry*> out;
  items[0].on_fire = [&](Item&) { wheel.take_all(out); };
  for (Item& item : items) wheel.arm(&item, rt.now() + milliseconds{4});
  rt.manual.advance(milliseconds{4});
  CHECK(log.fired.size() == 2);
  CHECK(out.size() == 5);
  CHECK(rt.timers_alive == 0);
}

namespace {

// ModelRun — the wheel against a reference: a multimap from due tick to
// item, in arming order within a tick (multimap inserts at the end of an
// equal range). Each fire must be the model's first, at its tick.
struct ModelRun {
  CountingRuntime rt;
  TimePoint t0 = rt.now();
  std::mt19937_64 rng;
  std::vector<Item> items;
  std::multimap<long long, std::size_t> model;
  std::vector<std::optional<std::multimap<long long, std::size_t>::iterator>> where;
  std::unique_ptr<LeaseWheel> wheel;
  int actions_left = 1500;  // re-arms and disarms inside fires
  long long fires = 0;
  long long max_late = 0;
  long long mismatches = 0;

  ModelRun(std::uint64_t seed, std::size_t n, milliseconds late) : rng(seed), items(n), where(n) {
    rt.late = late;
    wheel = std::make_unique<LeaseWheel>(rt, &ModelRun::fire, this);
  }

  long long now_tick() { return std::chrono::floor<milliseconds>(rt.now() - t0).count(); }
  long long uniform(long long lo, long long hi) { return std::uniform_int_distribution<long long>(lo, hi)(rng); }

  // arm: at the first tick at or after due, but after the tick run last —
  // here always now's (ManualRuntime wakes fall on whole ms).
  void arm(std::size_t i, TimePoint due) {
    disarm(i);
    const long long tick = std::max<long long>(std::chrono::ceil<milliseconds>(due - t0).count(), now_tick() + 1);
    where[i] = model.emplace(tick, i);
    wheel->arm(&items[i], due);
  }
  void disarm(std::size_t i) {
    if (where[i]) model.erase(*where[i]);
    where[i].reset();
    wheel->disarm(&items[i]);
  }

  static void fire(void* context, WheelEntry* entry, TimePoint /*now*/) {
    auto& run = *static_cast<ModelRun*>(context);
    const auto i = static_cast<std::size_t>(static_cast<Item*>(entry) - run.items.data());
    run.check_fire(i);
    run.act();
  }
  void check_fire(std::size_t i) {
    ++fires;
    if (model.empty() || model.begin()->second != i || !where[i]) {
      ++mismatches;
      return;
    }
    const long long late = now_tick() - model.begin()->first;
    if (late < 0) ++mismatches;  // early
    max_late = std::max(max_late, late);
    model.erase(model.begin());
    where[i].reset();
  }
  void act() {
    if (actions_left <= 0) return;
    const long long draw = uniform(0, 7);
    if (draw >= 3) return;
    --actions_left;
    const auto other = static_cast<std::size_t>(uniform(0, static_cast<long long>(items.size()) - 1));
    if (draw == 0) {
      disarm(other);
    } else {  // re-arm (itself, or an entry of this tick, maybe), sometimes into the past
      arm(other, rt.now() + nanoseconds{uniform(-5'000'000, 3'000'000'000)});
    }
  }
};

}  // namespace

TEST_CASE("seeded against a reference model: each arming fires once, at its tick, FIFO within a tick") {
  for (const long long late : {0LL, 40LL}) {  // exact wakes; a loop waking up to 40 ms late
    CAPTURE(late);
    ModelRun run(20'240'601 + static_cast<std::uint64_t>(late), 2000, milliseconds{late});
    for (std::size_t i = 0; i < run.items.size(); ++i) {
      run.arm(i, run.t0 + nanoseconds{run.uniform(0, 100'000'000'000)});
    }
    for (int step = 0; step < 10'000 && !run.model.empty(); ++step) {
      run.rt.manual.advance(milliseconds{run.uniform(1, 400)});
      if (run.uniform(0, 3) == 0) {  // and from outside a fire, between turns
        const auto i = static_cast<std::size_t>(run.uniform(0, 1999));
        run.arm(i, run.rt.now() + nanoseconds{run.uniform(1, 2'000'000'000)});
      }
      REQUIRE(run.wheel->armed() == run.model.size());
    }
    CHECK(run.model.empty());
    CHECK(run.mismatches == 0);
    CHECK(run.max_late <= late);
    CHECK(run.fires > 2000);
    CHECK(run.wheel->armed() == 0);
    CHECK(run.rt.timers_alive == 0);
  }
}
