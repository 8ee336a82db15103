// cli/main.cpp — the `redlock` command: one lock across N independent Redis
// masters, from a shell.
//
//   redlock acquire RESOURCE [--ttl DURATION] [-w DURATION] [--token TOKEN]
//   redlock extend  RESOURCE TOKEN --ttl DURATION
//   redlock release RESOURCE TOKEN
//   redlock run     [options] RESOURCE [--] CMD [ARGS...]  (a distributed flock)
//   redlock run     [options] RESOURCE -c 'SHELL COMMAND'
//   redlock status  RESOURCE
//   redlock nodes   [--watch [--interval DURATION]]
//   redlock leader  NAME [--watch]
//
// Nodes come from --nodes, else --config, else REDLOCK_NODES, else
// REDLOCK_CONFIG. Output: one JSON object (--json; the default for acquire,
// extend, release) or a human table (--human; the default for status and
// nodes; run prints only messages unless --json). Exit status: 0 done, 1
// not done (held elsewhere, not held), 69 no quorum of usable masters, 2
// usage or configuration error; run exits with its command's status.
// docs/cli.md is the reference. This file runs the subcommand the command
// line names (command_line.hpp) and turns a usage error into exit status 2.
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "command_line.hpp"
#include "commands.hpp"

namespace redlock::cli {
namespace {

// guarded runs one command's body: what it did not expect (a bug, memory
// exhaustion) is reported naming the command, exit 1; a usage error goes on
// to main(). The body itself keeps its own promises when that happens:
// acquire releases a lock it could not print, run keeps supervising CMD.
template <class Body>
int guarded(const char* name, Body body) {
  try {
    return body();
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << terminal_safe("redlock: " + std::string(name) + ": internal error: " + e.what()) << '\n';
    return kExitNotDone;
  }
}

int run(int argc, char** argv, std::string& usage_help) {
  Args a;
  CLI::App app{"redlock — one lock across N independent Redis masters (Redlock).", "redlock"};
  Commands c = build(app, a);
  const Scan where = scan(app, c, argc, argv);
  if (where.command != nullptr) usage_help = "redlock " + where.command->get_name() + " --help";
  // Not `run`'s CMD: the first "--" may still end options (acquire -- -name).
  int dash = where.end;
  if (where.command != c.run) {
    for (int i = 1; i < argc && dash < 0; ++i)
      if (std::string_view(argv[i]) == "--") dash = i;
  }
  std::optional<int> help;
  CLI::App* cmd = nullptr;
  std::optional<UsageError> split_error;
  try {
    cmd = parse_into(app, c, a, dash >= 0 ? dash : argc, argv, help);
  } catch (const UsageError& e) {
    if (dash < 0) throw;
    split_error = e;  // perhaps not `run`: then "--" only ends the options (acquire -- -name)
  }
  if (help) return *help;
  if (cmd != c.run && dash >= 0) {
    // Not `run`: "--" means "no more options" as usual; parse everything.
    a = Args{};
    CLI::App again{"redlock", "redlock"};
    c = build(again, a);
    try {
      cmd = parse_into(again, c, a, argc, argv, help);
    } catch (const UsageError&) {
      if (split_error && c.run->parsed()) throw *split_error;  // run's own options are before "--"
      throw;
    }
    if (help) return *help;
    if (cmd == c.run && split_error) throw *split_error;
  }
  if (cmd == c.run) {
    if (where.cmd >= 0) a.run.command.assign(argv + where.cmd, argv + argc);
    if (c.run->get_option("--command")->count() > 0) {
      if (!a.run.command.empty())
        throw UsageError("run: -c and a command: give only one of them (redlock run RESOURCE -c 'STRING', or "
                         "redlock run RESOURCE CMD [ARGS...])");
      if (a.shell_command.empty()) throw UsageError("-c: must not be empty");
      a.run.command = {"/bin/sh", "-c", a.shell_command};
    }
    if (a.run.command.empty())
      throw UsageError("run: no command given: redlock run [OPTIONS] RESOURCE [--] CMD [ARGS...], or -c 'STRING'");
  }
  if (cmd == c.acquire) return guarded("acquire", [&] { return run_acquire(a); });
  if (cmd == c.extend) return guarded("extend", [&] { return run_extend(a); });
  if (cmd == c.release) return guarded("release", [&] { return run_release(a); });
  if (cmd == c.run) return guarded("run", [&] { return run_command(a.g, a.run); });
  if (cmd == c.status) return guarded("status", [&] { return run_status(a); });
  if (cmd == c.nodes) return guarded("nodes", [&] { return run_nodes(a); });
  if (cmd == c.leader) return guarded("leader", [&] { return run_leader(a); });
  throw UsageError("no command given (expected acquire, extend, release, run, status, nodes or leader)");
}

}  // namespace
}  // namespace redlock::cli

// Every usage error passes here: the library's messages are masked
// already, but CLI11's and ours echo arguments ("unknown option
// --bogus=redis://:pw@h", "--ttl: \"…\" is not a duration"), so mask them all.
int main(int argc, char** argv) {
  std::string usage_help = "redlock --help";  // the help of the command given, once known
  try {
    return redlock::cli::run(argc, argv, usage_help);
  } catch (const redlock::cli::UsageError& e) {
    std::cerr << redlock::cli::terminal_safe("redlock: " + redlock::mask_credentials(e.what()))
              << "\nRun '" << usage_help << "' for usage.\n";
    return redlock::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << redlock::cli::terminal_safe("redlock: internal error: " + redlock::mask_credentials(e.what())) << '\n';
    return redlock::cli::kExitNotDone;
  }
}
