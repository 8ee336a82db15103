// config_url.cpp — node addresses as text: redis://, rediss:// and unix://
// URLs, comma-separated lists of them (REDLOCK_NODES, --nodes), a node's
// display form, and mask_credentials (no password in any message).
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "config_text.hpp"
#include "redlock/config.hpp"

namespace redlock {
namespace {

using namespace detail::config_text;

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

}  // namespace redlock
