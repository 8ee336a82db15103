// test_token.cpp — tokens are 128 random bits (drawn in hex, held in
// base64url); caller tokens are checked.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "sha1.hpp"
#include "redlock/lock.hpp"
#include "token.hpp"

using namespace redlock::detail;

TEST_CASE("random tokens are 32 lowercase hex digits and do not repeat") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto t = random_token();
    REQUIRE(t.ok());
    CHECK(t->size() == 32);
    CHECK(t->find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(*t);
  }
  CHECK(seen.size() == 1000);
}

namespace {

// bits_of: the bits a drawn token's base64url characters carry, in order.
std::string bits_of(std::string_view dense) {
  static constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string bits;
  for (char c : dense) {
    const std::size_t v = alphabet.find(c);
    REQUIRE(v != std::string_view::npos);
    for (int b = 5; b >= 0; --b) bits += (v >> b & 1) != 0 ? '1' : '0';
  }
  return bits;
}

// bits_of_hex: the bits of hex digits, in order.
std::string bits_of_hex(std::string_view hex) {
  std::string bits;
  for (char c : hex) {
    const int v = c <= '9' ? c - '0' : c - 'a' + 10;
    for (int b = 3; b >= 0; --b) bits += (v >> b & 1) != 0 ? '1' : '0';
  }
  return bits;
}

}  // namespace

TEST_CASE("a drawn value: the draw's 128 bits as 22 base64url characters, never a leading '-', then the owner") {
  std::string out;
  assign_drawn_value(out, std::string(32, '0'), "~vm:7");
  CHECK(out == std::string(22, 'A') + "~vm:7");
  assign_drawn_value(out, std::string(32, 'f'), "");
  CHECK(out == "w" + std::string(21, '_'));  // the character of the last 2 bits comes first
  assign_drawn_value(out, "000102030405060708090a0b0c0d0e0f", "");
  CHECK(out == "wAAECAwQFBgcICQoLDA0OD");  // RFC 4648 base64url of those bytes, unpadded, its last first
  // Every bit of every draw, in order, and nothing else: 128 bits of the
  // CSPRNG in each token, so tokens are as unguessable as the draws.
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto draw = random_token();
    REQUIRE(draw.ok());
    const std::string hex = *draw;
    assign_drawn_value(out, std::move(*draw), "~h:1");
    REQUIRE(out.size() == dense_token_size + 4);
    const std::string_view token = token_core(out);
    CHECK(token.size() == dense_token_size);
    CHECK(token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
          std::string_view::npos);
    // Never a leading '-' (a command line's option): the first character
    // is the one of the last 2 bits.
    CHECK(std::string_view("AQgw").find(token.front()) != std::string_view::npos);
    const std::string in_order = std::string(token.substr(1)) + token.front();
    CHECK(bits_of(in_order) == bits_of_hex(hex) + "0000");
    CHECK(valid_token(out));
    CHECK_FALSE(is_fair_token(out));
    CHECK(owner_part(out) == "h:1");
    seen.insert(std::string(token));
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("a drawn value is sized to fit: a held lock keeps no more heap than its value") {
  std::string out;
  assign_drawn_value(out, std::string(32, 'a'), "~vm:4194304");
  CHECK(out.size() == dense_token_size + 11);
  CHECK(out.capacity() == out.size());
  // A retry writes into the room the attempt before left.
  const char* room = out.data();
  assign_drawn_value(out, std::string(32, 'b'), "~vm:4194304");
  CHECK(out.data() == room);
}

TEST_CASE("a token that is not 32 hex digits (a fair one) is kept as it is, the owner after it") {
  std::string out;
  const std::string fair = fair_token("0123456789abcdef", "fedcba9876543210ffffffffffffffff");
  assign_drawn_value(out, fair, "~h:1");
  CHECK(out == fair + "~h:1");
  CHECK(is_fair_token(out));
  assign_drawn_value(out, "not-hex-at-all", "~h:1");
  CHECK(out == "not-hex-at-all~h:1");
  assign_drawn_value(out, std::string(31, 'a'), "");
  CHECK(out == std::string(31, 'a'));
  assign_drawn_value(out, std::string(31, 'a') + "A", "");  // uppercase is not what a draw holds
  CHECK(out == std::string(31, 'a') + "A");
}

TEST_CASE("caller tokens: 1-128 characters of [0-9A-Za-z_-]") {
  CHECK(valid_token("a"));
  CHECK(valid_token("deadBEEF_-09"));
  CHECK(valid_token(std::string(128, 'f')));
  CHECK_FALSE(valid_token(""));
  CHECK_FALSE(valid_token(std::string(129, 'f')));
  CHECK_FALSE(valid_token("has space"));
  CHECK_FALSE(valid_token("semi;colon"));
  CHECK_FALSE(valid_token("new\nline"));
}

TEST_CASE("fair tokens: 'Q', the waiter id, a part drawn per attempt; only that shape is fair") {
  const std::string waiter = "0123456789abcdef";
  const std::string token = fair_token(waiter, "fedcba9876543210ffffffffffffffff");
  CHECK(token == "Q0123456789abcdeffedcba9876543210");
  CHECK(token.size() == fair_token_size);
  CHECK(is_fair_token(token));
  CHECK(valid_token(token));
  CHECK(fair_waiter_of(token) == waiter);
  CHECK_FALSE(is_fair_token("q0123456789abcdeffedcba9876543210"));  // lowercase q: a caller's
  CHECK_FALSE(is_fair_token("Q0123456789abcdeffedcba987654321"));   // one short
  CHECK_FALSE(is_fair_token("Q0123456789ABCDEFfedcba9876543210"));  // not what the library draws
  CHECK_FALSE(is_fair_token(*random_token()));
}

TEST_CASE("values: a token, then optionally '~' and the owner a drawn value carries") {
  CHECK(valid_token("0123abcd~build-3:4242"));
  CHECK(valid_token("0123abcd~build-3:4242:nightly/db"));
  CHECK(valid_token("x~" + std::string(max_owner_size, 'o')));
  CHECK_FALSE(valid_token("x~" + std::string(max_owner_size + 1, 'o')));
  CHECK_FALSE(valid_token("0123abcd~"));           // a mark names an owner
  CHECK_FALSE(valid_token("~build-3:4242"));       // and follows a token
  CHECK_FALSE(valid_token("0123abcd~has blank"));  // blanks split status lines
  CHECK_FALSE(valid_token("0123abcd~tab\there"));
  CHECK_FALSE(valid_token("0123abcd~\xc3\xa9"));  // printable ASCII only
  CHECK_FALSE(valid_token("bad;token~host:1"));    // the token's own rule still holds
  CHECK(token_core("0123abcd~h:1:x") == "0123abcd");
  CHECK(owner_part("0123abcd~h:1:x") == "h:1:x");
  CHECK(owner_part("0123abcd").empty());
  // A fair value keeps its shape with an owner after it.
  const std::string fair = fair_token("0123456789abcdef", "fedcba9876543210ffffffffffffffff") + "~h:7";
  CHECK(is_fair_token(fair));
  CHECK(fair_waiter_of(fair) == "0123456789abcdef");
  CHECK_FALSE(is_fair_token("Q0123456789abcdeffedcba987654321~h:7"));  // one short before the mark
}

TEST_CASE("owner_suffix names this host and process; owner_of reads it back") {
  const std::string suffix = owner_suffix("nightly");
  REQUIRE(suffix.starts_with("~"));
  REQUIRE(valid_token("0123abcd" + suffix));
  const auto owner = redlock::owner_of("0123abcd" + suffix);
  REQUIRE(owner.has_value());
  CHECK(owner->pid == static_cast<std::uint64_t>(getpid()));
  CHECK(owner->label == "nightly");
  CHECK_FALSE(owner->host.empty());
  CHECK(owner->host.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-") ==
        std::string::npos);
  const auto unlabelled = redlock::owner_of("0123abcd" + owner_suffix(""));
  REQUIRE(unlabelled.has_value());
  CHECK(unlabelled->label.empty());
  CHECK(unlabelled->host == owner->host);
}

TEST_CASE("owner_of: only host:pid[:label] after the mark names an owner; anything else names none") {
  const auto full = redlock::owner_of("t~db-1.example:12:a:b");
  REQUIRE(full.has_value());
  CHECK(full->host == "db-1.example");
  CHECK(full->pid == 12);
  CHECK(full->label == "a:b");  // a label may hold ':'
  CHECK_FALSE(redlock::owner_of("0123abcd").has_value());  // a caller's token
  CHECK_FALSE(redlock::owner_of("t~").has_value());
  CHECK_FALSE(redlock::owner_of("t~host").has_value());
  CHECK_FALSE(redlock::owner_of("t~:12").has_value());
  CHECK_FALSE(redlock::owner_of("t~host:").has_value());
  CHECK_FALSE(redlock::owner_of("t~host:12x").has_value());
  CHECK_FALSE(redlock::owner_of("t~host:99999999999999999999999").has_value());  // beyond 64 bits
}

TEST_CASE("jitter stays below its bound") {
  for (int i = 0; i < 1000; ++i) CHECK(random_below(7) < 7);
  CHECK(random_below(0) == 0);
}

TEST_CASE("sha1 matches the FIPS test vectors (EVALSHA names scripts by it)") {
  CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST_CASE("after a fork, parent and child never draw the same token") {
  // The first draw fills this thread's pool; without the fork guard the
  // child would hand out the very bytes the parent hands out next.
  REQUIRE(random_token().ok());
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto t = random_token();
    const std::string text = t ? *t : std::string("error");
    const ssize_t n = write(fds[1], text.data(), text.size());
    _exit(n == static_cast<ssize_t>(text.size()) ? 0 : 1);
  }
  close(fds[1]);
  auto mine = random_token();
  REQUIRE(mine.ok());
  char buf[64] = {};
  const ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(n == 32);
  CHECK(std::string(buf, 32) != *mine);
}
