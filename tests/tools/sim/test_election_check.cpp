// test_election_check.cpp — the election workload's checker
// (tools/sim/election_check.hpp) on histories written by hand: what it
// refuses, and what it excuses (a stopped process) and only that.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "election_check.hpp"

using namespace redlock::sim;

namespace {

Term term(std::size_t client, std::uint64_t n, Nanos elected, Nanos ended, std::string name = "r0") {
  Term t;
  t.client = client;
  t.name = std::move(name);
  t.identity = "c" + std::to_string(client);
  t.token = "tok" + std::to_string(client) + "-" + std::to_string(n);
  t.term = n;
  t.elected = elected;
  t.ended = ended;
  return t;
}

Reading leader(std::size_t observer, Nanos at, std::uint64_t n, std::string identity, std::string name = "r0") {
  return Reading{.observer = observer, .name = std::move(name), .at = at, .leader = true, .term = n,
                 .identity = std::move(identity)};
}

ElectionHistory history(std::vector<Term> terms) {
  ElectionHistory h;
  h.terms = std::move(terms);
  h.stopped.resize(4);
  h.slack = ms(5);
  return h;
}

std::vector<std::string> kinds(const std::vector<ElectionFinding>& found) {
  std::vector<std::string> out;
  for (const auto& f : found) out.push_back(f.kind);
  return out;
}

}  // namespace

TEST_CASE("election check: terms one after another, each over before the next, pass") {
  const auto h = history({term(0, 1, ms(10), ms(100)), term(1, 2, ms(100), ms(300)), term(0, 3, ms(301), never)});
  CHECK(check_election(h).empty());
}

TEST_CASE("election check: a term elected before the one before it was over is two leaders") {
  const auto found = check_election(history({term(0, 1, ms(10), ms(200)), term(1, 2, ms(150), ms(300))}));
  REQUIRE(kinds(found) == std::vector<std::string>{"two_leaders"});
  CHECK(found[0].at == ms(150));
  CHECK(found[0].tokens == std::vector<std::string>{"tok0-1", "tok1-2"});
  CHECK(found[0].what.find("c1 (c1, term 2) elected at 150.000 ms while c0 (c0, term 1)") != std::string::npos);
}

TEST_CASE("election check: names are judged apart") {
  CHECK(check_election(history({term(0, 1, ms(10), ms(200), "a"), term(1, 1, ms(150), ms(300), "b")})).empty());
}

TEST_CASE("election check: a leader stopped over the next election is excused, its notice within the slack after") {
  auto h = history({term(0, 1, ms(10), ms(403)), term(1, 2, ms(150), ms(300))});
  h.stopped[0] = {{ms(100), ms(400)}};  // heard of its loss 3 ms after it came back
  CHECK(check_election(h).empty());

  SUBCASE("but not one that ran on after it came back") {
    h.terms[0].ended = ms(420);  // 20 ms: it acted as leader
    const auto found = check_election(h);
    REQUIRE(kinds(found) == std::vector<std::string>{"two_leaders"});
    CHECK(found[0].what.find("its process ran at 405.000 ms") != std::string::npos);
  }
  SUBCASE("nor one stopped only after the next was elected") {
    h.stopped[0] = {{ms(200), ms(400)}};
    REQUIRE(kinds(check_election(h)) == std::vector<std::string>{"two_leaders"});
  }
  SUBCASE("two stops back to back cover it as one") {
    h.stopped[0] = {{ms(100), ms(250)}, {ms(252), ms(400)}};
    CHECK(check_election(h).empty());
  }
  SUBCASE("a stop that lasts to the end covers the rest") {
    h.terms[0].ended = never;
    h.stopped[0] = {{ms(100), never}};
    CHECK(check_election(h).empty());
  }
}

TEST_CASE("election check: terms must increase in election order, until the first data loss") {
  auto h = history({term(0, 5, ms(10), ms(100)), term(1, 5, ms(120), ms(200)), term(2, 4, ms(220), ms(300))});
  const auto found = check_election(h);
  REQUIRE(kinds(found) == std::vector<std::string>{"term_order", "term_order"});
  CHECK(found[1].what.find("not above c0 (c0, term 5)") != std::string::npos);
  h.terms_trusted_until = ms(110);
  CHECK(check_election(h).empty());
}

TEST_CASE("election check: observers") {
  auto h = history({term(0, 1, ms(10), ms(100)), term(1, 2, ms(120), ms(200))});
  h.readings = {leader(0, ms(11), 1, "c0"), leader(0, ms(121), 2, "c1"), leader(1, ms(50), 1, "c0")};
  CHECK(check_election(h).empty());

  SUBCASE("told an older term after a newer one") {
    h.readings.push_back(leader(0, ms(150), 1, "c0"));
    const auto found = check_election(h);
    REQUIRE(kinds(found) == std::vector<std::string>{"observer"});
    CHECK(found[0].what.find("at term 1 after term 2") != std::string::npos);
  }
  SUBCASE("told another identity than the one elected at that term") {
    h.readings.push_back(leader(1, ms(130), 2, "c3"));
    REQUIRE(kinds(check_election(h)) == std::vector<std::string>{"observer"});
  }
  SUBCASE("two observers disagree on a term no candidate was told it won") {
    h.readings.push_back(leader(0, ms(300), 7, "c2"));
    h.readings.push_back(leader(1, ms(310), 7, "c3"));
    REQUIRE(kinds(check_election(h)) == std::vector<std::string>{"observer"});
  }
  SUBCASE("no leader readings are not terms") {
    h.readings.push_back(Reading{.observer = 0, .name = "r0", .at = ms(400)});
    CHECK(check_election(h).empty());
  }
}
