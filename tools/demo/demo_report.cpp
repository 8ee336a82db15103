// demo_report — the verdict and the picture of one scripts/demo.sh run.
//
//   demo_report [--final-value V] [--expected E] [--store-rejected R]
//               [--injected-stalls S] [--injected-delays D]
//               [--svg OUT] [--json OUT] [--title T]
//               [--worker N] FILE... [--worker M FILE...] ...   (demo_report --help)
//
// Reads the run results, fenced_increment logs, its helpers' lines and the
// fault intervals the demo recorded (demo_input.hpp: `--worker N`
// attributes the run lines of the files after it to worker N), checks them
// with the chaos checker, draws the timeline with the chaos renderer, and
// prints a short summary: the counter against the expected value, accepted
// and rejected (stale, fenced-off) writes, writes issued after their own
// lease's deadline (on CLOCK_MONOTONIC, no fence involved), the delayed
// writes (issued in time, delivered late, and what the fence did),
// acquisitions and their latency, lost leases and commands killed on their
// lease's schedule (the stalled holders': before their deadline?),
// overlapping hold windows and lost updates, and where the SVG and JSON
// went.
//
// E is the number of increments the workers completed; the counter must
// hold E plus the delayed writes the store accepted (each of those is an
// increment the worker did again, not knowing it had landed). S and D are
// the stalls and delayed writes the demo injected: each must have left its
// record.
//
// Exit 0 when the counter equals the expected value (when both are given),
// no two hold windows overlap, no update was lost, no write was issued
// after its lease's deadline and every write could be matched to its
// lease, every stalled holder's command died before its deadline, and each
// injected delayed write was issued in time and rejected; 1 otherwise; 2 on
// a usage error or unreadable / malformed input (naming the file and line).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
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

struct Args {
  std::optional<std::int64_t> final_value, expected, store_rejected, injected_stalls, injected_delays;
  std::string svg, json_out, title = "redlock demo";
  std::vector<std::pair<std::string, int>> files;  // each FILE with the --worker given before it (-1: none)
};

// parse reads the command line into `a`; returns the exit status when the
// program is done (--help: 0; a bad argument: 2, its message on stderr).
std::optional<int> parse(int argc, char** argv, Args& a) {
  CLI::App app{"demo_report: check the records of one scripts/demo.sh run, draw its timeline, print the verdict.",
               "demo_report"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  const auto count = CLI::Range(std::int64_t{0}, std::int64_t{999'999'999'999'999'999});
  app.add_option("--final-value", a.final_value, "The counter's value at the end")->type_name("V")->check(count);
  app.add_option("--expected", a.expected, "Increments the workers completed")->type_name("E")->check(count);
  app.add_option("--store-rejected", a.store_rejected, "Stale writes the store counted")->type_name("R")->check(count);
  app.add_option("--injected-stalls", a.injected_stalls, "Holders the demo stalled")->type_name("S")->check(count);
  app.add_option("--injected-delays", a.injected_delays, "Writes the demo delayed")->type_name("D")->check(count);
  app.add_option("--svg", a.svg, "Write the timeline here")->type_name("OUT");
  app.add_option("--json", a.json_out, "Write the report here")->type_name("OUT");
  app.add_option("--title", a.title, "Title of the timeline")->type_name("T")->capture_default_str();
  // --worker N and the FILEs interleave: a FILE belongs to the last --worker before it.
  std::vector<int> workers;
  std::vector<std::string> files;
  const CLI::Option* worker = app.add_option("--worker", workers, "The run lines of the FILEs after it are worker N's")
                                  ->type_name("N")
                                  ->allow_extra_args(false)
                                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                                  ->check(CLI::Range(0, 1'000'000));
  const CLI::Option* file = app.add_option("FILE", files, "Run results, write logs, helper lines, fault intervals")
                                ->required()
                                ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::cerr << "demo_report: ";
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::size_t next_worker = 0, next_file = 0;
  int current = -1;
  for (const CLI::Option* o : app.parse_order()) {
    if (o == worker) current = workers[next_worker++];
    if (o == file) a.files.emplace_back(files[next_file++], current);
  }
  return std::nullopt;
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
  if (const auto done = parse(argc, argv, a)) return *done;

  demo::DemoInput in;
  if (auto err = read_inputs(a.files, in); !err.empty()) {
    std::cerr << "demo_report: " << err << "\n";
    return 2;
  }
  if (in.events.empty()) {
    std::cerr << "demo_report: the input files hold no records\n";
    return 2;
  }

  // The store holds one counter: the writes name one resource (the runs'
  // own, or none: DemoInput::finish), whose counter the final value is.
  std::map<std::string, std::int64_t> finals;
  for (const auto& e : in.events)
    if (a.final_value && e.type == chaos::EventType::write) finals[e.resource] = *a.final_value;
  if (finals.size() > 1) {
    std::cerr << "demo_report: the writes name " << finals.size()
              << " resources, but the store holds one counter: --final-value cannot be checked\n";
    return 2;
  }
  const chaos::CheckInput check_in{in.events, finals, 0, in.first_ns, in.last_ns};
  const chaos::CheckResult r = chaos::check(check_in);
  // The workers' increments, plus the delayed writes that landed (their
  // workers, not knowing, did those increments again).
  const std::int64_t expected = a.expected ? *a.expected + static_cast<std::int64_t>(in.delayed_accepted)
                                           : r.expected_final;
  const bool counter_ok = !a.final_value || *a.final_value == expected;
  const bool deadline_ok = in.late_issued_writes == 0 && in.unmatched_writes == 0;
  const bool stalls_ok = in.stall_kills_late == 0 &&
                         (!a.injected_stalls || *a.injected_stalls == static_cast<std::int64_t>(in.stall_records.size()));
  const bool delays_ok =
      !a.injected_delays || (*a.injected_delays == static_cast<std::int64_t>(in.delayed.size()) &&
                             in.delayed_rejected == in.delayed.size() && in.delayed_in_time == in.delayed.size());
  const bool passed = counter_ok && r.overlaps == 0 && r.lost_updates == 0 && deadline_ok && stalls_ok && delays_ok;

  if (!a.svg.empty() &&
      !write_file(a.svg, chaos::render_timeline_svg(r, chaos::fault_events(in.events), in.first_ns, in.last_ns, a.title))) {
    std::cerr << "demo_report: cannot write " << a.svg << "\n";
    return 2;
  }
  auto opt = [](const std::optional<std::int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  if (!a.json_out.empty()) {
    nlohmann::json late_runs = nlohmann::json::array();
    for (const auto& [token, lease] : in.leases)
      if (lease.late_writes > 0)
        late_runs.push_back({{"token", token}, {"worker", lease.worker}, {"late_writes", lease.late_writes}});
    nlohmann::json delayed = nlohmann::json::array();
    for (const auto& d : in.delayed)
      delayed.push_back({{"worker", d.worker},
                         {"token", d.token},
                         {"fence", d.fence},
                         {"issued_mono_us", d.issued_mono_us},
                         {"delivered_mono_us", d.delivered_mono_us},
                         {"deadline_mono_us", opt(d.deadline_mono_us)},
                         {"accepted", d.accepted ? nlohmann::json(*d.accepted) : nlohmann::json(nullptr)},
                         {"highest", d.highest},
                         {"error", d.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.error)}});
    nlohmann::json stalls = nlohmann::json::array();
    for (const auto& st : in.stall_records)
      stalls.push_back({{"worker", st.worker},
                        {"token", st.token},
                        {"cmd_exit_mono_us", opt(st.cmd_exit_mono_us)},
                        {"deadline_mono_us", opt(st.deadline_mono_us)}});
    nlohmann::json j = chaos::to_json(r, "demo", false,
                                      {{"title", a.title},
                                       {"expected", expected},
                                       {"worker_increments", opt(a.expected)},
                                       {"runs", in.runs},
                                       {"accepted_writes", in.accepted_writes},
                                       {"rejected_writes", in.rejected_writes},
                                       {"store_rejected", opt(a.store_rejected)},
                                       {"issued_writes", in.issued.size()},
                                       {"late_issued_writes", in.late_issued_writes},
                                       {"late_issued_runs", late_runs},
                                       {"unmatched_writes", in.unmatched_writes},
                                       {"closest_issue_us", opt(in.closest_issue_us)},
                                       {"delayed_writes", delayed},
                                       {"delayed_rejected", in.delayed_rejected},
                                       {"delayed_accepted", in.delayed_accepted},
                                       {"stalls", in.stalls},
                                       {"stall_records", stalls},
                                       {"stall_kills_in_time", in.stall_kills_in_time},
                                       {"stall_kills_late", in.stall_kills_late},
                                       {"killed_commands", in.killed_commands},
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
      << expected;
  if (a.expected) out << " = " << *a.expected << " increments + " << in.delayed_accepted << " delayed write(s) accepted";
  out << ")" << (counter_ok ? "" : "  <-- MISMATCH") << "\n";
  out << "writes:        " << in.accepted_writes << " accepted, " << in.rejected_writes
      << " stale write(s) rejected by the fence";
  if (a.store_rejected && *a.store_rejected != static_cast<std::int64_t>(in.rejected_writes))
    out << " (the store counted " << *a.store_rejected << ")";
  out << "\n";
  std::size_t late_runs = 0;
  for (const auto& [token, lease] : in.leases) late_runs += lease.late_writes > 0 ? 1 : 0;
  out << "issued late:   writes issued after the lease deadline: " << in.late_issued_writes << " (of "
      << in.issued.size() << " issued, in " << late_runs << " of " << in.leases.size() << " leases";
  if (in.closest_issue_us) out << "; the closest was issued " << ms1(*in.closest_issue_us) << " before its deadline";
  out << ")" << (in.late_issued_writes == 0 ? "" : "  <-- ISSUED AFTER THE DEADLINE") << "\n";
  if (in.unmatched_writes > 0)
    out << "unmatched:     " << in.unmatched_writes
        << " write(s) without a lease deadline to compare with (no token, t_mono_us or deadline_mono_us)  <-- CANNOT TELL\n";
  for (const auto& d : in.delayed) {
    out << "delayed write: worker " << d.worker << ", fence " << d.fence << ": ";
    if (!d.deadline_mono_us) {
      out << "its lease is not in the records";
    } else {
      const std::int64_t before = *d.deadline_mono_us - d.issued_mono_us;
      out << "issued " << (before >= 0 ? ms1(before) + " before" : ms1(-before) + " AFTER") << " its deadline, ";
      const std::int64_t after = d.delivered_mono_us - *d.deadline_mono_us;
      out << "delivered " << (after >= 0 ? ms1(after) + " after it" : ms1(-after) + " before it");
    }
    if (!d.accepted) out << ", not delivered: " << d.error;
    else if (*d.accepted) out << ", ACCEPTED (no higher fence had been written)";
    else out << ", rejected by the fence (highest fence " << d.highest << ")";
    out << "\n";
  }
  if (a.injected_delays && *a.injected_delays != static_cast<std::int64_t>(in.delayed.size()))
    out << "delayed write: " << *a.injected_delays << " injected, " << in.delayed.size() << " recorded  <-- MISSING\n";
  out << "acquisitions:  " << r.acquisitions << " of " << r.attempts << " attempts (" << r.failures
      << " not acquired); time to acquire (waiting included) p50 " << ms1(r.p50_us) << ", p99 " << ms1(r.p99_us) << "\n";
  out << "lost leases:   " << in.lost_leases << " reported by redlock run, " << in.overdue_holds
      << " held past their deadline; holders stalled on purpose: " << in.stalls << "\n";
  out << "killed:        " << in.killed_commands << " command(s) killed by a signal when their lease ran out";
  for (const auto& st : in.stall_records) {
    out << "; stalled holder (worker " << st.worker << "): ";
    if (!st.cmd_exit_mono_us) out << "its command outlived the stall  <-- NOT KILLED";
    else if (!st.deadline_mono_us) out << "its lease is not in the records  <-- CANNOT TELL";
    else if (*st.cmd_exit_mono_us <= *st.deadline_mono_us)
      out << "its command died " << ms1(*st.deadline_mono_us - *st.cmd_exit_mono_us) << " before its deadline";
    else out << "its command died " << ms1(*st.cmd_exit_mono_us - *st.deadline_mono_us) << " AFTER its deadline";
  }
  out << "\n";
  if (a.injected_stalls && *a.injected_stalls != static_cast<std::int64_t>(in.stall_records.size()))
    out << "stalls:        " << *a.injected_stalls << " injected, " << in.stall_records.size() << " recorded  <-- MISSING\n";
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
