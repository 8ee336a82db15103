// token.cpp — tokens from getrandom(2), jitter from a seeded PRNG.
#include "token.hpp"

#include "redlock/lock.hpp"

#include <pthread.h>
#include <unistd.h>
#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>

namespace redlock::detail {

namespace {

bool fill_random(unsigned char* buf, std::size_t len) noexcept {
  std::size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom(buf + got, len - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

// TokenBytes — getrandom(2) output fetched 4 KiB at a time and handed out
// 16 bytes per token: the kernel's CSPRNG, one system call per 256 tokens
// instead of one per acquire. Per thread (each loop draws its own). A fork
// bumps the generation (pthread_atfork), so a child never hands out bytes
// its parent may hand out too.
std::atomic<unsigned> fork_generation{0};

struct TokenBytes {
  unsigned char buf[4096];
  std::size_t used = sizeof buf;
  unsigned generation = 0;

  TokenBytes() noexcept {
    static const int registered = pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1); });
    (void)registered;
  }

  bool take(unsigned char* out, std::size_t len) noexcept {
    const unsigned now = fork_generation.load(std::memory_order_relaxed);
    if (now != generation || used + len > sizeof buf) {
      if (!fill_random(buf, sizeof buf)) return false;
      used = 0;
      generation = now;
    }
    std::memcpy(out, buf + used, len);
    std::memset(buf + used, 0, len);  // handed out once
    used += len;
    return true;
  }
};

}  // namespace

Result<std::string> random_token() {
  thread_local TokenBytes pool;
  unsigned char bytes[16];
  if (!pool.take(bytes, sizeof bytes)) {
    return make_error(Errc::internal, std::string("getrandom failed: ") + std::strerror(errno));
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    out[2 * i] = hex[bytes[i] >> 4];
    out[2 * i + 1] = hex[bytes[i] & 0xf];
  }
  return out;
}

namespace {

// hex_value: the digit's value, -1 for anything but [0-9a-f].
int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

void assign_drawn_value(std::string& out, std::string draw, std::string_view owner) {
  unsigned char bytes[16];
  bool hex = draw.size() == 2 * sizeof bytes;
  for (std::size_t i = 0; hex && i < sizeof bytes; ++i) {
    const int high = hex_value(draw[2 * i]), low = hex_value(draw[2 * i + 1]);
    hex = high >= 0 && low >= 0;
    if (hex) bytes[i] = static_cast<unsigned char>(high << 4 | low);
  }
  if (!hex) {
    out.reserve(draw.size() + owner.size());
    out.assign(draw).append(owner);
    return;
  }
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  char dense[dense_token_size];
  for (std::size_t i = 0; i < dense_token_size; ++i) {  // 6 bits each, big-endian; the last has 2
    const std::size_t bit = 6 * i, at = bit / 8;
    const unsigned pair = static_cast<unsigned>(bytes[at]) << 8 | (at + 1 < sizeof bytes ? bytes[at + 1] : 0u);
    dense[i] = alphabet[(pair >> (10 - bit % 8)) & 63u];
  }
  // The character of the last 2 bits goes first (one of A, Q, g, w): a
  // token never starts with '-', which a command line reads as an option.
  std::rotate(dense, dense + dense_token_size - 1, dense + dense_token_size);
  std::string().swap(draw);
  out.reserve(dense_token_size + owner.size());
  out.assign(dense, dense_token_size).append(owner);
}

namespace {

bool printable(std::string_view text, std::size_t most) noexcept {
  if (text.empty() || text.size() > most) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

}  // namespace

bool valid_owner_label(std::string_view label) noexcept { return printable(label, max_owner_label_size); }

std::string owner_suffix(std::string_view label) {
  char name[256] = {};
  std::string host;
  if (gethostname(name, sizeof name - 1) == 0) host = name;
  if (host.size() > max_owner_host_size) host.resize(max_owner_host_size);
  for (char& c : host) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (host.empty()) host = "unknown";
  std::string out;
  out.reserve(2 + host.size() + 11 + label.size());
  out += owner_mark;
  out += host;
  out += ':';
  out += std::to_string(getpid());
  if (!label.empty()) {
    out += ':';
    out += label;
  }
  return out;
}

bool valid_token(std::string_view value) noexcept {
  const std::size_t mark = value.find(owner_mark);
  if (mark != std::string_view::npos && !printable(value.substr(mark + 1), max_owner_size)) return false;
  const std::string_view token = value.substr(0, mark);
  if (token.empty() || token.size() > max_token_size) return false;
  for (char c : token) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

bool is_fair_token(std::string_view value) noexcept {
  const std::string_view token = token_core(value);
  if (token.size() != fair_token_size || token[0] != 'Q') return false;
  return std::all_of(token.begin() + 1, token.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string fair_token(std::string_view waiter, std::string_view fresh) {
  std::string out;
  out.reserve(fair_token_size);
  out += 'Q';
  out += waiter.substr(0, fair_id_size);
  out += fresh.substr(0, fair_id_size);
  return out;
}

unsigned long long random_below(unsigned long long bound) noexcept {
  if (bound == 0) return 0;
  thread_local std::mt19937_64 rng = [] {
    unsigned long long seed = 0;
    if (!fill_random(reinterpret_cast<unsigned char*>(&seed), sizeof seed)) {
      seed = static_cast<unsigned long long>(std::random_device{}());
    }
    return std::mt19937_64(seed);
  }();
  return std::uniform_int_distribution<unsigned long long>(0, bound - 1)(rng);
}

}  // namespace redlock::detail

namespace redlock {

std::optional<Owner> owner_of(std::string_view value) {
  const std::size_t mark = value.find(detail::owner_mark);
  if (mark == std::string_view::npos) return std::nullopt;
  const std::string_view owner = value.substr(mark + 1);
  const std::size_t colon = owner.find(':');
  if (colon == 0 || colon == std::string_view::npos) return std::nullopt;
  const std::string_view after = owner.substr(colon + 1);
  const std::string_view pid = after.substr(0, after.find(':'));
  Owner out;
  const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), out.pid);
  if (pid.empty() || ec != std::errc() || end != pid.data() + pid.size()) return std::nullopt;
  out.host.assign(owner.substr(0, colon));
  if (pid.size() < after.size()) out.label.assign(after.substr(pid.size() + 1));
  return out;
}

}  // namespace redlock
