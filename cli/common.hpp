// common.hpp — what every `redlock` command shares: the exit statuses, the
// usage error, argument checks, where the masters come from, and the two
// output forms (one JSON object, or a human table).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "redlock/redlock.hpp"

namespace redlock::cli {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr int kExitOk = 0;
constexpr int kExitNotDone = 1;
constexpr int kExitUsage = 2;

// UsageError — a bad argument, option, environment value or config file.
// Caught in main(): message on stderr, exit status 2, nothing on stdout.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Global options, as given on the command line.
struct Globals {
  std::string nodes;        // --nodes
  std::string config_file;  // --config
  bool no_quarantine = false;
  // TLS for rediss:// nodes: flags win over REDLOCK_TLS_CA / _CERT / _KEY,
  // which win over a --config file's tls_* keys.
  std::string tls_ca, tls_ca_dir, tls_cert, tls_key, tls_server_name;
  bool tls_insecure = false;
  // Credentials for nodes whose URLs carry none: --user / --password-file,
  // else REDLOCK_USER / REDLOCK_PASSWORD_FILE / REDLOCK_PASSWORD.
  std::string user, password_file;
  bool json = false;   // --json
  bool human = false;  // --human
};

// quote renders a user-given value in an error message.
std::string quote(std::string_view s);

// parse_ms reads a whole number of milliseconds in [min, INT_MAX].
milliseconds parse_ms(std::string_view name, const std::string& text, long long min);
// parse_int reads a whole number in [min, max].
int parse_int(std::string_view name, const std::string& text, int min, int max);

// check_token applies the library's token rule: 1-128 characters of [0-9A-Za-z_-].
void check_token(std::string_view name, const std::string& token);
void check_resource(const std::string& resource);

// load_config picks the node source: --nodes, else --config, else
// REDLOCK_NODES; errors name the source.
Config load_config(const Globals& g);
std::unique_ptr<Client> make_client(const Globals& g);
// check_ttl: a TTL above the config's max_ttl is refused before any node is asked.
void check_ttl(const Client& client, milliseconds ttl);

// throw_if_usage: argument and config errors found by the library are usage errors.
void throw_if_usage(const Error& e);

// --- output -------------------------------------------------------------------

// use_json: --json, --human, else the command's default.
bool use_json(const Globals& g, bool default_json);

json nodes_json(const std::vector<NodeOutcome>& nodes);
void add_error(json& out, Errc code, const std::string& text);

// Table — left-aligned columns for the human form; the last column may be
// ragged (free text).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Human renderings of amounts: "0.27 ms", "9,812 ms", "2h 03m 10s", and a
// token shortened to its first 8 characters and "…".
std::string fmt_us(std::int64_t us);
std::string fmt_ms(std::int64_t ms);
std::string fmt_duration_s(std::int64_t seconds);
std::string short_token(const std::string& token);
std::string human_node_outcomes(const std::vector<NodeOutcome>& nodes);

// Wall-clock renderings of a steady-clock instant: unix microseconds, and
// ISO 8601 UTC ("2026-11-21T11:02:03.456Z").
std::int64_t unix_us(std::chrono::steady_clock::time_point t);
std::int64_t unix_us_now();
std::string iso_utc(std::int64_t unix_us);

}  // namespace redlock::cli
