// checker.cpp — see checker.hpp.
#include "checker.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace redlock::chaos {
namespace {

constexpr std::size_t kMaxExamples = 10;

// by_time orders event indices by t, ties in input order: one client's file
// is written in order, so its order is the truth when two events share a ns.
void sort_by_time(std::vector<std::size_t>& idx, const std::vector<Event>& ev) {
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return ev[a].t < ev[b].t; });
}

Window open_window(const Event& ok) {
  Window w;
  w.client = ok.client;
  w.resource = ok.resource;
  w.token = ok.token;
  w.start = ok.t;
  w.deadline = ok.deadline;
  w.shared = ok.shared;
  return w;
}

// close ends a window at `at` (a release) but never after its deadline: past
// the deadline the holder no longer owns the lock whatever it believes, and
// the masters may have expired the key, so another holder is legitimate.
// A deadline before ok.t (never expected) gives an empty window, not a
// negative one.
Window close(Window w, std::int64_t at, bool by_release) {
  w.released = by_release && at < w.deadline;
  w.end = std::max(w.start, std::min(at, w.deadline));
  return w;
}

// build_windows walks each client's events in time order. Per resource it
// keeps the one open acquisition: a release closes it; a second ok for the
// same resource before any release means the client abandoned the first lock
// without releasing it, which then lasts to its own deadline (the key stays
// on the masters until then). In any well-formed history this is exactly
// "the client's next release of that resource after ok".
std::vector<Window> build_windows(const std::vector<Event>& ev, std::vector<int>& clients) {
  std::unordered_map<int, std::vector<std::size_t>> by_client;
  for (std::size_t i = 0; i < ev.size(); ++i)
    if (ev[i].type != EventType::fault) by_client[ev[i].client].push_back(i);

  std::vector<Window> out;
  for (auto& [client, idx] : by_client) {
    clients.push_back(client);
    sort_by_time(idx, ev);
    std::unordered_map<std::string, Window> open;
    for (auto i : idx) {
      const Event& e = ev[i];
      if (e.type == EventType::ok) {
        if (auto it = open.find(e.resource); it != open.end()) out.push_back(close(it->second, it->second.deadline, false));
        open[e.resource] = open_window(e);
      } else if (e.type == EventType::release) {
        if (auto it = open.find(e.resource); it != open.end()) {
          out.push_back(close(it->second, e.t, true));
          open.erase(it);
        }  // a release without a preceding ok ends nothing
      }
    }
    for (auto& [res, w] : open) out.push_back(close(w, w.deadline, false));  // died or killed holding it
  }
  std::sort(clients.begin(), clients.end());
  std::sort(out.begin(), out.end(), [](const Window& a, const Window& b) {
    return a.start != b.start ? a.start < b.start : a.client < b.client;
  });
  return out;
}

// count_overlaps sweeps each resource's windows by start, keeping the
// windows still active (end > current start) ordered by end. Every active
// window overlaps the new one, so the work is O(n log n + overlapping
// pairs), readers' included. Windows are half-open [start, end): touching
// ones do not overlap and empty ones overlap nothing. Two shared windows
// overlap as readers may: counted apart (shared_overlaps, the evidence that
// readers did share), neither marked nor an example.
void count_overlaps(CheckResult& r) {
  std::unordered_map<std::string, std::vector<std::size_t>> by_resource;
  for (std::size_t i = 0; i < r.windows.size(); ++i)
    if (r.windows[i].end > r.windows[i].start) by_resource[r.windows[i].resource].push_back(i);
  for (auto& [res, idx] : by_resource) {  // idx is already in start order (windows are sorted)
    std::multiset<std::pair<std::int64_t, std::size_t>> active;  // (end, window index)
    for (auto i : idx) {
      Window& w = r.windows[i];
      while (!active.empty() && active.begin()->first <= w.start) active.erase(active.begin());
      for (const auto& [end, j] : active) {
        if (w.shared && r.windows[j].shared) {
          ++r.shared_overlaps;
          continue;
        }
        ++r.overlaps;
        r.windows[j].overlapped = true;
        w.overlapped = true;
        if (r.overlap_examples.size() < kMaxExamples) r.overlap_examples.emplace_back(r.windows[j], w);
      }
      active.emplace(w.end, i);
    }
  }
  // The examples were copied while being marked: mark the copies too.
  for (auto& [a, b] : r.overlap_examples) a.overlapped = b.overlapped = true;
}

// OwnWindows finds the hold window an event of a holder happened in: its
// client's latest window of that resource that started at or before it.
class OwnWindows {
 public:
  explicit OwnWindows(const std::vector<Window>& windows) {
    for (const auto& w : windows) own_[{w.client, w.resource}].push_back(&w);  // windows are in start order
  }
  // inside: e happened in that window — start <= t <= end (end is the
  // release moment at the latest) and t < deadline (Lock::valid() is
  // now < deadline).
  bool inside(const Event& e) const {
    auto it = own_.find({e.client, e.resource});
    if (it == own_.end()) return false;
    const auto& list = it->second;
    auto after = std::upper_bound(list.begin(), list.end(), e.t,
                                  [](std::int64_t t, const Window* x) { return t < x->start; });
    if (after == list.begin()) return false;
    const Window* w = *(after - 1);
    return e.t <= w->end && e.t < w->deadline;
  }

 private:
  std::map<std::pair<int, std::string>, std::vector<const Window*>> own_;
};

// count_stale_writes: a write is valid only inside its own window
// (OwnWindows::inside). Anything else is stale.
void count_stale_writes(CheckResult& r, const std::vector<Event>& ev, const OwnWindows& own) {
  for (const auto& e : ev)
    if (e.type == EventType::write && !own.inside(e)) ++r.stale_writes;
}

// count_torn_reads: a reader reads the counter after its ok, reads it again
// at its hold's end, and stamps the event after that second read returned:
// stamped inside its window, both reads were made inside it, where only a
// writer whose window overlaps it can have written (a write lands after
// its stamp, inside its writer's window, and before its writer's release).
// A read stamped outside (a reader paused past its validity) may rightly
// see a change: not counted, as a stale write is not a lost update.
void count_torn_reads(CheckResult& r, const std::vector<Event>& ev, const OwnWindows& own) {
  for (const auto& e : ev) {
    if (e.type != EventType::read) continue;
    ++r.reads;
    if (e.reread != e.read && own.inside(e)) ++r.torn_reads;
  }
}

// check_counter replays each resource's counter. Writes are read-modify-
// write increments of the counter of their resource, taking effect in t
// order — true whenever mutual exclusion holds, since a write happens
// inside its window and the windows of one resource are disjoint. Writes
// of different resources are never compared: two resources are held at
// once by design.
//
// Per resource:
//   base     = the first write's read: the counter's value before the
//              run, normally 0.
//   current  = the value the counter holds after the writes so far: the
//              latest write's wrote.
//   For each write in t order:
//     read <  current: a stale read — it overwrites at least one increment.
//                      stale_reads += 1.
//     read >  current: the counter moved with no write event — a writer
//                      killed between its SET and its log line. Not a loss:
//                      unrecorded_increments += read − current.
//     wrote != read+1: bad_increments += 1 (a worker bug; reported apart).
//   expected       = base + writes + unrecorded_increments
//   missing        = max(0, expected − final)   (if the counter was read)
//   lost_updates  += max(stale_reads, missing)
//
// The two terms see the same loss from two sides (the history and the
// counter), so they are combined with max, not +: two clients that both read
// 5 and wrote 6 give stale_reads = 1 and missing = 1, hence lost_updates = 1.
// `missing` catches losses the history cannot show (e.g. a write that was
// never logged overwriting logged ones). Never negative by construction.
// final_mismatch flags a counter that differs from its expected value in
// either direction (above it: unrecorded writes after the last logged one).
void check_counter(CheckResult& r, const CheckInput& in) {
  std::unordered_map<std::string, std::vector<std::size_t>> by_resource;
  for (std::size_t i = 0; i < in.events.size(); ++i)
    if (in.events[i].type == EventType::write) by_resource[in.events[i].resource].push_back(i);
  for (auto& [resource, idx] : by_resource) {
    sort_by_time(idx, in.events);
    r.writes += idx.size();
    const std::int64_t base = in.events[idx.front()].read;
    std::int64_t current = base;
    std::size_t stale_reads = 0, unrecorded = 0;
    for (auto i : idx) {
      const Event& w = in.events[i];
      if (w.read < current) ++stale_reads;
      if (w.read > current) unrecorded += static_cast<std::size_t>(w.read - current);
      if (w.wrote != w.read + 1) ++r.bad_increments;
      current = w.wrote;
    }
    r.unrecorded_increments += unrecorded;
    const std::int64_t expected = base + static_cast<std::int64_t>(idx.size() + unrecorded);
    r.expected_final += expected;
    std::size_t missing = 0;
    if (auto it = in.final_values.find(resource); it != in.final_values.end()) {
      if (expected > it->second) missing = static_cast<std::size_t>(expected - it->second);
      r.final_mismatch = r.final_mismatch || it->second != expected;
    }
    r.lost_updates += std::max(stale_reads, missing);
  }
  if (!in.final_values.empty()) r.final_value = 0;
  for (const auto& [resource, value] : in.final_values) {
    r.final_value += value;
    // A counter without writes should still be 0.
    if (value != 0 && by_resource.count(resource) == 0) r.final_mismatch = true;
  }
}

// measure_recovery: for each fault, the first ok at or after its end, by
// any client — or, in an election, the first leader elected from its start
// on (its failover: a leader stopped or killed is replaced while the fault
// lasts). A fault never followed by either makes max_recovery_ms -1:
// "never recovered" must not be hidden by a finite maximum of other faults.
void measure_recovery(CheckResult& r, const std::vector<Event>& ev) {
  std::vector<std::int64_t> oks, elected;
  for (const auto& e : ev) {
    if (e.type == EventType::ok) oks.push_back(e.t);
    if (e.type == EventType::elected) elected.push_back(e.t);
  }
  std::sort(oks.begin(), oks.end());
  std::sort(elected.begin(), elected.end());
  for (const auto& f : fault_events(ev)) {
    Recovery rec{f.error, f.t, f.deadline, -1};
    auto it = std::lower_bound(oks.begin(), oks.end(), f.deadline);
    if (it != oks.end()) rec.recovery_ms = (*it - f.deadline) / 1'000'000;
    auto next = std::lower_bound(elected.begin(), elected.end(), f.t);
    if (next != elected.end() && (rec.recovery_ms < 0 || (*next - f.t) / 1'000'000 < rec.recovery_ms))
      rec.recovery_ms = (*next - f.t) / 1'000'000;
    if (rec.recovery_ms < 0) ++r.unrecovered_faults;
    else r.max_recovery_ms = std::max(r.max_recovery_ms, rec.recovery_ms);
    r.recoveries.push_back(std::move(rec));
  }
  if (r.unrecovered_faults > 0) r.max_recovery_ms = -1;
}

// nearest_rank: the smallest value with at least p % of the sample at or
// below it — rank ceil(p/100 · n), 1-based.
std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  std::size_t rank = (static_cast<std::size_t>(p) * sorted.size() + 99) / 100;
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// recovery_percentiles: a long run has thousands of faults; p50 and p99
// say more than their maximum alone.
void recovery_percentiles(CheckResult& r) {
  std::vector<std::int64_t> ms;
  for (const auto& rec : r.recoveries)
    if (rec.recovery_ms >= 0) ms.push_back(rec.recovery_ms);
  std::sort(ms.begin(), ms.end());
  r.recovery_p50_ms = nearest_rank(ms, 50);
  r.recovery_p99_ms = nearest_rank(ms, 99);
}

double ms_since(std::int64_t ns, std::int64_t origin) {
  return std::round(static_cast<double>(ns - origin) / 1e3) / 1e3;  // µs precision
}

nlohmann::json window_json(const Window& w, std::int64_t origin) {
  return {{"client", w.client}, {"window_ms", {ms_since(w.start, origin), ms_since(w.end, origin)}},
          {"released", w.released}, {"shared", w.shared}};
}

}  // namespace

std::vector<Event> fault_events(const std::vector<Event>& events) {
  std::vector<Event> out;
  for (const auto& e : events)
    if (e.type == EventType::fault) out.push_back(e);
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  return out;
}

CheckResult check(const CheckInput& in) {
  CheckResult r;
  r.run_start = in.run_start;
  r.run_end = in.run_end;
  r.leaked_keys = in.leaked_keys;
  std::vector<std::int64_t> latencies;
  for (const auto& e : in.events) {
    if (e.type == EventType::invoke) ++r.attempts;
    if (e.type == EventType::fail) ++r.failures;
    if (e.type == EventType::lost) ++r.leases_lost;
    if (e.type == EventType::ok) {
      ++r.acquisitions;
      latencies.push_back(e.latency_us);
    }
  }
  r.success_rate = r.attempts == 0 ? 0.0 : static_cast<double>(r.acquisitions) / static_cast<double>(r.attempts);
  std::sort(latencies.begin(), latencies.end());
  r.p50_us = nearest_rank(latencies, 50);
  r.p99_us = nearest_rank(latencies, 99);

  r.windows = build_windows(in.events, r.clients);
  std::unordered_set<std::string_view> resources;
  for (const auto& w : r.windows) {
    resources.insert(w.resource);
    r.shared_windows += w.shared ? 1 : 0;
  }
  r.resources = resources.size();
  count_overlaps(r);
  const OwnWindows own(r.windows);
  count_stale_writes(r, in.events, own);
  count_torn_reads(r, in.events, own);
  check_counter(r, in);
  measure_recovery(r, in.events);
  recovery_percentiles(r);
  r.election = check_election(in.events, in.deposed_slack_ns, in.run_start);
  return r;
}

std::vector<Window> leadership_windows(const ElectionResult& r) {
  std::vector<Window> out;
  for (const auto& l : r.leaderships) {
    Window w;
    w.client = l.client;
    w.resource = l.name + " (leader)";
    w.token = "term " + std::to_string(l.term);
    w.start = l.elected;
    w.end = std::max(l.elected, l.end);
    w.deadline = l.deadline;
    w.released = l.how == LeaderTerm::End::resigned;
    w.overlapped = l.overlapped;
    out.push_back(std::move(w));
  }
  return out;
}

bool violation(const CheckResult& r) {
  return r.overlaps + r.lost_updates + r.torn_reads + r.leaked_keys + election_violations(r.election) > 0;
}

namespace {

nlohmann::json election_json(const ElectionResult& e) {
  nlohmann::json j = {{"elections", e.elections},
                      {"empty_leaderships", e.empty_leaderships},
                      {"failovers", e.failovers},
                      {"kills", e.kills},
                      {"pauses", e.pauses},
                      {"leader_overlaps", e.leader_overlaps},
                      {"excused_by_pause", e.excused_by_pause},
                      {"excused_by_slack", e.excused_by_slack},
                      {"late_deposals", e.late_deposals},
                      {"max_told_delay_ms", e.max_told_delay_ms},
                      {"acted_late", e.acted_late},
                      {"term_regressions", e.term_regressions},
                      {"fenced_writes", e.fenced_writes},
                      {"fenced_accepted", e.fenced_accepted},
                      {"fenced_refused", e.fenced_refused},
                      {"fenced_unanswered", e.fenced_unanswered},
                      {"fence_order_violations", e.fence_order_violations},
                      {"bad_refusals", e.bad_refusals},
                      {"unelected_writes", e.unelected_writes},
                      {"late_writes", e.late_writes},
                      {"late_writes_refused", e.late_writes_refused},
                      {"late_writes_accepted", e.late_writes_accepted},
                      {"violations", election_violations(e)},
                      {"examples", e.examples}};
  return j;
}

}  // namespace

nlohmann::json to_json(const CheckResult& r, const std::string& scenario, bool expect_violation,
                       const std::map<std::string, nlohmann::json>& extra) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : extra) j[k] = v;
  j["scenario"] = scenario;
  j["attempts"] = r.attempts;
  j["acquisitions"] = r.acquisitions;
  j["leases_lost"] = r.leases_lost;
  j["failures"] = r.failures;
  j["success_rate"] = r.success_rate;
  j["p50_us"] = r.p50_us;
  j["p99_us"] = r.p99_us;
  j["overlaps"] = r.overlaps;
  j["shared_overlaps"] = r.shared_overlaps;
  j["shared_windows"] = r.shared_windows;
  j["resources"] = r.resources;
  j["writes"] = r.writes;
  j["lost_updates"] = r.lost_updates;
  j["stale_writes"] = r.stale_writes;
  j["reads"] = r.reads;
  j["torn_reads"] = r.torn_reads;
  j["bad_increments"] = r.bad_increments;
  j["unrecorded_increments"] = r.unrecorded_increments;
  j["final_value"] = r.final_value;
  j["expected_final"] = r.expected_final;
  j["final_mismatch"] = r.final_mismatch;
  j["leaked_keys"] = r.leaked_keys;
  j["max_recovery_ms"] = r.max_recovery_ms;
  j["recovery_p50_ms"] = r.recovery_p50_ms;
  j["recovery_p99_ms"] = r.recovery_p99_ms;
  j["unrecovered_faults"] = r.unrecovered_faults;
  j["windows"] = r.windows.size();
  j["clients"] = r.clients.size();
  if (!r.election.leaderships.empty() || r.election.fenced_writes > 0) j["election"] = election_json(r.election);
  j["expect_violation"] = expect_violation;
  j["violation"] = violation(r);
  auto& ex = j["overlap_examples"] = nlohmann::json::array();
  for (const auto& [a, b] : r.overlap_examples)
    ex.push_back({{"resource", a.resource}, {"a", window_json(a, r.run_start)}, {"b", window_json(b, r.run_start)}});
  auto& rec = j["recoveries"] = nlohmann::json::array();
  for (const auto& f : r.recoveries)
    rec.push_back({{"what", f.what}, {"fault_ms", {ms_since(f.start, r.run_start), ms_since(f.end, r.run_start)}},
                   {"recovery_ms", f.recovery_ms}});
  return j;
}

}  // namespace redlock::chaos
