// config_url.cpp — node addresses as text: redis://, rediss://, unix://,
// redis+cluster:// and redis+sentinel:// URLs with their query,
// comma-separated lists of them (REDLOCK_NODES, --nodes), a node's display
// form, and mask_credentials (no password in any message).
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
using Kind = NodeAddress::Kind;

constexpr std::string_view blanks = " \t\r\n\v\f";

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(blanks);
  if (first == npos) return {};
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
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

// ---- schemes and query keys ---------------------------------------------------

struct Scheme {
  std::string_view name;
  Kind kind;
  bool tls;
};

constexpr Scheme schemes[] = {
    {"redis", Kind::tcp, false},         {"rediss", Kind::tcp, true},
    {"unix", Kind::unix_socket, false},  {"redis+cluster", Kind::cluster, false},
    {"rediss+cluster", Kind::cluster, true}, {"redis+sentinel", Kind::sentinel, false},
    {"rediss+sentinel", Kind::sentinel, true},
};

const Scheme* find_scheme(std::string_view name) {
  for (const Scheme& scheme : schemes)
    if (iequals(scheme.name, name)) return &scheme;
  return nullptr;
}

bool is_ipv6(std::string_view host) {
  in6_addr address{};
  return inet_pton(AF_INET6, std::string(host).c_str(), &address) == 1;
}

bool is_unix_scheme(std::string_view scheme) { return iequals(scheme, "unix"); }

bool has_seeds(Kind kind) { return kind == Kind::cluster || kind == Kind::sentinel; }

// A scheme is a letter, then letters, digits, '+', '-' or '.' (RFC 3986):
// in "user:pw@redis://h" the text before "://" is none.
constexpr std::string_view scheme_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.";
bool is_scheme(std::string_view text) {
  return !text.empty() && scheme_chars.substr(0, 52).find(text.front()) != npos &&
         text.find_first_not_of(scheme_chars) == npos;
}

enum class QueryKey { db, wait_replicas, wait_timeout, replicated, sentinel_user, sentinel_password };

struct QueryKeyInfo {
  std::string_view name;
  QueryKey key;
};

constexpr QueryKeyInfo query_keys[] = {
    {"db", QueryKey::db},
    {"wait_replicas", QueryKey::wait_replicas},
    {"wait_timeout", QueryKey::wait_timeout},
    {"replicated", QueryKey::replicated},
    {"sentinel_user", QueryKey::sentinel_user},
    {"sentinel_password", QueryKey::sentinel_password},
};

const QueryKeyInfo* find_query_key(std::string_view name) {
  for (const auto& info : query_keys)
    if (info.name == name) return &info;
  return nullptr;
}

// known_query_start: the first '?' followed by a known key and '=', or
// npos. A query is recognised by its keys, so a password before it may hold
// '?' and a query value may hold '@' without ending the userinfo early.
std::size_t known_query_start(std::string_view text) {
  for (auto mark = text.find('?'); mark != npos; mark = text.find('?', mark + 1)) {
    const auto rest = text.substr(mark + 1);
    for (const auto& info : query_keys)
      if (rest.starts_with(info.name) && rest.substr(info.name.size()).starts_with('=')) return mark;
  }
  return npos;
}

// ---- URLs ------------------------------------------------------------------

struct UrlParts {
  std::string_view scheme;
  std::optional<std::string_view> userinfo;
  std::string_view location;  // tcp: host[:port][/db]; unix: /path; cluster: seeds[/db]; sentinel: seeds/name[/db]
  std::optional<std::string_view> query;  // after the '?'
};

// Where the userinfo ends. TCP and the other kinds: at the last '@' before
// the query (a host, a port, a db and a master name hold none), so '/',
// '@' and ':' in a password need no escape. Unix: the path is absolute, so
// the userinfo ends at the first "@/" and a path may hold anything; a
// location that starts with '/' is a path without credentials.
std::size_t userinfo_end(std::string_view scheme, std::string_view rest) {
  const auto before_query = rest.substr(0, known_query_start(rest));
  if (!is_unix_scheme(scheme)) return before_query.rfind('@');
  if (rest.starts_with('/')) return npos;
  const auto at_path = rest.find("@/");
  return at_path != npos ? at_path : before_query.rfind('@');
}

std::optional<UrlParts> split_url(std::string_view url) {
  const auto sep = url.find("://");
  if (sep == npos) return std::nullopt;
  UrlParts parts{url.substr(0, sep), std::nullopt, {}, std::nullopt};
  auto rest = url.substr(sep + 3);
  if (const auto at = userinfo_end(parts.scheme, rest); at != npos) {
    parts.userinfo = rest.substr(0, at);
    rest.remove_prefix(at + 1);
  }
  const auto mark = rest.find('?');
  parts.location = rest.substr(0, mark);
  if (mark != npos) parts.query = rest.substr(mark + 1);
  return parts;
}

// ---- masking -----------------------------------------------------------------

// secret_key: a key=value whose value is a secret: the key ends in
// "password", "passwd", "pass", "pwd" or "secret", in any case, also
// percent-encoded.
bool secret_key(std::string_view key) {
  std::string name = percent_decode(key).value_or(std::string(key));
  std::transform(name.begin(), name.end(), name.begin(), ascii_lower);
  for (const std::string_view end : {"password", "passwd", "pass", "pwd", "secret"})
    if (std::string_view(name).ends_with(end)) return true;
  return false;
}

// mask_secret_values: the values of secret keys, each up to the next blank
// (commas and '&' included: a value's end is not known where it may hold
// them unescaped).
std::string mask_secret_values(std::string_view text) {
  constexpr std::string_view key_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_%.+-";
  std::string masked;
  std::size_t done = 0;
  for (auto eq = text.find('='); eq != npos; eq = text.find('=', eq + 1)) {
    const auto before = text.substr(0, eq);
    const auto key_start = before.find_last_not_of(key_chars) + 1;  // npos + 1 == 0
    if (!secret_key(before.substr(key_start))) continue;
    const auto end = std::min(text.find_first_of(blanks, eq), text.size());
    const auto value = text.substr(eq + 1, end - eq - 1);
    if (value.empty() || value.substr(0, value.find_last_not_of("\"'`)]},;:.") + 1) == "***") continue;
    masked.append(text.substr(done, eq + 1 - done)).append("***");
    done = end;
    eq = end - 1;
  }
  return masked.append(text.substr(done));
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
  auto authority = word.substr(start);
  authority = authority.substr(0, std::min(authority.find('/'), known_query_start(authority)));
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

// ---- the parts of a URL --------------------------------------------------------

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

// parse_path_db: what follows a '/' that may end the URL: "redis://host/"
// is common shorthand for db 0.
Problem parse_path_db(std::string_view text, int& db) { return text.empty() ? Problem{} : parse_db(text, db); }

// parse_host_port: host[:port] into `endpoint`, whose port is the default.
Problem parse_host_port(std::string_view text, Endpoint& endpoint) {
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
  endpoint.host = host;
  return port.empty() ? Problem{} : parse_port(port.substr(1), endpoint.port);
}

// parse_seeds: host[:port][,host[:port]…], each with `default_port`.
Problem parse_seeds(std::string_view text, int default_port, std::vector<Endpoint>& seeds) {
  std::size_t start = 0;
  for (std::size_t index = 1;; ++index) {
    const auto comma = text.find(',', start);
    Endpoint seed{{}, default_port};
    if (auto problem = parse_host_port(trim(text.substr(start, comma - start)), seed))
      return cat("seed ", std::to_string(index), ": ", *problem);
    seeds.push_back(std::move(seed));
    if (comma == npos) return std::nullopt;
    start = comma + 1;
  }
}

Problem parse_tcp_location(std::string_view location, NodeAddress& node) {
  const auto slash = location.find('/');
  Endpoint endpoint{{}, node.port};
  if (auto problem = parse_host_port(location.substr(0, slash), endpoint)) return problem;
  node.host = std::move(endpoint.host);
  node.port = endpoint.port;
  return slash == npos ? Problem{} : parse_path_db(location.substr(slash + 1), node.db);
}

Problem parse_unix_location(std::string_view path, NodeAddress& node) {
  if (path.empty()) return "empty socket path";
  // Not quoted: without "@/" the path may begin with credentials.
  if (path.front() != '/') return "socket path is not absolute";
  node.path = path;
  return std::nullopt;
}

Problem parse_cluster_location(std::string_view location, NodeAddress& node) {
  const auto slash = location.find('/');
  if (auto problem = parse_seeds(location.substr(0, slash), 6379, node.seeds)) return problem;
  if (slash == npos) return std::nullopt;
  if (auto problem = parse_path_db(location.substr(slash + 1), node.db)) return problem;
  if (node.db != 0) return cat("db ", std::to_string(node.db), " on a cluster (a cluster has only db 0)");
  return std::nullopt;
}

// Sentinels listen on 26379 by default, as redis-sentinel does.
Problem parse_sentinel_location(std::string_view location, NodeAddress& node) {
  const auto slash = location.find('/');
  if (auto problem = parse_seeds(location.substr(0, slash), 26379, node.seeds)) return problem;
  if (slash == npos) return "missing \"/name\" (the master name: redis+sentinel://host:port[,host:port...]/name)";
  const auto path = location.substr(slash + 1);
  const auto next = path.find('/');
  const auto name = percent_decode(path.substr(0, next));
  if (!name) return "bad percent-escape in the master name";
  if (auto problem = master_name_problem(*name)) return problem;
  node.master_name = *name;
  return next == npos ? Problem{} : parse_path_db(path.substr(next + 1), node.db);
}

// ---- the query ------------------------------------------------------------------

// QueryParse — one URL's query applied to its node: each key once, and
// nothing after a sentinel_password shown (a '&' in it, unescaped, would
// make its tail a key of its own).
class QueryParse {
 public:
  explicit QueryParse(NodeAddress& node) : node_(node) {}

  Problem run(std::string_view query) {
    if (query.empty()) return "empty query after \"?\"";
    std::size_t start = 0;
    while (true) {
      const auto amp = query.find('&', start);
      if (auto problem = item(query.substr(start, amp - start))) return problem;
      if (amp == npos) return finish();
      start = amp + 1;
    }
  }

 private:
  Problem item(std::string_view text) {
    const auto eq = text.find('=');
    const auto key = text.substr(0, eq);
    const QueryKeyInfo* info = find_query_key(key);
    if (info == nullptr) {
      if (after_secret_) return "a query parameter after sentinel_password that is no key (write '&' in a password as %26)";
      if (text.empty()) return "empty query parameter (\"&&\", or '&' at an end)";
      std::string known;
      for (const auto& each : query_keys) known += cat(known.empty() ? "" : ", ", each.name);
      return cat("unknown query key ", quote(key), " (known: ", known, ")");
    }
    const auto bit = 1U << static_cast<unsigned>(info->key);
    if ((seen_ & bit) != 0) return cat("repeated query key ", quote(key));
    seen_ |= bit;
    if (eq == npos) return cat("query key ", quote(key), " without \"=value\"");
    if (auto where = misplaced(info->key)) return cat("query key ", quote(key), ": ", *where);
    return value(info->key, text.substr(eq + 1));
  }

  // misplaced: where the key belongs when this node's kind is not there.
  std::optional<std::string> misplaced(QueryKey key) const {
    const bool lone = !has_seeds(node_.kind);
    switch (key) {
      case QueryKey::db:
        if (node_.kind != Kind::unix_socket) return "for unix:// members only (elsewhere the db is the path: .../db)";
        break;
      case QueryKey::replicated:
        if (!lone) return std::string(lone_kinds_only);
        break;
      case QueryKey::sentinel_user:
      case QueryKey::sentinel_password:
        if (node_.kind != Kind::sentinel) return std::string(sentinel_kind_only);
        break;
      case QueryKey::wait_replicas:
      case QueryKey::wait_timeout:
        break;
    }
    return std::nullopt;
  }

  Problem value(QueryKey key, std::string_view text) {
    switch (key) {
      case QueryKey::db:
        return parse_db(text, node_.db);
      case QueryKey::wait_replicas: {
        const auto count = decimal(text);
        if (iequals(text, "all")) {
          node_.wait_replicas = NodeAddress::all_replicas;
        } else if (count && *count >= 1 && *count <= static_cast<std::uint64_t>(max_wait_replicas)) {
          node_.wait_replicas = static_cast<int>(*count);
        } else {
          return cat("bad wait_replicas ", quote(text), " (expected 1-", std::to_string(max_wait_replicas), " or all)");
        }
        return std::nullopt;
      }
      case QueryKey::wait_timeout: {
        const auto count = decimal(text);
        if (!count || *count < 1 || *count > static_cast<std::uint64_t>(max_wait_timeout.count()))
          return cat("bad wait_timeout ", quote(text), " (expected milliseconds, 1-",
                     std::to_string(max_wait_timeout.count()), ")");
        node_.wait_timeout = std::chrono::milliseconds{static_cast<std::int64_t>(*count)};
        return std::nullopt;
      }
      case QueryKey::replicated:
        if (text != "1" && text != "0") return cat("bad replicated ", quote(text), " (expected 1 or 0)");
        replicated_ = text == "1";
        return std::nullopt;
      case QueryKey::sentinel_user:
        return secret_text("sentinel_user", text, node_.sentinel_user);
      case QueryKey::sentinel_password:
        after_secret_ = true;
        return secret_text("sentinel_password", text, node_.sentinel_password);
    }
    return std::nullopt;
  }

  // secret_text: a percent-decoded value that is never shown.
  static Problem secret_text(std::string_view key, std::string_view text, std::string& out) {
    auto decoded = percent_decode(text);
    if (!decoded) return cat("bad percent-escape in ", key);
    if (decoded->empty()) return cat("empty ", key);
    out = std::move(*decoded);
    return std::nullopt;
  }

  Problem finish() {
    if (node_.wait_timeout.count() != 0 && node_.wait_replicas == 0) return "wait_timeout without wait_replicas";
    if (!node_.sentinel_user.empty() && node_.sentinel_password.empty())
      return "sentinel_user without sentinel_password";
    if (node_.wait_replicas != 0 && !has_seeds(node_.kind)) {
      // A member that waits for its replicas has them: it may fail over.
      if (replicated_ == false) return "wait_replicas with replicated=0 (a member with replicas may fail over)";
      replicated_ = true;
    }
    node_.replicated = replicated_.value_or(false);
    return std::nullopt;
  }

  NodeAddress& node_;
  unsigned seen_ = 0;
  bool after_secret_ = false;
  std::optional<bool> replicated_;
};

Problem parse_url_parts(const UrlParts& parts, NodeAddress& node) {
  const Scheme* scheme = find_scheme(parts.scheme);
  if (scheme == nullptr)  // no scheme at all ("user:pw@redis://h") is not quoted
    return cat("unknown scheme ", is_scheme(parts.scheme) ? quote(parts.scheme) + " " : "",
               "(expected redis, rediss, unix, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel)");
  node.kind = scheme->kind;
  node.tls = scheme->tls;
  if (parts.userinfo)
    if (auto problem = parse_userinfo(*parts.userinfo, node)) return problem;
  Problem problem;
  switch (node.kind) {
    case Kind::tcp: problem = parse_tcp_location(parts.location, node); break;
    case Kind::unix_socket: problem = parse_unix_location(parts.location, node); break;
    case Kind::cluster: problem = parse_cluster_location(parts.location, node); break;
    case Kind::sentinel: problem = parse_sentinel_location(parts.location, node); break;
  }
  if (problem || !parts.query) return problem;
  return QueryParse(node).run(*parts.query);
}

// ---- lists ---------------------------------------------------------------------

// seeds_open: whether an item without "://" after `url` is one more seed of
// it: a cluster or sentinel URL that has not reached its '/' or '?'.
bool seeds_open(std::string_view url) {
  const auto parts = split_url(url);
  const Scheme* scheme = parts ? find_scheme(parts->scheme) : nullptr;
  return scheme != nullptr && has_seeds(scheme->kind) && !parts->query && parts->location.find('/') == npos;
}

// stray_item: the error for an item without "://" that no seed list takes.
Error stray_item(std::string_view context, std::string_view text, std::string_view previous) {
  // A ',' in a query password would leave the password's tail here.
  if (mask_secret_values(previous) != previous)
    return config_error(cat(context, ": missing \"://\" (not shown: it follows a URL with a password in its query; "
                                     "write ',' in a password as %2C)"));
  const auto parts = split_url(previous);
  const Scheme* scheme = parts ? find_scheme(parts->scheme) : nullptr;
  if (scheme != nullptr && has_seeds(scheme->kind))
    return config_error(cat(context, ": ", quote(mask_credentials(text)),
                            ": missing \"://\" (an item without one continues the seeds of a redis+cluster:// or "
                            "redis+sentinel:// URL only before its '/' or '?')"));
  return in_context(context, parse_node_url(text).error());
}

std::string items_name(std::size_t first, std::size_t last) {
  return first == last ? cat("item ", std::to_string(first))
                        : cat("items ", std::to_string(first), "-", std::to_string(last));
}

}  // namespace

std::string mask_credentials(std::string_view text) {
  constexpr std::string_view space = " \t\r\n\v\f,";  // a list of URLs: URL by URL
  const std::string unmasked = mask_secret_values(text);
  std::string masked;
  std::size_t start = 0;
  while (start < unmasked.size()) {
    const auto word = unmasked.find_first_not_of(space, start);
    masked.append(unmasked, start, word - start);
    if (word == npos) break;
    const auto end = std::min(unmasked.find_first_of(space, word), unmasked.size());
    masked += mask_word(std::string_view(unmasked).substr(word, end - word));
    start = end;
  }
  return masked;
}

std::string NodeAddress::display() const {
  const auto seed_list = [this] {
    std::string list;
    for (const Endpoint& seed : seeds) list += cat(list.empty() ? "" : ",", endpoint_text(seed.host, seed.port));
    return list;
  };
  switch (kind) {
    case Kind::tcp: return endpoint_text(host, port);
    case Kind::unix_socket: return "unix://" + path;
    case Kind::cluster: return cat(tls ? "rediss" : "redis", "+cluster://", seed_list());
    case Kind::sentinel: break;
  }
  // The name escaped as in a URL, so that no byte of it can end a word of
  // mask_credentials or reach a terminal.
  constexpr std::string_view plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~";
  std::string name;
  for (const char c : master_name) {
    if (plain.find(c) != npos) {
      name += c;
    } else {
      constexpr char hex[] = "0123456789ABCDEF";
      const auto byte = static_cast<unsigned char>(c);
      name += {'%', hex[byte >> 4], hex[byte & 15]};
    }
  }
  return cat(tls ? "rediss" : "redis", "+sentinel://", seed_list(), "/", name);
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
  std::string url;  // a URL and the seed items after it, joined again
  std::size_t first = 0, last = 0;
  const auto add = [&]() -> Result<void> {
    auto node = parse_node_url(url);
    if (!node) return in_context(items_name(first, last), std::move(node).error());
    nodes.push_back(std::move(*node));
    return {};
  };
  std::size_t start = 0;
  for (std::size_t item = 1;; ++item) {
    const auto comma = urls.find(',', start);
    const auto text = trim(urls.substr(start, comma - start));
    const bool bare = !text.empty() && text.find("://") == npos;
    if (bare && first != 0 && seeds_open(url)) {
      url += cat(",", text);
      last = item;
    } else {
      if (first != 0)
        if (auto added = add(); !added) return added.error();
      if (bare && first != 0) return stray_item(items_name(item, item), text, url);
      url = text;
      first = last = item;
    }
    if (comma == npos) break;
    start = comma + 1;
  }
  if (auto added = add(); !added) return added.error();
  return nodes;
}

}  // namespace redlock
