// cli/main.cpp — the `redlock` command: one lock across N independent Redis
// masters, from a shell.
//
//   redlock acquire RESOURCE [--ttl MS] [--wait MS] [--token TOKEN]
//   redlock extend  RESOURCE TOKEN --ttl MS
//   redlock release RESOURCE TOKEN
//   redlock run     [options] RESOURCE -- CMD [ARGS...]   (a distributed flock)
//   redlock status  RESOURCE
//   redlock nodes
//
// Nodes come from --nodes, else --config, else REDLOCK_NODES. Output: one
// JSON object (--json; the default for acquire, extend, release) or a human
// table (--human; the default for status and nodes; run prints only
// messages unless --json). Exit status: 0 done, 1 not done, 2 usage or
// configuration error; run exits with its command's status. docs/cli.md is
// the reference.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "common.hpp"
#include "run.hpp"

namespace redlock::cli {
namespace {

// What the command line asked for, as given (validated by the commands).
struct Args {
  Globals g;
  std::string resource;
  std::string token;      // extend/release: positional; acquire: --token
  std::string ttl, wait;  // acquire/extend: raw text, validated by parse_ms
  RunArgs run;
};

// --- acquire / extend / release -------------------------------------------------

// finish prints the JSON object or the human text and returns the exit status.
int finish(bool as_json, const json& out, const std::string& human, bool done) {
  if (as_json) {
    std::cout << out.dump() << '\n' << std::flush;
  } else {
    std::cout << human << std::flush;
  }
  return done ? kExitOk : kExitNotDone;
}

// print_lock_result renders an acquire or extend: `verb` is "acquired" or "extended".
int print_lock_result(const Globals& g, const char* verb, const std::string& resource, const json& token,
                      const Result<Lock>& r) {
  json out;
  out[verb] = r.ok();
  out["resource"] = resource;
  std::string human;
  if (r) {
    out["token"] = r->token;
    out["validity_ms"] = r->validity.count();
    out["elapsed_us"] = r->elapsed.count();
    out["attempts"] = r->attempts;
    out["nodes"] = nodes_json(r->nodes);
    human = std::string(verb) + " " + quote(resource) + ": token " + r->token + ", valid for " +
            fmt_ms(r->validity.count()) + " (" + std::to_string(r->attempts) +
            (r->attempts == 1 ? " attempt, " : " attempts, ") + fmt_us(r->elapsed.count()) + ")\n" +
            human_node_outcomes(r->nodes);
  } else {
    throw_if_usage(r.error());
    out["token"] = token;
    out["validity_ms"] = nullptr;
    out["elapsed_us"] = r.error().elapsed.count();
    out["attempts"] = r.error().attempts;
    out["nodes"] = nodes_json(r.error().nodes);
    add_error(out, r.error().code, r.error().to_string());
    human = std::string("not ") + verb + " " + quote(resource) + ": " + r.error().to_string() + "\n" +
            human_node_outcomes(r.error().nodes);
  }
  return finish(use_json(g, true), out, human, r.ok());
}

int run_acquire(const Args& a) {
  check_resource(a.resource);
  AcquireOptions opts;
  if (!a.ttl.empty()) opts.ttl = parse_ms("--ttl", a.ttl, 1);
  if (!a.wait.empty()) opts.wait = parse_ms("--wait", a.wait, 0);
  if (!a.token.empty()) check_token("--token", a.token);
  opts.token = a.token;
  auto client = make_client(a.g);
  check_ttl(*client, opts.ttl);
  auto r = client->acquire(a.resource, opts);
  // Without --token the library draws one; a failed attempt does not report
  // it, so the output says null rather than inventing one.
  return print_lock_result(a.g, "acquired", a.resource, a.token.empty() ? json(nullptr) : json(a.token), r);
}

int run_extend(const Args& a) {
  check_resource(a.resource);
  check_token("TOKEN", a.token);
  const milliseconds ttl = parse_ms("--ttl", a.ttl, 1);
  auto client = make_client(a.g);
  check_ttl(*client, ttl);
  // The CLI does not know when the lock was taken, so it cannot know the old
  // validity deadline; it lets the servers decide (they extend only a key
  // that still holds our token, and never recreate one).
  Lock lock;
  lock.resource = a.resource;
  lock.token = a.token;
  lock.ttl = ttl;
  lock.validity_deadline = std::chrono::steady_clock::now() + ttl;
  auto r = client->extend(lock, ttl);
  return print_lock_result(a.g, "extended", a.resource, json(a.token), r);
}

// describe_release_failure explains a release that did not free the lock:
// no_quorum when a node could not be asked (error, timeout), else not_held
// (every node that answered said our token is not there).
void describe_release_failure(json& out, const ReleaseResult& rr) {
  bool unreachable = false;
  for (const auto& n : rr.nodes) unreachable = unreachable || n.outcome == Outcome::error || n.outcome == Outcome::timeout;
  const auto code = unreachable ? Errc::no_quorum : Errc::not_held;
  std::string msg = "released on " + std::to_string(rr.released_nodes) + " of " + std::to_string(rr.nodes.size()) +
                    " nodes";
  for (const auto& n : rr.nodes)
    if (n.outcome != Outcome::ok)
      msg += "; " + n.address + " " + std::string(outcome_name(n.outcome)) + (n.error.empty() ? "" : ": " + n.error);
  add_error(out, code, std::string(errc_name(code)) + ": " + msg);
}

int run_release(const Args& a) {
  check_resource(a.resource);
  check_token("TOKEN", a.token);
  auto client = make_client(a.g);
  auto r = client->release(a.resource, a.token);
  json out;
  if (!r) throw_if_usage(r.error());
  const bool released = r && r->released;
  out["released"] = released;
  out["released_nodes"] = r ? r->released_nodes : 0;
  out["resource"] = a.resource;
  out["token"] = a.token;
  out["elapsed_us"] = r ? r->elapsed.count() : r.error().elapsed.count();
  out["nodes"] = nodes_json(r ? r->nodes : r.error().nodes);
  if (!r)
    add_error(out, r.error().code, r.error().to_string());
  else if (!released)
    describe_release_failure(out, *r);
  std::string human = released ? "released " + quote(a.resource) + " on " + std::to_string(r->released_nodes) +
                                     " of " + std::to_string(r->nodes.size()) + " masters (" +
                                     fmt_us(r->elapsed.count()) + ")\n"
                               : "not released " + quote(a.resource) + ": " + out["error"].get<std::string>() + "\n";
  human += human_node_outcomes(r ? r->nodes : r.error().nodes);
  return finish(use_json(a.g, true), out, human, released);
}

// --- status ------------------------------------------------------------------------

int run_status(const Args& a) {
  check_resource(a.resource);
  auto client = make_client(a.g);
  auto r = client->status(a.resource);
  if (!r) {
    throw_if_usage(r.error());
    throw std::runtime_error(r.error().to_string());
  }
  const ResourceStatus& st = *r;
  std::size_t answered = 0;
  json nodes = json::array();
  Table table({"NODE", "STATE", "TOKEN", "TTL", "FENCE", "RTT", "DETAIL"});
  for (const NodeHolding& n : st.nodes) {
    const bool up = n.state != NodeHolding::State::unreachable;
    answered += up && !n.quarantined ? 1 : 0;
    const bool held = n.state == NodeHolding::State::held;
    nodes.push_back({{"address", n.address},
                     {"state", state_name(n.state)},
                     {"token", held ? json(n.token) : json(nullptr)},
                     {"ttl_ms", held ? json(n.ttl.count()) : json(nullptr)},
                     {"fence", up ? json(n.fence) : json(nullptr)},
                     {"quarantined", n.quarantined},
                     {"rtt_us", up ? json(n.rtt.count()) : json(nullptr)},
                     {"error", n.error.empty() ? json(nullptr) : json(n.error)}});
    std::string detail = n.error;
    if (n.quarantined) detail = "quarantined (restarted recently; does not count)";
    if (held && !st.token.empty() && n.token != st.token) detail = "another token than the majority's";
    table.add({n.address, state_name(n.state), held ? short_token(n.token) : "-",
               held ? (n.ttl.count() < 0 ? "no expiry" : fmt_ms(n.ttl.count())) : "-",
               up ? std::to_string(n.fence) : "-", up ? fmt_us(n.rtt.count()) : "-", detail});
  }
  const bool known = answered >= st.quorum;
  json out = {{"resource", st.resource},
              {"held", st.held},
              {"token", st.token.empty() ? json(nullptr) : json(st.token)},
              {"agreeing", st.agreeing},
              {"quorum", st.quorum},
              {"ttl_ms", st.held ? json(st.ttl.count()) : json(nullptr)},
              {"free_nodes", st.free_nodes},
              {"answered", answered},
              {"nodes", nodes}};
  std::string human;
  if (st.held) {
    human = quote(st.resource) + " is held by " + short_token(st.token) + " on " + std::to_string(st.agreeing) + " of " +
            std::to_string(st.nodes.size()) + " masters (quorum " + std::to_string(st.quorum) + ")" +
            (st.ttl.count() < 0 ? ", with no expiry" : "; a majority holds it for another " + fmt_ms(st.ttl.count())) +
            "\n";
  } else if (!known) {
    human = quote(st.resource) + ": unknown — only " + std::to_string(answered) + " of " +
            std::to_string(st.nodes.size()) + " masters answered (quorum " + std::to_string(st.quorum) + ")\n";
  } else if (st.agreeing == 0) {
    human = quote(st.resource) + " is free on every master that answered (" + std::to_string(st.free_nodes) + " of " +
            std::to_string(st.nodes.size()) + ")\n";
  } else {
    human = quote(st.resource) + " is not held by a majority: at most " + std::to_string(st.agreeing) + " of " +
            std::to_string(st.nodes.size()) + " masters agree on one token (quorum " + std::to_string(st.quorum) +
            ")\n";
  }
  human += table.render();
  return finish(use_json(a.g, false), out, human, known);
}

// --- nodes ---------------------------------------------------------------------------

int run_nodes(const Args& a) {
  auto client = make_client(a.g);
  auto r = client->nodes();
  if (!r) throw std::runtime_error(r.error().to_string());
  const NodesReport& rep = *r;
  const std::int64_t now_us = unix_us_now();
  json nodes = json::array();
  Table table({"NODE", "STATE", "RTT", "VERSION", "RUN ID", "UPTIME", "QUARANTINE", "DETAIL"});
  for (const NodeHealth& h : rep.nodes) {
    const std::int64_t until_us = now_us + h.quarantine_left.count() * 1000;
    nodes.push_back({{"address", h.address},
                     {"reachable", h.reachable},
                     {"rtt_us", h.reachable ? json(h.rtt.count()) : json(nullptr)},
                     {"version", h.version.empty() ? json(nullptr) : json(h.version)},
                     {"run_id", h.run_id.empty() ? json(nullptr) : json(h.run_id)},
                     {"uptime_s", h.uptime.count() >= 0 ? json(h.uptime.count()) : json(nullptr)},
                     {"quarantined", h.quarantined},
                     {"quarantine_left_ms", h.quarantine_left.count()},
                     {"quarantine_until", h.quarantine_left.count() > 0 ? json(iso_utc(until_us)) : json(nullptr)},
                     {"excluded", h.excluded.empty() ? json(nullptr) : json(h.excluded)},
                     {"error", h.error.empty() ? json(nullptr) : json(h.error)}});
    const std::string quarantine =
        !h.excluded.empty()            ? "excluded"
        : h.quarantine_left.count() > 0 ? fmt_ms(h.quarantine_left.count()) + " left (until " +
                                              iso_utc(until_us).substr(11, 8) + "Z)"
                                        : "no";
    table.add({h.address, h.reachable ? "up" : "down", h.reachable ? fmt_us(h.rtt.count()) : "-",
               h.version.empty() ? "-" : h.version, h.run_id.empty() ? "-" : h.run_id.substr(0, 8),
               fmt_duration_s(h.uptime.count()), quarantine, h.error.empty() ? h.excluded : h.error});
  }
  json out = {{"nodes", nodes}, {"usable", rep.usable()}, {"quorum", rep.quorum}, {"can_lock", rep.can_lock()}};
  std::string human = table.render() + std::to_string(rep.usable()) + " of " + std::to_string(rep.nodes.size()) +
                      " masters usable (up and not quarantined; quorum " + std::to_string(rep.quorum) + "): " +
                      (rep.can_lock() ? "locks can be taken\n" : "NO lock can be taken now\n");
  return finish(use_json(a.g, false), out, human, rep.can_lock());
}

// --- command line -----------------------------------------------------------------------

constexpr const char* kGlobalHelp =
    "\nAlso: --nodes URL,URL,... | --config FILE | REDLOCK_NODES, --no-quarantine,\n"
    "--tls-ca FILE, --tls-cert FILE, --tls-key FILE, ..., --json | --human (see redlock --help).\n";

constexpr const char* kNodeHelp =
    "\nNodes: --nodes wins, then --config, then the environment variable REDLOCK_NODES\n"
    "(comma-separated redis://[user:password@]host[:port][/db], rediss://... (TLS)\n"
    "or unix:///path URLs).\n"
    "Output: --json (one JSON object; the default for acquire, extend, release) or\n"
    "--human (a table; the default for status and nodes). Exit status: 0 done,\n"
    "1 not done (held elsewhere, no quorum, not held), 2 usage or configuration\n"
    "error; run exits with the command's status (see redlock run --help).\n";

struct Commands {
  CLI::App* acquire = nullptr;
  CLI::App* extend = nullptr;
  CLI::App* release = nullptr;
  CLI::App* run = nullptr;
  CLI::App* status = nullptr;
  CLI::App* nodes = nullptr;
};

Commands build(CLI::App& app, Args& a) {
  app.fallthrough();  // global options are accepted after the subcommand, too
  app.set_version_flag("--version", "redlock " + std::string(redlock::version()));
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.add_option("--nodes", a.g.nodes, "Comma-separated node URLs")->type_name("URL,URL,...");
  app.add_option("--config", a.g.config_file, "JSON config file (nodes and options)")->type_name("FILE");
  app.add_flag("--no-quarantine", a.g.no_quarantine,
               "Let freshly (re)started masters count at once (test beds; unsafe without appendfsync always)");
  app.add_option("--tls-ca", a.g.tls_ca, "CA certificates (PEM) to verify rediss:// masters with [env REDLOCK_TLS_CA]")
      ->type_name("FILE");
  app.add_option("--tls-ca-dir", a.g.tls_ca_dir, "A directory of CA certificates (c_rehash layout)")->type_name("DIR");
  app.add_option("--tls-cert", a.g.tls_cert, "Client certificate (PEM) for mutual TLS [env REDLOCK_TLS_CERT]")
      ->type_name("FILE");
  app.add_option("--tls-key", a.g.tls_key, "Its private key (PEM) [env REDLOCK_TLS_KEY]")->type_name("FILE");
  app.add_option("--tls-server-name", a.g.tls_server_name, "Name to expect in the masters' certificates (default: each host)")
      ->type_name("NAME");
  app.add_flag("--tls-insecure", a.g.tls_insecure,
               "Do not verify the masters' certificates (UNSAFE: anyone on the path can pose as a master)");
  app.add_option("--user", a.g.user, "ACL user for nodes whose URLs name none [env REDLOCK_USER]")->type_name("NAME");
  app.add_option("--password-file", a.g.password_file,
                 "Password (first line of FILE) for nodes whose URLs carry none [env REDLOCK_PASSWORD_FILE, "
                 "or the password itself in REDLOCK_PASSWORD]")
      ->type_name("FILE");
  auto* json_flag = app.add_flag("--json", a.g.json, "Print one JSON object (run: one JSON line on stderr)");
  app.add_flag("--human", a.g.human, "Print a human-readable table")->excludes(json_flag);
  app.footer(std::string(kNodeHelp) +
             "\nExamples:\n"
             "  export REDLOCK_NODES=redis://10.0.0.1,redis://10.0.0.2,redis://10.0.0.3\n"
             "  redlock run nightly-report -- ./report.sh        # like flock(1), across machines\n"
             "  redlock run --no-wait --fence job -- ./job.sh   # fail at once if held; REDLOCK_FENCE set\n"
             "  redlock status nightly-report\n"
             "  redlock nodes\n"
             "  redlock acquire nightly-report --ttl 30000 --wait 5000\n"
             "  redlock extend nightly-report 3f9c0a...e1 --ttl 30000\n"
             "  redlock release nightly-report 3f9c0a...e1\n");

  Commands c;
  c.acquire = app.add_subcommand("acquire", "Take RESOURCE on a majority of the nodes");
  c.acquire->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  c.acquire->add_option("--ttl", a.ttl, "Lock time-to-live (default: the config's default_ttl, 10000)")->type_name("MS");
  c.acquire->add_option("--wait", a.wait, "Keep retrying this long (default 0: one attempt)")->type_name("MS");
  c.acquire->add_option("--token", a.token,
                        "Token to use (default: a fresh random one); re-acquiring with a held token refreshes the TTL")
      ->type_name("TOKEN");
  c.acquire->footer(std::string(kGlobalHelp) +
                    "\nExamples:\n"
                    "  redlock acquire nightly-report --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,"
                    "redis://127.0.0.1:7003\n"
                    "  redlock acquire nightly-report --ttl 30000 --wait 5000\n"
                    "  redlock acquire nightly-report --ttl 30000 --token host1-job42 --human\n");

  c.extend = app.add_subcommand("extend", "Move the expiry of a lock we hold to TTL from now");
  c.extend->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  c.extend->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  c.extend->add_option("--ttl", a.ttl, "New time-to-live")->type_name("MS")->required();
  c.extend->footer(std::string(kGlobalHelp) + "\nExample:\n  redlock extend nightly-report 3f9c0a...e1 --ttl 30000\n");

  c.release = app.add_subcommand("release", "Delete the lock on every node where TOKEN holds it");
  c.release->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  c.release->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  c.release->footer(std::string(kGlobalHelp) + "\nExample:\n  redlock release nightly-report 3f9c0a...e1\n");

  RunArgs& r = a.run;
  c.run = app.add_subcommand("run", "Run a command while holding RESOURCE (a distributed flock)");
  c.run->add_option("RESOURCE", r.resource, "Name of the lock")->required();
  c.run->add_option("--ttl", r.ttl, "Lease time-to-live, extended at 1/3 of it while CMD runs (default 10000)")
      ->type_name("MS");
  c.run->add_option("--wait", r.wait, "Give up after waiting this long for the lock (default: wait indefinitely)")
      ->type_name("MS");
  c.run->add_flag("--no-wait", r.no_wait, "Give up at once if the lock is held");
  c.run->add_flag("--fence", r.fence, "Take a fencing token too; CMD gets it in REDLOCK_FENCE");
  c.run->add_option("--conflict-exit-code", r.conflict_exit_code,
                    "Exit status when the lock was not acquired (default 1)")
      ->type_name("N");
  c.run->add_option("--lost-exit-code", r.lost_exit_code, "Exit status when the lease was lost while CMD ran (default 3)")
      ->type_name("N");
  c.run->add_option("--kill-after", r.kill_after, "SIGTERM to SIGKILL when the lease ends: at most TTL/3 - margin (default 1000, or that maximum)")
      ->type_name("MS");
  c.run->add_option("--max-hold", r.max_hold, "Stop extending after this long: the lease is then lost")->type_name("MS");
  c.run->footer(
      std::string(kGlobalHelp) +
      "\nCMD runs in its own process group with REDLOCK_RESOURCE, REDLOCK_TOKEN and\n"
      "(--fence) REDLOCK_FENCE set. SIGINT, SIGTERM and SIGHUP are passed on to it;\n"
      "the lock is released once it exits. If the lease is lost, or is about to\n"
      "run out unextended, the group gets SIGTERM, then SIGKILL after --kill-after,\n"
      "and never later than just before the lease's deadline. A guard process does\n"
      "the same if redlock is stopped (SIGSTOP) or killed; Ctrl-Z stops CMD with it.\n"
      "\nExit status: CMD's (128+N if it died of signal N); the conflict code (1)\n"
      "when the lock was not acquired; the lost code (3) when the lease was lost;\n"
      "2 usage error; 126 CMD could not be run, 127 CMD not found; 128+N when\n"
      "signal N interrupted the wait.\n"
      "\nExamples:\n"
      "  redlock run nightly-report -- ./report.sh --date today\n"
      "  redlock run --no-wait --conflict-exit-code 0 cron-job -- ./job.sh   # skip if running\n"
      "  redlock run --fence --ttl 5000 --wait 60000 writer -- sh -c 'write-with-fence \"$REDLOCK_FENCE\"'\n"
      "  redlock run --json job -- ./job.sh 2>>runs.jsonl   # one JSON line per run on stderr\n");

  c.status = app.add_subcommand("status", "Show who holds RESOURCE on each master");
  c.status->add_option("RESOURCE", a.resource, "Name of the lock")->required();
  c.status->footer(std::string(kGlobalHelp) +
                   "\nExit status: 0 when a quorum of masters answered (held or free), 1 when\n"
                   "too few did to tell.\n"
                   "\nExamples:\n  redlock status nightly-report\n  redlock status nightly-report --json | jq .held\n");

  c.nodes = app.add_subcommand("nodes", "Show each master's health, version, uptime and quarantine");
  c.nodes->footer(std::string(kGlobalHelp) +
                  "\nExit status: 0 when a quorum of masters is up and out of quarantine (a\n"
                  "lock can be taken), 1 otherwise.\n"
                  "\nExamples:\n  redlock nodes\n  until redlock nodes >/dev/null; do sleep 0.5; done   # wait for a usable quorum\n");
  return c;
}

// parse_into parses argv[0..argc) into `a`; returns the command chosen (or
// null) and sets `help_status` when --help was asked for.
CLI::App* parse_into(CLI::App& app, const Commands& c, Args& a, int argc, char** argv, std::optional<int>& help) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    help = app.exit(e);  // --help: prints the help of the subcommand asked about
    return nullptr;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  // Extras are allowed by the parser so that they can be named here.
  if (const auto rest = app.remaining(true); !rest.empty()) {
    if (rest[0].starts_with('-')) throw UsageError("unknown option " + quote(rest[0]));
    if (app.get_subcommands().empty())
      throw UsageError("unknown command " + quote(rest[0]) +
                       " (expected acquire, extend, release, run, status or nodes)");
    throw UsageError("unexpected argument " + quote(rest[0]));
  }
  (void)a;
  for (CLI::App* cmd : {c.acquire, c.extend, c.release, c.run, c.status, c.nodes})
    if (cmd->parsed()) return cmd;
  return nullptr;
}

int run(int argc, char** argv) {
  // `run` takes its command after "--": split there, so the command's own
  // options never reach our parser.
  int dash = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      dash = i;
      break;
    }
  }
  Args a;
  CLI::App app{"redlock — one lock across N independent Redis masters (Redlock).", "redlock"};
  Commands c = build(app, a);
  std::optional<int> help;
  CLI::App* cmd = parse_into(app, c, a, dash >= 0 ? dash : argc, argv, help);
  if (help) return *help;
  if (cmd != c.run && dash >= 0) {
    // Not `run`: "--" means "no more options" as usual; parse everything.
    a = Args{};
    CLI::App again{"redlock", "redlock"};
    c = build(again, a);
    cmd = parse_into(again, c, a, argc, argv, help);
    if (help) return *help;
  }
  if (cmd == c.run) {
    if (dash < 0) throw UsageError("run: give the command after \"--\" (redlock run RESOURCE -- CMD [ARGS...])");
    a.run.command.assign(argv + dash + 1, argv + argc);
  }
  if (cmd == c.acquire) return run_acquire(a);
  if (cmd == c.extend) return run_extend(a);
  if (cmd == c.release) return run_release(a);
  if (cmd == c.run) return run_command(a.g, a.run);
  if (cmd == c.status) return run_status(a);
  if (cmd == c.nodes) return run_nodes(a);
  throw UsageError("no command given (expected acquire, extend, release, run, status or nodes)");
}

}  // namespace
}  // namespace redlock::cli

int main(int argc, char** argv) {
  try {
    return redlock::cli::run(argc, argv);
  } catch (const redlock::cli::UsageError& e) {
    std::cerr << "redlock: " << e.what() << "\nRun 'redlock --help' for usage.\n";
    return redlock::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "redlock: internal error: " << e.what() << '\n';
    return redlock::cli::kExitNotDone;
  }
}
