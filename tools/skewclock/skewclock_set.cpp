// skewclock-set — write a libskewclock settings file atomically.
//
//   skewclock-set FILE [offset_ms=N] [rate=R] [monotonic=0|1] [--wait MS]
//   skewclock-set FILE --show
//
// Keys not given keep their value from FILE (defaults when FILE does not
// exist: offset_ms=0 rate=1 monotonic=0). The version is bumped on every
// write. --wait MS then waits until the process under the shim acknowledged
// the new version in FILE.ack. --show prints FILE and FILE.ack.
// Exit status: 0 done, 1 I/O or format error, 2 usage, 3 --wait timed out.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "skewclock.hpp"

namespace {

constexpr const char* kUsage =
    "usage: skewclock-set FILE [offset_ms=N] [rate=R] [monotonic=0|1] [--wait MS]\n"
    "       skewclock-set FILE --show\n"
    "Writes FILE atomically; keys not given keep their current value.\n"
    "--wait MS: wait until the process under the shim applied it (FILE.ack).\n";

int usage(const std::string& why) {
  std::fprintf(stderr, "skewclock-set: %s\n%s", why.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2) return usage("missing FILE");
  const std::string file = argv[1];
  std::string assignments;
  bool show = false;
  long wait_ms = -1;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--show") {
      show = true;
    } else if (a == "--wait") {
      if (i + 1 >= argc) return usage("--wait needs a number of milliseconds");
      std::string_view v = argv[++i];
      auto r = std::from_chars(v.data(), v.data() + v.size(), wait_ms);
      if (r.ec != std::errc{} || r.ptr != v.data() + v.size() || wait_ms < 0)
        return usage("--wait: not a number of milliseconds: " + std::string(v));
    } else if (a.find('=') != std::string_view::npos && a.substr(0, 8) != "version=" &&
               a.substr(0, 4) != "pid=") {
      assignments += std::string(a) + "\n";
    } else {
      return usage("unexpected argument: " + std::string(a));
    }
  }
  try {
    skewclock::Control control(file);
    if (show) {
      if (!assignments.empty() || wait_ms >= 0) return usage("--show takes no other arguments");
      std::printf("%s: %s", file.c_str(), skewclock::format(control.current()).c_str());
      if (auto ack = control.ack()) {
        std::printf("%s: pid=%ld %s", control.ack_path().c_str(), static_cast<long>(ack->pid),
                    skewclock::format(ack->settings).c_str());
      } else {
        std::printf("%s: (none)\n", control.ack_path().c_str());
      }
      return 0;
    }
    if (assignments.empty()) return usage("nothing to set (offset_ms=, rate=, monotonic=)");
    skewclock::Settings next;
    try {
      next = skewclock::parse(assignments, control.current());
    } catch (const std::invalid_argument& e) {
      return usage(e.what());
    }
    const std::uint64_t version = control.set(next);
    if (wait_ms >= 0 && !control.wait_applied(std::chrono::milliseconds(wait_ms), version)) {
      std::fprintf(stderr, "skewclock-set: %s: version %llu not acknowledged within %ld ms\n",
                   file.c_str(), static_cast<unsigned long long>(version), wait_ms);
      return 3;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "skewclock-set: %s\n", e.what());
    return 1;
  }
}
