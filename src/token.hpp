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

// Fair tokens (docs/design.md, "Fair order"): 'Q', then the waiter id (16
// hex digits, drawn once per fair acquire: its name in the masters'
// queues), then 16 hex digits drawn for each attempt. Every attempt still
// writes a value no other attempt writes (the waiter id and the attempt
// part are both random), and a release of such a value (also one by token
// alone, from another process) knows the waiter to take out of the queue.
// A caller's token of that shape is released as a fair one: the fair
// release does all a release does.
inline constexpr std::size_t fair_id_size = 16;
inline constexpr std::size_t fair_token_size = 1 + 2 * fair_id_size;
bool is_fair_token(std::string_view token) noexcept;
// fair_waiter_of: the waiter id of a fair token.
inline std::string_view fair_waiter_of(std::string_view token) noexcept { return token.substr(1, fair_id_size); }
// fair_token: 'Q' + waiter + the first 16 digits of `fresh` (a random_token).
std::string fair_token(std::string_view waiter, std::string_view fresh);

// random_below returns a uniformly distributed value in [0, bound) from a
// per-thread PRNG seeded by getrandom; for jitter, never for tokens.
unsigned long long random_below(unsigned long long bound) noexcept;

}  // namespace redlock::detail
