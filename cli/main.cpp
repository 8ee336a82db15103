// cli/main.cpp — the `redlock` command: acquire, extend and release one lock
// across N independent Redis masters from a shell script.
//
//   redlock acquire RESOURCE [--ttl MS] [--wait MS] [--token TOKEN]
//   redlock extend  RESOURCE TOKEN --ttl MS
//   redlock release RESOURCE TOKEN
//
// Nodes come from --nodes, else --config, else REDLOCK_NODES. Every
// operation prints one JSON object on stdout (also when the lock was not
// taken). Exit status: 0 done, 1 not done (held elsewhere, no quorum, not
// held, …), 2 usage or configuration error (message on stderr). docs/cli.md
// is the reference.
#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "redlock/redlock.hpp"

namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr int kExitOk = 0;
constexpr int kExitNotDone = 1;
constexpr int kExitUsage = 2;

// UsageError — a bad argument, option, environment value or config file.
// Caught in main(): message on stderr, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the command line asked for, as given (validated by the functions below).
struct Args {
  std::string nodes;        // --nodes
  std::string config_file;  // --config
  bool no_quarantine = false;
  std::string resource;
  std::string token;      // extend/release: positional; acquire: --token
  std::string ttl, wait;  // raw text, validated by parse_ms; empty when not given
  bool ttl_given = false, wait_given = false;
};

// quote renders a user-given value in an error message.
std::string quote(std::string_view s) { return json(std::string(s)).dump(); }

// parse_ms reads a whole non-negative number of milliseconds; `min` is 0 or 1.
milliseconds parse_ms(std::string_view name, const std::string& text, long long min) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec == std::errc::invalid_argument || p != end)
    throw UsageError(std::string(name) + ": " + quote(text) + " is not a number of milliseconds");
  // An hour of wait is generous; a TTL is further bounded by the config's max_ttl.
  if (ec == std::errc::result_out_of_range || v > std::numeric_limits<int>::max())
    throw UsageError(std::string(name) + ": " + quote(text) + " is out of range");
  if (v < min)
    throw UsageError(std::string(name) + ": " + quote(text) +
                     (min > 0 ? " must be greater than 0" : " must not be negative"));
  return milliseconds{v};
}

// check_token applies the library's token rule: 1-128 characters of [0-9A-Za-z_-].
void check_token(std::string_view name, const std::string& token) {
  auto ok_char = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
  };
  bool ok = !token.empty() && token.size() <= 128;
  for (char c : token) ok = ok && ok_char(c);
  if (!ok)
    throw UsageError(std::string(name) + ": " + quote(token) +
                     " must be 1-128 characters of [0-9A-Za-z_-]");
}

void check_resource(const std::string& resource) {
  if (resource.empty()) throw UsageError("RESOURCE: must not be empty");
}

// load_config picks the node source: --nodes, else --config, else REDLOCK_NODES.
// With both --config and --nodes, the file's options apply to --nodes' nodes.
// Errors name the source (the library's messages name the field).
redlock::Config load_config(const Args& a) {
  redlock::Config config;
  std::string source;
  if (!a.config_file.empty()) {
    source = "--config";
    auto loaded = redlock::load_config_file(a.config_file);
    if (!loaded) throw UsageError("--config: " + loaded.error().message);
    config = std::move(*loaded);
  }
  if (!a.nodes.empty()) {
    source = "--nodes";
    auto nodes = redlock::parse_node_list(a.nodes);
    if (!nodes) throw UsageError("--nodes: " + nodes.error().message);
    config.nodes = std::move(*nodes);
  } else if (a.config_file.empty()) {
    const char* env = std::getenv("REDLOCK_NODES");
    if (env == nullptr || *env == '\0')
      throw UsageError("no nodes: give --nodes URL,URL,..., --config FILE, or set REDLOCK_NODES");
    source = "REDLOCK_NODES";
    auto from_env = redlock::config_from_env();  // its messages name REDLOCK_NODES
    if (!from_env) throw UsageError(from_env.error().message);
    config = std::move(*from_env);
  }
  if (a.no_quarantine) config.options.quarantine = false;
  config.options.node_outcomes = true;  // the JSON output lists every node
  // A one-shot command can afford to wait for every master's answer: let
  // release report every node (a config file may still set its own value).
  if (config.options.release_settle.count() == 0) config.options.release_settle = config.options.node_timeout;
  if (auto valid = redlock::validate_config(config); !valid)
    throw UsageError(source + ": " + valid.error().message);
  return config;
}

std::unique_ptr<redlock::Client> make_client(const Args& a) {
  auto client = redlock::Client::create(load_config(a));
  if (!client) throw UsageError(client.error().message);
  return std::move(*client);
}

// check_ttl: a TTL above the config's max_ttl is refused before any node is asked.
void check_ttl(const redlock::Client& client, milliseconds ttl) {
  const milliseconds max = client.config().options.max_ttl;
  if (ttl > max)
    throw UsageError("--ttl: " + std::to_string(ttl.count()) + " exceeds max_ttl (" +
                     std::to_string(max.count()) + " ms; max_ttl_ms in a --config file raises it)");
}

// --- output -----------------------------------------------------------------

json nodes_json(const std::vector<redlock::NodeOutcome>& nodes) {
  json out = json::array();
  for (const auto& n : nodes) {
    json j = {{"address", n.address},
              {"outcome", std::string(redlock::outcome_name(n.outcome))},
              {"rtt_us", n.rtt.count()},
              {"error", n.error.empty() ? json(nullptr) : json(n.error)}};
    if (n.holder_ttl.count() >= 0) j["holder_ttl_ms"] = n.holder_ttl.count();
    out.push_back(std::move(j));
  }
  return out;
}

void add_error(json& out, redlock::Errc code, const std::string& text) {
  out["error"] = text;
  out["code"] = std::string(redlock::errc_name(code));
}

// finish prints the JSON object and returns the exit status.
int finish(const json& out, bool done) {
  std::cout << out.dump() << '\n' << std::flush;
  return done ? kExitOk : kExitNotDone;
}

// throw_if_usage: argument and config errors found by the library are usage
// errors (status 2, message on stderr, no JSON).
void throw_if_usage(const redlock::Error& e) {
  if (e.code == redlock::Errc::invalid_argument || e.code == redlock::Errc::config)
    throw UsageError(e.message);
}

// print_lock_result renders an acquire or extend: `verb` is "acquired" or "extended".
int print_lock_result(const char* verb, const std::string& resource, const json& token,
                      const redlock::Result<redlock::Lock>& r) {
  json out;
  out[verb] = r.ok();
  out["resource"] = resource;
  if (r) {
    out["token"] = r->token;
    out["validity_ms"] = r->validity.count();
    out["elapsed_us"] = r->elapsed.count();
    out["attempts"] = r->attempts;
    out["nodes"] = nodes_json(r->nodes);
  } else {
    throw_if_usage(r.error());
    out["token"] = token;
    out["validity_ms"] = nullptr;
    out["elapsed_us"] = r.error().elapsed.count();
    out["attempts"] = r.error().attempts;
    out["nodes"] = nodes_json(r.error().nodes);
    add_error(out, r.error().code, r.error().to_string());
  }
  return finish(out, r.ok());
}

// --- commands ---------------------------------------------------------------

int run_acquire(const Args& a) {
  check_resource(a.resource);
  redlock::AcquireOptions opts;
  if (a.ttl_given) opts.ttl = parse_ms("--ttl", a.ttl, 1);
  if (a.wait_given) opts.wait = parse_ms("--wait", a.wait, 0);
  if (!a.token.empty()) check_token("--token", a.token);
  opts.token = a.token;
  auto client = make_client(a);
  check_ttl(*client, opts.ttl);
  auto r = client->acquire(a.resource, opts);
  // Without --token the library draws one; a failed attempt does not report
  // it, so the output says null rather than inventing one.
  return print_lock_result("acquired", a.resource, a.token.empty() ? json(nullptr) : json(a.token), r);
}

int run_extend(const Args& a) {
  check_resource(a.resource);
  check_token("TOKEN", a.token);
  const milliseconds ttl = parse_ms("--ttl", a.ttl, 1);
  auto client = make_client(a);
  check_ttl(*client, ttl);
  // The CLI does not know when the lock was taken, so it cannot know the old
  // validity deadline; it lets the servers decide (they extend only a key
  // that still holds our token, and never recreate one).
  redlock::Lock lock;
  lock.resource = a.resource;
  lock.token = a.token;
  lock.ttl = ttl;
  lock.validity_deadline = std::chrono::steady_clock::now() + ttl;
  auto r = client->extend(lock, ttl);
  return print_lock_result("extended", a.resource, json(a.token), r);
}

// describe_release_failure explains a release that did not free the lock:
// no_quorum when a node could not be asked (error, timeout), else not_held
// (every node that answered said our token is not there).
void describe_release_failure(json& out, const redlock::ReleaseResult& rr) {
  bool unreachable = false;
  for (const auto& n : rr.nodes)
    unreachable = unreachable || n.outcome == redlock::Outcome::error || n.outcome == redlock::Outcome::timeout;
  const auto code = unreachable ? redlock::Errc::no_quorum : redlock::Errc::not_held;
  std::string msg = "released on " + std::to_string(rr.released_nodes) + " of " +
                    std::to_string(rr.nodes.size()) + " nodes";
  for (const auto& n : rr.nodes)
    if (n.outcome != redlock::Outcome::ok)
      msg += "; " + n.address + " " + std::string(redlock::outcome_name(n.outcome)) +
             (n.error.empty() ? "" : ": " + n.error);
  add_error(out, code, std::string(redlock::errc_name(code)) + ": " + msg);
}

int run_release(const Args& a) {
  check_resource(a.resource);
  check_token("TOKEN", a.token);
  auto client = make_client(a);
  auto r = client->release(a.resource, a.token);
  json out;
  if (!r) throw_if_usage(r.error());
  out["released"] = r && r->released;
  out["released_nodes"] = r ? r->released_nodes : 0;
  out["resource"] = a.resource;
  out["token"] = a.token;
  out["elapsed_us"] = r ? r->elapsed.count() : r.error().elapsed.count();
  out["nodes"] = nodes_json(r ? r->nodes : r.error().nodes);
  if (!r)
    add_error(out, r.error().code, r.error().to_string());
  else if (!r->released)
    describe_release_failure(out, *r);
  return finish(out, r && r->released);
}

// --- command line -----------------------------------------------------------

constexpr const char* kGlobalHelp =
    "\nAlso: --nodes URL,URL,... | --config FILE | REDLOCK_NODES, and --no-quarantine\n"
    "(see redlock --help).\n";

constexpr const char* kNodeHelp =
    "\nNodes: --nodes wins, then --config, then the environment variable REDLOCK_NODES\n"
    "(comma-separated redis://[user:password@]host[:port][/db] or unix:///path URLs).\n"
    "Output: one JSON object on stdout. Exit status: 0 done, 1 not done (held\n"
    "elsewhere, no quorum, not held), 2 usage or configuration error.\n";

int run(int argc, char** argv) {
  Args a;
  CLI::App app{"redlock — take one lock across N independent Redis masters (Redlock).", "redlock"};
  app.fallthrough();  // global options are accepted after the subcommand, too
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.add_option("--nodes", a.nodes, "Comma-separated node URLs")->type_name("URL,URL,...");
  app.add_option("--config", a.config_file, "JSON config file (nodes and options)")->type_name("FILE");
  app.add_flag("--no-quarantine", a.no_quarantine,
               "Let freshly (re)started masters count at once (test beds; unsafe without appendfsync always)");
  app.footer(std::string(kNodeHelp) +
             "\nExamples:\n"
             "  export REDLOCK_NODES=redis://10.0.0.1,redis://10.0.0.2,redis://10.0.0.3\n"
             "  redlock acquire nightly-report --ttl 30000 --wait 5000\n"
             "  redlock extend nightly-report 3f9c0a...e1 --ttl 30000\n"
             "  redlock release nightly-report 3f9c0a...e1\n"
             "  out=$(redlock acquire job --ttl 60000) && token=$(jq -r .token <<<\"$out\") &&\n"
             "    run-job; redlock release job \"$token\"\n");

  auto* acquire = app.add_subcommand("acquire", "Take RESOURCE on a majority of the nodes");
  acquire->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  auto* acquire_ttl = acquire->add_option("--ttl", a.ttl, "Lock time-to-live (default: the config's default_ttl, 10000)")
      ->type_name("MS");
  auto* acquire_wait = acquire->add_option("--wait", a.wait, "Keep retrying this long (default 0: one attempt)")->type_name("MS");
  acquire->add_option("--token", a.token, "Token to use (default: a fresh random one); "
                                          "re-acquiring with a held token refreshes the TTL")
      ->type_name("TOKEN");
  acquire->footer(
      std::string(kGlobalHelp) +
      "\nExamples:\n"
      "  redlock acquire nightly-report --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,"
      "redis://127.0.0.1:7003\n"
      "  redlock acquire nightly-report --ttl 30000 --wait 5000\n"
      "  redlock acquire nightly-report --ttl 30000 --token host1-job42\n");

  auto* extend = app.add_subcommand("extend", "Move the expiry of a lock we hold to TTL from now");
  extend->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  extend->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  auto* extend_ttl = extend->add_option("--ttl", a.ttl, "New time-to-live")->type_name("MS")->required();
  extend->footer(std::string(kGlobalHelp) + "\nExample:\n  redlock extend nightly-report 3f9c0a...e1 --ttl 30000\n");

  auto* release = app.add_subcommand("release", "Delete the lock on every node where TOKEN holds it");
  release->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  release->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  release->footer(std::string(kGlobalHelp) + "\nExample:\n  redlock release nightly-report 3f9c0a...e1\n");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help: prints the help of the subcommand asked about
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  // Extras are allowed by the parser so that they can be named here.
  if (const auto rest = app.remaining(true); !rest.empty()) {
    if (rest[0].starts_with('-')) throw UsageError("unknown option " + quote(rest[0]));
    if (app.get_subcommands().empty())
      throw UsageError("unknown command " + quote(rest[0]) + " (expected acquire, extend or release)");
    throw UsageError("unexpected argument " + quote(rest[0]));
  }
  a.ttl_given = acquire_ttl->count() + extend_ttl->count() > 0;
  a.wait_given = acquire_wait->count() > 0;

  if (acquire->parsed()) return run_acquire(a);
  if (extend->parsed()) return run_extend(a);
  if (release->parsed()) return run_release(a);
  throw UsageError("no command given (expected acquire, extend or release)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "redlock: " << e.what() << "\nRun 'redlock --help' for usage.\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "redlock: internal error: " << e.what() << '\n';
    return kExitNotDone;
  }
}
