// arguments.cpp — see arguments.hpp.
#include "arguments.hpp"

#include <signal.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <utility>

namespace redlock::cli {

namespace {

long long parse_whole(std::string_view name, const std::string& text, long long min, long long max,
                      const char* what) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec == std::errc::invalid_argument || p != end)
    throw UsageError(std::string(name) + ": " + quote(text) + " is not " + what);
  if (ec == std::errc::result_out_of_range || v > max)
    throw UsageError(std::string(name) + ": " + quote(text) + " is out of range (at most " + std::to_string(max) +
                     ")");
  if (v < min)
    throw UsageError(std::string(name) + ": " + quote(text) +
                     (min == 1 ? " must be greater than 0" : min == 0 ? " must not be negative"
                                                                      : " must be at least " + std::to_string(min)));
  return v;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

int parse_int(std::string_view name, const std::string& text, int min, int max) {
  return static_cast<int>(parse_whole(name, text, min, max, "a whole number"));
}

std::chrono::milliseconds parse_duration(std::string_view name, const std::string& text, long long min) {
  constexpr long long kMax = std::numeric_limits<int>::max();
  const std::string what = std::string(name) + ": " + quote(text);
  const auto refuse = [&](const std::string& why) -> UsageError { return UsageError(what + why); };
  if (!text.empty() && text.front() == '-') throw refuse(" must not be negative");
  // Not rounded: a duration that is not what was written could wait or
  // hold a lock for another time than asked.
  static const std::string kSubMillisecond = " is not a whole number of milliseconds (the finest unit is 1ms)";
  // NUMBER [. FRACTION] [UNIT], read by hand: exact, no floating point.
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  const std::string_view whole(text.data(), i);
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = std::string_view(text.data() + start, i - start);
    if (fraction.empty()) throw refuse(" is not a duration: no digits after the \".\"");
  }
  const std::string_view unit(text.data() + i, text.size() - i);
  if (whole.empty())
    throw refuse(" is not a duration (seconds, or a number with a unit: 500ms, 30s, 1.5m, 1h)");
  static constexpr std::array<std::pair<std::string_view, long long>, 4> kUnits{
      {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};
  long long scale = 0;
  for (const auto& [u, ms] : kUnits)
    if (unit == u) scale = ms;
  // A plain number is seconds, as flock(1) and timeout(1) read it.
  if (unit.empty()) {
    scale = 1000;
  } else if (scale == 0) {
    throw refuse(": unknown unit " + quote(unit) + " (use ms, s, m or h; a plain number is seconds)");
  }
  // whole·scale + fraction·scale / 10^digits, each checked against kMax.
  const auto out_of_range = [&] {
    return refuse(" is out of range (at most " + std::to_string(kMax) + " ms, about 24.8 days)");
  };
  long long ms = 0;
  for (char c : whole) {
    ms = ms * 10 + (c - '0');
    if (ms > kMax) throw out_of_range();
  }
  if (ms > kMax / scale) throw out_of_range();
  ms *= scale;
  long long numerator = 0, denominator = 1;
  for (char c : fraction) {
    if (denominator > kMax) {  // digits beyond any unit's precision must be zeros
      if (c != '0') throw refuse(kSubMillisecond);
      continue;
    }
    numerator = numerator * 10 + (c - '0');
    denominator *= 10;
  }
  if (numerator * scale % denominator != 0) throw refuse(kSubMillisecond);
  ms += numerator * scale / denominator;
  if (ms > kMax) throw out_of_range();
  if (ms < min)
    throw refuse(min == 1 ? " must be greater than 0" : " must be at least " + format_duration(std::chrono::milliseconds{min}));
  return std::chrono::milliseconds{ms};
}

std::string format_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms == 0) return "0";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

namespace {

struct NamedSignal {
  std::string_view name;  // without "SIG"
  int number;
};

// The standard signals of Linux; SIGRTMIN+N / SIGRTMAX-N are read apart.
constexpr std::array<NamedSignal, 31> kSignals{{
    {"HUP", SIGHUP},       {"INT", SIGINT},       {"QUIT", SIGQUIT},   {"ILL", SIGILL},       {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT},     {"IOT", SIGIOT},       {"BUS", SIGBUS},     {"FPE", SIGFPE},       {"KILL", SIGKILL},
    {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},     {"USR2", SIGUSR2},   {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},
    {"TERM", SIGTERM},     {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD},   {"CONT", SIGCONT},     {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU},   {"URG", SIGURG},       {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ},     {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},   {"WINCH", SIGWINCH},   {"IO", SIGIO},
    {"SYS", SIGSYS},
}};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// name_to_number: 0 when `name` (upper case, no "SIG") names no signal.
int name_to_number(const std::string& name) {
  for (const auto& s : kSignals)
    if (name == s.name) return s.number;
  for (const auto& [base, number, sign] : {std::tuple{"RTMIN", SIGRTMIN, 1}, std::tuple{"RTMAX", SIGRTMAX, -1}}) {
    const std::string_view b(base);
    if (!name.starts_with(b)) continue;
    if (name.size() == b.size()) return number;
    const char op = name[b.size()];
    if (op != (sign > 0 ? '+' : '-')) return 0;
    int n = 0;
    const char* first = name.data() + b.size() + 1;
    const char* last = name.data() + name.size();
    auto [p, ec] = std::from_chars(first, last, n);
    if (ec != std::errc{} || p != last || first == last) return 0;
    const int sig = number + sign * n;
    return sig >= SIGRTMIN && sig <= SIGRTMAX ? sig : 0;
  }
  return 0;
}

}  // namespace

int parse_signal(std::string_view name, const std::string& text) {
  const std::string what = std::string(name) + ": " + quote(text);
  int sig = 0;
  if (!text.empty() && is_digit(text.front())) {
    const char* last = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), last, sig);
    if (ec != std::errc{} || p != last || sig <= 0 || sig > SIGRTMAX)
      throw UsageError(what + " is not a signal number (1-" + std::to_string(SIGRTMAX) + ")");
  } else {
    std::string n = upper(text);
    if (n.starts_with("SIG")) n.erase(0, 3);
    sig = name_to_number(n);
    if (sig == 0) throw UsageError(what + " is not a signal name or number (e.g. TERM, INT, HUP, KILL, 15)");
  }
  if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU || sig == SIGCONT)
    throw UsageError(what + " (" + signal_name(sig) + ") does not end a process; use TERM, INT, HUP, KILL, ...");
  return sig;
}

std::string signal_name(int sig) {
  if (sig >= SIGRTMIN && sig <= SIGRTMAX)
    return sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  for (const auto& s : kSignals)
    if (s.number == sig && s.name != "IOT") return "SIG" + std::string(s.name);
  return "signal " + std::to_string(sig);
}

namespace {

bool printable(std::string_view text, std::size_t most) {
  return !text.empty() && text.size() <= most &&
         std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

}  // namespace

void check_token(std::string_view name, const std::string& token) {
  auto ok_char = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
  };
  const std::size_t mark = token.find('~');
  const std::string_view core = std::string_view(token).substr(0, mark);
  bool ok = !core.empty() && core.size() <= 128 && std::all_of(core.begin(), core.end(), ok_char);
  if (mark != std::string::npos) ok = ok && printable(std::string_view(token).substr(mark + 1), 140);
  if (!ok && mark == std::string::npos)
    throw UsageError(std::string(name) + ": " + quote(token) + " must be 1-128 characters of [0-9A-Za-z_-]");
  if (!ok)
    throw UsageError(std::string(name) + ": " + quote(token) +
                     " must be 1-128 characters of [0-9A-Za-z_-], '~', then the owner as redlock printed it "
                     "(1-140 printable ASCII characters without blanks)");
}

void check_owner(std::string_view name, const std::string& label) {
  if (!label.empty() && !printable(label, 64))
    throw UsageError(std::string(name) + ": " + quote(label) +
                     " must be 1-64 printable ASCII characters without blanks");
}

}  // namespace redlock::cli
