// survey.hpp — one command to every node, every answer kept: the looking
// (not locking) side of the client, for `redlock status` and `redlock
// nodes`. Unlike a QuorumRound nothing is decided early: the survey is done
// when every node has answered, failed, or passed its deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/election.hpp"
#include "redlock/status.hpp"
#include "node_set.hpp"
#include "quorum.hpp"
#include "runtime.hpp"
#include "transport.hpp"

namespace redlock::detail {

class LeaderWatcher;
struct WatchLink;

// SurveyAnswer — the first event of one node, copied out of the event.
//   answered     a reply came (reply_type / text / integer hold it)
//   text         the reply's string, or why there was none
struct SurveyAnswer {
  bool answered = false;
  ReplyView::Type reply_type = ReplyView::Type::other;
  long long integer = 0;
  std::string text;
  bool quarantined = false;
  std::chrono::microseconds rtt{0};
};

class Survey final : public ReplySink {
 public:
  using Done = std::function<void(std::vector<SurveyAnswer>)>;

  // launch sends `call` to every node; `done` runs once, on the loop, never
  // inside launch, when every node has given its first event. The survey
  // frees itself on a later loop turn once every node has also given its
  // final event; `on_freed` runs then (the client counts live surveys
  // before it closes).
  static void launch(Runtime& runtime, Transport& transport, Call call, Done done, std::function<void()> on_freed);

  Survey(const Survey&) = delete;
  Survey& operator=(const Survey&) = delete;

  void on_node_event(std::size_t slot, const NodeEvent& event) override;

 private:
  Survey(Runtime& runtime, Call call, Done done, std::function<void()> on_freed, std::size_t nodes);
  ~Survey() = default;
  void first_in();
  void finish();
  void maybe_free();
  void on_later();

  Call call_;
  Done done_;
  std::function<void()> on_freed_;
  std::vector<SurveyAnswer> answers_;
  std::vector<bool> have_first_;
  std::size_t firsts_ = 0, finals_ = 0, expected_finals_ = 0;
  bool launching_ = true, done_called_ = false, freeing_ = false;
  // later_: runs `done` when launch itself completed the survey, and frees
  // it (never inside a node's event: the node still holds it as its sink).
  std::unique_ptr<Timer> later_;
};

// Reports — `status` and `nodes` over a NodeSet: one Survey each, its
// answers made into the public report. It counts what it still owes, so
// that a closing client waits for it; after close() every report not yet
// given says Errc::closed (the answers then say only "client closed"), a
// call after close() too, on a later loop turn. Loop thread only; the
// runtime and the nodes must outlive it and every report it owes.
class Reports {
 public:
  using StatusDone = std::function<void(Result<ResourceStatus>)>;
  using NodesDone = std::function<void(Result<NodesReport>)>;

  Reports(Runtime& runtime, NodeSet& nodes, std::string prefix)
      : runtime_(runtime), nodes_(nodes), prefix_(std::move(prefix)) {}
  Reports(const Reports&) = delete;
  Reports& operator=(const Reports&) = delete;

  // status: every node's view of `resource` (the inspect script: its lock
  // key, fence counter, fair queue, readers and writers, and its permits
  // key), summarized; for a semaphore, then each permit's too.
  void status(std::string resource, StatusDone done);
  // nodes: PING every node; report it with what its last handshake read.
  void nodes(NodesDone done);

  // An election's rounds (src/leader.cpp; docs/design.md, "Elections").
  // leader: every node's leader_read of `resource`, judged by
  // leader_verdict; Errc::no_quorum when fewer than a quorum could tell.
  using LeaderDone = std::function<void(Result<LeaderStatus>)>;
  void leader(std::string resource, LeaderDone done);
  // proclaim: the record written on every node where the lock holds the
  // leader's token (leader_proclaim); ok once a quorum wrote it, else
  // Errc::no_quorum naming how many did.
  struct Proclaim {
    std::string resource, token;
    std::uint64_t term = 0, rev = 0;
    std::string identity, value;
  };
  using VoidDone = std::function<void(Result<void>)>;
  void proclaim(Proclaim p, VoidDone done);
  // resign: the record deleted on every node where it names `token`
  // (leader_resign); ok whatever each node said (a node that missed it
  // keeps a record no lock backs: it reads as the last leader).
  void resign(std::string resource, std::string token, VoidDone done);
  // observe starts a LeaderWatcher of `resource` (src/leader_watch.hpp)
  // linked to `link`; unobserve ends it (no-op once ended). close() ends
  // every watcher, telling each Errc::closed.
  std::uint64_t observe(std::string resource, std::chrono::milliseconds retry, std::chrono::milliseconds safety_net,
                        std::shared_ptr<WatchLink> link, LeaderWatchCallback callback);
  // (`closed`: its callback is told Errc::closed first)
  void unobserve(std::uint64_t id, bool closed = false);
  void close();
  // live: reports owed (surveys not yet freed, closed answers not yet given).
  std::size_t live() const noexcept { return live_; }
  // on_idle runs when live() drops to 0.
  std::function<void()> on_idle;

 private:
  template <class Done>
  void answer_closed(Done done) {
    ++live_;
    runtime_.post([this, done = std::move(done)] {
      done(make_error(Errc::closed, "the client was closed"));
      one_less();
    });
  }
  void survey(Call call, Survey::Done done);
  void one_less();
  ResourceStatus holdings(std::string resource, std::vector<SurveyAnswer>& answers) const;
  void permits_status(ResourceStatus st, StatusDone done);

  Runtime& runtime_;
  NodeSet& nodes_;
  std::string prefix_;
  std::size_t live_ = 0;
  bool closing_ = false;
  std::map<std::uint64_t, std::shared_ptr<LeaderWatcher>> watchers_;
  std::uint64_t next_watch_ = 0;
};

// parse_inspect fills `out` (state, token, ttl, fence, queued, queue_head)
// from an inspect script's reply text ("PTTL FENCE TOKEN", "-2 FENCE", or
// "wrongtype TYPE KEY": state wrong_type, `out.error` names the key and its
// type, TYPE "unknown" when the user may not run TYPE), each maybe after
// "queue COUNT HEAD " (COUNT ≥ 1 fair waiters, HEAD the first; without it
// queued is 0 and queue_head empty); false when the text has none of these
// forms (then `out.error` says so, and queued is 0).
bool parse_inspect(std::string_view text, NodeHolding& out);

// summarize fills the verdict of `status` (quorum, token, agreeing, held,
// ttl, free_nodes, queued, queue_head) from its nodes.
void summarize(ResourceStatus& status);

}  // namespace redlock::detail
