// config_validate.cpp — the rules a Config must satisfy (validate_config):
// the nodes (at least one, no server twice, each kind's fields) and the
// options, field by field and in relation; each broken rule names the field
// and its value. Also the members a client of this version refuses
// (refuse_unsupported_members).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "config_text.hpp"
#include "quorum.hpp"
#include "redlock/config.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock {
namespace {

using namespace detail::config_text;
using namespace std::chrono_literals;

using Kind = NodeAddress::Kind;

std::string node_name(std::size_t index) { return cat("nodes[", std::to_string(index), "]"); }

std::string ms(milliseconds value) { return std::to_string(value.count()); }

bool lone(Kind kind) { return kind == Kind::tcp || kind == Kind::unix_socket; }

Problem endpoint_problem(const std::string& host, int port) {
  if (host.empty()) return "missing host";
  if (port < 1 || port > 65535) return "port out of range (1-65535)";
  return std::nullopt;
}

bool same_endpoint(const std::string& host_a, int port_a, const std::string& host_b, int port_b) {
  return port_a == port_b && iequals(host_a, host_b);
}

Problem seeds_problem(const std::vector<Endpoint>& seeds) {
  if (seeds.empty()) return "no seeds (at least one host:port)";
  if (seeds.size() > max_seeds)
    return cat(std::to_string(seeds.size()), " seeds (at most ", std::to_string(max_seeds), ")");
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (auto problem = endpoint_problem(seeds[i].host, seeds[i].port))
      return cat("seeds[", std::to_string(i), "]: ", *problem);
    for (std::size_t j = 0; j < i; ++j)
      if (same_endpoint(seeds[i].host, seeds[i].port, seeds[j].host, seeds[j].port))
        return cat("seeds[", std::to_string(i), "]: the same as seeds[", std::to_string(j), "] (",
                   endpoint_text(seeds[j].host, seeds[j].port), ")");
  }
  return std::nullopt;
}

// where_problem: where the node is — the fields of its own kind.
Problem where_problem(const NodeAddress& node) {
  switch (node.kind) {
    case Kind::tcp:
      return endpoint_problem(node.host, node.port);
    case Kind::unix_socket:
      if (node.path.empty() || node.path.front() != '/') return "socket path is not absolute";
      return std::nullopt;
    case Kind::cluster:
      if (auto problem = seeds_problem(node.seeds)) return problem;
      if (node.db != 0) return cat("db ", std::to_string(node.db), " on a cluster (a cluster has only db 0)");
      return std::nullopt;
    case Kind::sentinel:
      if (auto problem = seeds_problem(node.seeds)) return problem;
      return master_name_problem(node.master_name);
  }
  return std::nullopt;
}

// misplaced_problem: a field of another kind.
Problem misplaced_problem(const NodeAddress& node) {
  if (lone(node.kind) && !node.seeds.empty()) return "seeds: for redis+cluster:// and redis+sentinel:// members only";
  if (node.kind != Kind::sentinel && !node.master_name.empty()) return cat("master_name: ", sentinel_kind_only);
  if (node.kind != Kind::sentinel && (!node.sentinel_user.empty() || !node.sentinel_password.empty()))
    return cat("sentinel_user, sentinel_password: ", sentinel_kind_only);
  if (!lone(node.kind) && node.replicated) return cat("replicated: ", lone_kinds_only);
  return std::nullopt;
}

Problem wait_problem(const NodeAddress& node) {
  const int replicas = node.wait_replicas;
  if (replicas != 0 && replicas != NodeAddress::all_replicas && (replicas < 1 || replicas > max_wait_replicas))
    return cat("wait_replicas ", std::to_string(replicas), ": must be 1-", std::to_string(max_wait_replicas), ", ",
               std::to_string(NodeAddress::all_replicas), " (all) or 0 (off)");
  if (node.wait_timeout < 0ms || node.wait_timeout > max_wait_timeout)
    return cat("wait_timeout ", ms(node.wait_timeout), " ms: must be 1-", ms(max_wait_timeout),
               " (or 0: half of node_timeout_ms)");
  if (node.wait_timeout != 0ms && replicas == 0) return "wait_timeout without wait_replicas";
  if (lone(node.kind) && replicas != 0 && !node.replicated)
    return "wait_replicas without replicated (a member with replicas may fail over)";
  return std::nullopt;
}

Problem node_problem(const NodeAddress& node) {
  if (auto problem = where_problem(node)) return problem;
  if (auto problem = misplaced_problem(node)) return problem;
  if (node.db < 0) return cat("db ", std::to_string(node.db), ": must be >= 0");
  if (!node.user.empty() && node.password.empty()) return "user without password";
  if (!node.sentinel_user.empty() && node.sentinel_password.empty()) return "sentinel_user without sentinel_password";
  return wait_problem(node);
}

// same_node: one server, whatever the db number (two dbs of one server are
// one vote, not two). Other spellings of one server are caught by run id at
// the handshake; so are the servers behind cluster and sentinel members,
// whose seeds only say where to look (and may be shared).
bool same_node(const NodeAddress& a, const NodeAddress& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::tcp: return same_endpoint(a.host, a.port, b.host, b.port);
    case Kind::unix_socket: return a.path == b.path;
    case Kind::cluster:
    case Kind::sentinel: return false;
  }
  return false;
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

// validate_waits: a WAIT must end before the command's node deadline, so
// a slow replica costs that member's vote, not the round.
Result<void> validate_waits(const std::vector<NodeAddress>& nodes, milliseconds node_timeout) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].wait_replicas == 0) continue;
    const milliseconds wait = detail::wait_timeout_in_force(nodes[i], node_timeout);
    if (wait < 1ms || wait >= node_timeout)
      return config_error(cat(node_name(i), ": ", quote(nodes[i].display()), ": wait_timeout ", ms(wait), " ms",
                              nodes[i].wait_timeout == 0ms ? " (unset: half of node_timeout_ms)" : "",
                              ": must be at least 1 and below node_timeout_ms (", ms(node_timeout), ")"));
  }
  return {};
}

}  // namespace

Result<void> validate_config(const Config& config) {
  if (auto nodes = validate_nodes(config.nodes); !nodes) return nodes;
  if (config.tls.cert_file.empty() != config.tls.key_file.empty()) {
    return config_error(config.tls.cert_file.empty() ? "tls_key_file: set without tls_cert_file"
                                                     : "tls_cert_file: set without tls_key_file");
  }
  if (auto options = validate_options(config.options); !options) return options;
  return validate_waits(config.nodes, config.options.node_timeout);
}

namespace detail {

Result<void> refuse_unsupported_members(const Config& config) {
  for (std::size_t i = 0; i < config.nodes.size(); ++i) {
    const NodeAddress& node = config.nodes[i];
    if (node.kind == Kind::cluster && node.wait_replicas != 0)
      return config_error(cat(node_name(i), ": ", quote(node.display()),
                              ": wait_replicas on a cluster member is not supported by this version"));
  }
  return {};
}

}  // namespace detail

}  // namespace redlock
