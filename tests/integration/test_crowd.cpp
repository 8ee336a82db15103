// test_crowd.cpp — a crowd of waiters on one resource cannot stall
// (issue 12). It runs alone (meson: not parallel): 200 processes on two
// cores are the load under test, not a neighbour's.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace redlock::test::cli_harness;
using Clock = redlock::BootClock;

TEST_CASE("a crowd cannot stall: 200 `redlock run --wait` on one resource all finish within their wait") {
  // Before, every failed attempt's rollback published a release, waking
  // every other waiter, whose failed attempts woke everyone again: 109 of
  // 200 timed out after 20 s. Now only a real release wakes waiters.
  // Under ASan+UBSan each `redlock` costs several times the CPU to start
  // and run: 100 of them took ~20 s of the two cores' time in CI, so they
  // wait up to 60 s (a stall, as before, is waiters that never get it).
#if defined(__SANITIZE_ADDRESS__)
  constexpr int size = 100;
  const std::string wait = "60000ms";
#else
  constexpr int size = 200;
  const std::string wait = "20000ms";
#endif
  RedisGroup group(5);
  const auto start = Clock::now();
  std::vector<std::unique_ptr<Child>> crowd;
  for (int i = 0; i < size; ++i) {
    crowd.push_back(std::make_unique<Child>(
        program("REDLOCK_CLI"), std::vector<std::string>{"run", "--nodes", group.url_list(), "--no-quarantine",
                                                          "--wait", wait, "--json", "crowd", "--", "true"}));
  }
  int finished = 0;
  long long attempts = 0;
  for (auto& child : crowd) {
    const ProcResult r = child->wait(std::chrono::seconds(120));
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    finished += r.exit_code == 0 ? 1 : 0;
    const json report = report_of(r);
    if (report.contains("attempts")) attempts += report["attempts"].get<long long>();
  }
  CHECK(finished == size);
  MESSAGE(size << " runs took " << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
               << " ms and " << attempts << " acquire attempts");
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{crowd}:lock") == 0; }));
}
