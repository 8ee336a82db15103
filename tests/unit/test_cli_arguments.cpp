// test_cli_arguments.cpp — the `redlock` command line's values
// (cli/arguments.hpp): durations with units, signals, tokens. Each refusal
// is a UsageError naming the option and the value.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <string>

#include "arguments.hpp"

namespace {

using redlock::cli::format_duration;
using redlock::cli::parse_duration;
using redlock::cli::parse_signal;
using redlock::cli::signal_name;
using redlock::cli::UsageError;
using std::chrono::milliseconds;

long long ms(const std::string& text, long long min = 0) { return parse_duration("--ttl", text, min).count(); }

// refusal returns parse_duration's message for `text` ("" when it was accepted).
std::string refusal(const std::string& text, long long min = 0) {
  try {
    parse_duration("--wait", text, min);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string signal_refusal(const std::string& text) {
  try {
    parse_signal("--signal", text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cli durations: a plain number is seconds, as flock(1) and timeout(1) read it; units ms, s, m, h; fractions") {
  CHECK(ms("0") == 0);
  CHECK(ms("10") == 10000);     // flock -w 10: ten seconds
  CHECK(ms("1.5") == 1500);     // flock -w 1.5
  CHECK(ms("0.001") == 1);
  CHECK(ms("0.25") == 250);
  CHECK(ms("500") == 500000);
  CHECK(ms("500ms") == 500);
  CHECK(ms("30s") == 30000);
  CHECK(ms("1.5s") == 1500);
  CHECK(ms("0.001s") == 1);
  CHECK(ms("1m") == 60000);
  CHECK(ms("1.5m") == 90000);
  CHECK(ms("2h") == 7'200'000);
  CHECK(ms("0.25h") == 900'000);
  CHECK(ms("007s") == 7000);
  CHECK(ms("1.50000000000000s") == 1500);  // trailing zeros beyond any precision
  CHECK(ms("2147483647ms") == 2147483647);  // INT_MAX ms
  CHECK(ms("2147483.647") == 2147483647);
  CHECK(ms("2147483.647s") == 2147483647);
}

TEST_CASE("cli durations: each bad value is refused with a message naming the option, the value and why") {
  CHECK(refusal("abc") == "--wait: \"abc\" is not a duration (seconds, or a number with a unit: 500ms, 30s, 1.5m, 1h)");
  CHECK(refusal("") .find("is not a duration") != std::string::npos);
  CHECK(refusal("5x") == "--wait: \"5x\": unknown unit \"x\" (use ms, s, m or h; a plain number is seconds)");
  CHECK(refusal("5 s").find("unknown unit \" s\"") != std::string::npos);
  CHECK(refusal("5S").find("unknown unit \"S\"") != std::string::npos);
  CHECK(refusal("1d").find("unknown unit \"d\"") != std::string::npos);
  CHECK(refusal("-1") == "--wait: \"-1\" must not be negative");
  CHECK(refusal("-5s") == "--wait: \"-5s\" must not be negative");
  CHECK(refusal("-1.5") == "--wait: \"-1.5\" must not be negative");
  // Below a millisecond: refused, never rounded to 0 or 1 ms.
  CHECK(refusal("0.0001") == "--wait: \"0.0001\" is not a whole number of milliseconds (the finest unit is 1ms)");
  CHECK(refusal("1.0005").find("not a whole number of milliseconds") != std::string::npos);
  CHECK(refusal("0.00000000000001").find("not a whole number of milliseconds") != std::string::npos);
  for (const char* odd : {"nan", "NaN", "inf", "-inf", "infinity", "+5", "0x10", " 5", "1,5"}) {
    CAPTURE(odd);
    CHECK(refusal(odd).rfind("--wait: ", 0) == 0);
  }
  CHECK(refusal("0.5ms").find("not a whole number of milliseconds") != std::string::npos);
  CHECK(refusal("1.0005s").find("not a whole number of milliseconds") != std::string::npos);
  CHECK(refusal("1.").find("no digits after") != std::string::npos);
  CHECK(refusal(".5s").find("is not a duration") != std::string::npos);
  CHECK(refusal("1e3").find("unknown unit \"e3\"") != std::string::npos);
  // Overflow: past INT_MAX ms, however it is written.
  for (const char* big : {"2147483648ms", "2147484", "2147483.648", "99999999999999999999999", "600h", "2147484s", "35791.4m"}) {
    CAPTURE(big);
    CHECK(refusal(big).find("is out of range (at most 2147483647 ms") != std::string::npos);
  }
  // The minimum.
  CHECK(refusal("0", 1) == "--wait: \"0\" must be greater than 0");
  CHECK(refusal("0s", 1) == "--wait: \"0s\" must be greater than 0");
  CHECK(refusal("999ms", 1000) == "--wait: \"999ms\" must be at least 1s");
}

TEST_CASE("cli durations: format_duration writes what parse_duration reads back") {
  CHECK(format_duration(milliseconds{0}) == "0");
  CHECK(format_duration(milliseconds{1500}) == "1500ms");
  CHECK(format_duration(milliseconds{30000}) == "30s");
  CHECK(format_duration(milliseconds{60000}) == "1m");
  CHECK(format_duration(milliseconds{7'200'000}) == "2h");
  for (long long v : {0LL, 1LL, 999LL, 1000LL, 61'000LL, 3'600'000LL, 2147483647LL})
    CHECK(ms(format_duration(milliseconds{v})) == v);
}

TEST_CASE("cli signals: names with or without SIG, any case, and numbers, as timeout(1) takes them") {
  CHECK(parse_signal("--signal", "TERM") == SIGTERM);
  CHECK(parse_signal("--signal", "SIGTERM") == SIGTERM);
  CHECK(parse_signal("--signal", "kill") == SIGKILL);
  CHECK(parse_signal("--signal", "SigInt") == SIGINT);
  CHECK(parse_signal("--signal", "9") == SIGKILL);
  CHECK(parse_signal("--signal", "15") == SIGTERM);
  CHECK(parse_signal("--signal", "USR1") == SIGUSR1);
  CHECK(parse_signal("--signal", "RTMIN+2") == SIGRTMIN + 2);
  CHECK(parse_signal("--signal", "SIGRTMAX-1") == SIGRTMAX - 1);
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(SIGABRT) == "SIGABRT");
  CHECK(signal_name(SIGRTMIN + 3) == "SIGRTMIN+3");
}

TEST_CASE("cli signals: unknown names, bad numbers and signals that do not end a process are refused") {
  CHECK(signal_refusal("FOO") == "--signal: \"FOO\" is not a signal name or number (e.g. TERM, INT, HUP, KILL, 15)");
  CHECK(signal_refusal("") .find("is not a signal name") != std::string::npos);
  CHECK(signal_refusal("0").find("is not a signal number") != std::string::npos);
  CHECK(signal_refusal("65").find("is not a signal number") != std::string::npos);
  CHECK(signal_refusal("9x").find("is not a signal number") != std::string::npos);
  CHECK(signal_refusal("-9").find("is not a signal name") != std::string::npos);
  CHECK(signal_refusal("RTMIN+99").find("is not a signal name") != std::string::npos);
  for (const char* stop : {"STOP", "SIGTSTP", "ttin", "TTOU", "CONT", "19"}) {
    CAPTURE(stop);
    CHECK(signal_refusal(stop).find("does not end a process") != std::string::npos);
  }
}

TEST_CASE("cli tokens: 1-128 characters of [0-9A-Za-z_-], then maybe '~' and an owner; the empty token is refused") {
  CHECK_NOTHROW(redlock::cli::check_token("--token", "host1-job_42"));
  CHECK_NOTHROW(redlock::cli::check_token("--token", std::string(128, 'a')));
  CHECK_NOTHROW(redlock::cli::check_token("TOKEN", "0123abcd~build-3:4242:nightly"));  // as acquire prints it
  CHECK_THROWS_AS(redlock::cli::check_token("TOKEN", "0123abcd~"), UsageError);
  CHECK_THROWS_AS(redlock::cli::check_token("TOKEN", "0123abcd~two words"), UsageError);
  CHECK_THROWS_AS(redlock::cli::check_token("TOKEN", "~host:1"), UsageError);
  CHECK_THROWS_WITH_AS(redlock::cli::check_token("--token", ""),
                       "--token: \"\" must be 1-128 characters of [0-9A-Za-z_-]", UsageError);
  CHECK_THROWS_WITH_AS(redlock::cli::check_token("TOKEN", "0123abcd~a b"),
                       "TOKEN: \"0123abcd~a b\" must be 1-128 characters of [0-9A-Za-z_-], '~', then the owner as "
                       "redlock printed it (1-140 printable ASCII characters without blanks)",
                       UsageError);
  CHECK_THROWS_AS(redlock::cli::check_token("--token", std::string(129, 'a')), UsageError);
  CHECK_THROWS_AS(redlock::cli::check_token("--token", "a b"), UsageError);
}
