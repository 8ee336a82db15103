// config.cpp — node URLs, JSON config documents, REDLOCK_NODES, and the rules
// a Config must satisfy. Every failure is an Errc::config Error whose message
// names the field and the offending value, masked (mask_credentials: no
// password in any message); nothing here throws.
#include "redlock/config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "config_keys.hpp"
#include "quorum.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
constexpr auto npos = std::string_view::npos;

// A parsing step yields nothing on success or says what is wrong; the caller
// adds the context (the URL, the list item, the JSON key).
using Problem = std::optional<std::string>;

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string text;
  (text.append(parts), ...);
  return text;
}

std::string quote(std::string_view text) { return cat("\"", text, "\""); }

Error config_error(std::string message) { return make_error(Errc::config, std::move(message)); }

Error in_context(std::string_view context, Error error) {
  error.message.insert(0, cat(context, ": "));
  return error;
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view space = " \t\r\n";
  const auto first = text.find_first_not_of(space);
  if (first == npos) return {};
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// Digits only: from_chars alone would stop silently at junk. Overflow
// saturates so that the caller's range check reports it.
std::optional<std::uint64_t> decimal(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != npos) return std::nullopt;
  std::uint64_t value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec == std::errc::result_out_of_range) return std::numeric_limits<std::uint64_t>::max();
  return value;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const auto hex = text.substr(i + 1, 2);
    unsigned char byte = 0;
    const auto result = std::from_chars(hex.data(), hex.data() + hex.size(), byte, 16);
    if (hex.size() != 2 || result.ec != std::errc{} || result.ptr != hex.data() + 2) return std::nullopt;
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

// ---- URLs ------------------------------------------------------------------

struct UrlParts {
  std::string_view scheme;
  std::optional<std::string_view> userinfo;
  std::string_view location;  // tcp: host[:port][/db]; unix: /path[?db=N]
};

bool is_ipv6(std::string_view host) {
  in6_addr address{};
  return inet_pton(AF_INET6, std::string(host).c_str(), &address) == 1;
}

bool is_unix_scheme(std::string_view scheme) { return iequals(scheme, "unix"); }

// A scheme is a letter, then letters, digits, '+', '-' or '.' (RFC 3986):
// in "user:pw@redis://h" the text before "://" is none.
constexpr std::string_view scheme_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.";
bool is_scheme(std::string_view text) {
  return !text.empty() && scheme_chars.substr(0, 52).find(text.front()) != npos &&
         text.find_first_not_of(scheme_chars) == npos;
}

// Where the userinfo ends. TCP: at the last '@' (a host, a port and a db
// hold none), so '/', '@' and ':' in a password need no escape. Unix: the
// path is absolute, so the userinfo ends at the first "@/" and a path may
// hold anything; a location that starts with '/' is a path without
// credentials.
std::size_t userinfo_end(std::string_view scheme, std::string_view location) {
  if (!is_unix_scheme(scheme)) return location.rfind('@');
  if (location.starts_with('/')) return npos;
  const auto at_path = location.find("@/");
  return at_path != npos ? at_path : location.rfind('@');
}

std::optional<UrlParts> split_url(std::string_view url) {
  const auto sep = url.find("://");
  if (sep == npos) return std::nullopt;
  UrlParts parts{url.substr(0, sep), std::nullopt, url.substr(sep + 3)};
  if (const auto at = userinfo_end(parts.scheme, parts.location); at != npos) {
    parts.userinfo = parts.location.substr(0, at);
    parts.location.remove_prefix(at + 1);
  }
  return parts;
}

// mask_word: mask_credentials for one word. It masks at least what
// split_url would take for a userinfo (up to the last '@', where unix
// takes the first "@/"), also when the word is not a URL at all or is
// wrapped in quotes or other words ("--nodes=redis://…", "\"redis://…\":").
std::string mask_word(std::string_view word) {
  const auto sep = word.find("://");
  if (const auto at = word.rfind('@'); at != npos) {
    // Opening quotes belong to the message around the word.
    std::size_t start = std::min(word.find_first_not_of("\"'`("), at);
    if (word.substr(start).starts_with("//")) start += 2;
    // After "scheme://" when that precedes the '@' and no credentials can
    // be before it (a scheme holds no '@', ':' or '/').
    if (sep != npos && sep < at && word.substr(0, sep).find_first_of("@:/") == npos) {
      auto scheme = word.substr(0, sep);
      scheme.remove_prefix(std::min(scheme.size(), scheme.find_last_not_of(scheme_chars) + 1));
      if (is_unix_scheme(scheme) && word.substr(sep + 3).starts_with('/')) return std::string(word);  // a path
      start = sep + 3;
    }
    if (word.substr(start, at - start) == "***") return std::string(word);  // masked already
    return cat(word.substr(0, start), "***", word.substr(at));
  }
  // No '@': "user:password" with "@host" forgotten reads as host:port.
  const std::size_t start = sep != npos ? sep + 3 : word.starts_with("//") ? 2 : 0;
  auto authority = word.substr(start, word.find('/', start) - start);
  authority = authority.substr(0, authority.find_last_not_of("\"'`)]},;:.") + 1);  // closing punctuation
  auto colon = authority.find(':');
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    colon = close != npos && authority.substr(close + 1).starts_with(':') ? close + 1 : npos;
  }
  if (colon == npos || is_ipv6(authority) || is_ipv6(authority.substr(0, authority.rfind(':'))))
    return std::string(word);  // also "::1:6379", refused for its missing brackets
  const auto port = authority.substr(colon + 1);
  if (port.empty() || port == "***" || port.find_first_not_of("0123456789") == npos) return std::string(word);
  return cat(word.substr(0, start + colon + 1), "***");
}

Problem parse_userinfo(std::string_view info, NodeAddress& node) {
  const auto colon = info.find(':');
  if (colon == npos)
    return info.empty() ? "empty credentials before \"@\""
                        : "user without password (use user:password@ or :password@)";
  auto user = percent_decode(info.substr(0, colon));
  if (!user) return "bad percent-escape in user";
  auto password = percent_decode(info.substr(colon + 1));
  if (!password) return "bad percent-escape in password";
  if (password->empty()) return "empty password";
  node.user = std::move(*user);
  node.password = std::move(*password);
  return std::nullopt;
}

Problem parse_port(std::string_view text, int& port) {
  const auto value = decimal(text);
  // Not quoted: "user:password" with "@host" forgotten puts the password
  // here (mask_credentials masks it in the URL too).
  if (!value) return "bad port (expected 1-65535)";
  if (*value < 1 || *value > 65535) return "port out of range (1-65535)";
  port = static_cast<int>(*value);
  return std::nullopt;
}

Problem parse_db(std::string_view text, int& db) {
  constexpr auto max_db = static_cast<std::uint64_t>(std::numeric_limits<int>::max());
  const auto value = decimal(text);
  if (!value) return cat("bad db ", quote(text), " (expected a decimal number >= 0)");
  if (*value > max_db) return cat("db ", text, " out of range (0-", std::to_string(max_db), ")");
  db = static_cast<int>(*value);
  return std::nullopt;
}

Problem parse_host_port(std::string_view text, NodeAddress& node) {
  constexpr std::string_view host_chars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._";
  std::string_view host;
  std::string_view port;  // empty or ":digits"
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == npos) return "unclosed \"[\" in host";
    host = text.substr(1, close - 1);
    port = text.substr(close + 1);
    if (!port.empty() && port.front() != ':') return cat("junk after \"]\": ", quote(port));
    if (!is_ipv6(host)) return cat("bad IPv6 address ", quote(host));
  } else {
    const auto colon = text.find(':');
    if (colon != text.rfind(':')) return "IPv6 address must be in brackets, e.g. [::1]:6379";
    host = text.substr(0, colon);
    if (colon != npos) port = text.substr(colon);
    if (host.empty()) return "missing host";
    if (const auto bad = host.find_first_not_of(host_chars); bad != npos)
      return cat("bad character ", quote(host.substr(bad, 1)), " in host ", quote(host));
  }
  node.host = host;
  return port.empty() ? Problem{} : parse_port(port.substr(1), node.port);
}

Problem parse_tcp_location(std::string_view location, NodeAddress& node) {
  const auto slash = location.find('/');
  if (auto problem = parse_host_port(location.substr(0, slash), node)) return problem;
  // "redis://host/" is common shorthand for db 0.
  if (slash == npos || slash + 1 == location.size()) return std::nullopt;
  return parse_db(location.substr(slash + 1), node.db);
}

Problem parse_unix_location(std::string_view location, NodeAddress& node) {
  const auto mark = location.find('?');
  const auto path = location.substr(0, mark);
  if (path.empty()) return "empty socket path";
  // Not quoted: without "@/" the path may begin with credentials.
  if (path.front() != '/') return "socket path is not absolute";
  node.path = path;
  if (mark == npos) return std::nullopt;
  const auto query = location.substr(mark + 1);
  if (!query.starts_with("db=") || query.find('&') != npos)
    return cat("unsupported query ", quote(query), " (only ?db=N)");
  return parse_db(query.substr(3), node.db);
}

Problem parse_url_parts(const UrlParts& parts, NodeAddress& node) {
  if (is_unix_scheme(parts.scheme))
    node.kind = NodeAddress::Kind::unix_socket;
  else if (iequals(parts.scheme, "rediss"))
    node.tls = true;
  else if (!iequals(parts.scheme, "redis"))  // no scheme at all ("user:pw@redis://h") is not quoted
    return cat("unknown scheme ", is_scheme(parts.scheme) ? quote(parts.scheme) + " " : "",
               "(expected redis, rediss or unix)");
  if (parts.userinfo)
    if (auto problem = parse_userinfo(*parts.userinfo, node)) return problem;
  return node.kind == NodeAddress::Kind::tcp ? parse_tcp_location(parts.location, node)
                                             : parse_unix_location(parts.location, node);
}

// ---- JSON ------------------------------------------------------------------

// json_text: a wrong value in a message, on one short line. A string is
// masked (mask_credentials); an array or an object is named, not shown: it
// may hold a secret in a form no mask recognises ({"password": "…"}).
std::string json_text(const json& value) {
  constexpr std::size_t max_length = 60;
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  auto text = value.is_string() ? json(mask_credentials(value.get<std::string>())).dump() : value.dump();
  if (text.size() > max_length) text = cat(text.substr(0, max_length), "...");
  return text;
}

Error value_error(std::string_view key, const json& value, std::string_view reason) {
  return config_error(cat(key, ": ", json_text(value), ": ", reason));
}

Error wrong_type(std::string_view key, const json& value, std::string_view expected) {
  return value_error(key, value, cat("wrong type (expected ", expected, ")"));
}

Result<std::int64_t> json_integer(std::string_view key, const json& value, std::string_view expected) {
  if (!value.is_number_integer()) return wrong_type(key, value, expected);
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return value_error(key, value, "out of range");
  return value.get<std::int64_t>();
}

using Setter = Result<void> (*)(std::string_view key, const json& value, Config& config);

template <milliseconds Options::*field>
Result<void> set_duration(std::string_view key, const json& value, Config& config) {
  auto count = json_integer(key, value, "integer milliseconds");
  if (!count) return std::move(count).error();
  config.options.*field = milliseconds{*count};
  return {};
}

// set_count: a positive count into a std::size_t field. Checked here
// because a negative count cannot reach validate_config through the
// unsigned field.
template <std::size_t Options::*field>
Result<void> set_count(std::string_view key, const json& value, Config& config) {
  auto count = json_integer(key, value, "positive integer");
  if (!count) return std::move(count).error();
  if (*count <= 0) return value_error(key, value, "must be > 0");
  config.options.*field = static_cast<std::size_t>(*count);
  return {};
}

Result<void> set_release_retries(std::string_view key, const json& value, Config& config) {
  auto count = json_integer(key, value, "integer from 0 to 10");
  if (!count) return std::move(count).error();
  if (*count < 0 || *count > 10) return value_error(key, value, "must be from 0 to 10");
  config.options.release_retries = static_cast<int>(*count);
  return {};
}

Result<void> set_drift_factor(std::string_view key, const json& value, Config& config) {
  if (!value.is_number()) return wrong_type(key, value, "number");
  config.options.drift_factor = value.get<double>();
  return {};
}

template <bool Options::*Field>
Result<void> set_flag(std::string_view key, const json& value, Config& config) {
  if (!value.is_boolean()) return wrong_type(key, value, "true or false");
  config.options.*Field = value.get<bool>();
  return {};
}

template <std::string Options::*Field>
Result<void> set_option_text(std::string_view key, const json& value, Config& config) {
  if (!value.is_string()) return wrong_type(key, value, "string");
  config.options.*Field = value.get<std::string>();
  return {};
}

template <std::string TlsSettings::*Field>
Result<void> set_tls_text(std::string_view key, const json& value, Config& config) {
  if (!value.is_string()) return wrong_type(key, value, "string");
  config.tls.*Field = value.get<std::string>();
  return {};
}

Result<void> set_tls_verify(std::string_view key, const json& value, Config& config) {
  if (!value.is_boolean()) return wrong_type(key, value, "true or false");
  config.tls.verify = value.get<bool>();
  return {};
}

// user and password_file are only type-checked here: credentials_from_json
// applies them once every node is known.
Result<void> check_text(std::string_view key, const json& value, Config&) {
  if (!value.is_string()) return wrong_type(key, value, "string");
  return {};
}

Result<void> set_nodes(std::string_view key, const json& value, Config& config) {
  if (!value.is_array()) return wrong_type(key, value, "array of URL strings");
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto item = cat(key, "[", std::to_string(i), "]");
    if (!value[i].is_string()) return wrong_type(item, value[i], "URL string");
    auto node = parse_node_url(value[i].get<std::string>());
    if (!node) return in_context(item, std::move(node).error());
    config.nodes.push_back(std::move(*node));
  }
  return {};
}

// The defaults as the docs show them, read from a default Options.
using Shower = std::string (*)();

template <milliseconds Options::*field>
std::string show_duration() {
  return std::to_string((Options{}.*field).count());
}
template <std::size_t Options::*field>
std::string show_count() {
  return std::to_string(Options{}.*field);
}
template <bool Options::*field>
std::string show_flag() {
  return Options{}.*field ? "true" : "false";
}
template <std::string Options::*field>
std::string show_option_text() {
  return json(Options{}.*field).dump();
}
std::string show_drift_factor() { return json(Options{}.drift_factor).dump(); }
std::string show_release_retries() { return std::to_string(Options{}.release_retries); }

// Key — one JSON key: how it is parsed and what the docs say of it. This
// table is the one list of keys: the parser reads it, and docs/config.md's
// table is generated from it (detail::config_keys_markdown; the unit test
// unit/config fails while they differ).
struct Key {
  std::string_view name;
  Setter set;
  std::string_view type;
  Shower show_default;     // the default from Options{}, or
  const char* fixed_default;  // or a default stated here, as markdown (nullptr: show_default's)
  std::string_view doc;
};

constexpr Key keys[] = {
    {"nodes", set_nodes,
     "array of URL strings", nullptr, "required",
     "The masters: `redis://`, `rediss://` or `unix://` URLs (config.hpp, NodeAddress). At least one; no server twice."},
    {"prefix", set_option_text<&Options::prefix>,
     "string", show_option_text<&Options::prefix>, nullptr,
     "Key prefix: the lock key is prefix + resource (Options::prefix). No `{` or `}`."},
    {"owner", set_option_text<&Options::owner>,
     "string", show_option_text<&Options::owner>, nullptr,
     "Owner label written after every token the client draws, `~host:pid:label` (Options::owner); 0–64 printable ASCII characters without blanks."},
    {"default_ttl_ms", set_duration<&Options::default_ttl>,
     "integer ms", show_duration<&Options::default_ttl>, nullptr,
     "TTL of an acquire that names none (Options::default_ttl). > 0, at most max_ttl_ms."},
    {"max_ttl_ms", set_duration<&Options::max_ttl>,
     "integer ms", show_duration<&Options::max_ttl>, nullptr,
     "Largest TTL an acquire or extend may ask for; also sets the restart quarantine (Options::max_ttl)."},
    {"drift_factor", set_drift_factor,
     "number", show_drift_factor, nullptr,
     "Clock drift allowance as a fraction of the TTL, in [0, 0.5) (Options::drift_factor)."},
    {"min_validity_ms", set_duration<&Options::min_validity>,
     "integer ms", show_duration<&Options::min_validity>, nullptr,
     "A round succeeds only with more validity left than this (Options::min_validity). >= 0."},
    {"node_timeout_ms", set_duration<&Options::node_timeout>,
     "integer ms", show_duration<&Options::node_timeout>, nullptr,
     "Deadline for one command on one node (Options::node_timeout). > 0, well below the TTL."},
    {"connect_timeout_ms", set_duration<&Options::connect_timeout>,
     "integer ms", show_duration<&Options::connect_timeout>, nullptr,
     "Deadline for a connect plus the handshake (Options::connect_timeout). > 0."},
    {"reconnect_min_ms", set_duration<&Options::reconnect_min>,
     "integer ms", show_duration<&Options::reconnect_min>, nullptr,
     "First reconnect delay, doubled per failure (Options::reconnect_min). > 0."},
    {"reconnect_max_ms", set_duration<&Options::reconnect_max>,
     "integer ms", show_duration<&Options::reconnect_max>, nullptr,
     "Cap of the reconnect delay (Options::reconnect_max). >= reconnect_min_ms."},
    {"retry_delay_ms", set_duration<&Options::retry_delay>,
     "integer ms", show_duration<&Options::retry_delay>, nullptr,
     "Pause between acquire rounds, before jitter (Options::retry_delay). >= 0."},
    {"retry_jitter_ms", set_duration<&Options::retry_jitter>,
     "integer ms", show_duration<&Options::retry_jitter>, nullptr,
     "Random 0..this added to each retry pause (Options::retry_jitter). >= 0."},
    {"release_settle_ms", set_duration<&Options::release_settle>,
     "integer ms", show_duration<&Options::release_settle>, nullptr,
     "How long a decided release waits for the other nodes' answers (Options::release_settle). >= 0."},
    {"release_retries", set_release_retries,
     "integer 0–10", show_release_retries, nullptr,
     "Rounds a release is sent again while a majority may still hold our value (Options::release_retries)."},
    {"stall_timeout_ms", set_duration<&Options::stall_timeout>,
     "integer ms", show_duration<&Options::stall_timeout>, nullptr,
     "A connection whose oldest command has waited this long is reconnected (Options::stall_timeout). > node_timeout_ms."},
    {"max_pending", set_count<&Options::max_pending>,
     "positive integer", show_count<&Options::max_pending>, nullptr,
     "Commands in flight per node before a send fails at once (Options::max_pending)."},
    {"extend_batch_window_ms", set_duration<&Options::extend_batch_window>,
     "integer ms", show_duration<&Options::extend_batch_window>, nullptr,
     "Watchdog extensions due within this window share one script call per master (Options::extend_batch_window). >= 0."},
    {"extend_batch_max", set_count<&Options::extend_batch_max>,
     "integer 1–100000", show_count<&Options::extend_batch_max>, nullptr,
     "Most keys in one batched extension call (Options::extend_batch_max); 1: no batching."},
    {"quarantine", set_flag<&Options::quarantine>,
     "true or false", show_flag<&Options::quarantine>, nullptr,
     "Restart and data-loss quarantine: a restarted or emptied master does not vote for max_ttl + drift (Options::quarantine)."},
    {"node_outcomes", set_flag<&Options::node_outcomes>,
     "true or false", show_flag<&Options::node_outcomes>, nullptr,
     "Fill Lock::nodes with every node's outcome of the deciding round (Options::node_outcomes)."},
    {"wake_ups", set_flag<&Options::wake_ups>,
     "true or false", show_flag<&Options::wake_ups>, nullptr,
     "Waiters are woken by release notifications instead of polling (Options::wake_ups)."},
    {"wake_jitter_ms", set_duration<&Options::wake_jitter>,
     "integer ms", show_duration<&Options::wake_jitter>, nullptr,
     "Random delay before a woken waiter that lost a race retries, doubled per race lost (Options::wake_jitter). >= 0."},
    {"wake_safety_net_ms", set_duration<&Options::wake_safety_net>,
     "integer ms", show_duration<&Options::wake_safety_net>, nullptr,
     "A waiter retries at least this often, in case a notification was lost (Options::wake_safety_net). > 0."},
    {"fair_grace_ms", set_duration<&Options::fair_grace>,
     "integer ms", show_duration<&Options::fair_grace>, nullptr,
     "How long the head of a fair queue has to take a free lock before the next may (Options::fair_grace). > 0."},
    {"data_check_interval_ms", set_duration<&Options::data_check_interval>,
     "integer ms", show_duration<&Options::data_check_interval>, nullptr,
     "How often each master's data-loss marker is checked (Options::data_check_interval). > 0."},
    {"accept_eviction", set_flag<&Options::accept_eviction>,
     "true or false", show_flag<&Options::accept_eviction>, nullptr,
     "Let masters whose maxmemory-policy may evict lock keys vote anyway (Options::accept_eviction)."},
    {"tls_ca_file", set_tls_text<&TlsSettings::ca_file>,
     "string (path)", nullptr, "`\"\"`",
     "PEM file of CAs to trust for rediss:// nodes; with tls_ca_dir empty too, the system's store (TlsSettings::ca_file)."},
    {"tls_ca_dir", set_tls_text<&TlsSettings::ca_dir>,
     "string (path)", nullptr, "`\"\"`",
     "Directory of CAs, c_rehash layout (TlsSettings::ca_dir)."},
    {"tls_cert_file", set_tls_text<&TlsSettings::cert_file>,
     "string (path)", nullptr, "`\"\"`",
     "Client certificate chain for mutual TLS; needs tls_key_file (TlsSettings::cert_file)."},
    {"tls_key_file", set_tls_text<&TlsSettings::key_file>,
     "string (path)", nullptr, "`\"\"`",
     "Private key of tls_cert_file (TlsSettings::key_file)."},
    {"tls_server_name", set_tls_text<&TlsSettings::server_name>,
     "string", nullptr, "`\"\"`",
     "Name to send (SNI) and verify; empty: each node's host (TlsSettings::server_name)."},
    {"tls_verify", set_tls_verify,
     "true or false", nullptr, "`true`",
     "Verify the servers' certificates. false: encrypted but not authenticated, for tests only (TlsSettings::verify)."},
    {"user", check_text,
     "string", nullptr, "`\"\"`",
     "ACL user for the nodes whose URLs carry no credentials; only with password_file."},
    {"password_file", check_text,
     "string (path)", nullptr, "`\"\"`",
     "File whose first line is the password of the nodes whose URLs carry no credentials (read_password_file)."},
};

}  // namespace

namespace detail {

std::string config_keys_markdown() {
  std::string text = "| Key | Type | Default | Meaning |\n|---|---|---|---|\n";
  for (const Key& key : keys) {
    const std::string shown =
        key.fixed_default != nullptr ? std::string(key.fixed_default) : cat("`", key.show_default(), "`");
    text += cat("| `", key.name, "` | ", key.type, " | ", shown, " | ", key.doc, " |\n");
  }
  return text;
}

}  // namespace detail

namespace {

Error unknown_key(std::string_view name) {
  std::string known;
  for (const auto& key : keys) known += cat(known.empty() ? "" : ", ", key.name);
  return config_error(cat("unknown key ", quote(mask_credentials(name)), " (known: ", known, ")"));
}

// credentials_from_json applies "user" and "password_file" (read here,
// after every node is known).
Result<void> credentials_from_json(const json& document, Config& config) {
  const std::string user = document.value("user", std::string());
  const std::string file = document.value("password_file", std::string());
  if (file.empty()) {
    if (!user.empty()) return config_error("user: set without password_file");
    return {};
  }
  auto password = read_password_file(file);
  if (!password) return in_context("password_file", std::move(password).error());
  apply_default_credentials(config.nodes, user, *password);
  return {};
}

Result<Config> config_from_json(const json& document) {
  if (!document.is_object()) return wrong_type("top level", document, "an object");
  if (!document.contains("nodes")) return config_error("nodes: missing (at least one node is required)");
  Config config;
  for (const auto& [name, value] : document.items()) {
    const Key* key = nullptr;
    for (const auto& candidate : keys)
      if (candidate.name == name) key = &candidate;
    if (!key) return unknown_key(name);
    if (auto applied = key->set(name, value, config); !applied) return applied.error();
  }
  if (auto applied = credentials_from_json(document, config); !applied) return applied.error();
  if (auto valid = validate_config(config); !valid) return valid.error();
  return config;
}

// The parser's message starts with an id ("[json.exception.parse_error.101]")
// that means nothing to a user; the position and reason after it do. It
// ends with the text last read ("; last read: '…'"), which may be a
// password: cut there (the parser's own words come before it).
std::string json_failure(const json::exception& failure) {
  std::string_view what = failure.what();
  if (const auto end = what.find("] "); what.starts_with('[') && end != npos) what.remove_prefix(end + 2);
  what = what.substr(0, what.find("; last read: "));
  const auto* parse = dynamic_cast<const json::parse_error*>(&failure);
  return cat("invalid JSON: ", what, parse != nullptr ? cat(" (byte ", std::to_string(parse->byte), ")") : "");
}

// ---- files -----------------------------------------------------------------

std::string os_reason() { return std::error_code(errno, std::generic_category()).message(); }

// std::FILE rather than ifstream: only the C API reliably leaves errno set.
Result<std::string> read_file(const std::string& path) {
  struct Closer {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  const std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) return config_error(os_reason());
  std::string text;
  char buffer[4096];
  while (const auto n = std::fread(buffer, 1, sizeof buffer, file.get())) text.append(buffer, n);
  if (std::ferror(file.get())) return config_error(os_reason());
  return text;
}

// ---- validation ------------------------------------------------------------

std::string node_name(std::size_t index) { return cat("nodes[", std::to_string(index), "]"); }

Problem node_problem(const NodeAddress& node) {
  if (node.kind == NodeAddress::Kind::tcp) {
    if (node.host.empty()) return "missing host";
    if (node.port < 1 || node.port > 65535) return "port out of range (1-65535)";
  } else if (node.path.empty() || node.path.front() != '/') {
    return "socket path is not absolute";
  }
  if (node.db < 0) return cat("db ", std::to_string(node.db), ": must be >= 0");
  if (!node.user.empty() && node.password.empty()) return "user without password";
  return std::nullopt;
}

// same_node: one server, whatever the db number (two dbs of one server are
// one vote, not two). Other spellings of one server are caught by run id at
// the handshake.
bool same_node(const NodeAddress& a, const NodeAddress& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == NodeAddress::Kind::unix_socket) return a.path == b.path;
  return a.port == b.port && iequals(a.host, b.host);
}

Result<void> validate_nodes(const std::vector<NodeAddress>& nodes) {
  if (nodes.empty()) return config_error("nodes: empty (at least one node is required)");
  if (nodes.size() > detail::max_nodes)
    return config_error(cat("nodes: ", std::to_string(nodes.size()), " masters (at most ",
                            std::to_string(detail::max_nodes), "; a Redlock group is 3 to 7)"));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (auto problem = node_problem(nodes[i]))
      return config_error(cat(node_name(i), ": ", quote(nodes[i].display()), ": ", *problem));
    for (std::size_t j = 0; j < i; ++j)
      if (same_node(nodes[i], nodes[j]))
        return config_error(cat(node_name(i), ": the same server as ", node_name(j), " (", nodes[j].display(),
                                "; the db number does not make another master: one server, one vote)"));
  }
  return {};
}

struct Rule {
  bool holds;
  std::string_view field;
  std::string value;
  std::string requirement;
};

Result<void> first_broken(std::initializer_list<Rule> rules) {
  for (const auto& rule : rules)
    if (!rule.holds) return config_error(cat(rule.field, ": ", rule.value, ": ", rule.requirement));
  return {};
}

std::string ms(milliseconds value) { return std::to_string(value.count()); }

std::string number(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

Result<void> validate_options(const Options& o) {
  // Single-field rules first: the relations below compute with these values
  // (a NaN or huge drift_factor would make the drift arithmetic undefined).
  if (auto fields = first_broken({
          {o.drift_factor >= 0.0 && o.drift_factor < 0.5, "drift_factor", number(o.drift_factor),
           "must be in [0, 0.5)"},
          {o.default_ttl > 0ms, "default_ttl_ms", ms(o.default_ttl), "must be > 0"},
          {o.min_validity >= 0ms, "min_validity_ms", ms(o.min_validity), "must be >= 0"},
          {o.node_timeout > 0ms, "node_timeout_ms", ms(o.node_timeout), "must be > 0"},
          {o.connect_timeout > 0ms, "connect_timeout_ms", ms(o.connect_timeout), "must be > 0"},
          {o.reconnect_min > 0ms, "reconnect_min_ms", ms(o.reconnect_min), "must be > 0"},
          {o.retry_delay >= 0ms, "retry_delay_ms", ms(o.retry_delay), "must be >= 0"},
          {o.retry_jitter >= 0ms, "retry_jitter_ms", ms(o.retry_jitter), "must be >= 0"},
          {o.release_settle >= 0ms, "release_settle_ms", ms(o.release_settle), "must be >= 0"},
          {o.release_retries >= 0 && o.release_retries <= 10, "release_retries", std::to_string(o.release_retries),
           "must be from 0 to 10"},
          {o.wake_jitter >= 0ms, "wake_jitter_ms", ms(o.wake_jitter), "must be >= 0"},
          {o.wake_safety_net > 0ms, "wake_safety_net_ms", ms(o.wake_safety_net), "must be > 0"},
          {o.fair_grace > 0ms, "fair_grace_ms", ms(o.fair_grace), "must be > 0"},
          {o.max_pending > 0, "max_pending", std::to_string(o.max_pending), "must be > 0"},
          {o.extend_batch_window >= 0ms, "extend_batch_window_ms", ms(o.extend_batch_window), "must be >= 0"},
          {o.extend_batch_max > 0 && o.extend_batch_max <= 100000, "extend_batch_max",
           std::to_string(o.extend_batch_max), "must be from 1 to 100000"},
          {o.data_check_interval > 0ms, "data_check_interval_ms", ms(o.data_check_interval), "must be > 0"},
          {o.prefix.find_first_of("{}") == std::string::npos, "prefix", quote(mask_credentials(o.prefix)),
           "may not contain '{' or '}' (they mark the resource in every key)"},
          {o.owner.empty() || detail::valid_owner_label(o.owner), "owner",
           "a label of " + std::to_string(o.owner.size()) + " bytes",
           "must be 1-64 printable ASCII characters without blanks (or empty)"},
      });
      !fields)
    return fields;
  // Upper bounds, so that no sum of durations on the nanosecond steady
  // clock can overflow (a max_ttl of 2^63 ns switched the quarantine off).
  constexpr milliseconds most{std::numeric_limits<std::int32_t>::max()};
  const std::pair<std::string_view, milliseconds> durations[] = {
      {"default_ttl_ms", o.default_ttl},       {"max_ttl_ms", o.max_ttl},
      {"min_validity_ms", o.min_validity},     {"node_timeout_ms", o.node_timeout},
      {"connect_timeout_ms", o.connect_timeout}, {"reconnect_max_ms", o.reconnect_max},
      {"retry_delay_ms", o.retry_delay},       {"retry_jitter_ms", o.retry_jitter},
      {"release_settle_ms", o.release_settle}, {"stall_timeout_ms", o.stall_timeout},
      {"wake_jitter_ms", o.wake_jitter},       {"wake_safety_net_ms", o.wake_safety_net},
      {"fair_grace_ms", o.fair_grace},
      {"data_check_interval_ms", o.data_check_interval}, {"extend_batch_window_ms", o.extend_batch_window}};
  for (const auto& [field, value] : durations) {
    if (value > most) return config_error(cat(field, ": ", ms(value), ": must be <= ", ms(most), " (about 24.8 days)"));
  }
  if (o.max_pending > static_cast<std::size_t>(most.count())) {
    return config_error(cat("max_pending: ", std::to_string(o.max_pending), ": must be <= ", ms(most)));
  }
  // The same drift the lock rounds subtract, so a lock taken with the default
  // TTL can still be valid after a full node timeout. Written as ttl - drift
  // because node_timeout + drift could overflow.
  const milliseconds drift = detail::drift_allowance(o.default_ttl, o.drift_factor);
  return first_broken({
      {o.default_ttl <= o.max_ttl, "default_ttl_ms", ms(o.default_ttl),
       cat("must be <= max_ttl_ms (", ms(o.max_ttl), ")")},
      {o.default_ttl - drift > o.node_timeout, "default_ttl_ms", ms(o.default_ttl),
       cat("must be larger than node_timeout_ms (", ms(o.node_timeout), ") + drift (", ms(drift), " ms)")},
      {o.reconnect_min <= o.reconnect_max, "reconnect_min_ms", ms(o.reconnect_min),
       cat("must be <= reconnect_max_ms (", ms(o.reconnect_max), ")")},
      {o.stall_timeout > o.node_timeout, "stall_timeout_ms", ms(o.stall_timeout),
       cat("must be larger than node_timeout_ms (", ms(o.node_timeout), ")")},
      // A lease's extension waits up to the window, out of its validity.
      {o.extend_batch_window <= std::min(o.default_ttl / 4, milliseconds{1000}), "extend_batch_window_ms",
       ms(o.extend_batch_window), cat("must be at most 1000 and at most a quarter of default_ttl_ms (",
                                      ms(o.default_ttl), ")")},
  });
}

}  // namespace

std::string mask_credentials(std::string_view text) {
  constexpr std::string_view space = " \t\r\n\v\f,";  // a list of URLs: URL by URL
  std::string masked;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto word = text.find_first_not_of(space, start);
    masked.append(text.substr(start, word - start));
    if (word == npos) break;
    const auto end = std::min(text.find_first_of(space, word), text.size());
    masked += mask_word(text.substr(word, end - word));
    start = end;
  }
  return masked;
}

std::string NodeAddress::display() const {
  if (kind == Kind::unix_socket) return "unix://" + path;
  const bool ipv6 = host.find(':') != std::string::npos;
  return cat(ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", std::to_string(port));
}

Result<NodeAddress> parse_node_url(std::string_view url) {
  const auto fail = [url](std::string_view reason) {
    return config_error(cat(quote(mask_credentials(url)), ": ", reason));
  };
  if (url.empty()) return fail("empty URL");
  const auto parts = split_url(url);
  if (!parts) return fail("missing \"://\" (expected redis://host or unix:///path)");
  NodeAddress node;
  if (auto problem = parse_url_parts(*parts, node)) return fail(*problem);
  return node;
}

Result<std::vector<NodeAddress>> parse_node_list(std::string_view urls) {
  if (trim(urls).empty()) return config_error("empty list (at least one URL is required)");
  std::vector<NodeAddress> nodes;
  std::size_t start = 0;
  for (std::size_t item = 1;; ++item) {
    const auto comma = urls.find(',', start);
    auto node = parse_node_url(trim(urls.substr(start, comma - start)));
    if (!node) return in_context(cat("item ", std::to_string(item)), std::move(node).error());
    nodes.push_back(std::move(*node));
    if (comma == npos) return nodes;
    start = comma + 1;
  }
}

Result<Config> parse_config_json(std::string_view json_text) {
  json document;
  try {
    document = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& failure) {
    return config_error(json_failure(failure));
  }
  return config_from_json(document);
}

Result<std::string> read_password_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return in_context(quote(path), std::move(text).error());
  std::string password = text->substr(0, text->find_first_of("\r\n"));
  if (password.empty()) return config_error(cat(quote(path), ": empty password"));
  return password;
}

void apply_default_credentials(std::vector<NodeAddress>& nodes, const std::string& user, const std::string& password) {
  for (NodeAddress& node : nodes) {
    if (!node.password.empty()) continue;
    node.user = user;
    node.password = password;
  }
}

Result<Config> load_config_file(const std::string& path) {
  const auto context = cat("config file ", quote(path));
  auto text = read_file(path);
  if (!text) return in_context(context, std::move(text).error());
  auto config = parse_config_json(*text);
  if (!config) return in_context(context, std::move(config).error());
  return config;
}

Result<Config> config_from_env() {
  constexpr std::string_view variable = "REDLOCK_NODES";
  const char* value = std::getenv(variable.data());
  if (value == nullptr || *value == '\0') return config_error(cat(variable, ": not set"));
  auto nodes = parse_node_list(value);
  if (!nodes) return in_context(variable, std::move(nodes).error());
  Config config;
  config.nodes = std::move(*nodes);
  if (auto valid = validate_config(config); !valid) return in_context(variable, valid.error());
  return config;
}

Result<void> validate_config(const Config& config) {
  if (auto nodes = validate_nodes(config.nodes); !nodes) return nodes;
  if (config.tls.cert_file.empty() != config.tls.key_file.empty()) {
    return config_error(config.tls.cert_file.empty() ? "tls_key_file: set without tls_cert_file"
                                                     : "tls_cert_file: set without tls_key_file");
  }
  return validate_options(config.options);
}

}  // namespace redlock
