// test_world.cpp — the simulator's time (tools/sim/world.hpp): the event
// queue's order, processes' clocks (rate, steps, mapping back to true
// time), pauses, timers, signals and tokens. Deterministic; nothing sleeps.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "world.hpp"

namespace {

using namespace redlock::sim;
using std::chrono::milliseconds;

}  // namespace

TEST_CASE("Rng: the same seed gives the same sequence; below stays below") {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next();
    CHECK(x == b.next());
    CHECK(a.below(7) < 7);
    b.below(7);
  }
  CHECK(a.next() != c.next());
  CHECK(a.below(0) == 0);
  for (int i = 0; i < 100; ++i) {
    const auto v = a.between(-3, 3);
    CHECK(v >= -3);
    CHECK(v <= 3);
  }
}

TEST_CASE("World: events run in time order, ties first in first out") {
  World w(1);
  std::vector<std::string> log;
  w.post(ms(5), nullptr, [&] { log.push_back("b"); });
  w.post(ms(1), nullptr, [&] { log.push_back("a"); });
  w.post(ms(5), nullptr, [&] { log.push_back("c"); });
  w.post(ms(9), nullptr, [&] { log.push_back("late"); });
  w.run_until(ms(6));
  CHECK(log == std::vector<std::string>{"a", "b", "c"});
  CHECK(w.now() == ms(6));
  w.run_until(ms(20));
  CHECK(log.back() == "late");
  CHECK(w.queued() == 0);
}

TEST_CASE("SimClock: rate, steps, and true_at over the history") {
  SimClock c(1000, 1.0);
  CHECK(c.local(0) == 1000);
  CHECK(c.local(500) == 1500);
  c.set_rate(1000, 2.0);  // from true 1000 the clock runs twice as fast
  CHECK(c.local(1000) == 2000);
  CHECK(c.local(1500) == 3000);
  c.step(2000, 1000);  // reads 4000 at true 2000, then jumps to 5000
  CHECK(c.local(2000) == 5000);
  CHECK(c.true_at(1500) == 500);
  CHECK(c.true_at(3000) == 1500);
  CHECK(c.true_at(4500) == 2000);  // jumped over: reached at the step
  CHECK(c.true_at(7000) == 3000);  // extrapolated
  CHECK(c.true_delay(100) == 50);
}

TEST_CASE("SimRuntime: a timer fires after its delay on the process's clock, stop and restart") {
  World w(7);
  Process p(w, "c", ms(1000), ms(5000));
  SimRuntime rt(p);
  CHECK(SimRuntime::from_time_point(rt.now()) == ms(1000));
  p.steady().set_rate(0, 1.25);  // a fast clock: 10 ms of it is 8 ms of true time
  int fired = 0;
  Nanos fired_at = 0;
  auto t = rt.timer([&] {
    ++fired;
    fired_at = w.now();
  });
  t->start(milliseconds{10});
  CHECK(t->active());
  w.run_until(ms(7));
  CHECK(fired == 0);
  w.run_until(ms(100));
  CHECK(fired == 1);
  CHECK(fired_at == ms(8));
  CHECK_FALSE(t->active());

  t->start(milliseconds{10});
  t->start(milliseconds{20});  // replaces the pending start
  w.run_until(ms(200));
  CHECK(fired == 2);
  CHECK(fired_at == ms(100) + ms(16));

  t->start(milliseconds{1});
  t->stop();
  w.run_until(ms(300));
  CHECK(fired == 2);

  t->start(milliseconds{1});
  t.reset();  // destroyed while armed: never fires
  w.run_until(ms(400));
  CHECK(fired == 2);
}

TEST_CASE("SimRuntime: a timer may destroy itself in its own fire; zero delay is the next turn") {
  World w(7);
  Process p(w, "c", 0, 0);
  SimRuntime rt(p);
  std::unique_ptr<redlock::detail::Timer> t;
  std::vector<std::string> log;
  t = rt.timer([&] {
    log.push_back("fire");
    t.reset();
  });
  w.post(0, &p, [&] {
    t->start(milliseconds{0});
    log.push_back("started");
  });
  w.run_until(ms(1));
  CHECK(log == std::vector<std::string>{"started", "fire"});
  CHECK(t == nullptr);
}

TEST_CASE("Process: a paused process runs nothing; what came due runs at resume, in order") {
  World w(3);
  Process p(w, "c", 0, 0);
  SimRuntime rt(p);
  std::vector<std::string> log;
  auto a = rt.timer([&] { log.push_back("a@" + std::to_string(w.now() / ns_per_ms)); });
  auto b = rt.timer([&] { log.push_back("b@" + std::to_string(w.now() / ns_per_ms)); });
  a->start(milliseconds{10});
  b->start(milliseconds{20});
  w.post(ms(5), nullptr, [&] { p.pause(); });
  w.post(ms(50), nullptr, [&] { p.resume(); });
  w.run_until(ms(100));
  CHECK(log == std::vector<std::string>{"a@50", "b@50"});
  // Its clock kept running through the pause.
  CHECK(p.steady_now() == ms(100));
}

TEST_CASE("SimRuntime: tokens are 32 hex digits, unique, and the same for the same seed") {
  auto draw = [](std::uint64_t seed) {
    World w(seed);
    Process p(w, "c", 0, 0);
    SimRuntime rt(p);
    std::vector<std::string> out;
    for (int i = 0; i < 50; ++i) out.push_back(*rt.random_token());
    return out;
  };
  const auto x = draw(11);
  CHECK(x == draw(11));
  CHECK(x != draw(12));
  CHECK(std::set<std::string>(x.begin(), x.end()).size() == x.size());
  CHECK(x[0].size() == 32);
  CHECK(x[0].find_first_not_of("0123456789abcdef") == std::string::npos);
}

TEST_CASE("SimRuntime: a signal fires once per batch of raises, on the next turn") {
  World w(5);
  Process p(w, "c", 0, 0);
  SimRuntime rt(p);
  int fired = 0;
  auto s = rt.signal([&] { ++fired; });
  s->raise();
  s->raise();
  w.run_until(ms(1));
  CHECK(fired == 1);
  s->raise();
  w.run_until(ms(2));
  CHECK(fired == 2);
}

TEST_CASE("Process: turn hooks run at the end of the turn, also ones registered by a hook") {
  World w(5);
  Process p(w, "c", 0, 0);
  struct Hook final : TurnHook {
    Hook(std::vector<std::string>* log, Process* p, Hook* then, std::string name)
        : log(log), p(p), then(then), name(std::move(name)) {}
    std::vector<std::string>* log;
    Process* p;
    Hook* then;
    std::string name;
    void end_turn() override {
      log->push_back(name);
      if (then != nullptr) p->at_turn_end(then);
    }
  };
  std::vector<std::string> log;
  Hook second(&log, &p, nullptr, "second");
  Hook first(&log, &p, &second, "first");
  w.post(0, &p, [&] {
    p.at_turn_end(&first);
    log.push_back("event");
  });
  w.run_until(ms(1));
  CHECK(log == std::vector<std::string>{"event", "first", "second"});
}
