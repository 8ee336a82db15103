// command_line.hpp — the `redlock` command line as CLI11 reads it: every
// option and subcommand with its help (build), the parse into Args with the
// checks CLI11 does not make (parse_into), and where `run`'s CMD starts (scan).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

#include "commands.hpp"

namespace redlock::cli {

// Commands — the subcommands build declared, and acquire's --token option
// (given or not: an empty token is still one).
struct Commands {
  CLI::Option* token = nullptr;  // acquire --token
  CLI::App* acquire = nullptr;
  CLI::App* extend = nullptr;
  CLI::App* release = nullptr;
  CLI::App* run = nullptr;
  CLI::App* status = nullptr;
  CLI::App* nodes = nullptr;
  CLI::App* leader = nullptr;
};

// build declares every option and subcommand of `app`, parsed into `a`.
Commands build(CLI::App& app, Args& a);

// parse_into parses argv[0..argc) into `a`; returns the command chosen (or
// null) and sets `help_status` when --help was asked for.
CLI::App* parse_into(CLI::App& app, const Commands& c, Args& a, int argc, char** argv, std::optional<int>& help);

// Scan — the command a command line names, and for `run` where CMD starts.
struct Scan {
  const CLI::App* command = nullptr;  // the subcommand word, if any
  int end = -1;                       // run: argv[1, end) are redlock's own arguments
  int cmd = -1;                       // run: CMD is argv[cmd, argc)
};

// scan walks argv as CLI11 will read it, skipping each option's value, to
// find the subcommand and, for `run`, its CMD: after "--", else at the
// first word after RESOURCE (as flock's and timeout's commands start), so
// that CMD's own options never reach our parser.
Scan scan(const CLI::App& app, const Commands& c, int argc, char** argv);

}  // namespace redlock::cli
