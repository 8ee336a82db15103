// skewclock-set — write a libskewclock settings file atomically.
//
//   skewclock-set FILE [offset_ms=N] [rate=R] [monotonic=0|1] [suspend_ms=N] [--wait MS]
//   skewclock-set FILE --show
//   (skewclock-set --help)
//
// Keys not given keep their value from FILE (defaults when FILE does not
// exist: offset_ms=0 rate=1 monotonic=0). The version is bumped on every
// write. --wait MS then waits until the process under the shim acknowledged
// the new version in FILE.ack. --show prints FILE and FILE.ack.
// Exit status: 0 done, 1 I/O or format error, 2 usage, 3 --wait timed out.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "skewclock.hpp"

namespace {

constexpr int kExitUsage = 2;

int usage(const std::string& why) {
  std::fprintf(stderr, "skewclock-set: %s\nRun with --help for more information.\n", why.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skewclock-set: write a libskewclock settings file atomically; keys not given keep their value.",
               "skewclock-set"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string file;
  std::vector<std::string> settings;
  bool show = false;
  long wait_ms = -1;
  app.add_option("FILE", file, "The settings file (defaults when it does not exist: offset_ms=0 rate=1 monotonic=0)")
      ->required();
  // version= and pid= are the shim's to write, not ours.
  const CLI::Validator assignment(
      [](std::string& a) {
        const std::string_view v = a;
        const bool ok = v.find('=') != v.npos && !v.starts_with("version=") && !v.starts_with("pid=");
        return ok ? std::string() : "not offset_ms=N, rate=R, monotonic=0|1 or suspend_ms=N: " + a;
      },
      "");
  auto* assignments = app.add_option("SETTING", settings, "offset_ms=N, rate=R, monotonic=0|1, suspend_ms=N")
                          ->type_name("KEY=VALUE")
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                          ->check(assignment);
  auto* wait = app.add_option("--wait", wait_ms, "Then wait until the process under the shim applied it (FILE.ack)")
                   ->type_name("MS")
                   ->check(CLI::Range(0L, std::numeric_limits<long>::max()));
  app.add_flag("--show", show, "Print FILE and FILE.ack instead")->excludes(assignments)->excludes(wait);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fputs("skewclock-set: ", stderr);
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  std::string text;
  for (const auto& a : settings) text += a + "\n";
  try {
    skewclock::Control control(file);
    if (show) {
      std::printf("%s: %s", file.c_str(), skewclock::format(control.current()).c_str());
      if (auto ack = control.ack()) {
        std::printf("%s: pid=%ld %s", control.ack_path().c_str(), static_cast<long>(ack->pid),
                    skewclock::format(ack->settings).c_str());
      } else {
        std::printf("%s: (none)\n", control.ack_path().c_str());
      }
      return 0;
    }
    if (text.empty()) return usage("nothing to set (offset_ms=, rate=, monotonic=, suspend_ms=)");
    skewclock::Settings next;
    try {
      next = skewclock::parse(text, control.current());
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
