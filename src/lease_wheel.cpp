// lease_wheel.cpp — see lease_wheel.hpp.
#include "lease_wheel.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>

namespace redlock::detail {

namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t no_event = std::numeric_limits<std::uint64_t>::max();
// Ticks whose bits from here up differ from the current tick's are beyond
// level 3 ("far"): parked in level 3's slot 0.
constexpr unsigned far_shift = 32;

void make_empty(WheelEntry& head) noexcept { head.prev = head.next = &head; }
bool is_empty(const WheelEntry& head) noexcept { return head.next == &head; }

void link_at_tail(WheelEntry& head, WheelEntry* e) noexcept {
  e->prev = head.prev;
  e->next = &head;
  head.prev->next = e;
  head.prev = e;
}

// unlink needs no head: that is what lets disarm take an entry out of
// whichever list holds it, a slot or a drain's local one.
void unlink(WheelEntry* e) noexcept {
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->prev = e->next = nullptr;
}

// move_list moves `from`'s entries, in order, to the empty list `to`.
void move_list(WheelEntry& from, WheelEntry& to) noexcept {
  make_empty(to);
  if (is_empty(from)) return;
  to.next = from.next;
  to.prev = from.prev;
  to.next->prev = &to;
  to.prev->next = &to;
  make_empty(from);
}

void set_bit(std::uint64_t* words, std::size_t i) noexcept { words[i / 64] |= std::uint64_t{1} << (i % 64); }
void clear_bit(std::uint64_t* words, std::size_t i) noexcept { words[i / 64] &= ~(std::uint64_t{1} << (i % 64)); }

}  // namespace

LeaseWheel::LeaseWheel(Runtime& runtime, Fire fire, void* context) noexcept
    : runtime_(runtime), fire_(fire), context_(context), epoch_(runtime.now()) {
  for (Level& level : levels_) {
    for (WheelEntry& head : level.slot) make_empty(head);
  }
}

LeaseWheel::~LeaseWheel() { unlink_all(nullptr); }

std::uint64_t LeaseWheel::ceil_tick(TimePoint t) const {
  if (t <= epoch_) return 0;
  return static_cast<std::uint64_t>(std::chrono::ceil<milliseconds>(t - epoch_).count());
}

std::uint64_t LeaseWheel::floor_tick(TimePoint t) const {
  if (t <= epoch_) return 0;
  return static_cast<std::uint64_t>(std::chrono::floor<milliseconds>(t - epoch_).count());
}

// place links `e` (its tick after cur_, or equal to it inside a cascade) at
// the tail of its slot and returns the tick at which that slot is next
// visited: its tick on level 0, the start of its range above.
std::uint64_t LeaseWheel::place(WheelEntry* e) {
  const std::uint64_t differ = e->tick ^ cur_;
  int level = 3;
  std::size_t index = 0;
  if (differ >> far_shift == 0) {
    level = differ == 0 ? 0 : (static_cast<int>(std::bit_width(differ)) - 1) / static_cast<int>(slot_bits);
    index = (e->tick >> (slot_bits * level)) & (slot_count - 1);
  }
  link_at_tail(levels_[level].slot[index], e);
  set_bit(levels_[level].occupied.data(), index);
  return slot_event(level, index);
}

// slot_event: the tick at which the current tick next enters the range of
// slot `index` of `level` (for level 3's slot 0, the far entries': the next
// 2^32 boundary, which comes before any of their ticks).
std::uint64_t LeaseWheel::slot_event(int level, std::size_t index) const {
  if (level == 3 && index == 0) return ((cur_ >> far_shift) + 1) << far_shift;
  const unsigned shift = slot_bits * static_cast<unsigned>(level);
  const unsigned above = shift + slot_bits;
  return (cur_ >> above << above) | (static_cast<std::uint64_t>(index) << shift);
}

// occupied_after: the first non-empty slot of `level` after `index`, or
// slot_count.
std::size_t LeaseWheel::occupied_after(Level& level, std::size_t index) {
  std::size_t i = index + 1;
  while (i < slot_count) {
    const std::size_t word = i / 64;
    const std::uint64_t bits = level.occupied[word] & (~std::uint64_t{0} << (i % 64));
    if (bits == 0) {
      i = (word + 1) * 64;
      continue;
    }
    const std::size_t found = word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
    if (!is_empty(level.slot[found])) return found;
    clear_bit(level.occupied.data(), found);  // emptied by disarms
    i = found + 1;
  }
  return slot_count;
}

// next_event: the first tick after cur_ at which a slot is visited, or
// no_event. Only slots after the current tick's on each level can hold
// entries (an entry's tick differs from cur_ first there, and is greater),
// and a lower level's are all visited before a higher level's.
std::uint64_t LeaseWheel::next_event() {
  for (int level = 0; level < level_count; ++level) {
    const unsigned shift = slot_bits * static_cast<unsigned>(level);
    const std::size_t index = occupied_after(levels_[level], (cur_ >> shift) & (slot_count - 1));
    if (index < slot_count) return slot_event(level, index);
  }
  Level& top = levels_[3];
  if (!is_empty(top.slot[0])) return slot_event(3, 0);
  clear_bit(top.occupied.data(), 0);
  return no_event;
}

// run_to runs every tick up to `target` at which something happens, in
// order, skipping the empty ones.
void LeaseWheel::run_to(std::uint64_t target) {
  for (;;) {
    const std::uint64_t event = next_event();
    if (event > target) break;
    cur_ = event;
    if ((event & (slot_count - 1)) == 0) cascade(event);
    fire_slot(event & (slot_count - 1));
  }
  cur_ = target;
}

// cascade: `tick` starts the range of one slot above level 0 — on the
// highest level whose lower groups of `tick` are all 0 (the levels below it
// are empty: their current slots were the last of their ranges). Its
// entries move down, placed again by their real ticks, in order; far ones
// that are still far go back to level 3's slot 0.
void LeaseWheel::cascade(std::uint64_t tick) {
  int level = 1;
  while (level < level_count - 1 && (tick & ((std::uint64_t{1} << (slot_bits * (level + 1))) - 1)) == 0) ++level;
  const std::size_t index = (tick >> (slot_bits * level)) & (slot_count - 1);
  WheelEntry moving;
  move_list(levels_[level].slot[index], moving);
  clear_bit(levels_[level].occupied.data(), index);
  while (!is_empty(moving)) {
    WheelEntry* e = moving.next;
    unlink(e);
    place(e);
  }
}

// fire_slot fires the level-0 slot of cur_. Its list moves to a local one
// first: a fire may then disarm or re-arm any entry still waiting in it
// (unlink needs no head), and what it arms goes to later slots.
void LeaseWheel::fire_slot(std::size_t index) {
  WheelEntry due;
  move_list(levels_[0].slot[index], due);
  clear_bit(levels_[0].occupied.data(), index);
  draining_ = &due;
  while (!is_empty(due)) {
    WheelEntry* e = due.next;
    unlink(e);
    --armed_;
    fire_(context_, e, wake_now_);
  }
  draining_ = nullptr;
}

void LeaseWheel::arm(WheelEntry* e, TimePoint due) {
  if (e->armed()) detach(e);
  // An idle wheel's current tick catches up with the clock (nothing to
  // run); a busy one's may lag until its next wake, which runs the ticks
  // between. Inside a wake, arms go after the tick it runs to: they fire
  // on a later turn, not in this catch-up.
  if (armed_ == 0 && !waking_) cur_ = std::max(cur_, floor_tick(runtime_.now()));
  const std::uint64_t after = waking_ ? target_ : cur_;
  e->tick = std::max(ceil_tick(due), after + 1);
  ++armed_;
  const std::uint64_t event = place(e);
  if (!waking_) wake_for(event);  // a wake re-arms once it has run
}

void LeaseWheel::disarm(WheelEntry* e) {
  if (!e->armed()) return;
  detach(e);
  // Idle: no handle kept open on the loop. Otherwise the runtime timer
  // stays armed for what may have been this entry: an early wake finds
  // nothing and sleeps again.
  if (armed_ == 0 && !waking_) wake_.reset();
}

void LeaseWheel::detach(WheelEntry* e) {
  unlink(e);
  --armed_;
}

void LeaseWheel::take_all(std::vector<WheelEntry*>& out) {
  out.reserve(out.size() + armed_);  // the only step that may throw: before any change
  unlink_all(&out);
  if (!waking_) wake_.reset();
}

// unlink_all disarms every entry (appending it to *out, if given; reserved
// by the caller). A slot whose bit is clear is empty: only set bits are read.
void LeaseWheel::unlink_all(std::vector<WheelEntry*>* out) noexcept {
  auto take = [out](WheelEntry& head) {
    while (!is_empty(head)) {
      WheelEntry* e = head.next;
      unlink(e);
      if (out != nullptr) out->push_back(e);
    }
  };
  if (draining_ != nullptr) take(*draining_);
  for (Level& level : levels_) {
    for (std::size_t word = 0; word < level.occupied.size(); ++word) {
      for (std::uint64_t bits = level.occupied[word]; bits != 0; bits &= bits - 1) {
        take(level.slot[word * 64 + static_cast<std::size_t>(std::countr_zero(bits))]);
      }
      level.occupied[word] = 0;
    }
  }
  armed_ = 0;
}

// wake_for makes sure the runtime timer fires by `tick`: it is restarted
// only for an earlier tick than it is armed for, so 100,000 arms in one
// turn restart it at most once per slot visited earlier, not per arm.
void LeaseWheel::wake_for(std::uint64_t tick) {
  if (wake_ == nullptr) {
    wake_ = runtime_.timer([this] { on_wake(); });
  } else if (wake_->active() && wake_tick_ <= tick) {
    return;
  }
  wake_tick_ = tick;
  const TimePoint at = epoch_ + milliseconds{static_cast<milliseconds::rep>(tick)};
  const auto left = std::chrono::ceil<milliseconds>(at - runtime_.now());
  wake_->start(std::max(left, milliseconds{0}));
}

void LeaseWheel::on_wake() {
  waking_ = true;
  wake_now_ = runtime_.now();
  target_ = std::max(cur_, floor_tick(wake_now_));
  run_to(target_);
  waking_ = false;
  if (armed_ == 0) {
    wake_.reset();  // the last entry went during the wake
    return;
  }
  wake_for(next_event());  // wake_ has fired: inactive, so this starts it
}

}  // namespace redlock::detail
