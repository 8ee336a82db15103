// test_shrink.cpp — delta debugging over fault indices (tools/sim/shrink.hpp):
// the set it returns still fails, is 1-minimal when the budget allows, and
// the budget is kept.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "shrink.hpp"

using redlock::sim::shrink;

namespace {

std::vector<std::size_t> upto(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

bool has(const std::vector<std::size_t>& v, std::size_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("shrink: a failure that needs faults 3, 17 and 40 of 60 keeps exactly those") {
  const auto r = shrink(upto(60), [](const std::vector<std::size_t>& f) { return has(f, 3) && has(f, 17) && has(f, 40); });
  CHECK(r.kept == std::vector<std::size_t>{3, 17, 40});
  CHECK_FALSE(r.exhausted);
  CHECK(r.runs < 60);  // far fewer than trying each subset
}

TEST_CASE("shrink: a failure that needs no fault keeps none, after one run") {
  const auto r = shrink(upto(30), [](const std::vector<std::size_t>&) { return true; });
  CHECK(r.kept.empty());
  CHECK(r.runs == 1);
}

TEST_CASE("shrink: either of two faults alone is enough: one is kept") {
  const auto r = shrink(upto(20), [](const std::vector<std::size_t>& f) { return has(f, 5) || has(f, 12); });
  REQUIRE(r.kept.size() == 1);
  CHECK((r.kept[0] == 5 || r.kept[0] == 12));
}

TEST_CASE("shrink: the result is 1-minimal — removing any one kept fault makes it pass") {
  // Fails when at least two of the multiples of 7 are present.
  auto fails = [](const std::vector<std::size_t>& f) {
    return std::count_if(f.begin(), f.end(), [](std::size_t x) { return x % 7 == 0; }) >= 2;
  };
  const auto r = shrink(upto(50), fails);
  REQUIRE(r.kept.size() == 2);
  for (std::size_t i = 0; i < r.kept.size(); ++i) {
    std::vector<std::size_t> less = r.kept;
    less.erase(less.begin() + static_cast<std::ptrdiff_t>(i));
    CHECK_FALSE(fails(less));
  }
}

TEST_CASE("shrink: the run budget is kept, and what it returns still fails") {
  auto fails = [](const std::vector<std::size_t>& f) { return f.size() >= 10; };  // needs many faults
  const auto r = shrink(upto(200), fails, 15);
  CHECK(r.runs <= 15);
  CHECK(r.exhausted);
  CHECK(fails(r.kept));
}
