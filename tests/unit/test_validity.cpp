// test_validity.cpp — the Redlock time arithmetic.
#include <doctest/doctest.h>

#include "validity.hpp"

using namespace redlock::detail;
using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST_CASE("drift allowance is ceil(ttl * factor) + 2 ms") {
  CHECK(drift_allowance(milliseconds{10000}, 0.01) == milliseconds{102});
  CHECK(drift_allowance(milliseconds{150}, 0.01) == milliseconds{4});  // 1.5 rounds up to 2
  CHECK(drift_allowance(milliseconds{1000}, 0.0) == milliseconds{2});
}

TEST_CASE("validity subtracts the elapsed time and the drift from the ttl") {
  CHECK(validity_left(milliseconds{10000}, microseconds{1500}, 0.01) == microseconds{10000000 - 1500 - 102000});
  // A round that took longer than ttl - drift leaves a negative validity.
  CHECK(validity_left(milliseconds{100}, microseconds{99000}, 0.01) < microseconds{0});
}

TEST_CASE("quarantine lasts max_ttl plus its drift allowance") {
  CHECK(quarantine_period(milliseconds{60000}, 0.01) == milliseconds{60602});
}
