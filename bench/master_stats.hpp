// master_stats.hpp — the masters' INFO commandstats + cpu as scripts/bench.sh
// saves them (`redis-cli INFO commandstats cpu` of every master, one after
// the other in one file), summed over the masters; read by bench_crowd_merge
// and by redlock_bench's leases scenario. Header-only, standard library only.
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace bench {

// MasterStats — one snapshot: calls per command (lower case, as commandstats
// names them) and used_cpu_user + used_cpu_sys, summed over `masters`.
struct MasterStats {
  std::map<std::string, long long> calls;
  double cpu_seconds = 0;
  int masters = 0;
};

// read_master_stats reads a snapshot file into `out`; returns what is wrong
// with it, or "" (a file with no INFO cpu section is wrong).
inline std::string read_master_stats(const std::string& path, MasterStats& out) {
  std::ifstream f(path);
  if (!f) return "cannot read " + path;
  out = MasterStats{};
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("cmdstat_", 0) == 0) {
      const auto colon = line.find(':'), calls = line.find("calls=");
      if (colon == std::string::npos || calls == std::string::npos) return path + ": bad line '" + line + "'";
      out.calls[line.substr(8, colon - 8)] += std::atoll(line.c_str() + calls + 6);
    } else if (line.rfind("used_cpu_sys:", 0) == 0 || line.rfind("used_cpu_user:", 0) == 0) {
      out.cpu_seconds += std::atof(line.c_str() + line.find(':') + 1);
      if (line.rfind("used_cpu_sys:", 0) == 0) ++out.masters;
    }
  }
  if (out.masters == 0) return path + ": no INFO cpu section in it";
  return {};
}

// command_deltas: calls per command, after − before, of the commands that
// ran in between; the runner's own INFO calls are left out.
inline std::map<std::string, long long> command_deltas(const MasterStats& before, const MasterStats& after) {
  std::map<std::string, long long> delta;
  for (const auto& [name, calls] : after.calls) {
    if (name == "info") continue;  // the runner's snapshots
    const auto it = before.calls.find(name);
    const long long d = calls - (it == before.calls.end() ? 0 : it->second);
    if (d > 0) delta[name] = d;
  }
  return delta;
}

}  // namespace bench
