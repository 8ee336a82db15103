// commands.hpp — what the command line asked for (Args) and the handler of
// each `redlock` subcommand but run (run.hpp): each parses its own values,
// asks the masters, prints, and returns the exit status.
#pragma once

#include <string>

#include "common.hpp"
#include "run.hpp"

namespace redlock::cli {

// What the command line asked for, as given (validated by the commands).
struct Args {
  Globals g;
  std::string resource;
  std::string token;         // extend/release: positional; acquire: --token
  bool token_given = false;  // acquire: --token was given (perhaps as '')
  bool fair = false;         // acquire: --fair
  bool quiet = false;        // acquire: -q, nothing printed when the lock is held elsewhere
  std::string shell_command; // run -c: run through sh -c
  std::string ttl, wait;     // acquire/extend: raw text, validated by parse_duration
  bool watch = false;        // nodes --watch, leader --watch
  std::string interval;      // nodes --interval (only with --watch)
  RunArgs run;
};

// acquire, extend and release (lock_commands.cpp).
int run_acquire(const Args& a);
int run_extend(const Args& a);
int run_release(const Args& a);
// status RESOURCE (status.cpp).
int run_status(const Args& a);
// nodes [--watch] (nodes.cpp).
int run_nodes(const Args& a);
// leader NAME [--watch] (leader.cpp).
int run_leader(const Args& a);

}  // namespace redlock::cli
