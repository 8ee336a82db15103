// config_text.hpp — the text helpers and limits the config files share
// (URLs, JSON, loading, validation), and the two rules the client applies
// when it is created (wait_timeout_in_force, refuse_unsupported_members).
// Every failure there is an Errc::config Error whose message names the
// field and the value, masked; nothing there throws.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "redlock/config.hpp"
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

// The limits of a member's fields, for the URL parser and validate_config.
inline constexpr std::size_t max_seeds = 64;
inline constexpr int max_wait_replicas = 16;
inline constexpr std::chrono::milliseconds max_wait_timeout{60000};
inline constexpr std::size_t max_master_name = 255;

// Where the fields that only some kinds have belong, as both the query
// parser and validate_config say it.
inline constexpr std::string_view lone_kinds_only =
    "for redis://, rediss:// and unix:// members only (cluster and sentinel members are checked for failovers "
    "anyway)";
inline constexpr std::string_view sentinel_kind_only = "for redis+sentinel:// and rediss+sentinel:// members only";

// endpoint_text: "host:port", "[v6]:port".
inline std::string endpoint_text(std::string_view host, int port) {
  const bool ipv6 = host.find(':') != std::string_view::npos;
  return cat(ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", std::to_string(port));
}

// master_name_problem: a name the sentinels can be asked for and any
// message can show: 1–255 printable ASCII characters without blanks. The
// name itself is not echoed (it may hold what a terminal would run).
inline Problem master_name_problem(std::string_view name) {
  if (name.empty()) return "empty master name";
  if (name.size() > max_master_name)
    return cat("master name of ", std::to_string(name.size()), " bytes (at most ", std::to_string(max_master_name), ")");
  if (!std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < '\x7f'; }))
    return "master name: printable ASCII without blanks only";
  return std::nullopt;
}

}  // namespace redlock::detail::config_text

namespace redlock::detail {

// wait_timeout_in_force: how long a member's WAIT may take — its
// wait_timeout, or half of node_timeout when that is 0 (the other half is
// for the write itself). validate_config keeps it in [1 ms, node_timeout).
inline std::chrono::milliseconds wait_timeout_in_force(const NodeAddress& node, std::chrono::milliseconds node_timeout) {
  return node.wait_timeout.count() != 0 ? node.wait_timeout : node_timeout / 2;
}

// refuse_unsupported_members: the members this version parses and
// validates but cannot serve yet — cluster members — are an
// Errc::config error naming the first of them, when a client is created
// (AsyncClient::create).
Result<void> refuse_unsupported_members(const Config& config);

}  // namespace redlock::detail
