// election_check.cpp — see election_check.hpp.
#include "election_check.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string_view>
#include <map>
#include <optional>
#include <tuple>

namespace redlock::sim {

namespace {

// join: the pieces, appended (`"c" + std::to_string(…)` makes GCC 12 at
// -O3 warn of a restrict overlap that is not there).
std::string join(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (const std::string_view p : pieces) out += p;
  return out;
}

std::string at(Nanos t) {
  if (t == never) return " the end";
  char buf[32];
  std::snprintf(buf, sizeof buf, " %.3f ms", static_cast<double>(t) / 1e6);
  return buf;
}

std::string who(const Term& t) {
  return join({"c", std::to_string(t.client), " (", t.identity, ", term ", std::to_string(t.term), ")"});
}

// running: the first moment of [from, to) at which the process ran — no
// stop (each lasting `slack` past its end) covers it; nullopt if none.
std::optional<Nanos> running(std::vector<std::pair<Nanos, Nanos>> stops, Nanos from, Nanos to, Nanos slack) {
  std::sort(stops.begin(), stops.end());
  Nanos t = from;
  for (const auto& [start, end] : stops) {
    if (t >= to) break;
    if (start > t) break;  // sorted: no later stop covers t either
    const Nanos covered = end == never || end > never - slack ? never : end + slack;
    t = std::max(t, covered);
  }
  if (t < to) return t;
  return std::nullopt;
}

}  // namespace

std::vector<ElectionFinding> check_election(const ElectionHistory& h) {
  std::vector<ElectionFinding> out;
  std::map<std::string, std::vector<std::size_t>> by_name;
  for (std::size_t i = 0; i < h.terms.size(); ++i) by_name[h.terms[i].name].push_back(i);
  for (auto& [name, list] : by_name) {
    std::stable_sort(list.begin(), list.end(),
                     [&h](std::size_t a, std::size_t b) { return h.terms[a].elected < h.terms[b].elected; });
    bool overlap_told = false;
    const Term* top = nullptr;  // the highest term elected so far
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Term& j = h.terms[list[k]];
      for (std::size_t e = 0; e < k && !overlap_told; ++e) {
        const Term& i = h.terms[list[e]];
        if (i.ended <= j.elected) continue;
        static const std::vector<std::pair<Nanos, Nanos>> none;
        const auto& stops = i.client < h.stopped.size() ? h.stopped[i.client] : none;
        const std::optional<Nanos> t = running(stops, j.elected, i.ended, h.slack);
        if (!t) continue;
        out.push_back({"two_leaders",
                       name + ": " + who(j) + " elected at" + at(j.elected) + " while " + who(i) + " (elected at" +
                           at(i.elected) + ") led until" + at(i.ended) + (i.deposed ? ", its deposed notice" : "") +
                           "; its process ran at" + at(*t),
                       j.elected,
                       {i.token, j.token}});
        overlap_told = true;  // one per name: the first shows it
      }
      if (j.elected < h.terms_trusted_until && top != nullptr && j.term <= top->term) {
        out.push_back({"term_order",
                       name + ": " + who(j) + " elected at" + at(j.elected) + ", not above " + who(*top) +
                           " elected at" + at(top->elected),
                       j.elected,
                       {top->token, j.token}});
      }
      if (top == nullptr || j.term > top->term) top = &j;
    }
  }

  // Who led at each term: the elected candidate, else the first observer
  // told it.
  std::map<std::pair<std::string, std::uint64_t>, std::string> identity;
  for (const Term& t : h.terms) {
    if (t.elected < h.terms_trusted_until) identity.emplace(std::pair{t.name, t.term}, t.identity);
  }
  std::map<std::pair<std::size_t, std::string>, std::uint64_t> highest;  // (observer, name) → term
  for (const Reading& r : h.readings) {
    if (!r.leader || r.at >= h.terms_trusted_until) continue;
    const std::string where = join({"o", std::to_string(r.observer), " on ", r.name, " at", at(r.at)});
    auto [it, first] = identity.emplace(std::pair{r.name, r.term}, r.identity);
    if (!first && it->second != r.identity) {
      out.push_back({"observer",
                     where + ": told " + r.identity + " leads at term " + std::to_string(r.term) + ", which " +
                         it->second + " held",
                     r.at});
    }
    std::uint64_t& top = highest[{r.observer, r.name}];
    if (r.term < top) {
      out.push_back({"observer",
                     where + ": told " + r.identity + " at term " + std::to_string(r.term) + " after term " +
                         std::to_string(top),
                     r.at});
    }
    top = std::max(top, r.term);
  }
  return out;
}

}  // namespace redlock::sim
