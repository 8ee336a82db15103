// command_line.cpp — see command_line.hpp.
#include "command_line.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {
namespace {

constexpr const char* kGlobalHelp =
    "\nAlso: --nodes URL,URL,... | --config FILE | REDLOCK_NODES | REDLOCK_CONFIG,\n"
    "--no-quarantine, --tls-ca FILE, --tls-cert FILE, --tls-key FILE, ...,\n"
    "--json | --human (see redlock --help). DURATION: seconds unless a unit is\n"
    "given (10, 1.5), or a number with a unit: 500ms, 30s, 1.5m, 1h. A RESOURCE\n"
    "that starts with \"-\": --resource=-NAME.\n";

constexpr const char* kNodeHelp =
    "\nNodes: --nodes wins, then --config FILE's nodes, then the environment\n"
    "variable REDLOCK_NODES, then the nodes of the file REDLOCK_CONFIG names\n"
    "(--config wins over REDLOCK_CONFIG; a config file's options apply to nodes\n"
    "from --nodes or REDLOCK_NODES). Node URLs: redis://[user:password@]host[:port][/db],\n"
    "rediss://... (TLS) or unix:///path, comma-separated; ?replicated=1 or\n"
    "?wait_replicas=N|all for a primary with replicas; redis+sentinel://s1,s2/NAME\n"
    "for the primary Sentinel names; redis+cluster://h:p,h:p for a Redis Cluster\n"
    "(one vote each; docs/config.md).\n"
    "Durations (--ttl, --wait, ...): seconds unless a unit is given, as flock(1)\n"
    "and timeout(1) read them (10, 1.5); or 500ms, 30s, 1.5m, 1h.\n"
    "Output: --json (one JSON object; the default for acquire, extend, release) or\n"
    "--human (a table; the default for status and nodes). Exit status: 0 done,\n"
    "1 not done (held elsewhere, not held), 69 no quorum of usable masters\n"
    "(down, unreachable, in restart quarantine), 2 usage or configuration error;\n"
    "run exits with the command's status (see redlock run --help).\n";

// RunUsage — `run`'s usage line ends with "[--] CMD [ARGS...]": the command
// is split off before CLI11 parses, so CLI11 does not know about it.
class RunUsage : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = CLI::Formatter::make_usage(app, std::move(name));
    if (!usage.empty() && usage.back() == '\n') usage.pop_back();
    return usage + " [--] CMD [ARGS...]\n";
  }
};
}  // namespace

Commands build(CLI::App& app, Args& a) {
  app.fallthrough();  // global options are accepted after the subcommand, too
  app.set_version_flag("--version", "redlock " + std::string(redlock::version()));
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.add_option("--nodes", a.g.nodes, "Comma-separated node URLs")->type_name("URL,URL,...");
  app.add_option("--config", a.g.config_file, "JSON config file (nodes and options)")->type_name("FILE");
  app.add_option("--owner", a.g.owner,
                 "A label for the locks this command takes: status shows host:pid:LABEL as their holder")
      ->type_name("LABEL");
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
             "  redlock acquire nightly-report --ttl 30s --wait 5s\n"
             "  redlock extend nightly-report QKz1huhJ...ON~host:4242 --ttl 30s\n"
             "  redlock release nightly-report QKz1huhJ...ON~host:4242\n");

  // RESOURCE is positional, and also --resource=NAME for a name that starts
  // with "-" (which CLI11 would read as an option).
  const auto resource = [](CLI::App* cmd, std::string& into) {
    cmd->add_option("RESOURCE,--resource", into, "Name of the lock (--resource=-NAME for one that starts with \"-\")")
        ->required();
  };

  Commands c;
  c.acquire = app.add_subcommand("acquire", "Take RESOURCE on a majority of the nodes");
  resource(c.acquire, a.resource);
  c.acquire->add_option("--ttl", a.ttl, "Lock time-to-live (default: the config's default_ttl, 10s)")
      ->type_name("DURATION");
  c.acquire->add_option("-w,--wait,--timeout", a.wait, "Keep retrying this long (default 0: one attempt)")
      ->type_name("DURATION");
  c.token = c.acquire->add_option("--token", a.token,
                                  "Token to use, 1-128 of [0-9A-Za-z_-] (default: a fresh random one); re-acquiring "
                                  "with a held token refreshes the TTL")
                ->type_name("TOKEN");
  c.acquire->add_flag("-q,--quiet", a.quiet,
                      "Print nothing when the lock is held elsewhere (exit 1 says it); outages and errors still print");
  c.acquire->add_flag("--fair", a.fair,
                      "Wait in fair order: waiters get the lock in the order they came, across processes (no "
                      "--token)");
  c.acquire->footer(std::string(kGlobalHelp) +
                    "\nExamples:\n"
                    "  redlock acquire nightly-report --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,"
                    "redis://127.0.0.1:7003\n"
                    "  redlock acquire nightly-report --ttl 30s --wait 5s\n"
                    "  redlock acquire nightly-report --ttl 30s --token host1-job42 --human\n"
                    "  redlock acquire nightly-report --ttl 30s --wait 1m --fair   # first come, first served\n"
                    "\nExit status: 0 acquired, 1 held elsewhere, 69 no quorum of usable masters,\n"
                    "2 usage error.\n");

  c.extend = app.add_subcommand("extend", "Make a lock we hold live at least TTL from now (never shorter)");
  resource(c.extend, a.resource);
  c.extend->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  c.extend->add_option("--ttl", a.ttl, "Time-to-live from now; a master with more left keeps it")
      ->type_name("DURATION")
      ->required();
  c.extend->footer(std::string(kGlobalHelp) +
                   "\nextend never shortens a lock: a key with more than TTL left keeps it. The\n"
                   "validity_ms printed counts from TTL (TTL - elapsed - drift), so the lock may\n"
                   "last longer than it says; `redlock status` shows what the keys have left.\n"
                   "\nExit status: 0 extended, 1 not held (expired, taken over), 69 no quorum of\n"
                   "usable masters, 2 usage error.\n"
                   "\nExample:\n  redlock extend nightly-report QKz1huhJ...ON~host:4242 --ttl 30s\n");

  c.release = app.add_subcommand("release", "Delete the lock on every node where TOKEN holds it");
  resource(c.release, a.resource);
  c.release->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  c.release->footer(std::string(kGlobalHelp) +
                    "\nExit status: 0 released, 1 not held (expired, released, another's), 69 no\n"
                    "quorum of usable masters (the lock may still be held), 2 usage error.\n"
                    "\nExample:\n  redlock release nightly-report QKz1huhJ...ON~host:4242\n");

  RunArgs& r = a.run;
  c.run = app.add_subcommand("run", "Run a command while holding RESOURCE (a distributed flock)");
  c.run->formatter(std::make_shared<RunUsage>());
  resource(c.run, r.resource);
  c.run->add_option("--ttl", r.ttl, "Lease time-to-live, extended at 1/3 of it while CMD runs (default 10s)")
      ->type_name("DURATION");
  c.run->add_option("-w,--wait,--timeout", r.wait,
                    "Give up after waiting this long for the lock (default: wait indefinitely)")
      ->type_name("DURATION");
  c.run->add_flag("-n,--no-wait,--nonblock", r.no_wait, "Give up at once if the lock is held");
  c.run->add_option("-c,--command", a.shell_command, "Run STRING with sh -c, as flock -c (instead of CMD [ARGS...])")
      ->type_name("STRING");
  c.run->add_flag("-q,--quiet", r.quiet,
                  "Print nothing when the lock is held by another (so does -n -E 0); outages and errors still print");
  c.run->add_flag("--fence", r.fence, "Take a fencing token too; CMD gets it in REDLOCK_FENCE");
  c.run->add_option("--permits", r.permits,
                    "RESOURCE is a semaphore of P permits (1-100, the same for every user of the name): at most P "
                    "commands run at once; CMD gets its permit in REDLOCK_PERMIT")
      ->type_name("P");
  c.run->add_flag("--shared", r.shared,
                  "Hold RESOURCE shared (a read lock, as flock -s): with other --shared runs, never with an "
                  "exclusive one; a waiting exclusive run stops new shared ones");
  c.run->add_flag("-x,--exclusive", r.exclusive, "Hold RESOURCE exclusive (the default, as flock -x)");
  c.run->add_flag("--fair", r.fair,
                  "Wait in fair order: waiters get the lock in the order they came, across processes (no --fence)");
  c.run->add_option("-E,--conflict-exit-code", r.conflict_exit_code,
                    "Exit status when the lock is held by another (default 1)")
      ->type_name("N");
  c.run->add_option("--unavailable-exit-code", r.unavailable_exit_code,
                    "Exit status when no quorum of masters is usable: down, unreachable, quarantined (default 69)")
      ->type_name("N");
  c.run->add_option("--lost-exit-code", r.lost_exit_code, "Exit status when the lease was lost while CMD ran (default 3)")
      ->type_name("N");
  c.run->add_option("-s,--signal", r.signal,
                    "Signal that ends CMD's process group when the lease ends (default TERM); SIGKILL follows "
                    "--kill-after later")
      ->type_name("SIG");
  c.run->add_option("-k,--kill-after", r.kill_after,
                    "From --signal to SIGKILL when the lease ends: at most TTL/3 - margin (default 1s, or that maximum)")
      ->type_name("DURATION");
  c.run->add_option("--max-hold", r.max_hold, "Stop extending after this long: the lease is then lost")
      ->type_name("DURATION");
  c.run->add_option("--report", r.report_file,
                    "Append the JSON report (one line) to FILE, not to stderr (implies a report without --json)")
      ->type_name("FILE");
  c.run->add_flag("--foreground", r.foreground,
                  "Give CMD the terminal (an interactive CMD: it reads the tty, Ctrl-C and Ctrl-Z reach it)");
  c.run->add_flag("--campaign", r.campaign,
                  "Run CMD only while elected leader of RESOURCE (REDLOCK_FENCE: the term); stopped when the "
                  "leadership is lost, started again when re-elected; not with --permits, --shared, --fair, "
                  "--max-hold");
  c.run->add_option("--identity", r.identity,
                    "--campaign: who the leader says it is (redlock leader shows it; default host:pid)")
      ->type_name("NAME");
  c.run->add_option("--value", r.value, "--campaign: what the leader tells (an address, say; default empty)")
      ->type_name("TEXT");
  c.run->footer(
      std::string(kGlobalHelp) +
      "\nCMD runs in its own process group with REDLOCK_RESOURCE, REDLOCK_TOKEN and\n"
      "(--fence) REDLOCK_FENCE set. Every signal redlock can catch is handled: while\n"
      "CMD runs, it is passed on to CMD's group (not CHLD or PIPE, redlock's own;\n"
      "Ctrl-Z stops both, CONT continues both); while waiting, INT, TERM, HUP and\n"
      "the others that would end a process end the wait (exit 128+N).\n"
      "The lock is released once the group is empty: what CMD leaves running in\n"
      "the background (cmd &) holds it too, until it exits (processes that leave\n"
      "the group, by setsid, are not followed). If the lease is lost, or is about to\n"
      "run out unextended, the group gets --signal (SIGTERM), then SIGKILL after\n"
      "--kill-after, and never later than just before the lease's deadline. A guard\n"
      "process does the same if redlock is stopped (SIGSTOP) or killed; Ctrl-Z\n"
      "stops CMD with it. --foreground makes CMD's group the terminal's foreground\n"
      "group while it runs (when redlock's is), so the terminal's signals go to\n"
      "CMD directly; the kill schedule is the same.\n"
      "\n--campaign NAME: a leader-elected daemon. CMD runs while this redlock leads the\n"
      "election NAME (redlock leader NAME), with the term in REDLOCK_FENCE; a lost\n"
      "leadership stops CMD as a lost lock does, then redlock campaigns again (for\n"
      "as long as it takes) and starts CMD again when re-elected. -w bounds the first\n"
      "election only (default: forever). When CMD exits by itself, redlock resigns\n"
      "and exits with its status.\n"
      "\nExit status: CMD's (128+N if it died of signal N); the conflict code (1)\n"
      "when the lock is held by another; the unavailable code (69) when no quorum\n"
      "of masters is usable; the lost code (3) when the lease was lost; 125 when\n"
      "CMD succeeded but the final release failed (the lock stays until its TTL,\n"
      "or was no longer held);\n"
      "2 usage error; 126 CMD could not be run, 127 CMD not found; 128+N when\n"
      "signal N interrupted the wait.\n"
      "\nExamples:\n"
      "  redlock run nightly-report -- ./report.sh --date today\n"
      "  redlock run -w 10 nightly-report ./report.sh   # wait up to 10 s; CMD starts at the first word\n"
      "  redlock run -n -E 0 cron-job -- ./job.sh   # skip quietly if running; an outage still fails (69)\n"
      "  redlock run -w 1.5 -k 1 job -c 'make -C /srv/app deploy'   # sh -c STRING, as flock -c\n"
      "  redlock run --fence --ttl 5s --wait 1m writer -- sh -c 'write-with-fence \"$REDLOCK_FENCE\"'\n"
      "  redlock run --report runs.jsonl job -- ./job.sh   # one JSON line per run\n"
      "  redlock run --fair --wait 10m deploy -- ./deploy.sh   # deploys run in the order they came\n"
      "  redlock run --foreground -w 10s edit-config -- vi /etc/app.conf\n"
      "  redlock run --campaign --value 10.0.0.7:8080 scheduler -- ./scheduler   # one leader runs it\n"
      "\nCMD starts at the first word after RESOURCE (options after it are CMD's);\n"
      "\"--\" before CMD is optional. DURATION: seconds unless a unit is given.\n");

  c.status = app.add_subcommand("status", "Show who holds RESOURCE on each master, and who waits in its fair queue");
  resource(c.status, a.resource);
  c.status->footer(std::string(kGlobalHelp) +
                   "\nExit status: 0 when a quorum of masters answered (held or free), 1 when\n"
                   "too few did to tell.\n"
                   "\nExamples:\n  redlock status nightly-report\n  redlock status nightly-report --json | jq .held\n");

  c.nodes = app.add_subcommand("nodes", "Show each master's health, version, uptime and quarantine");
  c.nodes->add_flag("--watch", a.watch,
                    "Refresh every second (--interval) until interrupted; --json: one JSON line per refresh");
  c.nodes->add_option("--interval", a.interval, "Time between refreshes with --watch (default 1s)")
      ->type_name("DURATION");
  c.nodes->footer(std::string(kGlobalHelp) +
                  "\nExit status: 0 when a quorum of masters is up and out of quarantine (a\n"
                  "lock can be taken), 1 otherwise. --watch: 0 when SIGINT or SIGTERM ends it\n"
                  "or stdout is closed.\n"
                  "\nExamples:\n  redlock nodes\n  until redlock nodes >/dev/null; do sleep 0.5; done   # wait for a usable quorum\n"
                  "  redlock nodes --watch --interval 500ms\n"
                  "  redlock nodes --watch --json | jq -c '{usable, can_lock}'\n");

  c.leader = app.add_subcommand("leader", "Show who leads the election NAME: identity, term, value, how long");
  resource(c.leader, a.resource);
  c.leader->add_flag("--watch", a.watch,
                     "Print each change as the masters publish it, until interrupted; --json: one JSON line each");
  c.leader->footer(std::string(kGlobalHelp) +
                   "\nA leader is the fenced holder of the lock NAME whose record a majority of\n"
                   "the masters keep (a program's Client::campaign); its term is its fence.\n"
                   "\nExit status: 0 a leader, 1 no leader, 69 unknown (too few masters answered).\n"
                   "--watch: 0 when SIGINT or SIGTERM ends it or stdout is closed.\n"
                   "\nExamples:\n  redlock leader scheduler\n  redlock leader scheduler --json | jq -r .leader.value\n"
                   "  redlock leader scheduler --watch\n");
  return c;
}


CLI::App* parse_into(CLI::App& app, const Commands& c, Args& a, int argc, char** argv, std::optional<int>& help) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    help = app.exit(e);  // --help: prints the help of the subcommand asked about
    return nullptr;
  } catch (const CLI::ParseError& e) {
    if (std::string_view(e.what()) == "--resource is required")
      throw UsageError("RESOURCE is required (one that starts with \"-\": --resource=-NAME)");
    throw UsageError(e.what());
  }
  // Extras are allowed by the parser so that they can be named here.
  // CLI11 keeps a "--" that ended a command's options among the extras.
  std::vector<std::string> rest = app.remaining(true);
  std::erase(rest, "--");
  if (!rest.empty()) {
    if (rest[0].starts_with('-')) throw UsageError("unknown option " + quote(rest[0]));
    if (app.get_subcommands().empty())
      throw UsageError("unknown command " + quote(rest[0]) +
                       " (expected acquire, extend, release, run, status, nodes or leader)");
    throw UsageError("unexpected argument " + quote(rest[0]));
  }
  a.token_given = c.token->count() > 0;
  check_owner("--owner", a.g.owner);
  // An option given an empty value ("--ttl ''") is refused, not taken as
  // "not given" (--token: by check_token, as TOKEN is).
  std::vector<const CLI::App*> levels{&app};
  for (const CLI::App* sub : app.get_subcommands()) levels.push_back(sub);
  for (const CLI::App* level : levels) {
    for (const CLI::Option* o : level->get_options()) {
      if (o == c.token || o->get_positional() || o->get_type_size() == 0 || o->count() == 0) continue;
      for (const auto& v : o->results())
        if (v.empty()) throw UsageError(o->get_name() + ": must not be empty");
    }
  }
  for (CLI::App* cmd : {c.acquire, c.extend, c.release, c.run, c.status, c.nodes, c.leader})
    if (cmd->parsed()) return cmd;
  return nullptr;
}

Scan scan(const CLI::App& app, const Commands& c, int argc, char** argv) {
  Scan s;
  bool have_resource = false;
  const auto option = [&](const std::string& name) -> const CLI::Option* {
    const CLI::Option* o = s.command != nullptr ? s.command->get_option_no_throw(name) : nullptr;
    return o != nullptr ? o : app.get_option_no_throw(name);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool in_run = s.command == c.run;
    if (arg == "--") {
      if (in_run) s.end = i, s.cmd = i + 1;
      return s;
    }
    if (arg.size() > 1 && arg.front() == '-') {
      // --name=value, --name value, -x value, -xvalue, -nx value (flags first).
      if (arg.starts_with("--resource")) have_resource = true;
      if (arg.find('=') != std::string::npos && arg.starts_with("--")) continue;
      const CLI::Option* takes = nullptr;
      if (arg.starts_with("--")) {
        const CLI::Option* o = option(arg);
        if (o != nullptr && o->get_items_expected_min() > 0) takes = o;
      } else {
        for (std::size_t k = 1; k < arg.size(); ++k) {
          const CLI::Option* o = option(std::string{'-', arg[k]});
          if (o == nullptr || o->get_items_expected_min() == 0) continue;  // a flag
          if (k + 1 == arg.size()) takes = o;
          break;
        }
      }
      if (takes != nullptr) ++i;
      continue;
    }
    if (s.command == nullptr) {
      for (const CLI::App* sub : {c.acquire, c.extend, c.release, c.run, c.status, c.nodes, c.leader})
        if (sub->get_name() == arg) s.command = sub;
      if (s.command == nullptr) return s;
      continue;
    }
    if (!in_run) return s;
    if (!have_resource) {
      have_resource = true;
      continue;
    }
    s.end = s.cmd = i;
    return s;
  }
  return s;
}

}  // namespace redlock::cli
