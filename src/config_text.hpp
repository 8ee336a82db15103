// config_text.hpp — the text helpers the config files share (URLs, JSON,
// loading, validation). Every failure there is an Errc::config Error whose
// message names the field and the value, masked; nothing there throws.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "redlock/error.hpp"

namespace redlock::detail::config_text {

// A parsing step yields nothing on success or says what is wrong; the caller
// adds the context (the URL, the list item, the JSON key).
using Problem = std::optional<std::string>;

inline constexpr auto npos = std::string_view::npos;

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string text;
  (text.append(parts), ...);
  return text;
}

inline std::string quote(std::string_view text) { return cat("\"", text, "\""); }

inline Error config_error(std::string message) { return make_error(Errc::config, std::move(message)); }

inline Error in_context(std::string_view context, Error error) {
  error.message.insert(0, cat(context, ": "));
  return error;
}

inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

}  // namespace redlock::detail::config_text
