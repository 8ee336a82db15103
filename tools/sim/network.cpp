// network.cpp — masters, connections and their messages on the world's
// event queue. Messages live in a pool (their strings keep their capacity
// from one use to the next) and travel as pool indices: a command and its
// reply are one Msg, there and back.
#include "network.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "slot.hpp"

namespace redlock::sim {

namespace {

constexpr int base_port = 7001;

constexpr std::string_view lost_reasons[] = {
    "connection refused",
    "connection reset by peer",
};
enum : std::uint32_t { why_refused = 0, why_reset = 1 };

// fnv: the trace hash's step, eight bytes at a time (a byte at a time was
// 5 % of the simulator's time: script bodies go by in every handshake).
// Only the same input must give the same hash, on every build.
std::uint64_t fnv(std::uint64_t h, std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 1099511628211ULL;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 1099511628211ULL;
  return (h ^ (0xff + s.size())) * 1099511628211ULL;
}

std::uint64_t fnv(std::uint64_t h, const Reply& r) {
  h = fnv(h, std::string_view(reinterpret_cast<const char*>(&r.type), 1));
  h = (h ^ static_cast<std::uint64_t>(r.integer)) * 1099511628211ULL;
  h = fnv(h, r.str);
  for (const Reply& e : r.elements) h = fnv(h, e);
  return h;
}

bool iequals(std::string_view a, std::string_view b) {
  auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

// set_pubsub_reply: `r` becomes a pub/sub reply [kind, channel, third]
// (whatever a pooled message held before is overwritten).
void set_pubsub_reply(Reply& r, std::string_view kind, std::string_view channel, Reply third) {
  r.type = Reply::Type::array;
  r.integer = 0;
  r.str.clear();
  r.elements.resize(3);
  r.elements[0] = Reply{Reply::Type::string, 0, std::string(kind), {}};
  r.elements[1] = Reply{Reply::Type::string, 0, std::string(channel), {}};
  r.elements[2] = std::move(third);
}

std::size_t node_count(const Reply& r) {
  std::size_t n = 1;
  for (const Reply& e : r.elements) n += node_count(e);
  return n;
}

void set_scalar(detail::WireReply& w, const Reply& r) {
  w.type = static_cast<detail::WireReply::Type>(r.type);
  w.integer = r.integer;
  w.str = r.str;
  w.elements = {};
}

// fill_elements lays out r's elements contiguously from out[next] (as a
// span needs), then their elements, depth first; returns the next free
// index.
std::size_t fill_elements(const Reply& r, detail::WireReply& w, detail::WireReply* out, std::size_t next) {
  if (r.elements.empty()) return next;
  const std::size_t first = next;
  next += r.elements.size();
  for (std::size_t i = 0; i < r.elements.size(); ++i) {
    set_scalar(out[first + i], r.elements[i]);
    next = fill_elements(r.elements[i], out[first + i], out, next);
  }
  w.elements = {out + first, r.elements.size()};
  return next;
}

}  // namespace

struct Network::Msg {
  std::uint32_t conn = 0;
  bool delayed = false;  // already held back once as late bytes
  bool flood = false;    // an unsolicited reply of a hostile master
  // The command's arguments, one after another in `bytes`, argument k
  // ending at ends[k] (one buffer, reused with the message).
  std::string bytes;
  std::vector<std::size_t> ends;
  std::size_t argc = 0;
  Reply reply;
};

struct Network::Conn final : TurnHook {
  std::vector<std::string> channels;  // subscribed (Redis: the connection is in pub/sub mode while any)
  Network* net = nullptr;
  std::uint32_t id = 0;
  std::uint32_t client = 0;
  std::uint32_t master = 0;
  std::uint64_t incarnation = 0;  // the master's, once connected
  enum class State : std::uint8_t { connecting, up, dead } state = State::connecting;
  bool alive = true;    // the client's Wire exists
  bool dirty = false;   // registered for the end of the turn
  bool hanging = false;  // connect waits for a blackhole to heal
  bool busy = false;     // kept open after an unsolicited reply of a flood: keeps its client busy
  std::uint32_t outstanding = 0;  // commands written whose replies have not reached the client
  detail::WireEvents* events = nullptr;
  Process* proc = nullptr;
  Nanos last_c2s = 0;
  Nanos last_s2c = 0;
  Nanos late_extra = 0;  // dropped: in-flight commands arrive this much later
  std::vector<std::uint32_t> outgoing;
  std::vector<std::uint32_t> held_c2s;
  std::vector<std::uint32_t> held_s2c;

  void end_turn() override { net->flush(*this); }
};

// SimWire — the client's end of one connection.
class SimWire final : public detail::Wire {
 public:
  SimWire(Network& net, Network::Conn& conn) : net_(net), conn_(conn) {}
  SimWire(const SimWire&) = delete;
  SimWire& operator=(const SimWire&) = delete;
  ~SimWire() override { net_.drop(conn_); }

  bool write(std::span<const std::string_view> argv) override {
    if (conn_.state == Network::Conn::State::dead) return false;
    const std::uint32_t i = net_.new_msg();
    Network::Msg& m = net_.msgs_[i];
    m.conn = conn_.id;
    // Sized once, then copied argument by argument (the buffer keeps its
    // room from the message's last use).
    std::size_t total = 0;
    for (const std::string_view a : argv) total += a.size();
    m.bytes.resize(total);
    m.ends.resize(argv.size());
    char* out = m.bytes.data();
    std::size_t end = 0;
    for (std::size_t k = 0; k < argv.size(); ++k) {
      if (!argv[k].empty()) std::memcpy(out + end, argv[k].data(), argv[k].size());
      end += argv[k].size();
      m.ends[k] = end;
    }
    m.argc = argv.size();
    ++conn_.outstanding;
    conn_.outgoing.push_back(i);
    if (!conn_.dirty) {
      conn_.dirty = true;
      conn_.proc->at_turn_end(&conn_);
    }
    return true;
  }
  void read_now() override {}

 private:
  Network& net_;
  Network::Conn& conn_;
};

class SimWireFactory final : public detail::WireFactory {
 public:
  SimWireFactory(Network& net, Process& proc, std::size_t client) : net_(net), proc_(proc), client_(client) {}

  std::unique_ptr<detail::Wire> connect(const NodeAddress& address, detail::WireEvents& events) override {
    const auto m = static_cast<std::size_t>(address.port - base_port);
    Network::Conn& c = net_.open(client_, m, proc_, events);
    if (address.port < base_port || m >= net_.size()) {
      net_.lose(c, why_refused, 0);
    } else {
      net_.start_connect(c);
    }
    return std::make_unique<SimWire>(net_, c);
  }

 private:
  Network& net_;
  Process& proc_;
  std::size_t client_;
};

MasterHost::MasterHost(World& world, std::string name, Nanos wall_origin)
    : process_(world, name, 0, wall_origin), master_(name, [this] { return wall_ms(); }) {}

Network::Network(World& world, std::size_t masters, NetConfig config) : world_(world), config_(config) {
  Rng r = world.make_rng(0x4d415354);
  for (std::size_t i = 0; i < masters; ++i) {
    // Wall clocks of ordinary machines: around 2023, a little apart.
    const Nanos wall = 1'700'000'000'000 * ns_per_ms + r.between(0, 999) * ns_per_ms;
    std::string name = "m";  // (not "m" + to_string: GCC 12's -O3 takes that for an overlapping copy)
    name += std::to_string(i);
    masters_.push_back(std::make_unique<MasterHost>(world, std::move(name), wall));
    masters_.back()->master_.on_publish = [this, i](const std::string& channel, const std::string& message) {
      if (cluster_of_[i] < 0) return publish(i, channel, message);
      long long receivers = 0;
      for (const std::size_t m : clusters_[static_cast<std::size_t>(cluster_of_[i])].shards) {
        receivers += publish(m, channel, message);
      }
      return receivers;
    };
  }
  cluster_of_.assign(masters, -1);
}

std::size_t Network::add_cluster(std::vector<std::size_t> shards) {
  Cluster k;
  k.owner.resize(detail::slot_count);
  for (int s = 0; s < detail::slot_count; ++s) {
    k.owner[static_cast<std::size_t>(s)] = shards[static_cast<std::size_t>(s) * shards.size() / detail::slot_count];
  }
  for (const std::size_t m : shards) cluster_of_[m] = static_cast<int>(clusters_.size());
  k.shards = std::move(shards);
  clusters_.push_back(std::move(k));
  return clusters_.size() - 1;
}

NodeAddress Network::cluster_address(std::size_t k) const {
  NodeAddress a;
  a.kind = NodeAddress::Kind::cluster;
  for (const std::size_t m : clusters_[k].shards) a.seeds.push_back({"sim", base_port + static_cast<int>(m)});
  return a;
}

std::vector<NodeAddress> Network::members() const {
  std::vector<NodeAddress> out;
  for (std::size_t m = 0; m < masters_.size(); ++m) {
    if (cluster_of_[m] < 0) out.push_back(address(m));
  }
  for (std::size_t k = 0; k < clusters_.size(); ++k) out.push_back(cluster_address(k));
  return out;
}

void Network::reassign(std::size_t k, int slot, std::size_t to) {
  std::size_t& owner = clusters_[k].owner[static_cast<std::size_t>(slot)];
  if (owner == to) return;
  Master& old = masters_[owner]->master_;
  for (const auto& [key, value] : old.keys()) {
    if (detail::hash_slot(key) == slot) old.evict(key);
  }
  owner = to;
}

// cluster_reply: what a cluster master answers itself (CLUSTER SLOTS,
// ASKING, MOVED); false: the command runs as on any master.
bool Network::cluster_reply(Conn& c, std::span<const std::string_view> argv, Reply& out) {
  const Cluster& k = clusters_[static_cast<std::size_t>(cluster_of_[c.master])];
  const std::string_view name = argv[0];
  out.elements.clear();
  if (iequals(name, "asking")) {
    out.type = Reply::Type::status;
    out.str = "OK";
    return true;
  }
  if (iequals(name, "cluster")) {
    if (argv.size() != 2 || !iequals(argv[1], "slots")) {
      out.type = Reply::Type::error;
      out.str = "ERR the simulator's cluster answers CLUSTER SLOTS only";
      return true;
    }
    out.type = Reply::Type::array;
    out.str.clear();
    for (int s = 0; s < detail::slot_count;) {
      const std::size_t m = k.owner[static_cast<std::size_t>(s)];
      int e = s;
      while (e + 1 < detail::slot_count && k.owner[static_cast<std::size_t>(e + 1)] == m) ++e;
      Reply range;
      range.type = Reply::Type::array;
      range.elements.push_back({Reply::Type::integer, s, {}, {}});
      range.elements.push_back({Reply::Type::integer, e, {}, {}});
      char id[41];
      std::snprintf(id, sizeof id, "%040zx", m + 1);
      Reply node;
      node.type = Reply::Type::array;
      node.elements.push_back({Reply::Type::string, 0, "sim", {}});
      node.elements.push_back({Reply::Type::integer, base_port + static_cast<long long>(m), {}, {}});
      node.elements.push_back({Reply::Type::string, 0, id, {}});
      range.elements.push_back(std::move(node));
      out.elements.push_back(std::move(range));
      s = e + 1;
    }
    return true;
  }
  std::string_view key;
  if ((iequals(name, "evalsha") || iequals(name, "eval")) && argv.size() > 3 && argv[2] != "0") {
    key = argv[3];
  } else if ((iequals(name, "set") || iequals(name, "get") || iequals(name, "del")) && argv.size() > 1) {
    key = argv[1];
  } else {
    return false;
  }
  const int slot = detail::hash_slot(key);
  const std::size_t owner = k.owner[static_cast<std::size_t>(slot)];
  if (owner == c.master) return false;
  out.type = Reply::Type::error;
  out.str = "MOVED " + std::to_string(slot) + " sim:" + std::to_string(base_port + static_cast<int>(owner));
  return true;
}

Network::~Network() = default;

NodeAddress Network::address(std::size_t i) const {
  NodeAddress a;
  a.host = "sim";
  a.port = base_port + static_cast<int>(i);
  return a;
}

detail::WireFactory& Network::factory(Process& client) {
  factories_.push_back(std::make_unique<SimWireFactory>(*this, client, factories_.size()));
  links_.resize(factories_.size() * masters_.size());
  return *factories_.back();
}

Nanos Network::delay(const Link& l) {
  return config_.base_delay + static_cast<Nanos>(world_.rng().below(static_cast<std::uint64_t>(config_.jitter) + 1)) +
         l.extra;
}

std::uint32_t Network::new_msg() {
  if (!free_msgs_.empty()) {
    const std::uint32_t i = free_msgs_.back();
    free_msgs_.pop_back();
    msgs_[i].delayed = false;
    msgs_[i].flood = false;
    return i;
  }
  msgs_.emplace_back();
  return static_cast<std::uint32_t>(msgs_.size() - 1);
}

void Network::free_msg(std::uint32_t i) { free_msgs_.push_back(i); }

Network::Conn& Network::open(std::size_t client, std::size_t m, Process& proc, detail::WireEvents& events) {
  auto c = std::make_unique<Conn>();
  c->net = this;
  c->id = static_cast<std::uint32_t>(conns_.size());
  c->client = static_cast<std::uint32_t>(client);
  c->master = static_cast<std::uint32_t>(std::min(m, masters_.size() - 1));
  c->events = &events;
  c->proc = &proc;
  conns_.push_back(std::move(c));
  return *conns_.back();
}

void Network::start_connect(Conn& c) {
  const Link& l = link(c.client, c.master);
  if (l.hole_c2s || l.hole_s2c) {
    c.hanging = true;  // SYNs lost until the link heals
    return;
  }
  const MasterHost& h = *masters_[c.master];
  if (!h.up_ || h.refusing_) return lose(c, why_refused, 2 * delay(l));
  world_.schedule(world_.now() + 2 * delay(l), c.proc, &Network::ev_connected, this, c.id);
}

void Network::ev_connected(void* net, std::uint64_t id, std::uint64_t) {
  auto* self = static_cast<Network*>(net);
  Conn& c = *self->conns_[id];
  if (!c.alive || c.state != Conn::State::connecting) return;
  MasterHost& h = *self->masters_[c.master];
  if (!h.up_) {
    c.state = Conn::State::dead;
    return c.events->on_lost(lost_reasons[why_refused]);
  }
  c.state = Conn::State::up;
  c.incarnation = h.incarnation_;
  c.events->on_connected();
  if (c.alive && !c.outgoing.empty() && !c.dirty) {
    c.dirty = true;
    c.proc->at_turn_end(&c);
  }
}

void Network::lose(Conn& c, std::uint32_t why, Nanos after) {
  world_.schedule(world_.now() + after, c.proc, &Network::ev_lost, this, (std::uint64_t{why} << 32) | c.id);
}

void Network::ev_lost(void* net, std::uint64_t conn_and_why, std::uint64_t) {
  auto* self = static_cast<Network*>(net);
  Conn& c = *self->conns_[conn_and_why & 0xffffffffU];
  if (!c.alive || c.state == Conn::State::dead) return;
  c.state = Conn::State::dead;
  for (const std::uint32_t m : c.outgoing) self->free_msg(m);
  c.outgoing.clear();
  c.events->on_lost(lost_reasons[conn_and_why >> 32]);
}

void Network::flush(Conn& c) {
  c.dirty = false;
  if (!c.alive || c.state == Conn::State::dead) {
    for (const std::uint32_t m : c.outgoing) free_msg(m);
    c.outgoing.clear();
    return;
  }
  if (c.state != Conn::State::up || c.outgoing.empty()) return;  // goes out once connected
  c.dirty = true;  // writes inside on_flush join this batch
  c.events->on_flush();
  c.dirty = false;
  if (!c.alive) return flush(c);
  for (const std::uint32_t m : c.outgoing) send(c, m, true);
  c.outgoing.clear();
}

// send: one message on its way, behind the ones before it on the same
// connection and direction (held while that direction is blackholed).
void Network::send(Conn& c, std::uint32_t msg, bool to_master) {
  const Link& l = link(c.client, c.master);
  std::vector<std::uint32_t>& held = to_master ? c.held_c2s : c.held_s2c;
  if ((to_master ? l.hole_c2s : l.hole_s2c) || !held.empty()) {
    held.push_back(msg);
    return;
  }
  Nanos& last = to_master ? c.last_c2s : c.last_s2c;
  last = std::max(world_.now() + delay(l), last);
  if (to_master) {
    world_.schedule(last, &masters_[c.master]->process_, &Network::ev_arrive, this, msg);
  } else {
    world_.schedule(last, c.proc, &Network::ev_reply, this, msg);
  }
}

void Network::ev_arrive(void* net, std::uint64_t msg, std::uint64_t) {
  auto* self = static_cast<Network*>(net);
  Msg& m = self->msgs_[msg];
  Conn& c = *self->conns_[m.conn];
  MasterHost& h = *self->masters_[c.master];
  if (!h.up_ || h.incarnation_ != c.incarnation) return self->free_msg(static_cast<std::uint32_t>(msg));
  if (!c.alive && c.late_extra > 0 && !m.delayed) {
    // Late bytes: the path still carries them; they arrive after whatever
    // the replacement connection sends meanwhile.
    m.delayed = true;
    self->world_.schedule(self->world_.now() + c.late_extra, &h.process_, &Network::ev_arrive, net, msg);
    return;
  }
  self->execute(c, m, !c.alive);
  const bool answer = c.alive && c.state == Conn::State::up;
  if (answer) {
    self->send(c, static_cast<std::uint32_t>(msg), false);
  } else {
    self->free_msg(static_cast<std::uint32_t>(msg));
  }
  for (const std::uint32_t p : self->pushes_) {
    if (answer) {
      self->send(c, p, false);
    } else {
      self->free_msg(p);
    }
  }
  self->pushes_.clear();
}

void Network::execute(Conn& c, Msg& m, bool late) {
  MasterHost& h = *masters_[c.master];
  argv_scratch_.resize(m.argc);
  for (std::size_t k = 0, begin = 0; k < m.argc; begin = m.ends[k++]) {
    argv_scratch_[k] = std::string_view(m.bytes).substr(begin, m.ends[k] - begin);
  }
  const std::span<const std::string_view> argv(argv_scratch_.data(), m.argc);
  const std::string_view name = argv.empty() ? std::string_view{} : argv[0];
  if (iequals(name, "subscribe") || iequals(name, "unsubscribe")) {
    m.reply = pubsub(c, argv, name.size() == 9);
  } else if (!c.channels.empty() && !iequals(name, "ping")) {
    m.reply.type = Reply::Type::error;
    m.reply.str = "ERR Can't execute '" + std::string(name) +
                  "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context";
    m.reply.elements.clear();
  } else if (cluster_of_[c.master] < 0 || !cluster_reply(c, argv, m.reply)) {
    h.master_.execute_into(argv, m.reply);
    if (cluster_of_[c.master] >= 0 && iequals(name, "info") && m.reply.type == Reply::Type::string) {
      m.reply.str += "# Cluster\r\ncluster_enabled:1\r\n";
    }
  }
  ++h.executed_;
  ++executed_;
  if (hashing) {
    std::uint64_t hh = (hash_ ^ c.master) * 1099511628211ULL;
    for (const std::string_view a : argv) hh = fnv(hh, a);
    hash_ = fnv(hh, m.reply);
  }
  if (on_command) on_command(ExecutedCommand{world_.now(), c.master, c.client, c.id, late, argv, m.reply});
}

// pubsub: SUBSCRIBE or UNSUBSCRIBE on connection `c`, as Redis answers it
// in RESP2: one [kind, channel, count] per channel (the first is the
// command's reply, the rest follow it in pushes_); UNSUBSCRIBE without
// channels unsubscribes them all, and with none left answers [kind, nil, 0].
Reply Network::pubsub(Conn& c, std::span<const std::string_view> argv, bool subscribe) {
  auto confirm = [&c](std::string_view kind, std::string_view channel, bool nil) {
    Reply r;
    Reply count;
    count.type = Reply::Type::integer;
    count.integer = static_cast<long long>(c.channels.size());
    set_pubsub_reply(r, kind, channel, std::move(count));
    if (nil) r.elements[1] = Reply{};
    return r;
  };
  if (subscribe && argv.size() < 2) {
    Reply r;
    r.type = Reply::Type::error;
    r.str = "ERR wrong number of arguments for 'subscribe' command";
    return r;
  }
  std::vector<std::string_view> channels(argv.begin() + 1, argv.end());
  std::vector<std::string> all;
  if (!subscribe && channels.empty()) {
    all = c.channels;
    channels.assign(all.begin(), all.end());
    if (channels.empty()) return confirm("unsubscribe", {}, true);
  }
  MasterHost& h = *masters_[c.master];
  Reply first;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const std::string_view ch = channels[i];
    const auto it = std::find(c.channels.begin(), c.channels.end(), ch);
    if (subscribe && it == c.channels.end()) {
      if (c.channels.empty()) h.subscribed_.push_back(c.id);
      c.channels.emplace_back(ch);
    } else if (!subscribe && it != c.channels.end()) {
      c.channels.erase(it);
      if (c.channels.empty()) std::erase(h.subscribed_, c.id);
    }
    Reply r = confirm(subscribe ? "subscribe" : "unsubscribe", ch, false);
    if (i == 0) {
      first = std::move(r);
    } else {
      push(c, std::move(r));
    }
  }
  return first;
}

void Network::push(Conn& c, Reply reply) {
  const std::uint32_t i = new_msg();
  Msg& m = msgs_[i];
  m.conn = c.id;
  m.argc = 0;
  m.reply = std::move(reply);
  pushes_.push_back(i);
}

// publish: `message` on `channel` of master m, to every live subscriber of
// this incarnation, after whatever its connection carries already.
long long Network::publish(std::size_t m, const std::string& channel, const std::string& message) {
  MasterHost& h = *masters_[m];
  ++h.publishes_;
  long long receivers = 0;
  std::erase_if(h.subscribed_, [this, &h](std::uint32_t id) {
    const Conn& c = *conns_[id];
    return !c.alive || c.state != Conn::State::up || c.incarnation != h.incarnation_ || c.channels.empty();
  });
  for (const std::uint32_t id : h.subscribed_) {
    Conn& c = *conns_[id];
    if (std::find(c.channels.begin(), c.channels.end(), channel) == c.channels.end()) continue;
    ++receivers;
    const std::uint32_t i = new_msg();
    Msg& msg = msgs_[i];
    msg.conn = c.id;
    msg.argc = 0;
    Reply payload;
    payload.type = Reply::Type::string;
    payload.str = message;
    set_pubsub_reply(msg.reply, "message", channel, std::move(payload));
    send(c, i, false);
  }
  return receivers;
}

void Network::ev_reply(void* net, std::uint64_t msg, std::uint64_t) {
  auto* self = static_cast<Network*>(net);
  Msg& m = self->msgs_[msg];
  Conn& c = *self->conns_[m.conn];
  if (m.flood) {
    self->flood_reply(c, static_cast<std::uint32_t>(msg));
    return;
  }
  if (m.argc > 0 && c.outstanding > 0) --c.outstanding;
  if (c.alive && c.state == Conn::State::up) {
    auto& scratch = self->reply_scratch_;
    scratch.resize(node_count(m.reply));
    set_scalar(scratch[0], m.reply);
    fill_elements(m.reply, scratch[0], scratch.data(), 1);
    if (m.argc == 0 && m.reply.elements.size() == 3 && m.reply.elements[0].str == "message") ++self->delivered_;
    c.events->on_reply(scratch[0]);
  }
  self->free_msg(static_cast<std::uint32_t>(msg));
}

void Network::drop(Conn& c) {
  if (c.busy) end_busy(c);
  c.alive = false;
  c.events = nullptr;
  for (const std::uint32_t m : c.outgoing) free_msg(m);
  c.outgoing.clear();
  for (const std::uint32_t m : c.held_s2c) free_msg(m);
  c.held_s2c.clear();
  c.state = Conn::State::dead;
  if (world_.rng().chance(config_.late_chance)) {
    c.late_extra = std::max<Nanos>(config_.late_min, 1) +
                   static_cast<Nanos>(world_.rng().below(
                       static_cast<std::uint64_t>(std::max<Nanos>(config_.late_max - config_.late_min, 0)) + 1));
  }
}

void Network::crash(std::size_t m) {
  MasterHost& h = *masters_[m];
  if (!h.up_) return;
  h.up_ = false;
  for (auto& cp : conns_) {
    Conn& c = *cp;
    if (c.master != m || c.state == Conn::State::dead) continue;
    for (const std::uint32_t i : c.held_c2s) free_msg(i);
    c.held_c2s.clear();
    c.hanging = false;
    if (c.alive) lose(c, why_reset, delay(link(c.client, m)));
  }
}

void Network::fail_over(std::size_t m, long long synced_ms, long long uptime_ms) {
  MasterHost& h = *masters_[m];
  if (h.up_) crash(m);
  h.up_ = true;
  ++h.incarnation_;
  h.master_.fail_over(synced_ms, uptime_ms);
}

void Network::resync(std::size_t m, long long synced_ms) {
  MasterHost& h = *masters_[m];
  if (h.up_) crash(m);
  h.up_ = true;
  ++h.incarnation_;
  h.master_.resync(synced_ms);
}

// flood: while on, master m sends an unsolicited reply, every
// flood_interval, on each of its connections to client `client` that waits
// for no reply (so the client cannot take it for the answer to a command:
// a hostile master that forged answers is beyond what any client can
// tell) — not on a subscribed one. A connection that reads one and stays
// open keeps its client process busy until the flood ends (flood_reply).
void Network::flood(std::size_t client, std::size_t m, bool on) {
  Link& l = link(client, m);
  if (l.flooding == on) return;
  l.flooding = on;
  if (on) return flood_tick(client, m);
  for (auto& cp : conns_) {
    Conn& c = *cp;
    if (c.client == client && c.master == m && c.busy) end_busy(c);
  }
}

void Network::flood_tick(std::size_t client, std::size_t m) {
  MasterHost& h = *masters_[m];
  if (!link(client, m).flooding) return;
  if (h.up_) {
    for (auto& cp : conns_) {
      Conn& c = *cp;
      if (c.client != client || c.master != m || !c.alive || c.state != Conn::State::up ||
          c.incarnation != h.incarnation_ || !c.channels.empty() || c.outstanding > 0) {
        continue;
      }
      const std::uint32_t i = new_msg();
      Msg& msg = msgs_[i];
      msg.conn = c.id;
      msg.argc = 0;
      msg.flood = true;
      msg.reply = Reply{};
      msg.reply.type = Reply::Type::status;
      msg.reply.str = "OK";
      ++h.flooded_;
      send(c, i, false);
    }
  }
  world_.post(world_.now() + flood_interval, &h.process_, [this, client, m] { flood_tick(client, m); });
}

// flood_reply: an unsolicited reply reaches the client. One that crossed
// a command the client wrote since is not delivered (see flood). If the
// client keeps the connection, it is busy (its process runs nothing) as
// long as the connection stays open and the flood goes on.
void Network::flood_reply(Conn& c, std::uint32_t msg) {
  MasterHost& h = *masters_[c.master];
  const bool deliver = c.alive && c.state == Conn::State::up && c.outstanding == 0 &&
                       link(c.client, c.master).flooding && c.incarnation == h.incarnation_;
  if (deliver) {
    auto& scratch = reply_scratch_;
    scratch.resize(1);
    set_scalar(scratch[0], msgs_[msg].reply);
    ++unsolicited_;
    c.events->on_reply(scratch[0]);
  }
  free_msg(msg);
  if (deliver && c.alive && c.state == Conn::State::up && !c.busy) {
    c.busy = true;
    ++busy_;
    c.proc->pause();
  }
}

void Network::end_busy(Conn& c) {
  c.busy = false;
  --busy_;
  for (const auto& other : conns_) {
    if (other->busy && other->proc == c.proc) return;  // still busy with another
  }
  c.proc->resume();
}

void Network::restart(std::size_t m, bool keep_data) {
  MasterHost& h = *masters_[m];
  if (h.up_) crash(m);
  h.up_ = true;
  ++h.incarnation_;
  h.master_.restart(keep_data);
}

void Network::set_extra_delay(std::size_t c, std::size_t m, Nanos extra) { link(c, m).extra = extra; }

void Network::blackhole(std::size_t c, std::size_t m, bool to_master, bool to_client) {
  Link& l = link(c, m);
  l.hole_c2s = l.hole_c2s || to_master;
  l.hole_s2c = l.hole_s2c || to_client;
}

void Network::release_held(Conn& c) {
  std::vector<std::uint32_t> c2s;
  c2s.swap(c.held_c2s);
  for (const std::uint32_t i : c2s) {
    if (!c.alive && !world_.rng().chance(config_.late_chance)) {
      free_msg(i);  // the kernel gave up on a closed socket's data
      continue;
    }
    send(c, i, true);
  }
  std::vector<std::uint32_t> s2c;
  s2c.swap(c.held_s2c);
  for (const std::uint32_t i : s2c) send(c, i, false);
  if (c.hanging) {
    c.hanging = false;
    if (c.alive) start_connect(c);
  }
}

void Network::heal(std::size_t client, std::size_t m) {
  Link& l = link(client, m);
  l.hole_c2s = l.hole_s2c = false;
  l.extra = 0;
  for (auto& cp : conns_) {
    Conn& c = *cp;
    if (c.client == client && c.master == m && (c.hanging || !c.held_c2s.empty() || !c.held_s2c.empty())) {
      release_held(c);
    }
  }
}

void Network::reset(std::size_t client, std::size_t m) {
  for (auto& cp : conns_) {
    Conn& c = *cp;
    if (c.client == client && c.master == m && c.alive && c.state != Conn::State::dead) {
      lose(c, why_reset, delay(link(client, m)));
    }
  }
}

void Network::heal_all() {
  for (std::size_t m = 0; m < masters_.size(); ++m) {
    MasterHost& h = *masters_[m];
    for (std::size_t c = 0; c < factories_.size(); ++c) flood(c, m, false);
    if (!h.up_) restart(m, true);
    h.refusing_ = false;
    h.process_.resume();
  }
  for (std::size_t c = 0; c < factories_.size(); ++c) {
    for (std::size_t m = 0; m < masters_.size(); ++m) heal(c, m);
  }
}

}  // namespace redlock::sim
