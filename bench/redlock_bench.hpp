// redlock_bench.hpp — what the files of redlock_bench share (bench/CONTRACT.md):
// the metrics a scenario reports, its helpers, and each scenario's entry
// point. Arguments, set-up and output: redlock_bench.cpp; the scenarios:
// redlock_scenarios.cpp and redlock_failover.cpp.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "redlock/redlock.hpp"

namespace redlock_bench {

// Metrics: "ops", "seconds", "errors", and where the scenario has them
// "cpu_us_per_op", "bytes_per_lock", "heap_bytes_per_lock", "failed_attempts_per_handoff",
// "attempts_per_handoff", the leases fields and the failover fields
// (to_json lists them; p*_us when the scenario has no samples).
using Metrics = std::map<std::string, double>;
using redlock::AsyncClient;

// die: the message on stderr, then exit(code).
[[noreturn]] void die(int code, const std::string& message);
// pass_gate: blocks until `word` can be written to the FIFO `fifo`.
void pass_gate(const std::string& fifo, const std::string& word);
// nearest_rank: the p-th percentile (0–1) of `sorted`, nearest rank.
long long nearest_rank(const std::vector<long long>& sorted, double p);

// check_masters: the warm-up; empty, or why no majority of the masters answered.
std::string check_masters(uv_loop_t* loop, AsyncClient& client, const std::string& resource);
// redlock_scenarios.cpp
Metrics run_latency(uv_loop_t* loop, AsyncClient& client, const std::string& base, double seconds,
                    std::uint32_t permits, bool shared, std::vector<long long>& samples);
Metrics run_throughput(uv_loop_t* loop, AsyncClient& client, const std::string& base, long concurrency, double seconds,
                       std::vector<long long>& samples);
Metrics run_handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, const std::string& resource,
                    std::uint32_t permits, double seconds, std::vector<long long>& samples);
Metrics run_memory(uv_loop_t* loop, AsyncClient& client, const std::string& base, long locks,
                   std::vector<long long>& samples);
Metrics run_handoff_crowd(uv_loop_t* loop, AsyncClient& client, const std::string& resource, int waiters,
                          bool fair, double seconds, const std::string& events_path, std::vector<long long>& samples);
Metrics run_leases(uv_loop_t* loop, AsyncClient& client, const std::string& base, long leases, double hold,
                   bool spread, const std::string& gate, const std::string& stats_before,
                   const std::string& stats_after, std::vector<long long>& samples);
// redlock_failover.cpp
Metrics run_failover(uv_loop_t* loop, AsyncClient& standby, AsyncClient& observer, const std::string& name,
                     std::vector<std::string> child_args, std::chrono::milliseconds ttl, int rounds,
                     std::vector<long long>& samples);
[[noreturn]] void run_failover_leader(uv_loop_t* loop, AsyncClient& client, const std::string& name,
                                      std::chrono::milliseconds ttl);

}  // namespace redlock_bench
