// node_replication.cpp — a replicated member: a primary behind a name that
// may fail over to one of its replicas (NodeAddress::replicated), maybe
// with writes counted only once replicas have them (wait_replicas). The
// part of NodeSession (src/node_session.hpp) that checks, behind every
// flush of writes whose answers it holds back, that the server is still
// the primary it was and, with WAIT, that enough replicas have them.
// docs/design.md §5, "Replicated members".
#include <algorithm>
#include <charconv>

#include "config_text.hpp"
#include "node_session.hpp"
#include "resp.hpp"
#include "sabotage.hpp"
#include "scripts.hpp"
#include "server_info.hpp"

namespace redlock::detail {

// wait_timeout: the WAIT's bound in force (validate_config keeps it in
// [1 ms, node_timeout); never 0, which would make WAIT block for good).
std::chrono::milliseconds NodeSession::wait_timeout() const noexcept {
  return std::max(wait_timeout_in_force(address_, options_.node_timeout), std::chrono::milliseconds{1});
}

// holds_back: whether a command's answer waits for the checks written
// behind its flush. An acquire's always waits for the data-loss vote check
// (on a replicated member also when that is sabotaged: the role and
// replication checks remain); with wait_replicas, every write a holder
// relies on lasting waits for WAIT.
bool NodeSession::holds_back(CommandId id) const noexcept {
  if (shard_) return false;  // a Cluster member guards each acquire with its slot's marker
  if (is_acquire(id)) return !sabotage().no_data_check || replicated();
  return address_.wait_replicas != 0 && is_safety_write(id);
}

// queue_checks writes, behind the held writes of one flush and in this
// order: WAIT (with wait_replicas), INFO replication (replicated), and the
// vote check, whose answer releases the held answers. One connection's
// commands run in order, so each covers every write before it.
bool NodeSession::queue_checks() {
  if (address_.wait_replicas != 0) {
    // all: as many as were connected at the last reading. None, or not
    // known (INFO hid connected_slaves): WAIT 0 answers at once, and its
    // answer refuses the writes (handle_wait, told -1 for not known).
    const long long needed =
        address_.wait_replicas == NodeAddress::all_replicas ? replicas_ : static_cast<long long>(address_.wait_replicas);
    char count[24], ms[24];
    const std::string_view argv[3] = {
        "WAIT",
        std::string_view(count, static_cast<std::size_t>(
                                    std::to_chars(count, count + sizeof count, std::max(needed, 0LL)).ptr - count)),
        std::string_view(ms, static_cast<std::size_t>(std::to_chars(ms, ms + sizeof ms, wait_timeout().count()).ptr - ms))};
    if (!queue_raw(Kind::wait, argv, static_cast<std::size_t>(needed))) return false;  // -1 wraps, and back
  }
  if (replicated()) {
    const std::string_view argv[2] = {"INFO", "replication"};
    if (!queue_raw(Kind::replication, argv)) return false;
  }
  return queue_vote_check();
}

// handle_wait: WAIT's answer, the number of replicas that acknowledged
// every write before it on this connection. Fewer than needed (or none
// needed: all, with no replica connected): the held writes may not survive
// a failover, so they do not count.
void NodeSession::handle_wait(const WireReply& reply, long long needed) {
  if (reply.type == WireReply::Type::error) {
    refusal_ = "WAIT failed: " + resp::server_text(reply.str);
  } else if (reply.type != WireReply::Type::integer) {
    conn_.drop("WAIT answered no number");
  } else if (needed < 0) {
    refusal_ = "the number of connected replicas is unknown (INFO shows no connected_slaves): wait_replicas=all cannot count";
  } else if (needed == 0) {
    refusal_ = "no replica connected to take the write (wait_replicas=all)";
  } else if (reply.integer < needed) {
    refusal_ = "written on " + std::to_string(std::max(reply.integer, 0LL)) + " of " + std::to_string(needed) +
               " replicas within " + std::to_string(wait_timeout().count()) + " ms (wait_replicas)";
  }
}

// handle_replication: INFO replication right after the held writes ran. A
// replica now (demoted): the connection goes, and the held writes with it.
// Another replication id than the one this session knows, on the same
// connection: it took another primary's data since (demoted, resynced,
// promoted again), so what it held may be gone: it sits out the
// quarantine from now, and the held writes come back quarantined.
void NodeSession::handle_replication(const WireReply& reply, clock::time_point now) {
  if (reply.type != WireReply::Type::string) {
    return conn_.drop(reply.type == WireReply::Type::error ? "INFO replication failed: " + resp::server_text(reply.str)
                                                           : std::string("INFO replication answered no text"));
  }
  const std::string role = info_field(reply.str, "role");
  if (!role.empty() && role != "master") {
    return conn_.drop("is a replica now (role:" + resp::server_text(role) + "): its writes will not last");
  }
  replicas_ = bounded_number(info_field(reply.str, "connected_slaves"), 1'000'000).value_or(-1);
  std::string replid = replication_id(reply.str);
  if (sabotage().no_failover_check || sabotage().no_replid_check || replid.empty()) return;
  if (!replid_.empty() && replid != replid_) {
    note_loss(now, "its replication history changed (master_replid) while connected: it took another server's data");
  }
  replid_ = std::move(replid);
}

}  // namespace redlock::detail
