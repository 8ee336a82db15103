// token.hpp — lock tokens: 128 bits from the OS CSPRNG, as 32 hex digits.
#pragma once

#include <string>
#include <string_view>

#include "redlock/error.hpp"

namespace redlock::detail {

// random_token returns 32 lowercase hex digits from getrandom(2); a failing
// getrandom is Errc::internal (never a weaker source).
Result<std::string> random_token();

// valid_token says whether a caller-chosen token is acceptable:
// 1–128 characters of [0-9A-Za-z_-].
bool valid_token(std::string_view token) noexcept;

// random_below returns a uniformly distributed value in [0, bound) from a
// per-thread PRNG seeded by getrandom; for jitter, never for tokens.
unsigned long long random_below(unsigned long long bound) noexcept;

}  // namespace redlock::detail
