// demo_report — the verdict and the picture of one scripts/demo.sh run.
//
//   demo_report [--final-value V] [--expected E] [--store-rejected R]
//               [--svg OUT] [--json OUT] [--title T]
//               [--worker N] FILE... [--worker M FILE...] ...
//
// Reads the run results, fenced_increment logs and fault intervals the demo
// recorded (demo_input.hpp: `--worker N` attributes the run lines of the
// files after it to worker N), checks them with the chaos checker, draws the
// timeline with the chaos renderer, and prints a short summary: the counter
// against the expected value, accepted and rejected (stale, fenced-off)
// writes, acquisitions and their latency, lost leases, overlapping hold
// windows and lost updates, and where the SVG and JSON went.
//
// Exit 0 when the counter equals the expected value (when both are given),
// no two hold windows overlap and no update was lost; 1 otherwise; 2 on a
// usage error or unreadable / malformed input (naming the file and line).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checker.hpp"
#include "demo_input.hpp"
#include "timeline_svg.hpp"

namespace {

using namespace redlock;

constexpr const char* kUsage =
    "usage: demo_report [--final-value V] [--expected E] [--store-rejected R]\n"
    "                   [--svg OUT] [--json OUT] [--title T] [--worker N] FILE... [--worker M FILE...]...\n";

struct Args {
  std::optional<std::int64_t> final_value, expected, store_rejected;
  std::string svg, json_out, title = "redlock demo";
};

int usage(const std::string& why) {
  std::cerr << "demo_report: " << why << "\n" << kUsage;
  return 2;
}

std::optional<std::int64_t> number(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) return std::nullopt;
  return std::stoll(s);
}

std::string ms1(std::int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(us) / 1000.0);
  return buf;
}

bool write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  return static_cast<bool>(out);
}

// read_inputs adds every FILE argument to `in`; options are already taken.
// Returns an error text, empty on success.
std::string read_inputs(const std::vector<std::pair<std::string, int>>& files, demo::DemoInput& in) {
  for (const auto& [path, worker] : files) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return "cannot read " + path;
    std::ostringstream text;
    text << f.rdbuf();
    try {
      in.add(text.str(), path, worker);
    } catch (const demo::InputError& e) {
      return e.what();
    }
  }
  in.finish();
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::vector<std::pair<std::string, int>> files;
  int worker = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "-h" || opt == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (opt.rfind("--", 0) != 0) {
      files.emplace_back(opt, worker);
      continue;
    }
    if (i + 1 >= argc) return usage(opt + ": missing value");
    const std::string val = argv[++i];
    if (opt == "--svg") a.svg = val;
    else if (opt == "--json") a.json_out = val;
    else if (opt == "--title") a.title = val;
    else if (opt == "--final-value" || opt == "--expected" || opt == "--store-rejected" || opt == "--worker") {
      const auto n = number(val);
      if (!n) return usage(opt + ": expected a whole number, got '" + val + "'");
      if (opt == "--final-value") a.final_value = n;
      else if (opt == "--expected") a.expected = n;
      else if (opt == "--store-rejected") a.store_rejected = n;
      else if (*n > 1'000'000) return usage("--worker: " + val + " is too large");
      else worker = static_cast<int>(*n);
    } else {
      return usage("unknown option " + opt);
    }
  }
  if (files.empty()) return usage("no input files");

  demo::DemoInput in;
  if (auto err = read_inputs(files, in); !err.empty()) {
    std::cerr << "demo_report: " << err << "\n";
    return 2;
  }
  if (in.events.empty()) {
    std::cerr << "demo_report: the input files hold no records\n";
    return 2;
  }

  const chaos::CheckInput check_in{in.events, a.final_value.value_or(-1), 0, in.first_ns, in.last_ns};
  const chaos::CheckResult r = chaos::check(check_in);
  const std::int64_t expected = a.expected.value_or(r.expected_final);
  const bool counter_ok = !a.final_value || *a.final_value == expected;
  const bool passed = counter_ok && r.overlaps == 0 && r.lost_updates == 0;

  if (!a.svg.empty() &&
      !write_file(a.svg, chaos::render_timeline_svg(r, chaos::fault_events(in.events), in.first_ns, in.last_ns, a.title))) {
    std::cerr << "demo_report: cannot write " << a.svg << "\n";
    return 2;
  }
  if (!a.json_out.empty()) {
    nlohmann::json j = chaos::to_json(r, "demo", false,
                                      {{"title", a.title},
                                       {"expected", expected},
                                       {"runs", in.runs},
                                       {"accepted_writes", in.accepted_writes},
                                       {"rejected_writes", in.rejected_writes},
                                       {"store_rejected", a.store_rejected ? nlohmann::json(*a.store_rejected) : nullptr},
                                       {"stalls", in.stalls},
                                       {"lost_leases", in.lost_leases},
                                       {"overdue_holds", in.overdue_holds},
                                       {"timeline", a.svg.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.svg)}});
    j["passed"] = passed;
    if (!write_file(a.json_out, j.dump(2) + "\n")) {
      std::cerr << "demo_report: cannot write " << a.json_out << "\n";
      return 2;
    }
  }

  auto& out = std::cout;
  out << "counter:       " << (a.final_value ? std::to_string(*a.final_value) : "(not read)") << " (expected "
      << expected << ")" << (counter_ok ? "" : "  <-- MISMATCH") << "\n";
  out << "writes:        " << in.accepted_writes << " accepted, " << in.rejected_writes
      << " stale write(s) rejected by the fence";
  if (a.store_rejected && *a.store_rejected != static_cast<std::int64_t>(in.rejected_writes))
    out << " (the store counted " << *a.store_rejected << ")";
  out << "\n";
  out << "acquisitions:  " << r.acquisitions << " of " << r.attempts << " attempts (" << r.failures
      << " not acquired); time to acquire (waiting included) p50 " << ms1(r.p50_us) << ", p99 " << ms1(r.p99_us) << "\n";
  out << "lost leases:   " << in.lost_leases << " reported by redlock run, " << in.overdue_holds
      << " held past their deadline; holders stalled on purpose: " << in.stalls << "\n";
  out << "overlaps:      " << r.overlaps << " overlapping hold windows\n";
  out << "lost updates:  " << r.lost_updates << "\n";
  if (r.stale_writes > 0) out << "late writes:   " << r.stale_writes << " accepted after their lease's deadline\n";
  for (const auto& f : r.recoveries)
    out << "fault:         " << f.what << ", " << ms1((f.end - f.start) / 1000) << ", next lock "
        << (f.recovery_ms < 0 ? std::string("never") : std::to_string(f.recovery_ms) + " ms") << " after it\n";
  if (!a.svg.empty()) out << "timeline:      " << a.svg << "\n";
  if (!a.json_out.empty()) out << "report:        " << a.json_out << "\n";
  return passed ? 0 : 1;
}
