// test_slot.cpp — hash slots as Redis Cluster computes them (values
// captured from redis-server 7.0.15's CLUSTER KEYSLOT), the smallest
// decimal tag of every slot, and the slot markers' names: in their slot,
// and never a resource's name.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "keys.hpp"
#include "slot.hpp"

using namespace redlock::detail;
using namespace std::string_view_literals;

static_assert(crc16("123456789") == 0x31c3);  // CRC-16/XMODEM's check value
static_assert(hash_slot("{user1000}.following") == hash_slot("{user1000}.followers"));

TEST_CASE("hash_slot: as CLUSTER KEYSLOT answers, tags and odd bytes included") {
  struct Known {
    std::string_view key;
    int slot;
  };
  // Each pair as redis-server 7.0.15 (cluster-enabled) answered it.
  const Known known[] = {
      {"redlock:{r1}:lock", 2121},
      {"redlock-marker", 2326},
      {"{redlock-marker}:server", 2326},
      {"", 0},
      {"foo", 12182},
      {"123456789", 12739},
      {"{user1000}.following", 3443},
      {"foo{}{bar}", 8363},       // an empty first tag: the whole key
      {"foo{{bar}}zap", 4015},    // the tag is "{bar"
      {"foo{bar}{zap}", 5061},    // the first tag only
      {"{}", 15257},
      {"{}a", 10875},
      {"x{}y{z}", 15453},
      {"}{", 12793},              // '}' before '{' closes nothing
      {"a}b{c}d", 7365},
      {"{a", 10276},              // never closed: the whole key
      {"a}", 5921},
      {"{{}}", 4092},
      {"{", 4092},
      {"}", 12090},
      {"\xff\xfe\x00\x80"sv, 8824},  // not UTF-8, a NUL inside
      {"r{\xc3\x28}q", 9837},
      {"\x00"sv, 0},
      {"{\x00}"sv, 0},
      {"0", 13907},
      {"1", 9842},
      {"redlock-marker{0}", 13907},
      {"redlock-marker{0}:server", 13907},
  };
  for (const Known& k : known) {
    CAPTURE(k.key);
    CHECK(hash_slot(k.key) == k.slot);
  }
}

TEST_CASE("slot_tag: every slot's tag hashes to it, is decimal without a leading zero, and is the smallest such number") {
  std::set<std::string> tags;
  unsigned long largest = 0;
  for (int s = 0; s < slot_count; ++s) {
    const std::string tag = slot_tag(s);
    CAPTURE(s);
    REQUIRE(hash_slot(tag) == s);
    REQUIRE(!tag.empty());
    REQUIRE(tag.size() <= 6);
    REQUIRE(tag.find_first_not_of("0123456789") == std::string::npos);
    REQUIRE((tag == "0" || tag[0] != '0'));
    tags.insert(tag);
    largest = std::max(largest, std::stoul(tag));
  }
  CHECK(tags.size() == slot_count);
  // Smallest: no number below a slot's tag hashes to that slot.
  for (unsigned long n = 0; n <= largest; ++n) {
    const std::string text = std::to_string(n);
    const std::string tag = slot_tag(hash_slot(text));
    if (std::stoul(tag) > n) FAIL_CHECK(text << " hashes to slot " << hash_slot(text) << ", whose tag is " << tag);
  }
  CHECK(largest == 109757);
  // Spot checks against CLUSTER KEYSLOT (redis-server 7.0.15).
  CHECK(slot_tag(13907) == "0");
  CHECK(slot_tag(9842) == "1");
  CHECK(slot_tag(0) == "3560");
  CHECK(slot_tag(2326) == "43190");
  CHECK(slot_tag(16383) == "39296");
  CHECK(slot_tag(1469) == "109757");
}

namespace {

// every_name_of: every name keys.hpp gives resource `r` under prefix `p`,
// the semaphore's permits 0..9 included.
std::vector<std::string> every_name_of(std::string_view p, std::string_view r) {
  const std::string lock = lock_key(p, r);
  std::vector<std::string> out = {lock,
                                  fence_key(p, r),
                                  release_channel(p, r),
                                  permits_key(p, r),
                                  permits_channel(p, r),
                                  queue_key_of(lock),
                                  turn_key_of(lock),
                                  expiry_key_of(lock),
                                  readers_key_of(lock),
                                  writers_key_of(lock),
                                  leader_key_of(lock),
                                  leader_channel_of(lock)};
  for (std::size_t i = 0; i < 10; ++i) {
    const std::string permit = permit_key(p, r, i);
    out.insert(out.end(), {permit, fence_key_of(permit), queue_key_of(permit), turn_key_of(permit), expiry_key_of(permit)});
  }
  return out;
}

}  // namespace

TEST_CASE("slot markers: redlock-marker{T} and its :server key are in slot s, and no resource has either name") {
  CHECK(slot_marker_key(13907) == "redlock-marker{0}");
  CHECK(slot_marker_server_key(13907) == "redlock-marker{0}:server");
  CHECK(slot_marker_key(0) == "redlock-marker{3560}");  // CLUSTER KEYSLOT: 0
  CHECK(slot_marker_server_key(1469) == "redlock-marker{109757}:server");  // CLUSTER KEYSLOT: 1469
  std::set<std::string> markers;
  for (int s = 0; s < slot_count; ++s) {
    CAPTURE(s);
    const std::string marker = slot_marker_key(s);
    const std::string server = slot_marker_server_key(s);
    REQUIRE(hash_slot(marker) == s);
    REQUIRE(hash_slot(server) == s);
    markers.insert(marker);
    markers.insert(server);
  }
  CHECK(markers.size() == 2 * slot_count);
  CHECK(markers.count(std::string(marker_key)) == 0);
  CHECK(markers.count(std::string(marker_server_key)) == 0);
  // A resource name's prefix is all before its first '{' (a prefix holds
  // none), so only the prefix "redlock-marker" and the resource T could
  // give a slot marker's name; every name of such a resource differs (one
  // slot in 13: the tags are alike but for their digits).
  for (int s = 0; s < slot_count; s += 13) {
    for (const std::string& name : every_name_of(marker_key, slot_tag(s))) {
      if (markers.count(name) != 0) FAIL_CHECK(name << " is a slot marker and a resource's name");
    }
  }
}
