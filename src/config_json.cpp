// config_json.cpp — JSON config documents: the one table of keys, which
// parses each key into a Config and generates docs/config.md's table of
// keys (config_keys_markdown), and parse_config_json.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "config_keys.hpp"
#include "config_text.hpp"
#include "redlock/config.hpp"

namespace redlock {
namespace {

using nlohmann::json;
using namespace detail::config_text;

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
     "The members, one URL each: `redis://`, `rediss://`, `unix://`, `redis+cluster://` or `redis+sentinel://` (config.hpp, NodeAddress; below: Node URLs). At least one; no server twice."},
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
     "How long a master's data-loss marker may go unread (by the marker script or an acquire's vote check) before it is checked (Options::data_check_interval). > 0."},
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

}  // namespace

Result<Config> parse_config_json(std::string_view json_text) {
  json document;
  try {
    document = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& failure) {
    return config_error(json_failure(failure));
  }
  return config_from_json(document);
}

}  // namespace redlock
