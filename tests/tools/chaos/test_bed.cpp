// test_bed.cpp — what the chaos bed counts as a leaked lock key, on real
// masters: a lock key is one; the data-loss marker never is; a flushed
// master keeps counting (what it holds afterwards was written since); a
// restarted one does not, unless it restarted longer ago than the grace.
// And the workers' shared counters, one per resource.
#include <doctest/doctest.h>

#include <chrono>

#include "bed.hpp"

using namespace redlock::chaos;

TEST_CASE("leaked_keys: lock keys count, the data-loss marker and a semaphore's permits key never do, a flushed master still counts") {
  ChaosBed bed(BedOptions{});
  for (std::size_t i = 0; i < bed.size(); ++i) {
    bed.master(i).command({"SET", "redlock-marker", "epoch 2022 1"});
  }
  CHECK(bed.leaked_keys() == 0);
  // A semaphore's permits key keeps its P for good (not a lock); a permit is a lock key.
  bed.master(2).command({"SET", "redlock:{chaos}:permits", "2"});
  CHECK(bed.leaked_keys() == 0);
  bed.master(2).command({"SET", "redlock:{chaos}:permit1:lock", "v", "PX", "60000"});
  CHECK(bed.leaked_keys() == 1);
  bed.master(2).command({"DEL", "redlock:{chaos}:permit1:lock"});
  // A fence counter and an election's record (a killed leader's stays) are kept for good too.
  bed.master(3).command({"SET", "redlock:{chaos}:fence", "7"});
  bed.master(3).command({"SET", "redlock:{chaos}:leader", "7 1 0 3 tok"});
  CHECK(bed.leaked_keys() == 0);

  bed.master(0).command({"SET", "redlock:{chaos}:lock", "v", "PX", "60000"});
  bed.master(1).command({"SET", "redlock:{chaos}:lock", "v", "PX", "60000"});
  CHECK(bed.leaked_keys() == 2);

  bed.flushall(0);  // the key is gone with the marker: nothing leaked there
  CHECK(bed.master(0).keys("*").empty());
  CHECK(bed.leaked_keys() == 1);
  bed.master(0).command({"SET", "redlock:{chaos}:lock", "w", "PX", "60000"});  // written after the flush
  CHECK(bed.leaked_keys() == 2);
  CHECK_FALSE(bed.touched(0));

  bed.restart(1, false);  // a restarted master may keep a key released while it was down
  CHECK(bed.touched(1));
  CHECK(bed.leaked_keys() == 1);

  // The flush is recorded as a fault interval, as every fault is.
  REQUIRE_FALSE(bed.faults().empty());
  CHECK(bed.faults().front().error == "flushall node 1");
}

TEST_CASE("leaked_keys: a master restarted longer ago than the grace counts again") {
  ChaosBed bed(BedOptions{});
  bed.restart(2, false);
  bed.master(2).command({"SET", "redlock:{chaos}:lock", "v", "PX", "60000"});  // written after its restart
  CHECK(bed.leaked_keys() == 0);                              // by default a restarted master never counts
  CHECK(bed.leaked_keys(std::chrono::hours{1}) == 0);         // restarted within the grace
  CHECK(bed.leaked_keys(std::chrono::milliseconds{0}) == 1);  // before it: its keys are its own
}

TEST_CASE("the shared counters: one per resource, and their total") {
  ChaosBed bed(BedOptions{});
  CHECK(bed.counter_value("chaos") == 0);  // never written
  CHECK(bed.counter_total() == 0);
  bed.counter().command({"SET", "counter:chaos", "41"});
  bed.counter().command({"SET", "counter:cold-7", "1"});
  bed.counter().command({"SET", "elsewhere", "100"});  // not a counter
  CHECK(bed.counter_value("chaos") == 41);
  CHECK(bed.counter_value("cold-7") == 1);
  CHECK(bed.counter_total() == 42);
}
