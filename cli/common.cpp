// common.cpp — see common.hpp.
#include "common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <iostream>


namespace redlock::cli {

// Only the empty name is caught here (before connecting); the library's own
// rules (length) come back as invalid_argument, which throw_if_usage turns
// into a usage error.
void check_resource(const std::string& resource) {
  if (resource.empty()) throw UsageError("RESOURCE: must not be empty");
}

nlohmann::json owner_json(const std::optional<Owner>& owner) {
  if (!owner) return nullptr;
  return {{"host", owner->host}, {"pid", owner->pid}, {"label", owner->label}};
}

std::string owner_text(const Owner& owner) {
  return escaped(owner.host + ":" + std::to_string(owner.pid) + (owner.label.empty() ? "" : ":" + owner.label));
}

namespace {

// apply_tls: --tls-* flags, else REDLOCK_TLS_CA / _CERT / _KEY, else what
// the config file said.
// flag_or_env: the flag's value when given, else the environment
// variable's (none when `variable` is null), else empty.
std::string flag_or_env(const std::string& flag, const char* variable) {
  if (!flag.empty()) return flag;
  const char* env = variable != nullptr ? std::getenv(variable) : nullptr;
  return env != nullptr ? env : "";
}

void apply_tls(const Globals& g, TlsSettings& tls) {
  const auto pick = [](const std::string& flag, const char* variable, std::string& field) {
    if (std::string value = flag_or_env(flag, variable); !value.empty()) field = std::move(value);
  };
  pick(g.tls_ca, "REDLOCK_TLS_CA", tls.ca_file);
  pick(g.tls_ca_dir, nullptr, tls.ca_dir);
  pick(g.tls_cert, "REDLOCK_TLS_CERT", tls.cert_file);
  pick(g.tls_key, "REDLOCK_TLS_KEY", tls.key_file);
  pick(g.tls_server_name, nullptr, tls.server_name);
  if (g.tls_insecure) tls.verify = false;
}

// apply_credentials: a password from --password-file, REDLOCK_PASSWORD_FILE
// or REDLOCK_PASSWORD (in that order) for the nodes whose URLs carry none.
void apply_credentials(const Globals& g, Config& config) {
  const std::string user = flag_or_env(g.user, "REDLOCK_USER");
  const std::string file = flag_or_env(g.password_file, "REDLOCK_PASSWORD_FILE");
  std::string password;
  if (!file.empty()) {
    auto read = read_password_file(file);
    if (!read) {
      throw UsageError((g.password_file.empty() ? "REDLOCK_PASSWORD_FILE: " : "--password-file: ") +
                       read.error().message);
    }
    password = std::move(*read);
  } else {
    password = flag_or_env("", "REDLOCK_PASSWORD");
  }
  if (password.empty()) {
    if (!g.user.empty()) throw UsageError("--user: needs a password (--password-file, REDLOCK_PASSWORD_FILE or REDLOCK_PASSWORD)");
    return;
  }
  apply_default_credentials(config.nodes, user, password);
}

}  // namespace

Config load_config(const Globals& g) {
  // The file: --config, else REDLOCK_CONFIG. The nodes: --nodes, else the
  // --config file's, else REDLOCK_NODES, else the REDLOCK_CONFIG file's — a
  // flag wins over a variable, and a node list over a file's nodes.
  const char* env_nodes = std::getenv("REDLOCK_NODES");
  const char* env_config = std::getenv("REDLOCK_CONFIG");
  const bool have_env_nodes = env_nodes != nullptr && *env_nodes != '\0';
  const bool file_from_flag = !g.config_file.empty();
  const std::string file = file_from_flag ? g.config_file : env_config != nullptr ? env_config : "";
  const std::string file_source = file_from_flag ? "--config" : "REDLOCK_CONFIG";
  Config config;
  std::string source;
  if (!file.empty()) {
    source = file_source;
    auto loaded = load_config_file(file);
    if (!loaded) throw UsageError(file_source + ": " + loaded.error().message);
    config = std::move(*loaded);
  } else if (env_config != nullptr && !file_from_flag) {
    throw UsageError("REDLOCK_CONFIG: is set but empty (unset it, or name a config file)");
  }
  if (!g.nodes.empty()) {
    source = "--nodes";
    auto nodes = parse_node_list(g.nodes);
    if (!nodes) throw UsageError("--nodes: " + nodes.error().message);
    config.nodes = std::move(*nodes);
  } else if (!file_from_flag && have_env_nodes) {
    if (file.empty()) {
      source = "REDLOCK_NODES";
      auto from_env = config_from_env();  // the default options; its messages name REDLOCK_NODES
      if (!from_env) throw UsageError(from_env.error().message);
      config = std::move(*from_env);
    } else {
      source = "REDLOCK_NODES (with REDLOCK_CONFIG's options)";
      auto nodes = parse_node_list(env_nodes);
      if (!nodes) throw UsageError("REDLOCK_NODES: " + nodes.error().message);
      config.nodes = std::move(*nodes);
    }
  } else if (file.empty()) {
    throw UsageError("no nodes: give --nodes URL,URL,..., --config FILE, or set REDLOCK_NODES or REDLOCK_CONFIG");
  }
  if (g.no_quarantine) config.options.quarantine = false;
  if (!g.owner.empty()) config.options.owner = g.owner;
  apply_tls(g, config.tls);
  apply_credentials(g, config);
  config.options.node_outcomes = true;  // the output lists every node
  // A one-shot command can afford to wait for every master's answer: let
  // release report every node (a config file may still set its own value).
  if (config.options.release_settle.count() == 0) config.options.release_settle = config.options.node_timeout;
  if (auto valid = validate_config(config); !valid) throw UsageError(source + ": " + valid.error().message);
  return config;
}

std::unique_ptr<Client> make_client(const Globals& g) {
  auto client = Client::create(load_config(g));
  if (!client) throw UsageError(client.error().message);
  return std::move(*client);
}

void check_ttl(const Client& client, milliseconds ttl) {
  const milliseconds max = client.config().options.max_ttl;
  if (ttl > max)
    throw UsageError("--ttl: " + format_duration(ttl) + " (" + std::to_string(ttl.count()) + " ms) exceeds max_ttl (" +
                     format_duration(max) + "; max_ttl_ms in a --config file raises it)");
}

void throw_if_usage(const Error& e) {
  if (e.code == Errc::invalid_argument || e.code == Errc::config) throw UsageError(e.message);
}

namespace {

// cannot_count: a master whose answer could not count toward a majority.
bool cannot_count(Outcome o) { return o == Outcome::error || o == Outcome::timeout || o == Outcome::quarantined; }

}  // namespace

bool unavailable(Errc code, const std::vector<NodeOutcome>& nodes) {
  if (code != Errc::held && code != Errc::not_held && code != Errc::too_late) return true;
  // "pending" counts as able: the round was decided without its answer.
  std::size_t out = 0;
  for (const auto& n : nodes) out += cannot_count(n.outcome) ? 1 : 0;
  return !nodes.empty() && nodes.size() - out < quorum_of(nodes.size());
}

int failure_status(Errc code, const std::vector<NodeOutcome>& nodes) {
  return unavailable(code, nodes) ? kExitUnavailable : kExitNotDone;
}

std::string quarantine_note(Client& client, const std::vector<NodeOutcome>& nodes) {
  std::size_t quarantined = 0, usable = 0;
  for (const auto& n : nodes) {
    quarantined += n.outcome == Outcome::quarantined ? 1 : 0;
    usable += cannot_count(n.outcome) ? 0 : 1;
  }
  const std::size_t quorum = quorum_of(nodes.size());
  if (quarantined == 0 || usable >= quorum || usable + quarantined < quorum) return {};
  auto report = client.nodes();
  if (!report) return {};
  // The time until enough of them count: the (quorum - usable)-th shortest
  // quarantine among the reachable quarantined masters that will ever count.
  // Counted from the masters' answers now: the round may have been decided
  // before every quarantined master's answer came in.
  std::vector<milliseconds> left;
  for (const NodeHealth& h : report->nodes)
    if (h.reachable && h.quarantined && h.excluded.empty()) left.push_back(h.quarantine_left);
  quarantined = std::max(quarantined, left.size());
  std::sort(left.begin(), left.end());
  const std::size_t need = quorum - std::min(quorum, report->usable());
  std::string when;
  if (need > 0 && need <= left.size()) {
    const auto s = std::chrono::ceil<std::chrono::seconds>(left[need - 1]).count();
    when = " for another " + std::to_string(s) + " s";
  }
  return std::to_string(quarantined) + " of " + std::to_string(report->nodes.size()) + " masters " +
         (quarantined == 1 ? "is" : "are") + " in restart quarantine" + when +
         " (see redlock nodes)";
}

std::string stuck_note(Client& client, Errc code, const std::vector<NodeOutcome>& nodes) {
  if (!unavailable(code, nodes)) return {};
  if (std::string note = quarantine_note(client, nodes); !note.empty()) return note;
  std::size_t answered = 0;
  std::string why;
  for (const auto& n : nodes) {
    // A master whose answer the round did not wait for has not answered
    // (it is listed, "pending"), though it may still count next time.
    if (n.outcome != Outcome::pending && !cannot_count(n.outcome)) {
      ++answered;
      continue;
    }
    why += (why.empty() ? "" : "; ") + escaped(n.address) + ": " +
           (n.error.empty() ? std::string(outcome_name(n.outcome)) : escaped(n.error));
  }
  if (nodes.empty()) return escaped(std::string(errc_name(code)));
  return std::to_string(answered) + " of " + std::to_string(nodes.size()) + " masters answered, " +
         std::to_string(quorum_of(nodes.size())) + " needed" + (why.empty() ? "" : " (" + why + ")");
}

// --- output -------------------------------------------------------------------

bool use_json(const Globals& g, bool default_json) {
  if (g.json) return true;
  if (g.human) return false;
  return default_json;
}

int finish(bool as_json, const json& out, const std::string& human, int status) {
  if (as_json) {
    std::cout << dump_json(out) << '\n' << std::flush;
  } else {
    std::cout << human << std::flush;
  }
  return status;
}

bool write_out(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string dump_json(const json& j) { return printable_json(j).dump(); }

json nodes_json(const std::vector<NodeOutcome>& nodes) {
  json out = json::array();
  for (const auto& n : nodes) {
    json j = {{"address", n.address},
              {"outcome", std::string(outcome_name(n.outcome))},
              {"rtt_us", n.rtt.count()},
              {"error", n.error.empty() ? json(nullptr) : json(n.error)}};
    if (n.holder_ttl.count() >= 0) j["holder_ttl_ms"] = n.holder_ttl.count();
    out.push_back(std::move(j));
  }
  return out;
}

void add_error(json& out, Errc code, const std::string& text) {
  out["error"] = text;
  out["code"] = std::string(errc_name(code));
}

namespace {

// display_width counts UTF-8 code points (the tables hold "…" and "µ").
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

}  // namespace

std::string Table::render() const {
  std::vector<std::size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - display_width(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

namespace {

std::string group_thousands(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

}  // namespace

std::string fmt_us(std::int64_t us) {
  char buf[32];
  if (us < 10000) {
    std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(us) / 1000.0);
    return buf;
  }
  return fmt_ms(us / 1000);
}

std::string fmt_ms(std::int64_t ms) { return group_thousands(ms) + " ms"; }

std::string fmt_duration_s(std::int64_t s) {
  if (s < 0) return "-";
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh %02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd %02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

std::string short_token(const std::string& token) {
  return token.size() <= 12 ? escaped(token) : escaped(token.substr(0, 8)) + "\u2026";
}

std::string human_node_outcomes(const std::vector<NodeOutcome>& nodes) {
  Table t({"NODE", "OUTCOME", "RTT", "DETAIL"});
  for (const auto& n : nodes) {
    t.add({escaped(n.address), std::string(outcome_name(n.outcome)), n.rtt.count() > 0 ? fmt_us(n.rtt.count()) : "-",
           escaped(n.error)});
  }
  return t.render();
}

std::int64_t unix_us_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t unix_us(BootClock::time_point t) {
  const auto now = BootClock::now();
  return unix_us_now() + std::chrono::duration_cast<std::chrono::microseconds>(t - now).count();
}

std::int64_t monotonic_us(BootClock::time_point t) {
  const auto boot = BootClock::now();
  const auto mono = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::microseconds>(mono.time_since_epoch() + (t - boot)).count();
}

std::string iso_utc(std::int64_t us) {
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03lldZ", static_cast<long long>(us % 1000000 / 1000));
  return buf;
}

}  // namespace redlock::cli
