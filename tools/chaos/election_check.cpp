// election_check.cpp — see election_check.hpp.
#include "election_check.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace redlock::chaos {
namespace {

constexpr std::size_t kMaxExamples = 10;

// fault_client: the client a fault names ("pause client 3 …" → 3), or -1.
int fault_client(const std::string& what, const char* verb) {
  const std::string head = std::string(verb) + " client ";
  if (what.rfind(head, 0) != 0) return -1;
  return std::atoi(what.c_str() + head.size());
}

struct ClientFaults {
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> pauses;  // client → [SIGSTOP, SIGCONT]
  std::map<int, std::vector<std::int64_t>> kills;                            // client → kill times
};

ClientFaults client_faults(const std::vector<Event>& events) {
  ClientFaults f;
  for (const auto& e : events) {
    if (e.type != EventType::fault) continue;
    if (int c = fault_client(e.error, "pause"); c >= 0) f.pauses[c].emplace_back(e.t, e.deadline);
    if (int c = fault_client(e.error, "kill"); c >= 0) f.kills[c].push_back(e.t);
  }
  for (auto& [c, v] : f.kills) std::sort(v.begin(), v.end());
  return f;
}

class Checker {
 public:
  Checker(const std::vector<Event>& events, std::int64_t slack, std::int64_t origin)
      : ev_(events), slack_(slack), origin_(origin), faults_(client_faults(events)) {}

  ElectionResult run() {
    build_leaderships();
    for (auto& [name, list] : by_name_) {
      check_terms(list);
      check_overlaps(list);
    }
    check_told();
    check_writes();
    for (auto& [key, l] : all_) r_.leaderships.push_back(l);
    std::sort(r_.leaderships.begin(), r_.leaderships.end(), [](const LeaderTerm& a, const LeaderTerm& b) {
      return std::tie(a.name, a.elected, a.client) < std::tie(b.name, b.elected, b.client);
    });
    return std::move(r_);
  }

 private:
  using Key = std::tuple<std::string, int, std::int64_t>;  // name, client, term

  double ms(std::int64_t t) const { return static_cast<double>(t - origin_) / 1e6; }

  void example(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (r_.examples.size() >= kMaxExamples) return;
    char buf[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    r_.examples.emplace_back(buf);
  }

  // build_leaderships pairs each elected event with its deposed or resigned
  // one by (name, client, term) — not by order: a worker stopped between
  // winning and stamping `elected` may stamp its deposal first — and ends
  // the others at their worker's kill.
  void build_leaderships() {
    for (const auto& e : ev_) {
      if (e.type != EventType::elected) continue;
      LeaderTerm& l = all_[{e.resource, e.client, e.term}];
      if (l.elected != 0) ++r_.term_regressions;  // a second election under the same term
      l.client = e.client;
      l.name = e.resource;
      l.term = e.term;
      l.elected = e.t;
      if (l.how == LeaderTerm::End::open) l.deadline = e.deadline;
    }
    for (const auto& e : ev_) {
      if (e.type != EventType::deposed && e.type != EventType::resigned) continue;
      auto it = all_.find({e.resource, e.client, e.term});
      if (it == all_.end()) continue;  // its elected line was never written: it never led
      it->second.how = e.type == EventType::deposed ? LeaderTerm::End::deposed : LeaderTerm::End::resigned;
      it->second.end = e.t;
      it->second.deadline = e.deadline;
    }
    // An open leadership's deadline is the one it was elected with; its
    // extensions are not in the record, so it ends at its last write's answer if later.
    std::map<Key, std::int64_t> last_write;
    for (const auto& e : ev_) {
      if (e.type != EventType::fenced) continue;
      auto& t = last_write[{e.resource, e.client, e.term}];
      t = std::max({t, e.t, e.replied});
    }
    for (auto& [key, l] : all_) {
      if (l.how == LeaderTerm::End::open) {
        const auto& kills = faults_.kills[l.client];
        auto k = std::lower_bound(kills.begin(), kills.end(), l.elected);
        if (k != kills.end()) {
          l.how = LeaderTerm::End::killed;
          l.end = *k;
          ++r_.kills;
        } else {
          l.end = std::max(l.deadline, last_write[key]);
        }
      }
      l.acting_end = l.how == LeaderTerm::End::killed || l.how == LeaderTerm::End::open ? l.end
                                                                                       : std::min(l.end, l.deadline);
      l.empty = l.acting_end <= l.elected;
      if (l.empty) {
        ++r_.empty_leaderships;
      } else {
        ++r_.elections;
        by_name_[l.name].push_back(&l);
      }
    }
    for (auto& [name, list] : by_name_) {
      std::sort(list.begin(), list.end(), [](const LeaderTerm* a, const LeaderTerm* b) {
        return std::tie(a->elected, a->term) < std::tie(b->elected, b->term);
      });
    }
  }

  // check_terms: in election order every term is above the one before it.
  void check_terms(const std::vector<LeaderTerm*>& list) {
    for (std::size_t i = 1; i < list.size(); ++i) {
      const LeaderTerm& a = *list[i - 1];
      const LeaderTerm& b = *list[i];
      if (b.term > a.term) {
        if (a.how == LeaderTerm::End::deposed || a.how == LeaderTerm::End::killed) ++r_.failovers;
        continue;
      }
      ++r_.term_regressions;
      example("%s: term %lld (client %d, elected at %.3f ms) after term %lld (client %d, elected at %.3f ms)",
              b.name.c_str(), static_cast<long long>(b.term), b.client, ms(b.elected),
              static_cast<long long>(a.term), a.client, ms(a.elected));
    }
  }

  // told_bound: when a leader must have been told at the latest, less the
  // slack — its deadline, or the SIGCONT of a pause it was stopped in at its
  // deadline — and whether a pause set it.
  std::pair<std::int64_t, bool> told_bound(const LeaderTerm& l) {
    for (const auto& [stop, cont] : faults_.pauses[l.client]) {
      if (stop <= l.deadline && l.deadline <= cont) return {cont, true};
    }
    return {l.deadline, false};
  }

  // excused: the earlier leadership `a` of an overlapping pair could not act
  // any more when `b` was elected, and was told in time.
  bool excused(const LeaderTerm& a, const LeaderTerm& b) {
    if (a.how != LeaderTerm::End::deposed && a.how != LeaderTerm::End::resigned) return false;
    if (a.acting_end > b.elected) return false;
    const auto [bound, by_pause] = told_bound(a);
    if (a.end > bound + slack_) return false;
    ++(by_pause ? r_.excused_by_pause : r_.excused_by_slack);
    return true;
  }

  // check_overlaps sweeps the leaderships by election, keeping those not
  // yet ended (end > the current one's election) ordered by end.
  void check_overlaps(const std::vector<LeaderTerm*>& list) {
    std::multiset<std::pair<std::int64_t, LeaderTerm*>> active;
    for (LeaderTerm* b : list) {
      while (!active.empty() && active.begin()->first <= b->elected) active.erase(active.begin());
      for (const auto& [end, a] : active) {
        if (excused(*a, *b)) {
          if (told_bound(*a).second) a->paused_excuse = b->paused_excuse = true;
          continue;
        }
        ++r_.leader_overlaps;
        a->overlapped = b->overlapped = true;
        example("%s: client %d (term %lld, %.3f-%.3f ms, could act until %.3f) and client %d (term %lld, elected "
                "at %.3f ms) lead at once",
                b->name.c_str(), a->client, static_cast<long long>(a->term), ms(a->elected), ms(a->end),
                ms(a->acting_end), b->client, static_cast<long long>(b->term), ms(b->elected));
      }
      active.emplace(b->end, b);
    }
  }

  // check_told: every deposed leader was told within the slack of its
  // deadline, or of the SIGCONT of a pause it was stopped in then.
  void check_told() {
    for (auto& [key, l] : all_) {
      if (l.how != LeaderTerm::End::deposed) continue;
      const auto [bound, by_pause] = told_bound(l);
      r_.pauses += by_pause ? 1 : 0;
      const std::int64_t late = l.end - bound;
      r_.max_told_delay_ms = std::max(r_.max_told_delay_ms, late / 1'000'000);
      if (late <= slack_) continue;
      ++r_.late_deposals;
      example("%s: client %d (term %lld) told deposed at %.3f ms, %.3f ms after %s at %.3f ms", l.name.c_str(),
              l.client, static_cast<long long>(l.term), ms(l.end), static_cast<double>(late) / 1e6,
              by_pause ? "its SIGCONT" : "its deadline", ms(bound));
    }
  }

  // check_writes: each write by a leader of its term, checked while it led;
  // the store's rule over the writes whose answers came.
  void check_writes() {
    std::map<std::string, std::vector<const Event*>> writes;
    for (const auto& e : ev_) {
      if (e.type != EventType::fenced) continue;
      ++r_.fenced_writes;
      writes[e.resource].push_back(&e);
      if (!e.error.empty()) {
        ++r_.fenced_unanswered;
        continue;
      }
      ++(e.accepted ? r_.fenced_accepted : r_.fenced_refused);
      if (!e.accepted && e.highest <= e.term) {
        ++r_.bad_refusals;
        example("%s: client %d's write of term %lld refused at %.3f ms naming term %lld", e.resource.c_str(),
                e.client, static_cast<long long>(e.term), ms(e.replied), static_cast<long long>(e.highest));
      }
      auto it = all_.find({e.resource, e.client, e.term});
      if (it == all_.end()) {
        ++r_.unelected_writes;
        example("%s: client %d wrote under term %lld at %.3f ms, never elected with it", e.resource.c_str(), e.client,
                static_cast<long long>(e.term), ms(e.t));
        continue;
      }
      const LeaderTerm& l = it->second;
      if (e.checked >= l.acting_end) {
        ++r_.acted_late;
        example("%s: client %d (term %lld) found itself leading at %.3f ms, after it could act (until %.3f ms)",
                e.resource.c_str(), e.client, static_cast<long long>(e.term), ms(e.checked), ms(l.acting_end));
      }
      if (e.t >= l.acting_end) {
        ++r_.late_writes;
        ++(e.accepted ? r_.late_writes_accepted : r_.late_writes_refused);
      }
    }
    for (auto& [name, list] : writes) check_store_order(list);
    // A resignation is stamped before its leading() check: one stamped at
    // or after the deadline found itself leading past it.
    for (const auto& [key, l] : all_) {
      if (l.how != LeaderTerm::End::resigned || l.end < l.deadline) continue;
      ++r_.acted_late;
      example("%s: client %d (term %lld) found itself leading at %.3f ms to resign, after its deadline (%.3f ms)",
              l.name.c_str(), l.client, static_cast<long long>(l.term), ms(l.end), ms(l.deadline));
    }
  }

  // check_store_order: a write accepted while a higher term had already
  // been accepted — answered before this one was sent — breaks the store's
  // rule. Writes whose times overlap cannot be ordered from the record and
  // are not compared.
  void check_store_order(std::vector<const Event*>& list) {
    std::vector<const Event*> accepted;
    for (const Event* e : list)
      if (e->error.empty() && e->accepted) accepted.push_back(e);
    std::stable_sort(list.begin(), list.end(), [](const Event* a, const Event* b) { return a->t < b->t; });
    std::stable_sort(accepted.begin(), accepted.end(),
                     [](const Event* a, const Event* b) { return a->replied < b->replied; });
    std::size_t next = 0;
    const Event* highest = nullptr;
    for (const Event* w : list) {
      for (; next < accepted.size() && accepted[next]->replied < w->t; ++next)
        if (highest == nullptr || accepted[next]->term > highest->term) highest = accepted[next];
      if (!w->error.empty() || !w->accepted || highest == nullptr || w->term >= highest->term) continue;
      ++r_.fence_order_violations;
      example("%s: client %d's write of term %lld sent at %.3f ms was accepted after term %lld's (client %d, "
              "answered at %.3f ms)",
              w->resource.c_str(), w->client, static_cast<long long>(w->term), ms(w->t),
              static_cast<long long>(highest->term), highest->client, ms(highest->replied));
    }
  }

  const std::vector<Event>& ev_;
  const std::int64_t slack_, origin_;
  ClientFaults faults_;
  std::map<Key, LeaderTerm> all_;
  std::map<std::string, std::vector<LeaderTerm*>> by_name_;  // non-empty, by election
  ElectionResult r_;
};

}  // namespace

ElectionResult check_election(const std::vector<Event>& events, std::int64_t slack_ns, std::int64_t origin) {
  return Checker(events, slack_ns, origin).run();
}

std::size_t election_violations(const ElectionResult& r) {
  return r.leader_overlaps + r.late_deposals + r.acted_late + r.term_regressions + r.fence_order_violations +
         r.bad_refusals + r.unelected_writes;
}

}  // namespace redlock::chaos
