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
  const auto r = chaos::check({in.events, 1, 0, in.first_ns, in.last_ns});
  CHECK(r.acquisitions == 1);
  CHECK(r.overlaps == 0);
  CHECK(r.lost_updates == 0);
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
