// arguments.hpp — the values a `redlock` command line carries, read and
// checked: whole numbers, durations with units, signal names, tokens. Each
// function throws UsageError with a message that names the option and the
// value it refused. Nothing here knows about Redis or the library.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

#include "escape.hpp"

namespace redlock::cli {

// UsageError — a bad argument, option, environment value or config file.
// Caught in main(): message on stderr, exit status 2, nothing on stdout.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// parse_int reads a whole number in [min, max].
int parse_int(std::string_view name, const std::string& text, int min, int max);

// parse_duration reads a duration as flock(1) and timeout(1) do: a plain
// number is seconds ("10", "1.5"); a number with a unit — ms, s, m or h —
// is that unit ("500ms", "30s", "1.5m", "2h"). Either may have a decimal
// fraction. The result must be a whole number of milliseconds (0.0001 is
// refused, not rounded) in [min, INT_MAX] (INT_MAX ms is about 24.8 days);
// negative numbers, "nan", "inf" and anything but digits are refused.
// `name` is the option ("--ttl") the messages name.
std::chrono::milliseconds parse_duration(std::string_view name, const std::string& text, long long min);

// format_duration renders a whole number of milliseconds the way
// parse_duration reads it back, in the largest unit that divides it
// ("30s", "1m", "1500ms"; "0" for zero).
std::string format_duration(std::chrono::milliseconds d);

// parse_signal reads a signal as timeout(1) does: a name with or without
// "SIG" ("TERM", "SIGKILL", "int"; any case) or a number ("15"). Signals
// that would not end a process — 0, STOP, TSTP, TTIN, TTOU, CONT — are
// refused, as is any number that is no signal.
int parse_signal(std::string_view name, const std::string& text);

// signal_name is "SIGTERM" for SIGTERM, "SIGRTMIN+3" for a real-time
// signal, "signal N" for one without a name.
std::string signal_name(int sig);

// check_token applies the library's rule for a value: a token of 1-128
// characters of [0-9A-Za-z_-], then optionally '~' and the owner a value
// drawn by redlock carries (1-140 printable ASCII characters, no blank).
void check_token(std::string_view name, const std::string& token);

// check_owner: --owner is 0-64 printable ASCII characters without blanks.
void check_owner(std::string_view name, const std::string& label);

}  // namespace redlock::cli
