// token.cpp — tokens from getrandom(2), jitter from a seeded PRNG.
#include "token.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <random>

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

}  // namespace

Result<std::string> random_token() {
  unsigned char bytes[16];
  if (!fill_random(bytes, sizeof bytes)) {
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

bool valid_token(std::string_view token) noexcept {
  if (token.empty() || token.size() > 128) return false;
  for (char c : token) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
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
