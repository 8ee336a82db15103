// sabotage.cpp — REDLOCK_SABOTAGE parsing; built only into redlock_sabotaged.
#include "sabotage.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace redlock::detail {

namespace {

Sabotage parse() {
  Sabotage s;
  const char* env = std::getenv("REDLOCK_SABOTAGE");
  std::string_view rest = env != nullptr ? env : "";
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (name == "small_quorum") {
      s.small_quorum = true;
    } else if (name == "no_elapsed") {
      s.no_elapsed = true;
    } else if (name == "wall_clock") {
      s.wall_clock = true;
    } else if (name == "no_rollback") {
      s.no_rollback = true;
    } else if (name == "no_quarantine") {
      s.no_quarantine = true;
    } else if (name == "no_data_check") {
      s.no_data_check = true;
    } else if (name == "reused_value") {
      s.reused_value = true;
    } else if (name == "batch_first_flag") {
      s.batch_first_flag = true;
    } else if (name == "fair_no_turn") {
      s.fair_no_turn = true;
    } else if (name == "no_queue_lapse") {
      s.no_queue_lapse = true;
    } else if (name == "no_failover_check") {
      s.no_failover_check = true;
    } else if (name == "no_replid_check") {
      s.no_replid_check = true;
    } else if (name == "own_quarantine") {
      s.own_quarantine = true;
    } else if (name == "keep_unsolicited") {
      s.keep_unsolicited = true;
    } else if (name == "survey_slots") {
      s.survey_slots = true;
    } else if (name == "permit_majority") {
      s.permit_majority = true;
    } else if (name == "read_ignores_writer") {
      s.read_ignores_writer = true;
    } else if (name == "no_writer_intent") {
      s.no_writer_intent = true;
    } else if (name == "any_shard_votes") {
      s.any_shard_votes = true;
    } else if (name == "deposed_on_notice") {
      s.deposed_on_notice = true;
    } else if (!name.empty()) {
      std::fprintf(stderr, "REDLOCK_SABOTAGE: unknown variant \"%.*s\"\n", static_cast<int>(name.size()),
                   name.data());
      std::abort();
    }
  }
  return s;
}

}  // namespace

const Sabotage& sabotage() noexcept {
  static const Sabotage s = parse();
  return s;
}

}  // namespace redlock::detail
