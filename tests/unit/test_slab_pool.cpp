// test_slab_pool.cpp — lease records in slabs (src/slab_pool.hpp): slots of
// one size, side by side, a freed slot used again, from any thread; and
// allocate_shared through the allocator, weak references included.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "slab_pool.hpp"

using redlock::detail::SlabAllocator;
using redlock::detail::SlabPool;

TEST_CASE("a pool's slots do not overlap, lie side by side in a slab, and a freed slot is taken next") {
  SlabPool pool(200);
  std::vector<char*> slots;
  for (int i = 0; i < 2000; ++i) slots.push_back(static_cast<char*>(pool.take()));  // three slabs and more
  std::vector<char*> sorted = slots;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i) CHECK(sorted[i] - sorted[i - 1] >= 200);
  CHECK(slots[1] - slots[0] == 200);  // the same slab: next to each other
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i][0] = static_cast<char>(i);  // writable
  pool.give(slots[7]);
  pool.give(slots[3]);
  CHECK(pool.take() == slots[3]);  // the last given back first
  CHECK(pool.take() == slots[7]);
  for (char* p : slots) pool.give(p);
}

TEST_CASE("slots taken and given back from several threads are never handed out twice at once") {
  SlabPool pool(64);
  constexpr int threads = 4;
  constexpr int rounds = 2000;
  std::vector<std::thread> workers;
  std::vector<int> clashes(threads, 0);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&pool, &clashes, t] {
      std::vector<std::uint64_t*> mine;
      for (int i = 0; i < rounds; ++i) {
        auto* p = static_cast<std::uint64_t*>(pool.take());
        *p = static_cast<std::uint64_t>(t);
        mine.push_back(p);
        if (i % 3 == 2) {  // give some back while the others take
          for (std::uint64_t* q : mine) {
            if (*q != static_cast<std::uint64_t>(t)) ++clashes[static_cast<std::size_t>(t)];
            pool.give(q);
          }
          mine.clear();
        }
      }
      for (std::uint64_t* q : mine) pool.give(q);
    });
  }
  for (std::thread& w : workers) w.join();
  for (int c : clashes) CHECK(c == 0);
}

TEST_CASE("allocate_shared through a SlabAllocator: the object lives while shared, its memory while weakly referenced") {
  struct Record {
    int value;
    explicit Record(int v) : value(v) {}
  };
  std::weak_ptr<Record> weak;
  {
    auto a = std::allocate_shared<Record>(SlabAllocator<Record>{}, 7);
    auto b = std::allocate_shared<Record>(SlabAllocator<Record>{}, 8);
    CHECK(a->value == 7);
    CHECK(b->value == 8);
    weak = a;
    CHECK(weak.lock() == a);
  }
  CHECK(weak.expired());
  auto c = std::allocate_shared<Record>(SlabAllocator<Record>{}, 9);
  CHECK(c->value == 9);
}
