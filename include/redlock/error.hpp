// redlock/error.hpp — the one error rule of the library.
//
// Every fallible public call returns a Result<T>: either a value or an Error.
// No public call throws: a runtime failure (a node that is down, a lock held
// elsewhere, a bad config value) is an Error, and a wrong access to a Result
// is a contract violation that aborts (Result, below). The one exception
// left is the standard library's own std::bad_alloc. An Error carries a stable code
// (Errc, spelled by errc_name() as "redlock.<name>"), a message that names
// what is wrong (the field and value for config errors; each node and its
// reason for quorum failures), and the per-node outcomes of the deciding
// round when there was one.
#pragma once

#include <cstdint>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "redlock/export.hpp"
#include "redlock/lock.hpp"

namespace redlock {

// Errc — the stable error codes. Their names (errc_name) never change once
// released; callers may switch on them.
enum class Errc : std::uint8_t {
  held,                // another owner holds the resource on at least one node and no quorum was reached
  no_quorum,           // fewer than a majority of nodes said yes (down, slow, quarantined, error replies)
  validity_too_short,  // a majority said yes, but too late: the remaining validity was not above the minimum
  not_held,            // extend/release: our token is not present on a majority (expired, released, or foreign)
  too_late,            // extend: the majority answered after the lock's validity deadline had passed
  invalid_argument,    // a call's argument is malformed (empty resource, ttl out of range, bad token),
                       // or the call is misused: a blocking Client call on the client's own loop thread,
                       // a reentrant lock() asking for more than the held lease gives
  config,              // a configuration value is wrong; the message names the field and the value
  closed,              // the client was closed before the operation could complete
  internal,            // a bug or resource exhaustion inside the library (out of memory, uv error)
  lost,                // a lease was lost: an extension was refused or came too late, or its deadline passed
  cancelled,           // the caller cancelled a waiting acquire (AcquireOptions::cancel)
  store,               // a FencedStore could not be reached, timed out, or answered with an error or a
                       // reply of the wrong shape (fenced_store.hpp)
};

// errc_name returns the stable id of a code, e.g. "redlock.no_quorum".
REDLOCK_API std::string_view errc_name(Errc code) noexcept;

// Error — what went wrong. `nodes` holds the per-node outcomes of the round
// that decided the failure (empty for argument and config errors); `attempts`
// counts the acquire rounds that were tried.
struct REDLOCK_API Error {
  Errc code = Errc::internal;
  std::string message;
  std::vector<NodeOutcome> nodes;
  int attempts = 0;
  std::chrono::microseconds elapsed{0};

  // to_string gives "redlock.<code>: <message>".
  std::string to_string() const;
};

// result_access_violation reports a wrong access to a Result and ends the
// program: one line on stderr naming the access (`access`, e.g.
// "Result::value()") and, when the Result holds one, the error's code and
// message ("redlock: Result::value() called on an error: redlock.held:
// …"; an Error never carries a secret), then std::abort(). Result calls
// it; a caller has no reason to.
[[noreturn]]
REDLOCK_API void result_access_violation(const char* access, const Error* error) noexcept;

// Result<T> — a value or an Error. Check with `if (r)` / `r.ok()` before
// `*r` / `r.value()` / `r->`, and error() only on a failed Result. A wrong
// access — value(), `*`, `->` on an error, error() on a value — is a
// contract violation, not an exception: it writes one line to stderr
// (result_access_violation) and calls std::abort(), so it cannot be
// caught and ignored and shows in a core dump at the faulty call.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & noexcept { return *checked_value(); }
  const T& value() const& noexcept { return *checked_value(); }
  T&& value() && noexcept { return std::move(*checked_value()); }
  T& operator*() & noexcept { return value(); }
  const T& operator*() const& noexcept { return value(); }
  T* operator->() noexcept { return &value(); }
  const T* operator->() const noexcept { return &value(); }

  const Error& error() const& noexcept { return *checked_error(); }
  Error&& error() && noexcept { return std::move(*checked_error()); }

 private:
  // get_if, not std::get: no path that throws std::bad_variant_access.
  T* checked_value() noexcept {
    if (T* v = std::get_if<0>(&v_)) return v;
    result_access_violation("Result::value()", std::get_if<1>(&v_));
  }
  const T* checked_value() const noexcept { return const_cast<Result*>(this)->checked_value(); }
  Error* checked_error() const noexcept {
    if (const Error* e = std::get_if<1>(&v_)) return const_cast<Error*>(e);
    result_access_violation("Result::error()", nullptr);
  }

  std::variant<T, Error> v_;
};

// Result<void> — success, or an Error. error() on a success is a contract
// violation, as for Result<T>.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}

  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const Error& error() const& noexcept {
    if (ok_) result_access_violation("Result::error()", nullptr);
    return error_;
  }
  Error&& error() && noexcept {
    if (ok_) result_access_violation("Result::error()", nullptr);
    return std::move(error_);
  }

 private:
  Error error_;
  bool ok_ = true;
};

// make_error builds an Error with no node outcomes.
inline Error make_error(Errc code, std::string message) {
  Error e;
  e.code = code;
  e.message = std::move(message);
  return e;
}

}  // namespace redlock
