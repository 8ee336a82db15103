// token.hpp — lock tokens: 128 bits from the OS CSPRNG, drawn as 32 hex
// digits, held in base64url.
#pragma once

#include <string>
#include <string_view>

#include "redlock/error.hpp"

namespace redlock::detail {

// random_token returns 32 lowercase hex digits from getrandom(2); a failing
// getrandom is Errc::internal (never a weaker source).
Result<std::string> random_token();

// A lock's own drawn token is the draw's 128 bits in base64url (RFC 4648
// §5, no padding), its last character (2 bits: A, Q, g or w) moved to the
// front: 22 characters of [A-Za-z0-9_-], never starting with '-' (which
// `redlock release NAME TOKEN` would read as an option). Not hex: a held
// Lock keeps its value, and 10 characters fewer put one with a short
// owner (host and pid up to 15 characters together) in a 48-byte malloc
// chunk instead of a 64-byte one.
inline constexpr std::size_t dense_token_size = 22;
// assign_drawn_value makes `out` a drawn value: `draw` (32 hex digits,
// Runtime::random_token) as dense_token_size base64url characters, then
// `owner` (owner_suffix). A token of any other shape (a fair token) is
// kept as it is. The draw is freed before `out` grows, so that `out` may
// take its heap chunk; `out` keeps its room (a retry allocates nothing
// more than its draw).
void assign_drawn_value(std::string& out, std::string draw, std::string_view owner);

// A lock's value is its token — a drawn one (above), a fair token
// (below) or a caller's — and, for a value drawn by the library, the
// holder's owner after a '~' (docs/design.md, "Owner"): "~host:pid" or
// "~host:pid:label". No token has a '~' ([0-9A-Za-z_-] only), so the
// owner never changes what makes the value unique (the random part) and
// is parsed back without ambiguity; the scripts compare whole values.
inline constexpr char owner_mark = '~';
inline constexpr std::size_t max_token_size = 128;
inline constexpr std::size_t max_owner_label_size = 64;
inline constexpr std::size_t max_owner_host_size = 64;
// max_owner_size: host, ':', a pid (at most 10 digits), ':', the label.
inline constexpr std::size_t max_owner_size = max_owner_host_size + 1 + 10 + 1 + max_owner_label_size;

// valid_token says whether a caller-given value is acceptable: a token of
// 1–128 characters of [0-9A-Za-z_-], then optionally '~' and an owner of
// 1–max_owner_size printable ASCII characters without blanks (as a value
// drawn by the library carries it: `redlock release` of a printed token).
bool valid_token(std::string_view token) noexcept;
// valid_owner_label: 1–64 printable ASCII characters, no blank (a label
// shows in status lines and environment variables as it is).
bool valid_owner_label(std::string_view label) noexcept;
// token_core: the value without its owner (all of it when it has none).
inline std::string_view token_core(std::string_view value) noexcept { return value.substr(0, value.find(owner_mark)); }
// owner_part: what follows the '~' ("" when none).
inline std::string_view owner_part(std::string_view value) noexcept {
  const std::size_t at = value.find(owner_mark);
  return at == std::string_view::npos ? std::string_view() : value.substr(at + 1);
}
// owner_suffix: "~host:pid" or "~host:pid:label" for this process; host is
// gethostname(2) with every byte outside [0-9A-Za-z._-] made '_' and cut to
// 64 bytes ("unknown" when it fails or is empty). `label` must be valid.
std::string owner_suffix(std::string_view label);

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
// is_fair_token: the value's token (before any owner) is a fair one.
bool is_fair_token(std::string_view token) noexcept;
// fair_waiter_of: the waiter id of a fair token.
inline std::string_view fair_waiter_of(std::string_view token) noexcept { return token.substr(1, fair_id_size); }
// fair_token: 'Q' + waiter + the first 16 digits of `fresh` (a random_token).
std::string fair_token(std::string_view waiter, std::string_view fresh);

// random_below returns a uniformly distributed value in [0, bound) from a
// per-thread PRNG seeded by getrandom; for jitter, never for tokens.
unsigned long long random_below(unsigned long long bound) noexcept;

}  // namespace redlock::detail
