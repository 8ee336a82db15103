// sabotage.hpp — deliberately broken variants of the algorithm, for the
// chaos suite's "check the checker" runs only. They exist only in the
// separately built test library `redlock_sabotaged` (compiled with
// REDLOCK_SABOTAGE); in the real library every flag is a constant false and
// its branches compile away.
#pragma once

namespace redlock::detail {

struct Sabotage {
  bool small_quorum = false;   // count N/2 as a majority instead of N/2 + 1
  bool no_elapsed = false;     // validity ignores the time the round took
  bool wall_clock = false;     // elapsed measured on the wall clock, not the boot clock
  bool no_rollback = false;    // a failed acquire round is not released
  bool no_quarantine = false;  // restarted nodes count at once
  bool no_data_check = false;  // a master that lost its data is not seen to have lost it
  bool reused_value = false;   // one value for all attempts of an acquire (the first design), rollback by it
  bool batch_first_flag = false;  // every lease of an extend batch takes the first key's answer (counted per batch)
  bool fair_no_turn = false;  // a fair waiter ignores the 'turn HEAD SECOND' messages (sleeps to the TTL / safety net)
  bool no_queue_lapse = false;  // a fair waiter's place lives its whole wait + TTL, not fair_life past its last round
  bool no_failover_check = false;  // the server's run id is ignored (a failover behind the same address unseen)
  bool no_replid_check = false;    // master_replid is ignored (a primary resynced and promoted again unseen)
  bool own_quarantine = false;     // a master sits out this client's own quarantine, not the largest declared
  bool keep_unsolicited = false;   // an unsolicited reply is dropped and the connection kept
  bool survey_slots = false;       // a status report shows each master's answer in the next master's place
  bool permit_majority = false;    // a semaphore counts a master's yes for any permit (a majority of per-master counts)
  bool read_ignores_writer = false;  // a reader checks and marks a lock key of its own: it never meets a writer
  bool no_writer_intent = false;     // a waiting writer stamps no intent: readers that keep coming starve it
  bool any_shard_votes = false;      // a Cluster member counts a shard's yes without its slot's marker or ownership
  bool deposed_on_notice = false;    // a lease (a leader) is lost only when the loop hears an extension refused, not at its deadline
};

#ifdef REDLOCK_SABOTAGE
// sabotage is parsed once from REDLOCK_SABOTAGE (comma-separated flag names
// as above); an unknown name aborts the process with a message.
const Sabotage& sabotage() noexcept;
#else
constexpr Sabotage sabotage() noexcept { return {}; }
#endif

}  // namespace redlock::detail
