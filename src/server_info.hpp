// server_info.hpp — reading what a server says of itself: a field of an
// INFO reply, and a decimal number from a server, bounded before any
// arithmetic (numbers from servers are hostile until checked). Pure.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {

// info_field: the value of `name` in an INFO reply ("name:value" on a line
// of its own), "" when there is none.
inline std::string info_field(std::string_view info, std::string_view name) {
  std::size_t at = 0;
  while ((at = info.find(name, at)) != std::string_view::npos) {
    if ((at == 0 || info[at - 1] == '\n') && at + name.size() < info.size() && info[at + name.size()] == ':') {
      std::size_t begin = at + name.size() + 1;
      std::size_t end = info.find_first_of("\r\n", begin);
      return std::string(info.substr(begin, end == std::string_view::npos ? end : end - begin));
    }
    at += name.size();
  }
  return {};
}

// bounded_number reads a server's decimal integer: digits only, and at
// most `most` — anything else (a sign, junk, a number that would overflow
// the arithmetic it goes into) is no number at all.
inline std::optional<long long> bounded_number(std::string_view text, long long most) {
  long long n = 0;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n > most) return std::nullopt;
  return n;
}

// replication_id: INFO's master_replid if it is one (40 lowercase hex
// digits), else "" (unknown: never compared).
inline std::string replication_id(std::string_view info) {
  std::string id = info_field(info, "master_replid");
  if (id.size() != 40 || id.find_first_not_of("0123456789abcdef") != std::string::npos) id.clear();
  return id;
}

}  // namespace redlock::detail
