// test_timer_queue.cpp — many timers on one of the runtime's
// (src/timer_queue): order, restarts, stops, destruction inside a fire,
// and the runtime timer given back once no timer is left.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "test_runtime.hpp"
#include "timer_queue.hpp"

using namespace redlock::detail;
using redlock::test::ManualRuntime;
using std::chrono::milliseconds;

TEST_CASE("timers fire in order of due time, then of starting; never before their delay") {
  ManualRuntime rt;
  TimerQueue q(rt);
  std::vector<std::string> fired;
  auto a = q.timer([&] { fired.push_back("a"); });
  auto b = q.timer([&] { fired.push_back("b"); });
  auto c = q.timer([&] { fired.push_back("c"); });
  c->start(milliseconds{30});
  a->start(milliseconds{10});
  b->start(milliseconds{10});
  CHECK(q.armed() == 3);
  CHECK(rt.armed() == 1);  // one runtime timer for all of them
  rt.advance(milliseconds{9});
  CHECK(fired.empty());
  rt.advance(milliseconds{1});
  CHECK(fired == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(a->active());
  CHECK(c->active());
  rt.advance(milliseconds{20});
  CHECK(fired == std::vector<std::string>{"a", "b", "c"});
  CHECK(q.armed() == 0);
}

TEST_CASE("a restart replaces the pending start, earlier or later; stop cancels") {
  ManualRuntime rt;
  TimerQueue q(rt);
  int a_fired = 0, b_fired = 0, c_fired = 0;
  auto a = q.timer([&] { ++a_fired; });
  auto b = q.timer([&] { ++b_fired; });
  auto c = q.timer([&] { ++c_fired; });
  a->start(milliseconds{50});
  b->start(milliseconds{20});
  c->start(milliseconds{40});
  a->start(milliseconds{5});  // earlier than the top: becomes the top
  b->start(milliseconds{60});  // later
  c->stop();
  CHECK_FALSE(c->active());
  rt.advance(milliseconds{5});
  CHECK(a_fired == 1);
  rt.advance(milliseconds{50});
  CHECK(b_fired == 0);
  rt.advance(milliseconds{5});
  CHECK(b_fired == 1);
  rt.advance(milliseconds{100});
  CHECK(a_fired == 1);
  CHECK(c_fired == 0);
}

TEST_CASE("a timer started inside a fire, even at 0 ms, fires on a later turn; one may destroy itself or another") {
  ManualRuntime rt;
  TimerQueue q(rt);
  int again = 0;
  std::unique_ptr<Timer> self_restart, doomed, destroyer, self_destroy;
  self_restart = q.timer([&] {
    if (++again < 3) self_restart->start(milliseconds{0});
  });
  bool doomed_fired = false;
  doomed = q.timer([&] { doomed_fired = true; });
  destroyer = q.timer([&] { doomed.reset(); });
  self_destroy = q.timer([&] { self_destroy.reset(); });
  self_restart->start(milliseconds{0});
  destroyer->start(milliseconds{0});
  doomed->start(milliseconds{0});  // due with the destroyer, started after it: destroyed first
  self_destroy->start(milliseconds{0});
  rt.advance(milliseconds{0});
  // ManualRuntime fires the queue's runtime timer once per due start: the
  // restarted timer waited for that next wake-up, it did not loop in the drain.
  CHECK(again >= 1);
  CHECK_FALSE(doomed_fired);
  CHECK(doomed == nullptr);
  CHECK(self_destroy == nullptr);
  rt.advance(milliseconds{1});
  CHECK(again == 3);
}

TEST_CASE("many timers: every one fires once, at or after its due time, in order") {
  ManualRuntime rt;
  TimerQueue q(rt);
  constexpr int n = 2000;
  std::vector<std::unique_ptr<Timer>> timers;
  std::vector<long long> fired_at(n, -1);
  const auto t0 = rt.now();
  for (int i = 0; i < n; ++i) {
    timers.push_back(q.timer([&, i] { fired_at[i] = std::chrono::duration_cast<milliseconds>(rt.now() - t0).count(); }));
  }
  // Start each twice (the second start wins), some stopped for good.
  for (int i = 0; i < n; ++i) timers[i]->start(milliseconds{(i * 7919) % 997});
  for (int i = 0; i < n; ++i) timers[i]->start(milliseconds{(i * 104729) % 1009});
  for (int i = 0; i < n; i += 10) timers[i]->stop();
  rt.advance(milliseconds{2000});
  for (int i = 0; i < n; ++i) {
    if (i % 10 == 0) {
      CHECK(fired_at[i] == -1);
    } else {
      CHECK(fired_at[i] == (i * 104729) % 1009);
    }
  }
  CHECK(q.armed() == 0);
}

TEST_CASE("the runtime timer is given back once the last timer is destroyed, and taken again when needed") {
  ManualRuntime rt;
  TimerQueue q(rt);
  {
    auto a = q.timer([] {});
    a->start(milliseconds{10});
    CHECK(rt.armed() == 1);
    CHECK(q.timers() == 1);
  }
  CHECK(q.timers() == 0);
  CHECK(rt.armed() == 0);
  int fired = 0;
  auto b = q.timer([&] { ++fired; });
  b->start(milliseconds{3});
  rt.advance(milliseconds{3});
  CHECK(fired == 1);
  // Destroyed inside its own fire, as the last timer: the queue gives its
  // runtime timer back after the drain, not inside it.
  std::unique_ptr<Timer> last;
  last = q.timer([&] { last.reset(); });
  b.reset();
  last->start(milliseconds{0});
  rt.advance(milliseconds{0});
  CHECK(last == nullptr);
  CHECK(q.timers() == 0);
  CHECK(rt.armed() == 0);
}

TEST_CASE("0 ms timers (the FIFO) and delayed ones: due order, stop and restart move between them") {
  ManualRuntime rt;
  TimerQueue q(rt);
  std::vector<std::string> fired;
  auto a = q.timer([&] { fired.push_back("a"); });
  auto b = q.timer([&] { fired.push_back("b"); });
  auto c = q.timer([&] { fired.push_back("c"); });
  auto d = q.timer([&] { fired.push_back("d"); });
  a->start(milliseconds{5});
  rt.advance(milliseconds{4});
  b->start(milliseconds{0});
  c->start(milliseconds{1});
  d->start(milliseconds{0});
  d->stop();  // out of the FIFO
  CHECK_FALSE(d->active());
  CHECK(q.armed() == 3);
  rt.advance(milliseconds{0});
  CHECK(fired == std::vector<std::string>{"b"});
  d->start(milliseconds{0});
  d->start(milliseconds{10});  // from the FIFO to the heap
  b->start(milliseconds{0});
  b->start(milliseconds{0});  // a restart moves it to the FIFO's end, once
  rt.advance(milliseconds{0});
  CHECK(fired == std::vector<std::string>{"b", "b"});
  rt.advance(milliseconds{1});
  CHECK(fired == std::vector<std::string>{"b", "b", "a", "c"});
  rt.advance(milliseconds{10});
  CHECK(fired == std::vector<std::string>{"b", "b", "a", "c", "d"});
  CHECK(q.armed() == 0);
}
