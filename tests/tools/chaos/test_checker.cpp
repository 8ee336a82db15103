// test_checker.cpp — the chaos suite's analysis on synthetic histories: each
// property the checker reports is shown both firing and staying quiet, so a
// checker that always says "fine" (or always "broken") fails here.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "checker.hpp"
#include "history.hpp"
#include "timeline_svg.hpp"

using namespace redlock::chaos;

namespace {

constexpr std::int64_t kOrigin = 5'000'000'000;  // monotonic clocks do not start at 0
std::int64_t ms(double v) { return kOrigin + static_cast<std::int64_t>(v * 1e6); }

Event ev(EventType type, int client, double t_ms, const std::string& res = "r") {
  Event e;
  e.type = type;
  e.client = client;
  e.t = ms(t_ms);
  e.resource = res;
  return e;
}
Event invoke(int c, double t) { return ev(EventType::invoke, c, t); }
Event ok(int c, double t, double deadline, std::int64_t latency_us = 100, const std::string& res = "r") {
  Event e = ev(EventType::ok, c, t, res);
  e.deadline = ms(deadline);
  e.latency_us = latency_us;
  e.token = "tok" + std::to_string(c);
  return e;
}
Event release(int c, double t, const std::string& res = "r") {
  Event e = ev(EventType::release, c, t, res);
  e.released = true;
  return e;
}
Event write(int c, double t, std::int64_t read, std::int64_t wrote, const std::string& res = "r") {
  Event e = ev(EventType::write, c, t, res);
  e.read = read;
  e.wrote = wrote;
  return e;
}
// A read lock's ok, and a reader's look at the counter (t: after its reread).
Event shared_ok(int c, double t, double deadline) {
  Event e = ok(c, t, deadline);
  e.shared = true;
  return e;
}
Event read(int c, double t, std::int64_t first, std::int64_t reread) {
  Event e = ev(EventType::read, c, t);
  e.read = first;
  e.reread = reread;
  return e;
}
Event fault(double t, double end, const std::string& what) {
  Event e;
  e.type = EventType::fault;
  e.t = ms(t);
  e.deadline = ms(end);
  e.error = what;
  return e;
}

// run checks `events`; final_value >= 0 is what the counter of resource "r" held at the end.
CheckResult run(std::vector<Event> events, std::int64_t final_value = -1, std::size_t leaked = 0) {
  std::map<std::string, std::int64_t> finals;
  if (final_value >= 0) finals["r"] = final_value;
  return check(CheckInput{std::move(events), finals, leaked, ms(0), ms(1000)});
}

// A correct history: `n` clients take turns, each turn invoke → ok → write → release.
std::vector<Event> sequential(int n_turns, int n_clients) {
  std::vector<Event> h;
  for (int i = 0; i < n_turns; ++i) {
    const int c = i % n_clients;
    const double t = 10.0 * i;
    h.push_back(invoke(c, t));
    h.push_back(ok(c, t + 1, t + 100));
    h.push_back(write(c, t + 2, i, i + 1));
    h.push_back(release(c, t + 3));
  }
  std::reverse(h.begin(), h.end());  // the checker must not rely on input order
  return h;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("a clean sequential history has no overlap, no lost update, no stale write") {
  auto r = run(sequential(30, 3), 30);
  CHECK(r.windows.size() == 30);
  CHECK(r.overlaps == 0);
  CHECK(r.lost_updates == 0);
  CHECK(r.stale_writes == 0);
  CHECK_FALSE(r.final_mismatch);
  CHECK(r.expected_final == 30);
  CHECK_FALSE(violation(r));
  CHECK(r.clients == std::vector<int>{0, 1, 2});
  for (const auto& w : r.windows) CHECK(w.released);
}

TEST_CASE("two overlapping windows of one resource are one overlap") {
  auto r = run({ok(1, 0, 500), release(1, 100), ok(2, 50, 500), release(2, 150)});
  CHECK(r.overlaps == 1);
  REQUIRE(r.overlap_examples.size() == 1);
  CHECK(r.overlap_examples[0].first.client == 1);
  CHECK(r.overlap_examples[0].second.client == 2);
  CHECK(std::all_of(r.windows.begin(), r.windows.end(), [](const Window& w) { return w.overlapped; }));
  CHECK(violation(r));
}

TEST_CASE("windows that merely touch do not overlap") {
  auto r = run({ok(1, 0, 500), release(1, 100), ok(2, 100, 500), release(2, 200)});
  CHECK(r.overlaps == 0);
  CHECK_FALSE(violation(r));
}

TEST_CASE("windows of different resources never overlap") {
  auto r = run({ok(1, 0, 500, 1, "a"), release(1, 100, "a"), ok(2, 50, 500, 1, "b"), release(2, 150, "b")});
  CHECK(r.overlaps == 0);
}

// concurrent: `resources` resources ("r0", "r1", …) held at the same time,
// each by its own `n_clients` clients taking `turns` turns (invoke → ok →
// write → release, 10 ms apart); a client id is 100 · resource + k. Every
// resource's counter starts at 0, and `finals` gets what each should hold.
std::vector<Event> concurrent(int resources, int n_clients, int turns, std::map<std::string, std::int64_t>& finals) {
  std::vector<Event> h;
  for (int r = 0; r < resources; ++r) {
    const std::string res = "r" + std::to_string(r);
    for (int i = 0; i < turns; ++i) {
      const int c = 100 * r + i % n_clients;
      const double t = 10.0 * i + 0.01 * r;  // every resource's turns interleave with the others'
      Event in = invoke(c, t);
      in.resource = res;
      h.push_back(in);
      h.push_back(ok(c, t + 1, t + 100, 100, res));
      h.push_back(write(c, t + 2, i, i + 1, res));
      h.push_back(release(c, t + 3, res));
    }
    finals[res] = turns;
  }
  std::reverse(h.begin(), h.end());
  return h;
}

TEST_CASE("many resources at once: each is checked on its own, one verdict over all") {
  std::map<std::string, std::int64_t> finals;
  auto h = concurrent(40, 3, 25, finals);
  const CheckResult clean = check(CheckInput{h, finals, 0, ms(0), ms(1000)});
  CHECK(clean.resources == 40);
  CHECK(clean.windows.size() == 40 * 25);
  CHECK(clean.acquisitions == 40 * 25);
  CHECK(clean.overlaps == 0);  // 40 holders at every moment, one per resource
  CHECK(clean.lost_updates == 0);
  CHECK(clean.stale_writes == 0);
  CHECK_FALSE(clean.final_mismatch);
  CHECK(clean.final_value == 40 * 25);
  CHECK(clean.expected_final == 40 * 25);
  CHECK_FALSE(violation(clean));

  // One intruder on r17 among the forty: one overlap, named, and its write
  // (it read what the holder read) one lost update on r17's counter only.
  h.push_back(ok(9999, 51, 150, 100, "r17"));
  h.push_back(write(9999, 52.5, 5, 6, "r17"));
  h.push_back(release(9999, 53, "r17"));
  finals["r17"] = 25;  // the intruder's increment overwrote the holder's
  const CheckResult one = check(CheckInput{h, finals, 0, ms(0), ms(1000)});
  CHECK(one.overlaps == 1);
  REQUIRE(one.overlap_examples.size() == 1);
  CHECK(one.overlap_examples[0].first.resource == "r17");
  CHECK(one.overlap_examples[0].first.client == 9999);  // it came first, by 0.17 ms
  CHECK(one.overlap_examples[0].second.client == 1700 + 5 % 3);
  CHECK(one.lost_updates == 1);
  CHECK(one.final_mismatch);
  CHECK(violation(one));
}

TEST_CASE("interleaved events of different resources are not confused") {
  // Client 1 holds a and b at once and releases b first: a's window goes on,
  // so its write after b's release is not stale. The writes to the two
  // counters interleave; each counter is replayed on its own.
  std::vector<Event> h{ok(1, 0, 100, 100, "a"), ok(1, 5, 100, 100, "b"),   write(1, 6, 0, 1, "a"),
                       write(1, 7, 0, 1, "b"),  release(1, 10, "b"),       write(1, 20, 1, 2, "a"),
                       release(1, 30, "a"),     ok(2, 12, 100, 100, "b"),  write(2, 13, 1, 2, "b"),
                       release(2, 14, "b")};
  const CheckResult r = check(CheckInput{h, {{"a", 2}, {"b", 2}}, 0, ms(0), ms(1000)});
  CHECK(r.resources == 2);
  CHECK(r.overlaps == 0);  // 2 on b after 1 released it; a is another resource
  CHECK(r.stale_writes == 0);
  CHECK(r.lost_updates == 0);
  CHECK(r.unrecorded_increments == 0);
  CHECK_FALSE(r.final_mismatch);
  CHECK(r.expected_final == 4);
  // One counter short: the loss is that counter's alone.
  const CheckResult short_b = check(CheckInput{h, {{"a", 2}, {"b", 1}}, 0, ms(0), ms(1000)});
  CHECK(short_b.lost_updates == 1);
  CHECK(short_b.final_mismatch);
  // A counter nobody wrote must still be 0; a missing one was not read.
  CHECK(check(CheckInput{h, {{"a", 2}, {"b", 2}, {"c", 1}}, 0, ms(0), ms(1000)}).final_mismatch);
  const CheckResult unread = check(CheckInput{h, {{"a", 2}}, 0, ms(0), ms(1000)});
  CHECK_FALSE(unread.final_mismatch);
  CHECK(unread.final_value == 2);
}

TEST_CASE("a long history of many resources is checked in time") {
  // 120,000 acquisitions: one hot resource with 60,000 and 60 others with
  // 1,000 each. Work that grows with the square of a resource's (or the
  // run's) windows would not finish within the test's timeout.
  std::vector<Event> h;
  std::map<std::string, std::int64_t> finals;
  for (int i = 0; i < 60000; ++i) {
    const double t = 2.0 * i;
    h.push_back(ok(10000 + i % 8, t, t + 50, 100, "hot"));
    h.push_back(write(10000 + i % 8, t + 0.5, i, i + 1, "hot"));
    h.push_back(release(10000 + i % 8, t + 1, "hot"));
  }
  finals["hot"] = 60000;
  auto rest = concurrent(60, 4, 1000, finals);
  h.insert(h.end(), rest.begin(), rest.end());
  const CheckResult r = check(CheckInput{std::move(h), finals, 0, ms(0), ms(120000)});
  CHECK(r.acquisitions == 120000);
  CHECK(r.resources == 61);
  CHECK(r.overlaps == 0);
  CHECK(r.lost_updates == 0);
  CHECK(r.stale_writes == 0);
  CHECK_FALSE(r.final_mismatch);
}

TEST_CASE("a window ends at its deadline when the release comes later") {
  // Client 1's validity ends at 100 ms but it releases only at 300 ms: from
  // 100 on, client 2 may legitimately hold the lock.
  auto r = run({ok(1, 0, 100), release(1, 300), ok(2, 150, 400), release(2, 200)});
  REQUIRE(r.windows.size() == 2);
  CHECK(r.windows[0].end == ms(100));
  CHECK_FALSE(r.windows[0].released);
  CHECK(r.overlaps == 0);
  // …but an acquisition before that deadline does overlap.
  auto r2 = run({ok(1, 0, 100), release(1, 300), ok(2, 90, 400), release(2, 200)});
  CHECK(r2.overlaps == 1);
}

TEST_CASE("a holder that never releases (killed) holds until its deadline") {
  auto r = run({ok(1, 0, 100), ok(2, 120, 400), release(2, 130)});
  REQUIRE(r.windows.size() == 2);
  CHECK(r.windows[0].end == ms(100));
  CHECK(r.overlaps == 0);
  CHECK(run({ok(1, 0, 100), ok(2, 99, 400)}).overlaps == 1);
}

TEST_CASE("a second ok without a release leaves the first lock held to its deadline") {
  auto r = run({ok(1, 0, 100), ok(1, 10, 200), release(1, 20)});
  REQUIRE(r.windows.size() == 2);
  CHECK(r.windows[0].end == ms(100));  // abandoned, not ended by the later release
  CHECK(r.windows[1].end == ms(20));
  CHECK(r.overlaps == 1);  // two acquisitions of one resource held at once
}

TEST_CASE("overlaps count pairs, and at most ten examples are kept") {
  // One long window (client 0) and 15 short ones inside it that do not
  // overlap each other: 15 pairs.
  std::vector<Event> h{ok(0, 0, 1000), release(0, 900)};
  for (int i = 1; i <= 15; ++i) {
    h.push_back(ok(i, 10.0 * i, 1000));
    h.push_back(release(i, 10.0 * i + 5));
  }
  auto r = run(h);
  CHECK(r.overlaps == 15);
  CHECK(r.overlap_examples.size() == 10);
  // Three windows all overlapping each other: three pairs.
  CHECK(run({ok(1, 0, 500), ok(2, 1, 500), ok(3, 2, 500)}).overlaps == 3);
}

TEST_CASE("readers share: reader-reader overlaps are counted apart, not as overlaps") {
  auto r = run({shared_ok(1, 0, 500), read(1, 90, 0, 0), release(1, 100), shared_ok(2, 50, 500), read(2, 140, 0, 0),
                release(2, 150), shared_ok(3, 60, 500), release(3, 70)});
  CHECK(r.shared_windows == 3);
  CHECK(r.shared_overlaps == 3);  // every pair of the three
  CHECK(r.overlaps == 0);
  CHECK(r.overlap_examples.empty());
  CHECK(std::none_of(r.windows.begin(), r.windows.end(), [](const Window& w) { return w.overlapped; }));
  CHECK(r.reads == 2);
  CHECK(r.torn_reads == 0);
  CHECK_FALSE(violation(r));
}

TEST_CASE("a reader and a writer, or two writers, held at once are an overlap") {
  // Writer 2 inside reader 1's window, reader 3 inside writer 2's.
  auto r = run({shared_ok(1, 0, 500), release(1, 100), ok(2, 50, 500), release(2, 150), shared_ok(3, 120, 500),
                release(3, 200)});
  CHECK(r.overlaps == 2);
  CHECK(r.shared_overlaps == 0);  // 1 and 3 do not meet: 1 ended at 100
  REQUIRE(r.overlap_examples.size() == 2);
  CHECK(r.overlap_examples[0].first.shared);
  CHECK_FALSE(r.overlap_examples[0].second.shared);
  CHECK(violation(r));
  // One writer among readers that share: the writer's pairs only.
  auto mixed = run({shared_ok(1, 0, 500), release(1, 100), shared_ok(2, 10, 500), release(2, 110), ok(3, 50, 500),
                    release(3, 60)});
  CHECK(mixed.shared_overlaps == 1);
  CHECK(mixed.overlaps == 2);
  // A reader's window ends at its deadline like any other: a writer after it is fine.
  CHECK(run({shared_ok(1, 0, 100), release(1, 300), ok(2, 150, 400), release(2, 200)}).overlaps == 0);
}

TEST_CASE("a torn read inside the reader's window counts; one after its deadline does not") {
  // Writer 2 got in while reader 1 held (an overlap) and its increment
  // landed between the reader's two reads.
  auto torn = run({shared_ok(1, 0, 500), ok(2, 20, 500), write(2, 30, 0, 1), release(2, 40), read(1, 60, 0, 1),
                   release(1, 70)},
                  1);
  CHECK(torn.reads == 1);
  CHECK(torn.torn_reads == 1);
  CHECK(torn.lost_updates == 0);  // the writer wrote what it should
  CHECK(violation(torn));
  // A torn read alone (the windows as the history tells them do not
  // overlap, the counter does not lie) is a violation of its own.
  auto alone = run({shared_ok(1, 0, 500), read(1, 60, 0, 1), release(1, 70)});
  CHECK(alone.overlaps == 0);
  CHECK(alone.torn_reads == 1);
  CHECK(violation(alone));
  CHECK(to_json(alone, "s", true)["violation"] == true);
  // Stamped after its deadline (a reader paused past its validity): the
  // writer that came after the deadline was entitled to write.
  auto late = run({shared_ok(1, 0, 100), ok(2, 120, 500), write(2, 130, 0, 1), release(2, 140), read(1, 150, 0, 1),
                   release(1, 160)},
                  1);
  CHECK(late.overlaps == 0);
  CHECK(late.reads == 1);
  CHECK(late.torn_reads == 0);
  CHECK_FALSE(violation(late));
  CHECK(run({shared_ok(1, 0, 100), read(1, 100, 0, 1), release(1, 160)}).torn_reads == 0);  // at the deadline
  CHECK(run({shared_ok(1, 0, 100), read(1, 99, 0, 1), release(1, 160)}).torn_reads == 1);
  // Outside every window of its client: after its release, or never held.
  CHECK(run({shared_ok(1, 0, 500), release(1, 50), read(1, 60, 0, 1)}).torn_reads == 0);
  CHECK(run({read(1, 60, 0, 1)}).torn_reads == 0);
  // An untorn read inside its window is no violation.
  CHECK_FALSE(violation(run({shared_ok(1, 0, 500), read(1, 60, 3, 3), release(1, 70)})));
}

TEST_CASE("a lost update: two clients read the same value") {
  auto r = run({ok(1, 0, 500), write(1, 10, 0, 1), ok(2, 5, 500), write(2, 20, 0, 1), release(1, 30),
                release(2, 40)},
               1);
  CHECK(r.lost_updates == 1);
  CHECK(r.overlaps == 1);
  CHECK(r.expected_final == 2);
  CHECK(r.final_mismatch);
  // A stale read two increments behind is still one stale write, but the
  // counter shows both increments missing.
  auto r2 = run({write(1, 1, 0, 1), write(1, 2, 1, 2), write(1, 3, 2, 3), write(2, 4, 1, 2)}, 2);
  CHECK(r2.lost_updates == 2);
}

TEST_CASE("final_value below the number of writes counts as lost updates even in a clean history") {
  auto clean = sequential(10, 2);
  CHECK(run(clean, 10).lost_updates == 0);
  auto r = run(clean, 8);
  CHECK(r.final_mismatch);
  CHECK(r.lost_updates == 2);
  CHECK(violation(r));
  // Above it (a write that was never logged): a mismatch, not a loss.
  auto above = run(clean, 11);
  CHECK(above.final_mismatch);
  CHECK(above.lost_updates == 0);
  // Not read (-1): nothing to compare.
  CHECK_FALSE(run(clean, -1).final_mismatch);
}

TEST_CASE("a counter step without a write event is unrecorded, not lost") {
  // Client 1 was killed after its SET (0 → 1) but before logging it.
  auto r = run({write(2, 10, 1, 2), write(3, 20, 2, 3)}, 3);
  CHECK(r.lost_updates == 0);
  CHECK(r.expected_final == 3);  // base 1 from the first read + 2 writes
  auto r2 = run({write(2, 10, 0, 1), write(3, 20, 2, 3)}, 3);
  CHECK(r2.unrecorded_increments == 1);
  CHECK(r2.lost_updates == 0);
  CHECK_FALSE(r2.final_mismatch);
}

TEST_CASE("a write that is not an increment by one is a bad increment") {
  auto r = run({write(1, 10, 0, 1), write(1, 20, 1, 5)}, 5);
  CHECK(r.bad_increments == 1);
  CHECK(r.lost_updates == 0);
}

TEST_CASE("a write after the deadline is a stale write") {
  auto r = run({ok(1, 0, 100), write(1, 150, 0, 1), release(1, 200)}, 1);
  CHECK(r.stale_writes == 1);
  CHECK(r.overlaps == 0);
  CHECK(run({ok(1, 0, 100), write(1, 100, 0, 1), release(1, 200)}, 1).stale_writes == 1);  // at the deadline
  CHECK(run({ok(1, 0, 100), write(1, 99, 0, 1), release(1, 200)}, 1).stale_writes == 0);
}

TEST_CASE("a write outside every window of its client is a stale write") {
  CHECK(run({write(1, 5, 0, 1)}, 1).stale_writes == 1);                                  // never held
  CHECK(run({ok(1, 0, 100), release(1, 10), write(1, 20, 0, 1)}, 1).stale_writes == 1);  // after release
  CHECK(run({ok(1, 0, 100), write(2, 20, 0, 1), release(1, 30)}, 1).stale_writes == 1);  // another's window
  CHECK(run({write(1, 5, 0, 1), ok(1, 10, 100), release(1, 20)}, 1).stale_writes == 1);  // before ok
}

TEST_CASE("recovery time runs from a fault's end to the next successful acquisition") {
  auto r = run({fault(100, 200, "pause node 2"), ok(1, 150, 400), ok(2, 350, 600), fault(400, 500, "kill node 1"),
                ok(3, 520, 900)});
  REQUIRE(r.recoveries.size() == 2);
  CHECK(r.recoveries[0].recovery_ms == 150);
  CHECK(r.recoveries[1].recovery_ms == 20);
  CHECK(r.max_recovery_ms == 150);
  CHECK(r.recovery_p50_ms == 20);  // nearest rank of {20, 150}
  CHECK(r.recovery_p99_ms == 150);
  CHECK(r.unrecovered_faults == 0);
  // No acquisition after a fault: -1, and it dominates the maximum.
  auto never = run({fault(100, 200, "a"), ok(1, 250, 400), fault(300, 400, "b")});
  CHECK(never.recoveries[0].recovery_ms == 50);
  CHECK(never.recoveries[1].recovery_ms == -1);
  CHECK(never.max_recovery_ms == -1);
  CHECK(never.recovery_p99_ms == 50);  // over the recovered faults
  CHECK(never.unrecovered_faults == 1);
  CHECK(run({ok(1, 0, 10)}).max_recovery_ms == 0);  // no faults
}

TEST_CASE("success rate is acquisitions per attempt; percentiles are nearest-rank") {
  std::vector<Event> h;
  for (int i = 0; i < 100; ++i) h.push_back(invoke(i, i));
  for (int i = 1; i <= 80; ++i) h.push_back(ok(i, i + 0.5, i + 0.7, /*latency_us=*/81 - i));
  for (int i = 0; i < 20; ++i) h.push_back(ev(EventType::fail, 200 + i, i));
  auto r = run(h);
  CHECK(r.attempts == 100);
  CHECK(r.acquisitions == 80);
  CHECK(r.failures == 20);
  CHECK(r.success_rate == doctest::Approx(0.8));
  CHECK(r.p50_us == 40);  // rank ceil(0.5 · 80) = 40 of 1..80
  CHECK(r.p99_us == 80);  // rank ceil(0.99 · 80) = 80
  auto small = run({ok(1, 0, 1, 40), ok(2, 2, 3, 10), ok(3, 4, 5, 30), ok(4, 6, 7, 20)});
  CHECK(small.p50_us == 20);  // rank 2 of 10, 20, 30, 40
  CHECK(small.p99_us == 40);  // rank 4
  auto none = run({});
  CHECK(none.success_rate == 0.0);
  CHECK(none.p50_us == 0);
}

TEST_CASE("to_json carries the verdict, the examples in ms since run start, and extra fields") {
  auto r = run({ok(1, 0, 500), release(1, 100), ok(2, 50, 500), release(2, 150)}, 0, 2);
  auto j = to_json(r, "pause-minority", false, {{"nodes", 5}, {"violation", "masked?"}});
  for (const char* k : {"scenario", "acquisitions", "attempts", "overlaps", "lost_updates", "stale_writes",
                        "leaked_keys", "success_rate", "p50_us", "p99_us", "max_recovery_ms", "expect_violation",
                        "violation", "overlap_examples"})
    CHECK_MESSAGE(j.contains(k), k);
  CHECK(j["scenario"] == "pause-minority");
  CHECK(j["leaked_keys"] == 2);
  CHECK(j["violation"] == true);  // the checker's key wins over the extra one
  CHECK(j["nodes"] == 5);
  REQUIRE(j["overlap_examples"].size() == 1);
  const auto& ex = j["overlap_examples"][0];
  CHECK(ex["a"]["client"] == 1);
  CHECK(ex["b"]["client"] == 2);
  CHECK(ex["a"]["window_ms"][1].get<double>() == doctest::Approx(100.0));
  CHECK(ex["b"]["window_ms"][0].get<double>() == doctest::Approx(50.0));
  // Leaked keys alone are a violation; a clean run is not.
  CHECK(to_json(run({}, -1, 1), "s", true)["violation"] == true);
  CHECK(to_json(run(sequential(4, 2), 4), "s", false)["violation"] == false);
  // Read locks: their figures, and a shared window marked as such.
  auto rw = run({shared_ok(1, 0, 500), read(1, 40, 0, 1), release(1, 50), shared_ok(2, 10, 500), release(2, 20),
                 ok(3, 30, 500), release(3, 35)});
  auto jr = to_json(rw, "rw", false);
  CHECK(jr["shared_windows"] == 2);
  CHECK(jr["shared_overlaps"] == 1);
  CHECK(jr["overlaps"] == 1);
  CHECK(jr["reads"] == 1);
  CHECK(jr["torn_reads"] == 1);
  REQUIRE(jr["overlap_examples"].size() == 1);
  CHECK(jr["overlap_examples"][0]["a"]["shared"] == true);
  CHECK(jr["overlap_examples"][0]["b"]["shared"] == false);
}

TEST_CASE("parse_history round-trips every event type and skips empty lines") {
  Event f = ok(3, 1, 2, 812);
  Event fl = ev(EventType::fail, 4, 3);
  fl.latency_us = 51000;
  fl.code = "redlock.no_quorum";
  fl.error = "no quorum 2/5: \"x\"\n";
  fl.outcomes = {"ok", "timeout", "held"};
  Event lost = ev(EventType::lost, 3, 8);
  lost.error = "redlock.lost: extension refused";
  std::vector<Event> in{invoke(3, 0), f, fl, write(3, 4, 41, 42), release(3, 5), fault(6, 7, "pause node 2"), lost,
                        shared_ok(4, 9, 10), read(4, 11, 41, 43)};
  std::string text;
  for (const auto& e : in) text += to_json_line(e) + "\n\n";
  text += "  \r\n";
  std::string err;
  auto out = parse_history(text, err);
  CHECK(err.empty());
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].type == in[i].type);
    CHECK(out[i].t == in[i].t);
    CHECK(out[i].client == (in[i].type == EventType::fault ? -1 : in[i].client));
    CHECK(out[i].deadline == in[i].deadline);
    CHECK(out[i].latency_us == in[i].latency_us);
    CHECK(out[i].error == in[i].error);
    CHECK(out[i].outcomes == in[i].outcomes);
    CHECK(out[i].read == in[i].read);
    CHECK(out[i].wrote == in[i].wrote);
    CHECK(out[i].reread == in[i].reread);
    CHECK(out[i].released == in[i].released);
    CHECK(out[i].shared == in[i].shared);
  }
  CHECK(out[7].shared);
  CHECK(out[8].type == EventType::read);
  CHECK(out[8].read == 41);
  CHECK(out[8].reread == 43);
  // A writer's ok line is as it was before read locks: no "shared" key.
  CHECK(to_json_line(f).find("shared") == std::string::npos);
  CHECK(to_json_line(in[7]).find("\"shared\":true") != std::string::npos);
  CHECK(out[1].token == "tok3");
  CHECK(out[2].code == "redlock.no_quorum");
  CHECK(to_json_line(fl).find('\n') == std::string::npos);  // one line, whatever the text holds
  Event bad = fl;
  bad.error = "\xff\xfe";  // invalid UTF-8 from a server must not throw
  CHECK_NOTHROW(to_json_line(bad));
}

TEST_CASE("lost leases are counted, apart from the safety verdict") {
  CheckInput in;
  Event lost = ev(EventType::lost, 1, 50);
  lost.error = "redlock.lost: extension refused";
  in.events = {invoke(1, 0), ok(1, 1, 1000), lost, release(1, 60)};
  in.run_start = ms(0);
  in.run_end = ms(100);
  const CheckResult r = check(in);
  CHECK(r.leases_lost == 1);
  CHECK(r.acquisitions == 1);
  CHECK_FALSE(violation(r));  // a lost lease is liveness: the scenario's own criterion
  CHECK(to_json(r, "many-leases", false, {})["leases_lost"] == 1);
}

TEST_CASE("a history from before read locks still parses; a read without its values does not") {
  std::string err;
  auto out = parse_history(
      "{\"type\":\"ok\",\"client\":1,\"t\":5,\"resource\":\"r\",\"token\":\"x\",\"deadline\":9,\"latency_us\":3}\n"
      "{\"type\":\"write\",\"client\":1,\"t\":6,\"resource\":\"r\",\"read\":0,\"wrote\":1}\n",
      err);
  CHECK(err.empty());
  REQUIRE(out.size() == 2);
  CHECK_FALSE(out[0].shared);
  CHECK(out[1].reread == 0);
  parse_history("{\"type\":\"read\",\"client\":1,\"t\":6,\"resource\":\"r\",\"read\":0}\n", err);
  CHECK(err.find("reread") != std::string::npos);  // it could not be checked for tearing
  parse_history("{\"type\":\"read\",\"client\":1,\"t\":6,\"resource\":\"r\",\"reread\":0}\n", err);
  CHECK(err.find("read") != std::string::npos);
  parse_history(
      "{\"type\":\"ok\",\"client\":1,\"t\":5,\"resource\":\"r\",\"deadline\":9,\"shared\":1}\n", err);
  CHECK(err.find("\"shared\" is not a boolean") != std::string::npos);
}

TEST_CASE("parse_history names the malformed line") {
  std::string err;
  auto out = parse_history(to_json_line(invoke(1, 0)) + "\n\n{\"type\":\"ok\",\"client\":1,\"t\":\n", err);
  CHECK(out.empty());
  CHECK(err.rfind("line 3", 0) == 0);
  out = parse_history("{\"type\":\"ok\",\"client\":1,\"t\":5,\"resource\":\"r\"}\n", err);
  CHECK(out.empty());
  CHECK(err.find("line 1") == 0);
  CHECK(err.find("deadline") != std::string::npos);  // an ok without its deadline is refused
  parse_history("{\"type\":\"invoke\",\"client\":1,\"t\":1}\n{\"type\":\"nap\",\"t\":1}\n", err);
  CHECK(err.find("line 2") == 0);
  parse_history("{\"type\":\"invoke\",\"client\":1,\"t\":1.5}\n", err);
  CHECK(err.find("line 1") == 0);
  parse_history("[1,2]\n", err);
  CHECK(err.find("line 1") == 0);
}

TEST_CASE("monotonic_ns is CLOCK_MONOTONIC: positive and never going back") {
  const auto a = monotonic_ns();
  const auto b = monotonic_ns();
  CHECK(a > 0);
  CHECK(b >= a);
}

TEST_CASE("the SVG has one rect per window, red overlaps, fault bands and an escaped title") {
  auto h = sequential(2000, 7);
  h.push_back(ok(100, 5, 500));  // overlaps a few sequential windows
  h.push_back(release(100, 25));
  h.push_back(fault(300, 400, "pause <node 2> & \"3\""));
  auto r = run(h);
  REQUIRE(r.overlaps > 0);
  std::size_t overlapped = 0;
  for (const auto& w : r.windows) overlapped += w.overlapped;
  const auto svg = render_timeline_svg(r, fault_events(h), ms(0), ms(20000), "run <a & b>");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") == svg.size() - 7);
  CHECK(count(svg, "<svg") == 1);
  CHECK(count(svg, "<rect class=\"hold\"") + count(svg, "<rect class=\"hold overlap\"") == r.windows.size());
  CHECK(count(svg, "<rect class=\"hold overlap\"") == overlapped);
  CHECK(count(svg, "class=\"hold overlap\" ") == count(svg, "fill=\"#d62728\"/>\n"));  // red, and only those
  CHECK(count(svg, "<rect class=\"fault\"") == 1);
  CHECK(svg.find("pause &lt;node 2&gt; &amp; &quot;3&quot;") != std::string::npos);
  CHECK(svg.find("run &lt;a &amp; b&gt;") != std::string::npos);
  CHECK(svg.find("<a &") == std::string::npos);
  CHECK(svg.find(">client 100<") != std::string::npos);
  CHECK(count(svg, "<text") < 100);  // no per-bar text: thousands of windows stay readable
  CHECK(count(svg, "<") == count(svg, ">"));  // every tag closed (no raw < or > in text)
  CHECK(svg.find("read lock") == std::string::npos);  // no read locks: no swatch, no figures
}

TEST_CASE("the SVG draws read locks' windows apart, and says how many shared and tore") {
  auto r = run({shared_ok(1, 0, 500), read(1, 90, 0, 0), release(1, 100), shared_ok(2, 50, 500), release(2, 150),
                ok(3, 200, 500), release(3, 250)});
  REQUIRE(r.shared_windows == 2);
  const auto svg = render_timeline_svg(r, {}, ms(0), ms(300), "rw");
  CHECK(count(svg, "<rect class=\"hold shared\"") == 2);
  CHECK(count(svg, "<rect class=\"hold\"") == 1);
  CHECK(svg.find("read lock window") != std::string::npos);
  CHECK(svg.find("shared overlaps 1 · torn reads 0") != std::string::npos);
}

// Elections (election_check.hpp): leaderships of resource "e", terms, the
// fenced store's writes, and the client faults that excuse a late deposal.
namespace {

Event leader_event(EventType type, int c, double t, std::int64_t term, double deadline) {
  Event e = ev(type, c, t, "e");
  e.term = term;
  e.deadline = ms(deadline);
  return e;
}
Event elected(int c, double t, std::int64_t term, double deadline) {
  return leader_event(EventType::elected, c, t, term, deadline);
}
Event deposed(int c, double t, std::int64_t term, double deadline) {
  return leader_event(EventType::deposed, c, t, term, deadline);
}
Event resigned(int c, double t, std::int64_t term, double deadline) {
  return leader_event(EventType::resigned, c, t, term, deadline);
}
// A store write of `term`: leading() checked at `checked`, sent at t,
// answered 1 ms later — accepted, or refused naming `highest`.
Event beat(int c, double checked, double t, std::int64_t term, bool accepted, std::int64_t highest = 0) {
  Event e = ev(EventType::fenced, c, t, "e");
  e.term = term;
  e.checked = ms(checked);
  e.replied = ms(t + 1);
  e.accepted = accepted;
  e.highest = accepted ? term : highest;
  return e;
}

ElectionResult elect(std::vector<Event> events) {
  std::reverse(events.begin(), events.end());  // the checker must not rely on input order
  return check(CheckInput{std::move(events), {}, 0, ms(0), ms(3000)}).election;
}

}  // namespace

TEST_CASE("an election: leaders one after another, terms rising, writes accepted — no violation") {
  auto r = elect({elected(0, 0, 1, 300), beat(0, 10, 20, 1, true), beat(0, 40, 50, 1, true), resigned(0, 100, 1, 390),
                  elected(1, 105, 2, 400), beat(1, 110, 120, 2, true), deposed(1, 400, 2, 400),
                  elected(2, 420, 3, 700), beat(2, 430, 440, 3, true), resigned(2, 500, 3, 710)});
  CHECK(r.elections == 3);
  CHECK(r.failovers == 1);  // after client 1's deposal; client 0 resigned
  CHECK(r.leader_overlaps == 0);
  CHECK(r.term_regressions == 0);
  CHECK(r.fenced_writes == 4);
  CHECK(r.fenced_accepted == 4);
  CHECK(r.late_writes == 0);
  CHECK(election_violations(r) == 0);
  REQUIRE(r.leaderships.size() == 3);
  CHECK(r.leaderships[1].how == LeaderTerm::End::deposed);
  CHECK(r.leaderships[1].acting_end == ms(400));
}

TEST_CASE("an election: two leaders at once are an overlap") {
  // Client 0 still leads (its deadline 300) when client 1 is elected at 200.
  auto r = elect({elected(0, 0, 1, 300), deposed(0, 300, 1, 300), elected(1, 200, 2, 500), resigned(1, 400, 2, 500)});
  CHECK(r.leader_overlaps == 1);
  CHECK(r.excused_by_pause + r.excused_by_slack == 0);
  CHECK(election_violations(r) == 1);
  CHECK(r.leaderships[0].overlapped);
  CHECK(r.leaderships[1].overlapped);
  REQUIRE(r.examples.size() == 1);
  CHECK(r.examples[0].find("lead at once") != std::string::npos);
  auto whole = check(CheckInput{{elected(0, 0, 1, 300), elected(1, 200, 2, 500)}, {}, 0, ms(0), ms(1000)});
  CHECK(violation(whole));
}

TEST_CASE("an election: a leader paused past its deadline overlaps its successor, excused; its late write refused") {
  // Client 0 (term 1, deadline 300) is stopped from 250 to 900, in its work
  // after a leading() check at 240; client 1 is elected at 320 and writes;
  // client 0 runs again, writes late (refused: term 2 wrote) and is told at 905.
  std::vector<Event> h{elected(0, 0, 1, 300),       beat(0, 240, 901, 1, false, 2), deposed(0, 905, 1, 300),
                       fault(250, 900, "pause client 0 (leader)"), elected(1, 320, 2, 600), beat(1, 330, 340, 2, true),
                       resigned(1, 500, 2, 610)};
  auto r = elect(h);
  CHECK(r.leader_overlaps == 0);
  CHECK(r.excused_by_pause == 1);
  CHECK(r.late_deposals == 0);
  CHECK(r.pauses == 1);
  CHECK(r.failovers == 1);
  CHECK(r.late_writes == 1);
  CHECK(r.late_writes_refused == 1);
  CHECK(r.acted_late == 0);
  CHECK(election_violations(r) == 0);
  CHECK(r.leaderships[0].paused_excuse);

  SUBCASE("told too long after the SIGCONT: a late deposal, and the overlap is no longer excused") {
    h[2] = deposed(0, 900 + 151, 1, 300);  // the slack is 150 ms
    auto late = elect(h);
    CHECK(late.late_deposals == 1);
    CHECK(late.leader_overlaps == 1);
    CHECK(election_violations(late) == 2);
  }
  SUBCASE("its late write accepted after the newer term's: against the fence rule") {
    h[1] = beat(0, 240, 901, 1, true);
    auto accepted = elect(h);
    CHECK(accepted.fence_order_violations == 1);
    CHECK(accepted.late_writes_accepted == 1);
    CHECK(election_violations(accepted) == 1);
  }
  SUBCASE("not paused: told 605 ms after its deadline is late, and the overlap is not excused") {
    h.erase(h.begin() + 3);
    auto unpaused = elect(h);
    CHECK(unpaused.late_deposals == 1);
    CHECK(unpaused.leader_overlaps == 1);
    CHECK(unpaused.excused_by_pause == 0);
  }
  SUBCASE("paused, but its deadline came after its successor's election: not excused") {
    h[0] = elected(0, 0, 1, 330);
    h[2] = deposed(0, 905, 1, 330);
    auto r2 = elect(h);
    CHECK(r2.leader_overlaps == 1);
    CHECK(r2.late_deposals == 0);  // told in time after the SIGCONT, but it led when client 1 was elected
  }
}

TEST_CASE("an election: told a few ms after the deadline, within the slack, is excused by the slack") {
  auto r = elect({elected(0, 0, 1, 300), deposed(0, 320, 1, 300), elected(1, 310, 2, 600), resigned(1, 500, 2, 600)});
  CHECK(r.leader_overlaps == 0);
  CHECK(r.excused_by_slack == 1);
  CHECK(r.max_told_delay_ms == 20);
  CHECK(election_violations(r) == 0);
}

TEST_CASE("an election: a term that goes backward is caught, as is a term elected twice") {
  auto r = elect({elected(0, 0, 5, 300), resigned(0, 100, 5, 300), elected(1, 200, 4, 500), resigned(1, 300, 4, 500)});
  CHECK(r.term_regressions == 1);
  CHECK(r.leader_overlaps == 0);
  CHECK(election_violations(r) == 1);
  REQUIRE(r.examples.size() == 1);
  CHECK(r.examples[0].find("term 4") != std::string::npos);
  auto twice = elect({elected(0, 0, 5, 300), resigned(0, 100, 5, 300), elected(1, 200, 5, 500)});
  CHECK(twice.term_regressions == 1);
}

TEST_CASE("an election: a killed leader's leadership ends at its kill") {
  auto r = elect({elected(0, 0, 1, 300), beat(0, 10, 20, 1, true), fault(100, 100, "kill client 0 (leader)"),
                  elected(1, 400, 2, 700), resigned(1, 500, 2, 700)});
  CHECK(r.kills == 1);
  CHECK(r.failovers == 1);
  CHECK(r.leader_overlaps == 0);
  CHECK(r.leaderships[0].how == LeaderTerm::End::killed);
  CHECK(r.leaderships[0].end == ms(100));
  // A successor elected before the kill overlaps it: no excuse for a killed leader.
  auto early = elect({elected(0, 0, 1, 300), fault(100, 100, "kill client 0 (leader)"), elected(1, 50, 2, 350)});
  CHECK(early.leader_overlaps == 1);
}

TEST_CASE("an election: the fenced store's rule, writes outside leadership, and empty leaderships") {
  SUBCASE("a write accepted below a term accepted before it") {
    auto r = elect({elected(0, 0, 2, 300), beat(0, 10, 20, 2, true), resigned(0, 30, 2, 300), elected(1, 40, 1, 300),
                    beat(1, 50, 60, 1, true)});
    CHECK(r.fence_order_violations == 1);
    CHECK(r.term_regressions == 1);
  }
  SUBCASE("writes whose times overlap are not ordered by the record") {
    Event a = beat(0, 5, 20, 2, true), b = beat(1, 5, 20.5, 1, true);
    auto r = elect({elected(0, 0, 2, 300), elected(1, 0, 1, 300), a, b});
    CHECK(r.fence_order_violations == 0);
  }
  SUBCASE("a refusal naming a term not above the refused one") {
    auto r = elect({elected(0, 0, 3, 300), beat(0, 10, 20, 3, false, 3), resigned(0, 30, 3, 300)});
    CHECK(r.bad_refusals == 1);
    CHECK(r.fenced_refused == 1);
  }
  SUBCASE("a write under a term its writer was never elected with") {
    auto r = elect({elected(0, 0, 3, 300), beat(1, 10, 20, 3, true)});
    CHECK(r.unelected_writes == 1);
  }
  SUBCASE("leading() found true after the deadline: acted late") {
    auto r = elect({elected(0, 0, 3, 300), beat(0, 310, 320, 3, true), deposed(0, 330, 3, 300)});
    CHECK(r.acted_late == 1);
    CHECK(r.late_writes == 1);
    CHECK(r.late_writes_accepted == 1);
  }
  SUBCASE("a resignation stamped at its deadline: leading() said true past it") {
    auto r = elect({elected(0, 0, 3, 300), resigned(0, 300, 3, 300)});
    CHECK(r.acted_late == 1);
    CHECK(elect({elected(0, 0, 3, 300), resigned(0, 299, 3, 300)}).acted_late == 0);
  }
  SUBCASE("a write whose answer never came is counted apart and ordered nothing") {
    Event lost = beat(0, 10, 20, 3, true);
    lost.error = "redlock.store: timed out";
    auto r = elect({elected(0, 0, 3, 300), lost, resigned(0, 30, 3, 300)});
    CHECK(r.fenced_unanswered == 1);
    CHECK(r.fenced_accepted == 0);
    CHECK(election_violations(r) == 0);
  }
  SUBCASE("stamped elected after its own deadline (stopped right after winning): empty, out of the order") {
    auto r = elect({elected(0, 0, 1, 300), resigned(0, 100, 1, 300), elected(2, 200, 3, 500), resigned(2, 480, 3, 500),
                    elected(1, 600, 2, 150), deposed(1, 601, 2, 150)});
    CHECK(r.empty_leaderships == 1);
    CHECK(r.elections == 2);
    CHECK(r.term_regressions == 0);
    CHECK(r.leader_overlaps == 0);
  }
}

TEST_CASE("an election's events round-trip, and to_json carries the election's verdict") {
  Event f = beat(3, 10, 20, 7, false, 9);
  f.beat = 12;
  Event u = beat(3, 30, 40, 7, true);
  u.error = "redlock.store: timed out";
  Event d = deposed(3, 50, 7, 45);
  d.error = "redlock.lost: validity deadline passed";
  std::vector<Event> in{elected(3, 0, 7, 45), f, u, d, resigned(4, 60, 8, 99)};
  std::string text;
  for (const auto& e : in) text += to_json_line(e) + "\n";
  std::string err;
  auto out = parse_history(text, err);
  CHECK(err.empty());
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].type == in[i].type);
    CHECK(out[i].t == in[i].t);
    CHECK(out[i].term == in[i].term);
    CHECK(out[i].error == in[i].error);
  }
  CHECK(out[0].deadline == ms(45));
  CHECK(out[1].beat == 12);
  CHECK(out[1].checked == ms(10));
  CHECK(out[1].replied == ms(21));
  CHECK_FALSE(out[1].accepted);
  CHECK(out[1].highest == 9);
  CHECK(out[2].replied == 0);  // no answer: no answer's fields
  CHECK(to_json_line(u).find("accepted") == std::string::npos);
  std::string bad_err;
  CHECK(parse_history(R"({"type":"elected","client":1,"t":5,"resource":"e","deadline":9})", bad_err).empty());
  CHECK(bad_err.find("term") != std::string::npos);

  auto r = check(CheckInput{{elected(0, 0, 1, 300), elected(1, 200, 2, 500)}, {}, 0, ms(0), ms(1000)});
  auto j = to_json(r, "election-kill-pause", false);
  CHECK(j["election"]["leader_overlaps"] == 1);
  CHECK(j["election"]["violations"] == 1);
  CHECK(j["violation"] == true);
  CHECK(j["election"]["examples"].size() == 1);
  CHECK_FALSE(to_json(run(sequential(4, 2)), "baseline", false).contains("election"));
  const auto windows = leadership_windows(r.election);
  REQUIRE(windows.size() == 2);
  CHECK(windows[0].resource == "e (leader)");
  CHECK(windows[0].overlapped);
}
