// slot.cpp — the slot tag table. See slot.hpp.
#include "slot.hpp"

#include <cassert>
#include <charconv>

namespace redlock::detail {

namespace {

// smallest_tags: for every slot, the smallest n whose decimal digits hash
// to it, found by counting up until every slot has one.
std::array<std::uint32_t, slot_count> smallest_tags() {
  std::array<std::uint32_t, slot_count> tags;
  tags.fill(UINT32_MAX);
  int left = slot_count;
  char digits[16];
  for (std::uint32_t n = 0; left > 0; ++n) {
    const char* end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    std::uint32_t& tag = tags[static_cast<std::size_t>(hash_slot(std::string_view(digits, end)))];
    if (tag == UINT32_MAX) {
      tag = n;
      --left;
    }
  }
  return tags;
}

}  // namespace

std::string slot_tag(int slot) {
  static const std::array<std::uint32_t, slot_count> tags = smallest_tags();
  assert(slot >= 0 && slot < slot_count);
  return std::to_string(tags[static_cast<std::size_t>(slot)]);
}

}  // namespace redlock::detail
