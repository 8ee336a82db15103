// test_leader.cpp — an election's reading (src/leader.hpp): records and
// leader_read replies of any bytes parse exactly or not at all, and the
// verdict names a leader only where a majority back one token.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "leader.hpp"

using namespace redlock::detail;
using redlock::LeaderStatus;

namespace {

std::string read_reply(long long pttl, long long led, const std::string& lock, const std::string& record) {
  return std::to_string(pttl) + " " + std::to_string(led) + " " + std::to_string(lock.size()) + " " +
         std::to_string(record.size()) + " " + lock + record;
}

std::string record_of(unsigned term, unsigned rev, const std::string& token, const std::string& id,
                      const std::string& value) {
  return std::to_string(term) + " " + std::to_string(rev) + " 100 " + std::to_string(token.size()) + " " +
         std::to_string(id.size()) + " " + token + id + value;
}

std::optional<LeaderAnswer> answer(long long pttl, const std::string& lock, const std::string& record) {
  return parse_leader_read(read_reply(pttl, 5, lock, record));
}

}  // namespace

TEST_CASE("parse_leader_record: exact fields of any bytes; out of range or short is none") {
  const std::string odd("a b\n\0\xff", 6);
  auto r = parse_leader_record(record_of(7, 2, "tok en", odd, odd + odd));
  REQUIRE(r);
  CHECK(r->term == 7);
  CHECK(r->rev == 2);
  CHECK(r->token == "tok en");
  CHECK(r->identity == odd);
  CHECK(r->value == odd + odd);
  CHECK(parse_leader_record("1 1 0 0 0 ")->value.empty());
  CHECK_FALSE(parse_leader_record(""));
  CHECK_FALSE(parse_leader_record("not a record"));
  CHECK_FALSE(parse_leader_record("1 1 0 5 0 abc"));                   // token past the end
  CHECK_FALSE(parse_leader_record("1 1 0 2 5 abcd"));                  // identity past the end
  CHECK_FALSE(parse_leader_record("9007199254740993 1 0 0 0 "));       // term above 2^53
  CHECK_FALSE(parse_leader_record("-1 1 0 0 0 "));
  CHECK_FALSE(parse_leader_record("1 1 0 99999999999999999999 0 x"));  // overflows
  CHECK_FALSE(parse_leader_record("1  1 0 0 0 "));
  CHECK(parse_leader_record("9007199254740992 1 0 0 0 ")->term == 9007199254740992ULL);
}

TEST_CASE("parse_leader_read: the lock's value and the record, exactly as long as they say") {
  auto a = parse_leader_read(read_reply(900, 12, "tok", record_of(3, 1, "tok", "id", "v")));
  REQUIRE(a);
  CHECK(a->pttl == 900);
  CHECK(a->led_ms == 12);
  CHECK(a->lock == "tok");
  REQUIRE(a->record);
  CHECK(a->record->identity == "id");
  auto free = parse_leader_read("-2 -1 0 0 ");
  REQUIRE(free);
  CHECK(free->lock.empty());
  CHECK_FALSE(free->record);
  auto junk = parse_leader_read(read_reply(-2, -1, "", "garbage"));
  REQUIRE(junk);  // a record of another shape: no record, still an answer
  CHECK_FALSE(junk->record);
  CHECK_FALSE(parse_leader_read("wrongtype redlock:{r}:leader"));
  CHECK_FALSE(parse_leader_read("900 1 3 0 to"));      // shorter than said
  CHECK_FALSE(parse_leader_read("900 1 3 0 tokk"));    // longer than said
  CHECK_FALSE(parse_leader_read("-3 1 0 0 "));          // no such PTTL
  CHECK_FALSE(parse_leader_read("900 -2 0 0 "));
  CHECK_FALSE(parse_leader_read(""));
}

TEST_CASE("leader_verdict: a majority backing one token is the leader; otherwise the newest record is the last") {
  const std::string rec1 = record_of(4, 1, "T", "a", "v1"), rec2 = record_of(4, 2, "T", "a", "v2");
  std::vector<std::optional<LeaderAnswer>> answers{answer(900, "T", rec1), answer(800, "T", rec2),
                                                   answer(950, "T", rec1), answer(-2, "", rec1), std::nullopt};
  LeaderStatus st = leader_verdict("r", answers, 3);
  CHECK(st.answered == 4);
  REQUIRE(st.leader);
  CHECK(st.leader->value == "v2");  // the highest rev among the backers
  CHECK(st.leader->led_for.count() == 5);
  CHECK(st.expires_in.count() == 800);  // the third largest of 900, 800, 950
  CHECK_FALSE(st.last);

  // Two backers only: no leader; the newest record is the last one known.
  answers[2] = answer(950, "other", rec1);
  st = leader_verdict("r", answers, 3);
  CHECK_FALSE(st.leader);
  REQUIRE(st.last);
  CHECK(st.last->value == "v2");
  // A lock holding another token never backs the record.
  const std::string rec9 = record_of(9, 1, "U", "b", "x");
  answers = {answer(900, "T", rec9), answer(900, "T", rec9), answer(900, "T", rec9), std::nullopt, std::nullopt};
  st = leader_verdict("r", answers, 3);
  CHECK_FALSE(st.leader);
  REQUIRE(st.last);
  CHECK(st.last->term == 9);
  // A lock without a TTL counts as never running out.
  answers = {answer(-1, "T", rec1), answer(-1, "T", rec1), answer(-1, "T", rec1)};
  st = leader_verdict("r", answers, 2);
  REQUIRE(st.leader);
  CHECK(st.expires_in.count() > 0);
}

TEST_CASE("leader_problem: identity and value sizes") {
  CHECK(leader_problem("id", "v").empty());
  CHECK(leader_problem(std::string(redlock::max_identity_size, 'i'), std::string(redlock::max_leader_value_size, 'v'))
            .empty());
  CHECK(leader_problem(std::string(redlock::max_identity_size + 1, 'i'), "") ==
        "identity of 1025 bytes: at most 1024");
  CHECK(leader_problem("", std::string(redlock::max_leader_value_size + 1, 'v')).find("value of 65537 bytes") == 0);
}
