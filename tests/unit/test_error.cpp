// test_error.cpp — stable error ids, outcome names and text forms.
#include <doctest/doctest.h>

#include "redlock/error.hpp"

using namespace redlock;

TEST_CASE("error codes have stable ids") {
  CHECK(errc_name(Errc::held) == "redlock.held");
  CHECK(errc_name(Errc::no_quorum) == "redlock.no_quorum");
  CHECK(errc_name(Errc::validity_too_short) == "redlock.validity_too_short");
  CHECK(errc_name(Errc::not_held) == "redlock.not_held");
  CHECK(errc_name(Errc::too_late) == "redlock.too_late");
  CHECK(errc_name(Errc::invalid_argument) == "redlock.invalid_argument");
  CHECK(errc_name(Errc::config) == "redlock.config");
  CHECK(errc_name(Errc::closed) == "redlock.closed");
  CHECK(errc_name(Errc::internal) == "redlock.internal");
  CHECK(errc_name(Errc::lost) == "redlock.lost");
  CHECK(errc_name(Errc::cancelled) == "redlock.cancelled");
}

TEST_CASE("outcome names are the CLI's words") {
  CHECK(outcome_name(Outcome::ok) == "ok");
  CHECK(outcome_name(Outcome::held) == "held");
  CHECK(outcome_name(Outcome::timeout) == "timeout");
  CHECK(outcome_name(Outcome::error) == "error");
  CHECK(outcome_name(Outcome::quarantined) == "quarantined");
  CHECK(outcome_name(Outcome::pending) == "pending");
}

TEST_CASE("to_string prefixes the id; Result carries a value or an error") {
  Error e = make_error(Errc::no_quorum, "no quorum 2/5: 127.0.0.1:7003 timeout after 50 ms");
  CHECK(e.to_string() == "redlock.no_quorum: no quorum 2/5: 127.0.0.1:7003 timeout after 50 ms");
  Result<int> good = 7;
  Result<int> bad = e;
  CHECK(good.ok());
  CHECK(*good == 7);
  CHECK_FALSE(bad.ok());
  CHECK(bad.error().code == Errc::no_quorum);
  Result<void> fine;
  CHECK(fine.ok());
}

TEST_CASE("a lock past its deadline is not valid and has nothing remaining") {
  Lock lock;
  lock.validity_deadline = redlock::BootClock::now() - std::chrono::milliseconds{1};
  CHECK_FALSE(lock.valid());
  CHECK(lock.remaining().count() == 0);
  lock.validity_deadline = redlock::BootClock::now() + std::chrono::seconds{10};
  CHECK(lock.valid());
  CHECK(lock.remaining() > std::chrono::seconds{9});
}
