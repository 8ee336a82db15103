// lease_wheel.hpp — the lease watchdogs' timers: a hierarchical timing wheel.
//
// A program holding 100,000 leases has one watchdog timer per lease (the
// earlier of its next extension and its validity deadline less a margin),
// restarted on every extension. As TimerQueue timers each costs 96 bytes
// and a heap slot, and a restart is an O(log n) sift. A LeaseWheel's timer
// is a WheelEntry embedded in the lease record (24 bytes, no allocation),
// and arming, moving or disarming one is O(1).
//
// Time is counted in ticks of 1 ms from the wheel's epoch (the runtime's
// now() when it was made). Four levels of 256 slots hold the entries: an
// entry sits at the highest 8-bit group in which its tick differs from the
// current tick, in the slot of its tick's group there (ticks in a later
// 2^32 range — about 49 days — are parked in level 3's slot 0, which holds
// nothing else and is visited at the next 2^32 boundary, before them).
// When the current tick reaches the start of a higher slot's range, that
// slot's entries move down (Linux's cascade); an entry fires from its
// level-0 slot. Placing by the tick alone keeps all entries of one tick in
// one slot, in the order they were armed: same-tick entries fire FIFO,
// which the deterministic simulator relies on. Occupancy bitmaps find the
// next tick at which anything happens, so a wheel whose entries are far off
// wakes only at the few cascades on their way down, and a loop that slept
// 30 s catches up in as many steps as there are occupied slots, not 30,000.
//
// The wheel holds one runtime Timer, armed for that next tick, made on the
// first arm and destroyed when the last entry goes: an idle wheel keeps no
// handle open on the loop. It runs on any Runtime (uv, the simulator's, the
// unit tests' manual one), on the loop's thread only; no locks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime.hpp"

namespace redlock::detail {

// WheelEntry — a timer of a LeaseWheel, embedded in its owner (the lease
// record derives from it). The wheel links armed entries into its slots; the
// owner must disarm its entry (or have it fired or taken) before destroying
// it, and must not touch the fields.
struct WheelEntry {
  WheelEntry* prev = nullptr;
  WheelEntry* next = nullptr;  // nullptr: not armed
  std::uint64_t tick = 0;      // due tick while armed (ms since the wheel's epoch)
  bool armed() const noexcept { return next != nullptr; }
};
static_assert(sizeof(WheelEntry) == 24);

// LeaseWheel — many one-shot timers on one of the runtime's. `fire(context,
// entry)` runs on the loop for each entry due, never inside arm(), the entry
// already disarmed. A fire may arm or disarm any entry (itself, one due at
// the same tick and not yet fired) and call take_all(); an entry armed inside
// a fire fires on a later turn, never in the same catch-up. A fire must not
// destroy the wheel. Entries still armed when the wheel is destroyed are
// unlinked, never fired.
class LeaseWheel {
 public:
  // `now`: the runtime's clock read once at the wake (every entry fired
  // is due by then; a wake that fires 500 leases reads it once, not 500
  // times).
  using Fire = void (*)(void* context, WheelEntry* entry, TimePoint now);

  LeaseWheel(Runtime& runtime, Fire fire, void* context) noexcept;
  LeaseWheel(const LeaseWheel&) = delete;
  LeaseWheel& operator=(const LeaseWheel&) = delete;
  ~LeaseWheel();

  // arm (re)arms `e` to fire once, on a later loop turn, at the first whole
  // tick at or after `due` on the runtime's clock — never before `due`. A
  // due at or before the last tick the wheel has run fires at the tick after
  // it (so a due in the past fires on the next turn, or 1 ms later when the
  // wheel has just run the current tick). Re-arming an armed entry moves it
  // to the back of its new tick's order.
  void arm(WheelEntry* e, TimePoint due);
  // disarm: no-op if `e` is not armed.
  void disarm(WheelEntry* e);
  std::size_t armed() const noexcept { return armed_; }
  // take_all disarms every entry and appends it to `out` (the client
  // closing: it shuts each lease down). Order: unspecified.
  void take_all(std::vector<WheelEntry*>& out);

 private:
  static constexpr int level_count = 4;
  static constexpr unsigned slot_bits = 8;
  static constexpr std::size_t slot_count = std::size_t{1} << slot_bits;

  // Level — 256 slots, each a circular list through a sentinel; `occupied`
  // has a bit set for every non-empty slot (and maybe for a slot emptied
  // by disarm: those are cleared when a search meets them).
  struct Level {
    std::array<WheelEntry, slot_count> slot;
    std::array<std::uint64_t, slot_count / 64> occupied{};
  };

  std::uint64_t ceil_tick(TimePoint t) const;
  std::uint64_t floor_tick(TimePoint t) const;
  std::uint64_t place(WheelEntry* e);
  std::uint64_t slot_event(int level, std::size_t index) const;
  std::size_t occupied_after(Level& level, std::size_t index);
  std::uint64_t next_event();
  void run_to(std::uint64_t target);
  void cascade(std::uint64_t tick);
  void fire_slot(std::size_t index);
  void detach(WheelEntry* e);
  void unlink_all(std::vector<WheelEntry*>* out) noexcept;
  void wake_for(std::uint64_t tick);
  void on_wake();

  Runtime& runtime_;
  Fire fire_;
  void* context_;
  TimePoint epoch_;
  std::uint64_t cur_ = 0;     // the last tick run: every entry's tick is after it
  std::uint64_t target_ = 0;  // while waking: the tick the wake runs to
  TimePoint wake_now_{};      // while waking: the clock at its start
  std::size_t armed_ = 0;
  bool waking_ = false;
  WheelEntry* draining_ = nullptr;  // while firing a slot: the list of its entries not yet fired
  std::unique_ptr<Timer> wake_;     // the runtime's timer; none while no entry is armed
  std::uint64_t wake_tick_ = 0;     // the tick wake_ was last armed for
  std::array<Level, level_count> levels_;
};

}  // namespace redlock::detail
