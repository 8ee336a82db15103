// faults.cpp — see faults.hpp.
#include "faultproxy/faults.hpp"

#include <charconv>

namespace faultproxy {
namespace {

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// parse_ms accepts plain decimal milliseconds 0..kMaxDelayMs (no sign, no
// unit) so "100ms" or "-1" are errors rather than silently something else.
std::optional<std::uint32_t> parse_ms(std::string_view v) {
  std::uint64_t n = 0;
  if (v.empty() || v.front() == '+' || v.front() == '-') return std::nullopt;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n > kMaxDelayMs) return std::nullopt;
  return static_cast<std::uint32_t>(n);
}

std::optional<bool> parse_flag(std::string_view v) {
  if (v == "0") return false;
  if (v == "1") return true;
  return std::nullopt;
}

}  // namespace

const char* setting_keys() {
  return "delay_up, delay_down, jitter_up, jitter_down, blackhole, drop_up, drop_down, refuse, "
         "hold_up, hold_down, reset";
}

nlohmann::json Faults::to_json() const {
  return {{"delay_up", delay_up},     {"delay_down", delay_down},
          {"jitter_up", jitter_up},   {"jitter_down", jitter_down},
          {"blackhole", int(blackhole)}, {"drop_up", int(drop_up)},
          {"drop_down", int(drop_down)}, {"refuse", int(refuse)},
          {"hold_up", int(hold_up)},  {"hold_down", int(hold_down)}};
}

std::optional<std::string> apply_setting(Faults& f, std::string_view token, bool* reset_requested) {
  const auto eq = token.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return "malformed setting " + quote(token) + " (expected key=value)";
  const std::string_view key = token.substr(0, eq);
  const std::string_view value = token.substr(eq + 1);

  std::uint32_t* ms = nullptr;
  if (key == "delay_up") ms = &f.delay_up;
  else if (key == "delay_down") ms = &f.delay_down;
  else if (key == "jitter_up") ms = &f.jitter_up;
  else if (key == "jitter_down") ms = &f.jitter_down;
  if (ms != nullptr) {
    auto v = parse_ms(value);
    if (!v)
      return "bad value " + quote(value) + " for " + std::string(key) + " (expected milliseconds 0.." +
             std::to_string(kMaxDelayMs) + ")";
    *ms = *v;
    return std::nullopt;
  }

  bool* flag = nullptr;
  bool reset = false;
  if (key == "blackhole") flag = &f.blackhole;
  else if (key == "drop_up") flag = &f.drop_up;
  else if (key == "drop_down") flag = &f.drop_down;
  else if (key == "refuse") flag = &f.refuse;
  else if (key == "hold_up") flag = &f.hold_up;
  else if (key == "hold_down") flag = &f.hold_down;
  else if (key == "reset") flag = &reset;
  if (flag == nullptr) return "unknown key " + quote(key) + " (known: " + setting_keys() + ")";
  auto v = parse_flag(value);
  if (!v) return "bad value " + quote(value) + " for " + std::string(key) + " (expected 0 or 1)";
  *flag = *v;
  if (reset && reset_requested != nullptr) *reset_requested = true;
  return std::nullopt;
}

}  // namespace faultproxy
