// test_demo_input.cpp — demo_report's reading of what scripts/demo.sh
// records: each kind of line becomes the events the chaos checker expects,
// and a bad line is an error naming its source and line.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "checker.hpp"
#include "demo_input.hpp"

using namespace redlock;
using chaos::EventType;

namespace {

std::size_t count(const demo::DemoInput& in, EventType type) {
  std::size_t n = 0;
  for (const auto& e : in.events) n += e.type == type ? 1 : 0;
  return n;
}

const std::string kRun =
    R"({"command":"run","resource":"c","acquired":true,"token":"aa","fence":1,"started_at_us":100,)"
    R"("acquired_at_us":150,"acquire_us":50,"deadline_at_us":1150,"released_at_us":400,"lost":null})";
const std::string kWrite =
    R"({"t_us":300,"worker":null,"resource":"c","fence":1,"read":0,"wrote":1,"accepted":true,"stalled":false})";

}  // namespace

TEST_CASE("an acquired run is invoke, ok (deadline, latency) and release, in ns") {
  demo::DemoInput in;
  in.add(kRun + "\n", "runs", 4);
  REQUIRE(in.events.size() == 3);
  CHECK(in.events[0].type == EventType::invoke);
  CHECK(in.events[1].type == EventType::ok);
  CHECK(in.events[1].t == 150'000);
  CHECK(in.events[1].deadline == 1'150'000);
  CHECK(in.events[1].latency_us == 50);
  CHECK(in.events[2].type == EventType::release);
  CHECK(in.events[2].t == 400'000);
  for (const auto& e : in.events) CHECK(e.client == 4);
  CHECK(in.runs == 1);
  CHECK(in.lost_leases == 0);
  CHECK(in.overdue_holds == 0);
}

TEST_CASE("a run that was not acquired is a fail after its wait; a lost lease is counted") {
  demo::DemoInput in;
  in.add(R"({"command":"run","resource":"c","acquired":false,"started_at_us":100,"acquire_us":30,)"
         R"("code":"redlock.held","error":"held by another"})"
         "\n\n" +
             std::string(R"({"command":"run","resource":"c","acquired":true,"started_at_us":1,"acquired_at_us":2,)"
                         R"("acquire_us":1,"deadline_at_us":5,"released_at_us":null,"lost":"expired"})"),
         "runs", 1);
  CHECK(count(in, EventType::fail) == 1);
  CHECK(in.events[1].t == 130'000);
  CHECK(in.events[1].code == "redlock.held");
  CHECK(count(in, EventType::release) == 0);  // no release: the window lasts to its deadline
  CHECK(in.lost_leases == 1);
  CHECK(in.overdue_holds == 1);  // never released
  in.add(R"({"command":"run","resource":"c","acquired":true,"started_at_us":1,"acquired_at_us":2,)"
         R"("acquire_us":1,"deadline_at_us":5,"released_at_us":6,"lost":null})",
         "runs", 1);
  CHECK(in.overdue_holds == 2);  // released after its deadline, though "lost" was not set
}

TEST_CASE("accepted writes become write events; rejected ones are only counted; a stall is a fault") {
  demo::DemoInput in;
  in.add(kWrite + "\n" +
             R"({"t_us":900,"worker":2,"fence":1,"read":0,"wrote":1,"accepted":false,"stalled":true,)"
             R"("stall_start_us":200,"stall_end_us":950})",
         "writes", 3);
  CHECK(count(in, EventType::write) == 1);
  CHECK(in.events[0].client == 3);  // "worker": null → the file's worker
  CHECK(in.accepted_writes == 1);
  CHECK(in.rejected_writes == 1);
  REQUIRE(count(in, EventType::fault) == 1);
  CHECK(in.events[1].error == "holder stalled (worker 2)");
  CHECK(in.events[1].deadline == 950'000);
  CHECK(in.last_ns == 950'000);
}

TEST_CASE("fault lines, and the checker sees one clean hold with its write") {
  demo::DemoInput in;
  in.add(kRun + "\n" + kWrite + "\n", "w1", 1);
  in.add(R"({"what":"master 1 down","start_us":120,"end_us":200})", "faults", -1);
  in.finish();
  CHECK(in.faults == 1);
  const auto r = chaos::check({in.events, {{"c", 1}}, 0, in.first_ns, in.last_ns});  // the counter of "c"
  CHECK(r.acquisitions == 1);
  CHECK(r.overlaps == 0);
  CHECK(r.lost_updates == 0);
  CHECK_FALSE(r.final_mismatch);
  CHECK(r.stale_writes == 0);
  CHECK(r.recoveries.size() == 1);
}

TEST_CASE("finish gives resource-less writes the runs' one resource") {
  demo::DemoInput in;
  in.add(kRun + "\n" + R"({"t_us":300,"fence":1,"read":0,"wrote":1,"accepted":true})", "w", 1);
  in.finish();
  CHECK(in.events.back().resource == "c");
}

TEST_CASE("bad lines are errors naming the source and line") {
  demo::DemoInput in;
  auto error_of = [&](const std::string& text, int worker) -> std::string {
    try {
      in.add(text, "f.jsonl", worker);
    } catch (const demo::InputError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of("\n{nope", 1) == "f.jsonl:2: not a JSON line");
  CHECK(error_of(kRun, -1) == "f.jsonl:1: a run result, but no --worker was given for this file");
  CHECK(error_of(R"({"what":"x","start_us":5})", -1) == "f.jsonl:1: missing field \"end_us\"");
  CHECK(error_of(R"({"what":"x","start_us":5,"end_us":4})", -1) == "f.jsonl:1: fault \"x\" ends before it starts");
  CHECK(error_of(R"({"t_us":"soon","accepted":true,"worker":1})", -1) ==
        "f.jsonl:1: field \"t_us\" is not an integer");
  CHECK(error_of(R"({"hello":1})", 1).find("neither a run result") != std::string::npos);
  CHECK(error_of("[1]", 1) == "f.jsonl:1: not a JSON object");
}

namespace {

// A run holding `token`, whose lease's last deadline is `deadline_mono` (CLOCK_MONOTONIC µs).
std::string run_line(const std::string& token, long long deadline_mono) {
  return R"({"command":"run","resource":"c","acquired":true,"token":")" + token +
         R"(","fence":1,"started_at_us":100,"acquired_at_us":150,"acquire_us":50,"deadline_at_us":1150,)"
         R"("deadline_mono_us":)" + std::to_string(deadline_mono) +
         R"(,"released_at_us":400,"lost":null,"child_signal":null})" "\n";
}

std::string write_line(const std::string& token, long long issued_mono, bool accepted = true) {
  return R"({"t_us":300,"t_mono_us":)" + std::to_string(issued_mono) + R"(,"worker":null,"resource":"c","token":")" +
         token + R"(","fence":1,"read":0,"wrote":1,"accepted":)" + (accepted ? "true" : "false") + "}\n";
}

}  // namespace

TEST_CASE("writes are matched to their lease by token: issued after its deadline_mono_us is late-issued") {
  demo::DemoInput in;
  in.add(run_line("aa", 5'000) + run_line("bb", 9'000), "runs", 1);
  in.add(write_line("aa", 4'000) + write_line("bb", 8'990, false) + write_line("aa", 5'001), "writes", 1);
  in.finish();
  CHECK(in.issued.size() == 3);
  CHECK(in.late_issued_writes == 1);  // 5001 > 5000; a rejected write counts as issued too
  CHECK(in.leases["aa"].late_writes == 1);
  CHECK(in.leases["bb"].late_writes == 0);
  CHECK(in.unmatched_writes == 0);
  REQUIRE(in.closest_issue_us.has_value());
  CHECK(*in.closest_issue_us == 10);  // bb's write, 10 µs before its deadline
  CHECK(in.leases["aa"].worker == 1);
}

TEST_CASE("a write with no issue time, no token or no lease with a deadline is unmatched, not in time") {
  demo::DemoInput in;
  in.add(run_line("aa", 5'000), "runs", 1);
  in.add(kWrite + "\n" + write_line("zz", 1) +
             R"({"t_us":300,"worker":1,"token":"aa","fence":1,"read":0,"wrote":1,"accepted":true})",
         "writes", 1);
  in.finish();
  CHECK(in.unmatched_writes == 3);
  CHECK(in.late_issued_writes == 0);
  CHECK_FALSE(in.closest_issue_us.has_value());
}

TEST_CASE("a stall line is a fault; its command's death is compared with its lease's deadline") {
  demo::DemoInput in;
  in.add(run_line("aa", 5'000) + run_line("bb", 9'000) +
             R"({"command":"run","resource":"c","acquired":true,"token":"cc","started_at_us":1,"acquired_at_us":2,)"
             R"("acquire_us":1,"deadline_at_us":5,"deadline_mono_us":7000,"released_at_us":6,)"
             R"("lost":"redlock.lost: not extended in time","child_signal":15})",
         "runs", 2);
  in.add(R"({"kind":"stall","worker":2,"token":"cc","stall_start_us":10,"stall_end_us":3010,"cmd_exit_mono_us":6700})"
         "\n"
         R"({"kind":"stall","worker":2,"token":"bb","stall_start_us":20,"stall_end_us":3020,"cmd_exit_mono_us":9001})"
         "\n"
         R"({"kind":"stall","worker":2,"token":"aa","stall_start_us":30,"stall_end_us":3030,"cmd_exit_mono_us":null})",
         "faults", -1);
  in.finish();
  CHECK(in.killed_commands == 1);  // cc: lost, and its command died of signal 15
  CHECK(in.stalls == 3);
  CHECK(count(in, EventType::fault) == 3);
  CHECK(in.stall_kills_in_time == 1);  // cc: dead 300 µs before its deadline
  CHECK(in.stall_kills_late == 2);     // bb: 1 µs after; aa: outlived the stall
  REQUIRE(in.stall_records.size() == 3);
  CHECK(*in.stall_records[0].deadline_mono_us == 7000);
}

TEST_CASE("a delayed write: issued in time, delivered late; rejected is counted, accepted is a write at delivery") {
  const std::string rejected =
      R"({"kind":"delayed_write","worker":3,"resource":"c","token":"aa","fence":4,"t_us":300,"t_mono_us":4000,)"
      R"("delivered_us":1800,"delivered_mono_us":5500,"delay_ms":1500,"read":7,"wrote":8,"accepted":false,)"
      R"("highest":9,"pid":11,"cmd_pid":10})";
  demo::DemoInput in;
  in.add(run_line("aa", 5'000), "runs", 3);
  in.add(rejected + "\n", "faults", -1);
  in.finish();
  CHECK(in.rejected_writes == 1);
  CHECK(in.delayed_rejected == 1);
  CHECK(in.delayed_in_time == 1);
  CHECK(in.delayed_arrived_late == 1);
  CHECK(in.late_issued_writes == 0);  // issued 1000 µs before the deadline: it is the network that was late
  CHECK(count(in, EventType::write) == 0);
  REQUIRE(count(in, EventType::fault) == 1);
  CHECK(in.events.back().error == "write delayed (worker 3)");
  CHECK(in.events.back().t == 300'000);
  CHECK(in.events.back().deadline == 1'800'000);
  REQUIRE(in.delayed.size() == 1);
  CHECK(in.delayed[0].highest == 9);
  CHECK(*in.delayed[0].deadline_mono_us == 5000);

  demo::DemoInput acc;
  std::string accepted = rejected;
  accepted.replace(accepted.find("\"accepted\":false"), 16, "\"accepted\":true");
  acc.add(accepted, "faults", -1);
  acc.add(R"({"kind":"delayed_write","worker":3,"token":"aa","fence":4,"t_us":1,"t_mono_us":1,"delivered_us":2,)"
          R"("delivered_mono_us":2,"read":7,"wrote":8,"accepted":null,"error":"fenced store: no reply"})",
          "faults", -1);
  acc.finish();
  CHECK(acc.delayed_accepted == 1);
  CHECK(acc.accepted_writes == 1);
  CHECK(acc.delayed_failed == 1);
  CHECK(count(acc, EventType::write) == 1);
  for (const auto& e : acc.events)
    if (e.type == EventType::write) CHECK(e.t == 1'800'000);  // when it changed the store
  CHECK(acc.unmatched_writes == 2);  // no run line for "aa" here
}

TEST_CASE("bad helper lines are errors naming the source and line") {
  demo::DemoInput in;
  auto error_of = [&](const std::string& text) -> std::string {
    try {
      in.add(text, "f.jsonl", -1);
    } catch (const demo::InputError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of(R"({"kind":"nap","worker":1})") == "f.jsonl:1: unknown \"kind\": \"nap\"");
  CHECK(error_of(R"({"kind":"stall","token":"a"})") ==
        "f.jsonl:1: a \"stall\" line without a worker, and no --worker was given for this file");
  CHECK(error_of(R"({"kind":"stall","worker":1,"stall_start_us":5})") == "f.jsonl:1: missing field \"stall_end_us\"");
  CHECK(error_of(R"({"kind":"delayed_write","worker":1,"fence":1,"t_us":1,"t_mono_us":9,"delivered_us":2,)"
                 R"("delivered_mono_us":8})") == "f.jsonl:1: delivered before it was issued");
}
