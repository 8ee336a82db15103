// run_child.cpp — see run_child.hpp.
#include "run_child.hpp"

#include <spawn.h>

#include <string_view>

#include "redlock/config.hpp"
#include "support/process.hpp"

extern char** environ;

namespace redlock::cli {

std::vector<std::string> child_environment(const Lease& lease, bool fence) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("REDLOCK_RESOURCE=") || v.starts_with("REDLOCK_TOKEN=") || v.starts_with("REDLOCK_FENCE=") ||
        v.starts_with("REDLOCK_OWNER=") || v.starts_with("REDLOCK_PERMIT=") ||
        v.starts_with("REDLOCK_TLS_KEY=") || v.starts_with("REDLOCK_PASSWORD=") ||
        (v.starts_with("REDLOCK_NODES=") && mask_credentials(v) != v))
      continue;
    env.emplace_back(v);
  }
  env.push_back("REDLOCK_RESOURCE=" + lease.resource());
  env.push_back("REDLOCK_TOKEN=" + lease.token());
  if (const std::size_t mark = lease.token().find('~'); mark != std::string::npos)
    env.push_back("REDLOCK_OWNER=" + lease.token().substr(mark + 1));
  if (fence) env.push_back("REDLOCK_FENCE=" + std::to_string(lease.fence()));
  if (lease.permit()) env.push_back("REDLOCK_PERMIT=" + std::to_string(*lease.permit()));
  return env;
}

Spawn spawn_command(const std::vector<std::string>& command, std::vector<std::string> env, const sigset_t& watched,
                    int tty) {
  std::vector<std::string> args = command;
  std::vector<char*> argv = support::pointers(args);
  std::vector<char*> envp = support::pointers(env);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &watched);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // glibc runs file actions after setpgid and with every signal blocked,
  // so the child's tcsetpgrp is not stopped by SIGTTOU.
  if (tty >= 0) posix_spawn_file_actions_addtcsetpgrp_np(&actions, tty);
  Spawn s;
  s.error = posix_spawnp(&s.pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (s.error != 0) s.pid = -1;
  return s;
}

}  // namespace redlock::cli
