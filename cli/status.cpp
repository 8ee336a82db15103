// status.cpp — `redlock status RESOURCE`: who holds it on each master and
// what a quorum of them agrees on — one holder, or readers — and who waits:
// in its fair queue, or as writers behind its readers.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"

namespace redlock::cli {
namespace {

// shared_count: counted masters held by readers.
std::size_t shared_count(const ResourceStatus& st) {
  return static_cast<std::size_t>(std::count_if(st.nodes.begin(), st.nodes.end(), [](const NodeHolding& n) {
    return !n.quarantined && n.state == NodeHolding::State::shared;
  }));
}

// permits_json: a semaphore's permits, each as a lock of its own.
json permits_json(const ResourceStatus& st) {
  json out = json::array();
  for (std::size_t i = 0; i < st.permit_status.size(); ++i) {
    const ResourceStatus& p = st.permit_status[i];
    json nodes = json::array();
    for (const NodeHolding& n : p.nodes) {
      const bool held = n.state == NodeHolding::State::held;
      const bool read = n.state != NodeHolding::State::unreachable && n.state != NodeHolding::State::wrong_type;
      nodes.push_back({{"address", n.address},
                       {"state", state_name(n.state)},
                       {"token", held ? json(n.token) : json(nullptr)},
                       {"ttl_ms", held ? json(n.ttl.count()) : json(nullptr)},
                       {"fence", read ? json(n.fence) : json(nullptr)},
                       {"error", n.error.empty() ? json(nullptr) : json(n.error)}});
    }
    out.push_back({{"permit", i},
                   {"held", p.held},
                   {"token", p.token.empty() ? json(nullptr) : json(p.token)},
                   {"owner", owner_json(p.owner)},
                   {"agreeing", p.agreeing},
                   {"ttl_ms", p.held ? json(p.ttl.count()) : json(nullptr)},
                   {"free_nodes", p.free_nodes},
                   {"nodes", nodes}});
  }
  return out;
}

// permits_human: "… is a semaphore of P permits: H held, F free", and a
// line per permit.
std::string permits_human(const ResourceStatus& st) {
  std::size_t held = 0, free = 0;
  for (const ResourceStatus& p : st.permit_status) {
    held += p.held ? 1 : 0;
    free += !p.held && p.agreeing == 0 && p.free_nodes >= p.quorum ? 1 : 0;
  }
  std::string out = quote(st.resource) + " is a semaphore of " + std::to_string(st.permits) + " permits: " +
                    std::to_string(held) + " held by a majority, " + std::to_string(free) + " free (quorum " +
                    std::to_string(st.quorum) + ")\n";
  Table table({"PERMIT", "HOLDER", "TOKEN", "TTL", "MASTERS"});
  for (std::size_t i = 0; i < st.permit_status.size(); ++i) {
    const ResourceStatus& p = st.permit_status[i];
    std::string masters = p.held || p.agreeing > 0 ? std::to_string(p.agreeing) + " of " + std::to_string(p.nodes.size())
                                                   : "free on " + std::to_string(p.free_nodes);
    table.add({std::to_string(i), p.held && p.owner ? owner_text(*p.owner) : (p.held ? "?" : "-"),
               p.token.empty() ? "-" : short_token(p.token),
               p.held ? (p.ttl.count() < 0 ? "no expiry" : fmt_ms(p.ttl.count())) : "-", std::move(masters)});
  }
  return out + table.render();
}

}  // namespace

int run_status(const Args& a) {
  check_resource(a.resource);
  auto client = make_client(a.g);
  auto r = client->status(a.resource);
  if (!r) {
    throw_if_usage(r.error());
    throw std::runtime_error(r.error().to_string());
  }
  const ResourceStatus& st = *r;
  std::size_t answered = 0;
  // The fair queue: shown (a QUEUE column, a line) only when a master has
  // one; readers and waiting writers (a READERS column, a line) only when
  // a master has some.
  std::size_t queue_nodes = 0, longest_queue = 0, rw_nodes = 0;
  for (const NodeHolding& n : st.nodes) {
    queue_nodes += n.queued > 0 ? 1 : 0;
    longest_queue = std::max(longest_queue, n.queued);
    rw_nodes += n.readers + n.writers_waiting > 0 || n.state == NodeHolding::State::shared ? 1 : 0;
  }
  json nodes = json::array();
  std::vector<std::string> header{"NODE", "STATE", "TOKEN", "TTL", "FENCE", "RTT", "DETAIL"};
  if (rw_nodes > 0) header.insert(header.end() - 1, "READERS");
  if (queue_nodes > 0) header.insert(header.end() - 1, "QUEUE");
  Table table(std::move(header));
  for (const NodeHolding& n : st.nodes) {
    // A wrong_type master answered (it holds no lock of anyone's), but its
    // fence counter was not read.
    const bool up = n.state != NodeHolding::State::unreachable;
    const bool read = up && n.state != NodeHolding::State::wrong_type;
    answered += up && !n.quarantined ? 1 : 0;
    const bool held = n.state == NodeHolding::State::held;
    const bool lasts = held || n.state == NodeHolding::State::shared;  // a TTL to show
    nodes.push_back({{"address", n.address},
                     {"state", state_name(n.state)},
                     {"token", held ? json(n.token) : json(nullptr)},
                     {"owner", held ? owner_json(n.owner) : json(nullptr)},
                     {"ttl_ms", lasts ? json(n.ttl.count()) : json(nullptr)},
                     {"fence", read ? json(n.fence) : json(nullptr)},
                     {"quarantined", n.quarantined},
                     {"rtt_us", up ? json(n.rtt.count()) : json(nullptr)},
                     {"error", n.error.empty() ? json(nullptr) : json(n.error)},
                     {"queued", read ? json(n.queued) : json(nullptr)},
                     {"lapsed", read ? json(n.lapsed) : json(nullptr)},
                     {"queue_head", n.queue_head.empty() ? json(nullptr) : json(n.queue_head)},
                     {"readers", read ? json(n.readers) : json(nullptr)},
                     {"writers_waiting", read ? json(n.writers_waiting) : json(nullptr)}});
    std::string detail = escaped(n.error);
    if (n.quarantined) detail = "quarantined (new, restarted, lost its data or another server recently; does not count)";
    if (held && !st.token.empty() && n.token != st.token) detail = "another token than the majority's";
    std::vector<std::string> row{escaped(n.address),
                                 std::string(state_name(n.state)),
                                 held ? short_token(n.token) : "-",
                                 lasts ? (n.ttl.count() < 0 ? "no expiry" : fmt_ms(n.ttl.count())) : "-",
                                 read ? std::to_string(n.fence) : "-",
                                 up ? fmt_us(n.rtt.count()) : "-"};
    if (rw_nodes > 0) {
      // "3", "3, 1 writer waiting": live readers, and writers waiting on them.
      std::string cell = read ? std::to_string(n.readers) : "-";
      if (read && n.writers_waiting > 0) {
        cell += ", " + std::to_string(n.writers_waiting) + (n.writers_waiting == 1 ? " writer" : " writers") + " waiting";
      }
      row.push_back(std::move(cell));
    }
    if (queue_nodes > 0) {
      row.push_back(!read           ? "-"
                    : n.queued == 0 ? "0"
                                    : std::to_string(n.queued) + ", head " + short_token(n.queue_head));
    }
    row.push_back(detail);
    table.add(std::move(row));
  }
  const bool known = answered >= st.quorum;
  json out = {{"resource", st.resource},
              {"held", st.held},
              {"token", st.token.empty() ? json(nullptr) : json(st.token)},
              {"owner", owner_json(st.owner)},
              {"agreeing", st.agreeing},
              {"quorum", st.quorum},
              {"ttl_ms", st.held || st.shared ? json(st.ttl.count()) : json(nullptr)},
              {"free_nodes", st.free_nodes},
              {"answered", answered},
              {"queued", st.queued},
              {"lapsed", st.lapsed},
              {"queue_head", st.queue_head.empty() ? json(nullptr) : json(st.queue_head)},
              {"shared", st.shared},
              {"readers", st.readers},
              {"writers_waiting", st.writers_waiting},
              {"permits", st.permits},
              {"permit_status", permits_json(st)},
              {"nodes", nodes}};
  put_name(out, "resource", st.resource);
  std::string human;
  if (known && st.permits > 0) {
    // A semaphore: its permits say who holds it; the masters' table below
    // is about the name's own lock key, which a semaphore does not use.
    human = permits_human(st);
  } else if (st.held) {
    const std::string holder =
        st.owner ? owner_text(*st.owner) + " (token " + short_token(st.token) + ")" : short_token(st.token);
    human = quote(st.resource) + " is held by " + holder + " on " + std::to_string(st.agreeing) + " of " +
            std::to_string(st.nodes.size()) + " masters (quorum " + std::to_string(st.quorum) + ")" +
            (st.ttl.count() < 0 ? ", with no expiry" : "; a majority holds it for another " + fmt_ms(st.ttl.count())) +
            "\n";
  } else if (st.shared) {
    human = quote(st.resource) + " is held by readers (" +
            (st.readers > 0 ? std::to_string(st.readers) + " on a majority" : std::string("none a majority counts")) +
            ") on " + std::to_string(shared_count(st)) + " of " + std::to_string(st.nodes.size()) +
            " masters (quorum " + std::to_string(st.quorum) + ")" +
            (st.ttl.count() < 0 ? ", with no expiry" : "; a majority holds it for another " + fmt_ms(st.ttl.count())) +
            "\n";
  } else if (!known) {
    human = quote(st.resource) + ": unknown — only " + std::to_string(answered) + " of " +
            std::to_string(st.nodes.size()) + " masters answered (quorum " + std::to_string(st.quorum) + ")\n";
  } else if (st.agreeing == 0 && shared_count(st) == 0) {
    human = quote(st.resource) + " is free on every master that answered (" + std::to_string(st.free_nodes) + " of " +
            std::to_string(st.nodes.size()) + ")\n";
  } else if (shared_count(st) > 0) {
    human = quote(st.resource) + " is not held by a majority: readers hold it on " + std::to_string(shared_count(st)) +
            " of " + std::to_string(st.nodes.size()) + " masters, at most " + std::to_string(st.agreeing) +
            " agree on one token (quorum " + std::to_string(st.quorum) + ")\n";
  } else {
    human = quote(st.resource) + " is not held by a majority: at most " + std::to_string(st.agreeing) + " of " +
            std::to_string(st.nodes.size()) + " masters agree on one token (quorum " + std::to_string(st.quorum) +
            ")\n";
  }
  if (queue_nodes > 0) {
    // "fair queue: 3 waiting (head 0123abcd…)": what a majority reports at
    // least; more on a minority of masters is said after it.
    if (st.queued > 0) {
      human += "fair queue: " + std::to_string(st.queued) + " waiting (" +
               (st.queue_head.empty() ? std::string("no head a majority agrees on")
                                      : "head " + short_token(st.queue_head)) +
               ")";
      if (longest_queue > st.queued) human += "; up to " + std::to_string(longest_queue) + " on some masters";
    } else {
      human += "fair queue: none on a majority; up to " + std::to_string(longest_queue) + " waiting on " +
               std::to_string(queue_nodes) + " of " + std::to_string(st.nodes.size()) + " masters";
    }
    human += "\n";
  }
  if (st.writers_waiting > 0) {
    human += "writers waiting: " + std::to_string(st.writers_waiting) +
             " on a majority (no new reader joins until they have had the lock or given up)\n";
  }
  if (st.lapsed > 0) {
    human += "fair queue: " + std::to_string(st.lapsed) +
             " lapsed place(s) that no waiter serves (dead waiters; removed by the next fair round)\n";
  }
  if (known && st.permits > 0) {
    human += std::string("each master, for the name's own lock key (a semaphore holds its permits)") +
             (queue_nodes > 0 ? " and the semaphore's fair queue" : "") + ":\n";
  }
  human += table.render();
  return finish(use_json(a.g, false), out, human, known ? kExitOk : kExitNotDone);
}

}  // namespace redlock::cli
