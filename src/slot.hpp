// slot.hpp — Redis Cluster's hash slots: which of the 16384 slots a key
// lives in, and a short tag that puts a key in a slot of our choosing (the
// slot markers, src/keys.hpp). Pure; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace redlock::detail {

// slot_count: Redis Cluster's fixed number of hash slots (a power of two:
// a slot is the CRC's low 14 bits).
inline constexpr int slot_count = 16384;

namespace slot_impl {

// crc16_table: the byte-at-a-time table of CRC-16/XMODEM (polynomial
// 0x1021, MSB first), built at compile time rather than copied.
inline constexpr std::array<std::uint16_t, 256> crc16_table = [] {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
    t[i] = static_cast<std::uint16_t>(crc);
  }
  return t;
}();

}  // namespace slot_impl

// crc16: CRC-16/XMODEM (initial value 0, no reflection, no final xor), the
// variant Redis Cluster hashes keys with (its crc16.c); crc16("123456789")
// is 0x31c3.
constexpr std::uint16_t crc16(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (char c : bytes) {
    const auto index = static_cast<std::uint8_t>((crc >> 8) ^ static_cast<std::uint8_t>(c));
    crc = static_cast<std::uint16_t>((crc << 8) ^ slot_impl::crc16_table[index]);
  }
  return crc;
}

// hash_slot: the slot Redis Cluster keeps `key` in. Only the hash tag is
// hashed when there is one: the bytes between the first '{' and the first
// '}' after it, if there is at least one; otherwise (no '{', no '}' after
// it, or an empty tag "{}") the whole key. Keys of one tag share a slot,
// which every multi-key script needs.
constexpr int hash_slot(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & (slot_count - 1);
}

// slot_tag: the smallest decimal number (as text: "0", "1", …) whose
// hash_slot is `slot` (0 ≤ slot < slot_count), so `{tag}` puts a key in
// that slot: the slot markers need a key in every slot they guard. Short
// (at most 6 digits) and the same in every client and release, since it
// is computed, not drawn. The table behind it is built on the first call
// (about 110,000 crc16s, once per process; thread-safe).
std::string slot_tag(int slot);

}  // namespace redlock::detail
