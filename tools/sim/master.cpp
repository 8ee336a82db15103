// master.cpp — the simulated Redis master: a keyspace with lazy expiry on
// the master's own clock, the commands the library sends, and Lua 5.1 with
// Redis' `redis` table and conversion rules for the real scripts.
//
// Speed matters (the simulator runs ~10^5 rounds of up to 5 masters per
// second): arguments travel as string_views, one Lua state serves every
// master of the thread (LuaShared), and each script is compiled once per SHA and
// kept in the Lua registry.
#include "master.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "sha1.hpp"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

namespace redlock::sim {

namespace {

using Args = std::span<const std::string_view>;

constexpr long long no_expiry = LLONG_MAX;  // compares above every clock reading
constexpr long long db_count = 16;          // SELECT's valid range, as redis.conf's default

constexpr std::string_view not_integer = "ERR value is not an integer or out of range";
constexpr std::string_view syntax_error = "ERR syntax error";
constexpr std::string_view no_script = "NOSCRIPT No matching script. Please use EVAL.";
constexpr std::string_view wrong_type = "WRONGTYPE Operation against a key holding the wrong kind of value";
constexpr std::string_view not_float = "ERR value is not a valid float";

Reply status(std::string_view text) {
  Reply r;
  r.type = Reply::Type::status;
  r.str = text;
  return r;
}
Reply bulk(std::string_view text) {
  Reply r;
  r.type = Reply::Type::string;
  r.str = text;
  return r;
}
Reply integer(long long n) {
  Reply r;
  r.type = Reply::Type::integer;
  r.integer = n;
  return r;
}
Reply error(std::string_view text) {
  Reply r;
  r.type = Reply::Type::error;
  r.str = text;
  return r;
}
Reply ok() { return status("OK"); }

// assign: `out` becomes the reply (type, n, text) with no elements,
// keeping its buffers: what it held before is gone.
void assign(Reply& out, Reply::Type type, long long n = 0, std::string_view text = {}) {
  out.type = type;
  out.integer = n;
  out.str.assign(text);
  out.elements.clear();
}

Reply wrong_arity(std::string_view name) {
  return error("ERR wrong number of arguments for '" + std::string(name) + "' command");
}

constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// iequals compares `text` with an already lowercase `lower`.
bool iequals(std::string_view text, std::string_view lower) {
  return text.size() == lower.size() &&
         std::equal(text.begin(), text.end(), lower.begin(), [](char a, char b) { return ascii_lower(a) == b; });
}

// parse_ll reads an integer as Redis' string2ll does: optional '-', no
// '+', no spaces, no leading zeros, within long long.
bool parse_ll(std::string_view text, long long& out) {
  const std::size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == digits) return false;
  if (text[digits] == '0' && text != "0") return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

long long floor_div(long long a, long long b) {
  const long long q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// StringHash lets the maps find a std::string_view without building a key.
// Eight bytes a step, multiply and fold, inlined: std::hash (murmur, out of
// line) was 1.7 % of the simulator's instructions, for keys of a few dozen
// bytes and 40-digit SHAs. Nothing depends on the maps' order (what lists
// keys sorts them). Not noexcept, on purpose: libstdc++ then keeps each
// node's hash in the node, and a lookup compares hashes before keys
// instead of hashing every key it passes again to see where its bucket
// ends.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const {
    constexpr std::uint64_t k = 0x9e3779b97f4a7c15ULL;
    std::uint64_t h = s.size() * k;
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * k;
      h ^= h >> 32;
    }
    std::uint64_t tail = 0;
    for (std::size_t j = 0; i + j < s.size(); ++j) tail |= std::uint64_t{static_cast<unsigned char>(s[i + j])} << (8 * j);
    h = (h ^ tail) * k;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

// ScriptTable — one master's loaded scripts, SHA → the registry ref of its
// compiled function: a few dozen at most (the library has fourteen),
// found by a scan of their first eight digits, then compared in full —
// no hash of forty digits and no node to chase on every EVALSHA.
class ScriptTable {
 public:
  const int* find(std::string_view sha) const {
    const std::uint64_t p = prefix(sha);
    for (std::size_t i = 0; i < prefixes_.size(); ++i) {
      if (prefixes_[i] == p && entries_[i].first == sha) return &entries_[i].second;
    }
    return nullptr;
  }
  bool contains(std::string_view sha) const { return find(sha) != nullptr; }
  // emplace: as unordered_map::emplace, a SHA known already keeps its ref.
  void emplace(std::string_view sha, int ref) {
    if (contains(sha)) return;
    prefixes_.push_back(prefix(sha));
    entries_.emplace_back(std::string(sha), ref);
  }
  void clear() {
    prefixes_.clear();
    entries_.clear();
  }

 private:
  static std::uint64_t prefix(std::string_view s) {
    std::uint64_t w = 0;
    if (s.size() >= 8) {
      std::memcpy(&w, s.data(), 8);
    } else {
      for (std::size_t i = 0; i < s.size(); ++i) w |= std::uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
    }
    return w;
  }

  std::vector<std::uint64_t> prefixes_;
  std::vector<std::pair<std::string, int>> entries_;
};

// parse_score reads a sorted-set score as Redis' string2d does: strtod
// over the whole text (no leading space, nothing after it), "inf" and
// "-inf" allowed, NaN refused.
bool parse_score(std::string_view text, double& out) {
  if (text.empty() || text.size() >= 128 || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char buf[128];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  char* end = nullptr;
  errno = 0;
  out = std::strtod(buf, &end);
  return end == buf + text.size() && !std::isnan(out) && !(errno == ERANGE && !std::isinf(out));
}

// format_score: a score in a reply, as Redis 7.0's addReplyDouble writes
// it over RESP2: "inf" / "-inf", else %.17g (3 → "3", 2.5 → "2.5").
// format_g17: `x` as %.17g writes it (Redis' number format), into `buf`;
// an integer (a ticket, a stamp or TTL in ms) without printf's cost.
std::string_view format_g17(double x, char (&buf)[32]) {
  if (std::abs(x) < 1e15 && x == std::trunc(x) && !(x == 0 && std::signbit(x))) {
    return {buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, static_cast<long long>(x)).ptr - buf)};
  }
  return {buf, static_cast<std::size_t>(std::snprintf(buf, sizeof buf, "%.17g", x))};
}

std::string format_score(double score) {
  if (std::isinf(score)) return score > 0 ? "inf" : "-inf";
  char buf[32];
  return std::string(format_g17(score, buf));
}

// ZSet — a sorted set, ordered as Redis orders one: by score, then by
// member bytewise (std::string compares as unsigned bytes, as memcmp). A
// sorted vector: the fair scripts' queues hold a few waiters, and a rank
// is an index.
struct ZSet {
  std::vector<std::pair<double, std::string>> entries;

  auto find(std::string_view member) {
    return std::find_if(entries.begin(), entries.end(), [member](const auto& e) { return e.second == member; });
  }
  void insert(double score, std::string_view member) {
    const auto at = std::lower_bound(entries.begin(), entries.end(), std::pair<double, std::string_view>(score, member),
                                     [](const auto& e, const auto& key) {
                                       return e.first < key.first || (e.first == key.first && e.second < key.second);
                                     });
    entries.emplace(at, score, std::string(member));
  }
};

// Value — one key: a string or a sorted set (the only types modelled),
// and its expiry. A command on the other type answers WRONGTYPE, as in
// Redis; DEL, EXISTS, PTTL, PEXPIRE, expiry and data loss treat both alike.
struct Value {
  std::variant<std::string, ZSet> data;
  long long expire_at = no_expiry;  // absolute, on this master's wall clock (ms)
  long long written = 0;            // last write, on this master's wall clock (ms): what a lagging replica lacks

  std::string* string() { return std::get_if<std::string>(&data); }
  ZSet* zset() { return std::get_if<ZSet>(&data); }
};

struct LuaClose {
  void operator()(lua_State* L) const noexcept { lua_close(L); }
};

// LuaHeap — the allocator of a master's Lua states. Each script call makes
// a few small tables and strings; glibc's malloc/free of them were over a
// tenth of the call. Lua passes a block's size on every free and realloc, so small
// blocks go back to per-size free lists with no header. The chunks are
// freed with the heap, which outlives every state made from it.
class LuaHeap {
 public:
  static void* alloc(void* self, void* ptr, std::size_t old_size, std::size_t new_size) noexcept {
    return static_cast<LuaHeap*>(self)->realloc(ptr, old_size, new_size);
  }

 private:
  static constexpr std::size_t grain = 16, max_small = 256, chunk_size = 64 * 1024;
  struct Free {
    Free* next;
  };

  static std::size_t size_class(std::size_t size) { return (size + grain - 1) / grain; }  // 0: none

  void* realloc(void* ptr, std::size_t old_size, std::size_t new_size) noexcept {
    if (ptr == nullptr) old_size = 0;
    const bool old_small = old_size <= max_small, new_small = new_size <= max_small;
    if (!old_small && !new_small) return std::realloc(ptr, new_size);  // Lua never asks for 0 here
    if (new_size == 0) {
      release(ptr, old_size);
      return nullptr;
    }
    if (old_small && new_small && size_class(old_size) == size_class(new_size)) return ptr;
    void* fresh = new_small ? take(new_size) : std::malloc(new_size);
    if (fresh == nullptr) {
      if (new_size < old_size) std::abort();  // Lua assumes a shrink never fails
      return nullptr;
    }
    if (ptr != nullptr) {
      std::memcpy(fresh, ptr, std::min(old_size, new_size));
      release(ptr, old_size);
    }
    return fresh;
  }

  void* take(std::size_t size) {
    Free*& head = free_[size_class(size)];
    if (head != nullptr) {
      // The block after this one is fetched now, ahead of the next take of
      // its size: a list refilled by a sweep runs through blocks long out of
      // the cache, and each take would otherwise wait for its block's link.
      Free* const block = std::exchange(head, head->next);
      if (head != nullptr) __builtin_prefetch(head, 1);
      return block;
    }
    const std::size_t bytes = size_class(size) * grain;
    if (left_ < bytes) {
      std::unique_ptr<std::byte[]> chunk(new (std::nothrow) std::byte[chunk_size]);
      if (chunk == nullptr) return nullptr;
      next_ = chunks_.emplace_back(std::move(chunk)).get();
      left_ = chunk_size;  // the rest of the previous chunk (< 256 bytes) is dropped
    }
    left_ -= bytes;
    return std::exchange(next_, next_ + bytes);
  }

  void release(void* ptr, std::size_t size) {
    if (ptr == nullptr) return;
    if (size > max_small) return std::free(ptr);
    Free*& head = free_[size_class(size)];
    head = new (ptr) Free{head};
  }

  std::array<Free*, max_small / grain + 1> free_{};
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  std::byte* next_ = nullptr;
  std::size_t left_ = 0;
};

// Lua's number → Redis integer: truncation, as Redis' (long long) cast;
// NaN and out-of-range values (undefined for the cast) become LLONG_MIN.
long long lua_to_ll(lua_Number n) {
  if (!(n >= -9223372036854775808.0 && n < 9223372036854775808.0)) return LLONG_MIN;
  return static_cast<long long>(n);
}

// lua_tonumber_base: Lua 5.1's own `tonumber` (lbaselib.c's luaB_tonumber),
// with one shortcut: a string of an optional '-' and 1 to 15 decimal
// digits (every ARGV number and reply the scripts convert) is read
// directly — the value strtod gives it, exactly (below 2^53), without the
// two strtod calls of lua_isnumber and lua_tonumber (4 % of the
// simulator's time). Everything else goes the library's way, word for word.
int lua_tonumber_base(lua_State* L) {
  const int base = luaL_optint(L, 2, 10);
  if (base == 10) {
    luaL_checkany(L, 1);
    if (lua_type(L, 1) == LUA_TSTRING) {
      std::size_t len = 0;
      const char* s = lua_tolstring(L, 1, &len);
      const std::size_t sign = len > 0 && s[0] == '-' ? 1 : 0;
      if (len > sign && len - sign <= 15) {
        long long n = 0;
        std::size_t i = sign;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; ++i) n = n * 10 + (s[i] - '0');
        if (i == len) {
          const auto value = static_cast<lua_Number>(n);
          lua_pushnumber(L, sign != 0 ? -value : value);
          return 1;
        }
      }
    }
    if (lua_isnumber(L, 1)) {
      lua_pushnumber(L, lua_tonumber(L, 1));
      return 1;
    }
  } else {
    const char* s1 = luaL_checkstring(L, 1);
    char* s2 = nullptr;
    luaL_argcheck(L, 2 <= base && base <= 36, 2, "base out of range");
    const unsigned long n = std::strtoul(s1, &s2, base);
    if (s1 != s2) {  // at least one valid digit
      while (std::isspace(static_cast<unsigned char>(*s2))) s2++;  // trailing spaces
      if (*s2 == '\0') {                                            // nothing else after
        lua_pushnumber(L, static_cast<lua_Number>(n));
        return 1;
      }
    }
  }
  lua_pushnil(L);
  return 1;
}

// Globals: a script may neither read an undefined one nor create one, so no
// state survives between calls (Redis 7 makes _G read-only to the same end).
// KEYS and ARGV are set with rawset, past this guard.
constexpr const char* protect_globals = R"lua(
setmetatable(_G, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = function(_, name)
    error("Script attempted to create global variable '" .. tostring(name) .. "'", 2)
  end,
})
)lua";

// LuaShared — the one Lua interpreter of this thread's masters, and the
// scripts compiled in it. A script can keep no state between calls (the
// globals are read-only, KEYS and ARGV hold each call's arguments and
// nothing else), so one
// interpreter serves every master, as each Redis serves all its clients
// with one: a new master, a restart or SCRIPT FLUSH empties that master's
// own SHA table (NOSCRIPT until loaded again) but compiles nothing anew,
// and no schedule builds an interpreter. (Making one per master and
// compiling every script on each was a tenth of the simulator's time.)
// `current` is the master whose script runs: redis.call goes to it.
struct LuaShared {
  static LuaShared& get() {
    thread_local LuaShared shared;
    return shared;
  }

  LuaHeap heap;  // before `lua`: the state is closed first
  std::unique_ptr<lua_State, LuaClose> lua;
  void* current = nullptr;                                                   // the running script's Master::Impl
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> compiled;  // SHA → Lua registry ref
  std::vector<std::pair<std::string, std::string>> sha_cache;                 // body → SHA1 (sha_of)
  // The names every call uses, interned once and kept in the registry (a
  // registry read is an array index; pushing a C string hashes it again).
  enum Name { name_keys, name_argv, name_err, name_ok, name_count };
  std::array<int, name_count> names{};
  void push_name(Name n) const { lua_rawgeti(lua.get(), LUA_REGISTRYINDEX, names[n]); }
  // ArgTable — the table KEYS (or ARGV) names, kept from call to call:
  // two tables fewer to make and collect per call. One per count of
  // arguments: its array part has room for `capacity` (that count)
  // entries; 1..used hold the last call's arguments and the rest is nil,
  // so that a call sees exactly a new table's contents (the same entries,
  // the same `#`). A table per count, not one for all: a call with fewer
  // arguments than the last nils no slots, and the check after it has
  // none to read. After each call `check_args` makes sure the script left
  // nothing past them.
  struct ArgTable {
    int ref = LUA_NOREF;
    int capacity = 0;
    int used = 0;
  };
  std::array<std::vector<ArgTable>, 2> args;  // by name_keys, name_argv; then by count
  std::array<std::size_t, 2> in_use{};         // the counts of the call running now
};

}  // namespace

std::string to_string(const Reply& reply) {
  switch (reply.type) {
    case Reply::Type::status:
      return "+" + reply.str;
    case Reply::Type::string:
      return "\"" + reply.str + "\"";
    case Reply::Type::integer:
      return ":" + std::to_string(reply.integer);
    case Reply::Type::nil:
      return "(nil)";
    case Reply::Type::error:
      return "-" + reply.str;
    case Reply::Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < reply.elements.size(); ++i) out += (i ? ", " : "") + to_string(reply.elements[i]);
      return out + "]";
    }
  }
  return "?";
}

struct Master::Impl {
  using Handler = Reply (Impl::*)(Args);
  using Into = void (Impl::*)(Args, Reply&);
  struct Command {
    std::string_view name;  // lowercase
    int arity;              // Redis' convention: N exactly, −N at least N (the name counts)
    bool noscript;          // refused from a script's redis.call
    Handler run;
    Into into = nullptr;  // run, into a reply whose buffers it reuses (the commands sent most)
  };

  Impl(Master& owner, std::string seed, std::function<long long()> wall_ms)
      : owner(owner), seed(std::move(seed)), wall_ms(std::move(wall_ms)) {
    start();
  }

  Master& owner;  // for on_publish, a public member of the Master
  std::string seed;
  std::function<long long()> wall_ms;
  long long now = 0;  // the clock of the running command: one reading per execute()
  unsigned generation = 0;
  std::string run_id;
  // replid: INFO replication's master_replid: drawn anew at every start
  // and promotion, and by a resync (demoted, it took another's data).
  unsigned histories = 0;
  std::string replid;
  long long started_ms = 0;
  long long maxmemory = 0;
  std::string maxmemory_policy = "noeviction";
  std::unordered_map<std::string, Value, StringHash, std::equal_to<>> keys;
  LuaShared& shared = LuaShared::get();
  // scripts: what this master has loaded (SCRIPT LOAD, EVAL), SHA → the
  // shared interpreter's registry ref of its compiled function.
  ScriptTable scripts;
  std::vector<std::string_view> argv_scratch, call_scratch;  // reused: no allocation per call
  struct Digits {
    char text[32];
  };
  std::vector<Digits> number_scratch;  // a redis.call's number arguments as text (call_scratch views them)
  Reply call_reply;  // a redis.call's reply (its buffers reused; scripts do not nest)

  // start: the process (re)starts; keys are the caller's business.
  void start() {
    run_id = redlock::detail::sha1_hex(seed + '#' + std::to_string(generation++));
    new_history();
    started_ms = wall_ms();
    new_lua();
  }

  // fail_over: a replica that has been up for `uptime_ms` takes over with
  // this keyspace as replicated up to `synced_ms`: what was written after
  // that is missing (an overwritten key is gone rather than older).
  void fail_over(long long synced_ms, long long uptime_ms) {
    std::erase_if(keys, [synced_ms](const auto& kv) { return kv.second.written > synced_ms; });
    start();
    started_ms -= uptime_ms;
  }

  void new_history() { replid = redlock::detail::sha1_hex(seed + "#replid" + std::to_string(histories++)); }

  // resync: demoted to a replica, this process took its promoted
  // replica's keyspace (replicated up to `synced_ms`: later writes gone)
  // and is promoted again: the same run id and uptime, another history.
  void resync(long long synced_ms) {
    std::erase_if(keys, [synced_ms](const auto& kv) { return kv.second.written > synced_ms; });
    new_history();
  }

  // find_live: the key, or end() when missing or expired (then erased:
  // Redis' lazy expiry).
  auto find_live(std::string_view key) {
    auto it = keys.find(key);
    if (it != keys.end() && it->second.expire_at <= now) {
      keys.erase(it);
      return keys.end();
    }
    return it;
  }

  void purge_expired() {
    std::erase_if(keys, [this](const auto& kv) { return kv.second.expire_at <= now; });
  }

  long long ttl_of(std::string_view key) {
    const auto it = find_live(key);
    if (it == keys.end()) return -2;
    return it->second.expire_at == no_expiry ? -1 : it->second.expire_at - now;
  }

  static const Command* find_command(std::string_view name);

  Reply dispatch(Args argv, bool from_script) {
    Reply r;
    dispatch_into(argv, from_script, r);
    return r;
  }

  // dispatch_into: dispatch's reply in `out`, whose buffers (text,
  // elements) the commands sent most reuse; whatever it held is replaced.
  void dispatch_into(Args argv, bool from_script, Reply& out) {
    if (argv.empty()) {
      out = error("ERR empty command");
      return;
    }
    const Command* cmd = find_command(argv[0]);
    if (cmd == nullptr) {
      std::string text = "ERR unknown command '" + std::string(argv[0]) + "', with args beginning with: ";
      for (std::size_t i = 1; i < argv.size() && text.size() < 200; ++i) text += "'" + std::string(argv[i]) + "' ";
      out = error(text);
      return;
    }
    if (from_script && cmd->noscript) {
      out = error("ERR This Redis command is not allowed from script");
      return;
    }
    const auto argc = static_cast<long long>(argv.size());
    if (cmd->arity > 0 ? argc != cmd->arity : argc < -cmd->arity) {
      out = wrong_arity(cmd->name);
      return;
    }
    if (cmd->into != nullptr) return (this->*cmd->into)(argv, out);
    out = (this->*cmd->run)(argv);
  }

  // ---- commands -----------------------------------------------------------

  Reply ping(Args a) {
    if (a.size() > 2) return wrong_arity("ping");
    return a.size() == 1 ? status("PONG") : bulk(a[1]);
  }

  Reply auth(Args a) { return a.size() > 3 ? error(syntax_error) : ok(); }

  Reply select(Args a) {
    long long db = 0;
    if (!parse_ll(a[1], db)) return error(not_integer);
    return db >= 0 && db < db_count ? ok() : error("ERR DB index is out of range");
  }

  Reply get(Args a) {
    Reply r;
    get_into(a, r);
    return r;
  }

  void get_into(Args a, Reply& out) {
    const auto it = find_live(a[1]);
    if (it == keys.end()) return assign(out, Reply::Type::nil);
    const std::string* text = it->second.string();
    if (text == nullptr) return assign(out, Reply::Type::error, 0, wrong_type);
    assign(out, Reply::Type::string, 0, *text);
  }

  Reply set(Args a) {
    bool nx = false, xx = false, keep_ttl = false, get_old = false, has_expire = false;
    long long when = no_expiry;
    for (std::size_t i = 3; i < a.size(); ++i) {
      const std::string_view opt = a[i];
      if (iequals(opt, "nx") && !xx) {
        nx = true;
      } else if (iequals(opt, "xx") && !nx) {
        xx = true;
      } else if (iequals(opt, "get")) {
        get_old = true;
      } else if (iequals(opt, "keepttl") && !has_expire) {
        keep_ttl = true;
      } else if ((iequals(opt, "ex") || iequals(opt, "px") || iequals(opt, "exat") || iequals(opt, "pxat")) &&
                 !keep_ttl && !has_expire && i + 1 < a.size()) {
        has_expire = true;
        if (!parse_ll(a[++i], when)) return error(not_integer);
        const bool seconds = ascii_lower(opt[0]) == 'e';
        const bool relative = opt.size() == 2;
        if (when <= 0 || (seconds && __builtin_mul_overflow(when, 1000, &when)) ||
            (relative && __builtin_add_overflow(when, now, &when))) {
          return error("ERR invalid expire time in 'set' command");
        }
      } else {
        return error(syntax_error);
      }
    }
    auto it = find_live(a[1]);
    const bool exists = it != keys.end();
    // SET replaces a key of any type; with GET, the old value must be a string.
    if (get_old && exists && it->second.string() == nullptr) return error(wrong_type);
    Reply reply = !get_old ? ok() : exists ? bulk(*it->second.string()) : Reply{};
    if ((nx && exists) || (xx && !exists)) {
      if (!get_old) return Reply{};
      return reply;  // (not `get_old ? reply : Reply{}`, which copies it)
    }
    if (!exists) it = keys.try_emplace(std::string(a[1])).first;
    if (std::string* text = it->second.string()) {
      text->assign(a[2]);  // reuses the string's buffer
    } else {
      it->second.data = std::string(a[2]);
    }
    if (!keep_ttl) it->second.expire_at = when;
    it->second.written = now;
    return reply;
  }

  Reply del(Args a) {
    long long n = 0;
    for (std::size_t i = 1; i < a.size(); ++i) {
      if (const auto it = find_live(a[i]); it != keys.end()) {
        keys.erase(it);
        ++n;
      }
    }
    return integer(n);
  }

  Reply exists(Args a) {
    long long n = 0;
    for (std::size_t i = 1; i < a.size(); ++i) n += find_live(a[i]) != keys.end();
    return integer(n);
  }

  // Condition flags of PEXPIRE and ZADD: NX, XX, GT, LT (and ZADD's CH).
  struct Conditions {
    bool nx = false, xx = false, gt = false, lt = false, ch = false;
    // take: true when `word` is one of them (`ch`: CH is one too).
    bool take(std::string_view word, bool with_ch) {
      if (iequals(word, "nx")) return nx = true;
      if (iequals(word, "xx")) return xx = true;
      if (iequals(word, "gt")) return gt = true;
      if (iequals(word, "lt")) return lt = true;
      if (with_ch && iequals(word, "ch")) return ch = true;
      return false;
    }
  };

  Reply pexpire(Args a) {
    long long when = 0;
    if (!parse_ll(a[2], when)) return error(not_integer);
    Conditions c;
    for (std::size_t i = 3; i < a.size(); ++i) {
      if (!c.take(a[i], false)) return error("ERR Unsupported option " + std::string(a[i]));
    }
    const auto [nx, xx, gt, lt, ch] = c;
    (void)ch;
    if (nx && (xx || gt || lt)) return error("ERR NX and XX, GT or LT options at the same time are not compatible");
    if (gt && lt) return error("ERR GT and LT options at the same time are not compatible");
    if (__builtin_add_overflow(when, now, &when)) return error("ERR invalid expire time in 'pexpire' command");
    const auto it = find_live(a[1]);
    if (it == keys.end()) return integer(0);
    const long long current = it->second.expire_at;  // no_expiry counts as infinite, as Redis' -1 does
    if ((nx && current != no_expiry) || (xx && current == no_expiry) || (gt && when <= current) ||
        (lt && current != no_expiry && when >= current)) {
      return integer(0);
    }
    if (when <= now) {
      keys.erase(it);
    } else {
      it->second.expire_at = when;
      it->second.written = now;
    }
    return integer(1);
  }

  Reply pttl(Args a) { return integer(ttl_of(a[1])); }

  Reply incr(Args a) {
    auto it = find_live(a[1]);
    long long value = 0;
    if (it != keys.end() && it->second.string() == nullptr) return error(wrong_type);
    if (it != keys.end() && !parse_ll(*it->second.string(), value)) return error(not_integer);
    if (value == LLONG_MAX) return error("ERR increment or decrement would overflow");
    if (it == keys.end()) it = keys.try_emplace(std::string(a[1])).first;
    *it->second.string() = std::to_string(++value);  // the TTL stays, as in Redis
    it->second.written = now;
    return integer(value);
  }

  // ---- sorted sets (the fair scripts' queues) ------------------------------

  // find_zset: the live sorted set at `key` (nullptr when missing); a key
  // of another type sets `failed` to WRONGTYPE.
  ZSet* find_zset(std::string_view key, Reply& failed) {
    const auto it = find_live(key);
    if (it == keys.end()) return nullptr;
    ZSet* z = it->second.zset();
    if (z == nullptr) failed = error(wrong_type);
    return z;
  }

  // ZADD key [NX|XX] [GT|LT] [CH] score member [score member …] → the
  // members added (with CH: added or changed). INCR is not modelled.
  Reply zadd(Args a) {
    Conditions c;
    std::size_t i = 2;
    for (; i < a.size() && c.take(a[i], true); ++i) {
    }
    if (i < a.size() && iequals(a[i], "incr")) return error("ERR the simulated master does not model ZADD INCR");
    const auto [nx, xx, gt, lt, ch] = c;
    if (i == a.size() || (a.size() - i) % 2 != 0) return error(syntax_error);
    if (nx && xx) return error("ERR XX and NX options at the same time are not compatible");
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
      return error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    std::vector<double> scores;
    for (std::size_t j = i; j < a.size(); j += 2) {
      double score = 0;
      if (!parse_score(a[j], score)) return error(not_float);
      scores.push_back(score);
    }
    Reply failed;
    ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    if (z == nullptr) {
      if (xx) return integer(0);  // nothing to update: no key is made
      z = &keys[std::string(a[1])].data.emplace<ZSet>();
    }
    long long added = 0, changed = 0;
    for (std::size_t j = i, k = 0; j < a.size(); j += 2, ++k) {
      const double score = scores[k];
      const auto it = z->find(a[j + 1]);
      if (it == z->entries.end()) {
        if (xx) continue;
        z->insert(score, a[j + 1]);
        ++added;
        continue;
      }
      if (nx || (gt && score <= it->first) || (lt && score >= it->first) || score == it->first) continue;
      z->entries.erase(it);
      z->insert(score, a[j + 1]);
      ++changed;
    }
    if (added + changed > 0) keys.find(a[1])->second.written = now;
    return integer(ch ? added + changed : added);
  }

  // ZRANGE key start stop [REV] [WITHSCORES]: by rank (negative from the
  // end), scores as bulk strings after their members. BYSCORE, BYLEX and
  // LIMIT are not modelled.
  Reply zrange(Args a) {
    bool rev = false, with_scores = false;
    for (std::size_t i = 4; i < a.size(); ++i) {
      if (iequals(a[i], "rev"))
        rev = true;
      else if (iequals(a[i], "withscores"))
        with_scores = true;
      else if (iequals(a[i], "byscore") || iequals(a[i], "bylex") || iequals(a[i], "limit"))
        return error("ERR the simulated master does not model ZRANGE BYSCORE, BYLEX or LIMIT");
      else
        return error(syntax_error);
    }
    long long start = 0, stop = 0;
    if (!parse_ll(a[2], start) || !parse_ll(a[3], stop)) return error(not_integer);
    Reply failed;
    const ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    Reply r;
    r.type = Reply::Type::array;
    const long long len = z == nullptr ? 0 : static_cast<long long>(z->entries.size());
    if (start < 0) start = std::max(start + len, 0LL);
    if (stop < 0) stop += len;
    if (stop >= len) stop = len - 1;
    if (start <= stop) r.elements.reserve(static_cast<std::size_t>(stop - start + 1) * (with_scores ? 2 : 1));
    for (long long rank = start; rank <= stop; ++rank) {
      const auto& [score, member] = z->entries[static_cast<std::size_t>(rev ? len - 1 - rank : rank)];
      r.elements.push_back(bulk(member));
      if (with_scores) r.elements.push_back(bulk(format_score(score)));
    }
    return r;
  }

  // ZREM key member [member …] → how many were there; an emptied set's key
  // is gone, as in Redis.
  Reply zrem(Args a) {
    Reply failed;
    ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    if (z == nullptr) return integer(0);
    long long removed = 0;
    for (std::size_t i = 2; i < a.size(); ++i) {
      if (const auto it = z->find(a[i]); it != z->entries.end()) {
        z->entries.erase(it);
        ++removed;
      }
    }
    if (z->entries.empty()) keys.erase(keys.find(a[1]));
    return integer(removed);
  }

  // ZREMRANGEBYSCORE key min max → how many left; min and max as Redis
  // reads them (zslParseRange): a score, "-inf"/"+inf", or "(" before one
  // for an open end. An emptied set's key is gone.
  Reply zremrangebyscore(Args a) {
    const auto bound = [](std::string_view text, double& v, bool& open) {
      open = !text.empty() && text[0] == '(';
      if (open) text.remove_prefix(1);
      return parse_score(text, v);
    };
    double min = 0, max = 0;
    bool min_open = false, max_open = false;
    if (!bound(a[2], min, min_open) || !bound(a[3], max, max_open)) return error("ERR min or max is not a float");
    Reply failed;
    ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    if (z == nullptr) return integer(0);
    const auto gone = std::remove_if(z->entries.begin(), z->entries.end(), [&](const auto& e) {
      return (min_open ? e.first > min : e.first >= min) && (max_open ? e.first < max : e.first <= max);
    });
    const auto removed = static_cast<long long>(z->entries.end() - gone);
    z->entries.erase(gone, z->entries.end());
    if (z->entries.empty()) keys.erase(keys.find(a[1]));
    return integer(removed);
  }

  Reply zcard(Args a) {
    Reply failed;
    const ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    return integer(z == nullptr ? 0 : static_cast<long long>(z->entries.size()));
  }

  // ZRANK key member → its rank from 0, nil when absent (Redis 7.0: no
  // WITHSCORE).
  Reply zrank(Args a) {
    Reply failed;
    ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    if (z == nullptr) return Reply{};
    const auto it = z->find(a[2]);
    return it == z->entries.end() ? Reply{} : integer(it - z->entries.begin());
  }

  Reply zscore(Args a) {
    Reply failed;
    ZSet* z = find_zset(a[1], failed);
    if (failed.is_error()) return failed;
    if (z == nullptr) return Reply{};
    const auto it = z->find(a[2]);
    return it == z->entries.end() ? Reply{} : bulk(format_score(it->first));
  }

  Reply time(Args) {
    Reply r;
    r.type = Reply::Type::array;
    r.elements = {bulk(std::to_string(floor_div(now, 1000))),
                  bulk(std::to_string((now - floor_div(now, 1000) * 1000) * 1000))};
    return r;
  }

  Reply flushall(Args a) {
    if (a.size() > 2 || (a.size() == 2 && !iequals(a[1], "async") && !iequals(a[1], "sync"))) {
      return error(syntax_error);
    }
    keys.clear();
    return ok();
  }

  Reply publish(Args a) {
    return integer(owner.on_publish ? owner.on_publish(std::string(a[1]), std::string(a[2])) : 0);
  }

  Reply info(Args a) {
    const auto wants = [&](std::string_view section) {
      if (a.size() == 1) return true;
      return std::any_of(a.begin() + 1, a.end(), [&](std::string_view s) {
        return iequals(s, section) || iequals(s, "all") || iequals(s, "everything") || iequals(s, "default");
      });
    };
    std::string out;
    const auto field = [&out](std::string_view name, const std::string& value) {
      out.append(name).append(":").append(value).append("\r\n");
    };
    const auto section = [&out](std::string_view title) {
      out.append(out.empty() ? "# " : "\r\n# ").append(title).append("\r\n");
    };
    if (wants("server")) {
      const long long uptime = floor_div(now, 1000) - floor_div(started_ms, 1000);
      section("Server");
      field("redis_version", "7.0.15");
      field("redis_mode", "standalone");
      field("os", "redlock-sim");
      field("run_id", run_id);
      field("uptime_in_seconds", std::to_string(uptime));
      field("uptime_in_days", std::to_string(floor_div(uptime, 86400)));
    }
    if (wants("memory")) {
      section("Memory");
      field("maxmemory", std::to_string(maxmemory));
      field("maxmemory_policy", maxmemory_policy);
    }
    if (wants("replication")) {
      section("Replication");
      field("role", "master");
      field("connected_slaves", "0");
      field("master_replid", replid);
    }
    if (wants("keyspace")) {
      section("Keyspace");
      purge_expired();
      if (!keys.empty()) {
        const auto expires =
            std::count_if(keys.begin(), keys.end(), [](const auto& kv) { return kv.second.expire_at != no_expiry; });
        field("db0", "keys=" + std::to_string(keys.size()) + ",expires=" + std::to_string(expires) + ",avg_ttl=0");
      }
    }
    return bulk(out);
  }

  Reply script(Args a) {
    if (iequals(a[1], "load")) {
      if (a.size() != 3) return wrong_arity("script|load");
      const std::string& sha = sha_of(a[2]);
      int ref = 0;
      Reply failed;
      return compile(a[2], sha, ref, failed) ? bulk(sha) : failed;
    }
    if (iequals(a[1], "flush")) {
      if (a.size() > 3) return wrong_arity("script|flush");
      if (a.size() == 3 && !iequals(a[2], "async") && !iequals(a[2], "sync")) {
        return error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
      }
      flush_scripts();
      return ok();
    }
    if (iequals(a[1], "exists")) {
      if (a.size() < 3) return wrong_arity("script|exists");
      Reply r;
      r.type = Reply::Type::array;
      for (std::size_t i = 2; i < a.size(); ++i) {
        std::string sha(a[i]);
        std::transform(sha.begin(), sha.end(), sha.begin(), ascii_lower);
        r.elements.push_back(integer(scripts.contains(sha) ? 1 : 0));
      }
      return r;
    }
    return error("ERR unknown subcommand '" + std::string(a[1]) + "'. Try SCRIPT HELP.");
  }

  Reply eval(Args a) {
    long long numkeys = 0;
    Reply failed;
    if (!check_numkeys(a, numkeys, failed)) return failed;
    const std::string& sha = sha_of(a[1]);
    int ref = 0;
    if (!compile(a[1], sha, ref, failed)) return failed;
    Reply r;
    run_script(ref, sha, a, numkeys, r);
    return r;
  }

  Reply evalsha(Args a) {
    Reply r;
    evalsha_into(a, r);
    return r;
  }

  void evalsha_into(Args a, Reply& out) {
    long long numkeys = 0;
    Reply failed;
    if (!check_numkeys(a, numkeys, failed)) {
      out = std::move(failed);
      return;
    }
    if (a[1].size() != 40) return assign(out, Reply::Type::error, 0, no_script);
    // Redis looks the SHA up in lowercase; the SHAs kept are, so one found
    // as given was lowercase already (the library's always are).
    if (const int* ref = scripts.find(a[1])) return run_script(*ref, a[1], a, numkeys, out);
    char sha[40];
    std::transform(a[1].begin(), a[1].end(), sha, ascii_lower);
    const int* ref = scripts.find(std::string_view(sha, sizeof sha));
    if (ref == nullptr) return assign(out, Reply::Type::error, 0, no_script);
    run_script(*ref, std::string_view(sha, sizeof sha), a, numkeys, out);
  }

  // ---- scripts --------------------------------------------------------------

  static bool check_numkeys(Args a, long long& numkeys, Reply& failed) {
    if (!parse_ll(a[2], numkeys))
      failed = error(not_integer);
    else if (numkeys > static_cast<long long>(a.size()) - 3)
      failed = error("ERR Number of keys can't be greater than number of args");
    else if (numkeys < 0)
      failed = error("ERR Number of keys can't be negative");
    else
      return true;
    return false;
  }

  // sha_of: SHA1 of a script body, remembered (every connection's
  // handshake loads the same few bodies; hashing them each time was 5 % of
  // the simulator's time). A body is compared in full before its SHA is
  // reused. The reference is valid until the next call.
  const std::string& sha_of(std::string_view body) {
    auto& cache = shared.sha_cache;
    for (const auto& [known, sha] : cache) {
      if (known == body) return sha;
    }
    if (cache.size() >= 64) cache.erase(cache.begin());
    cache.emplace_back(std::string(body), redlock::detail::sha1_hex(body));
    return cache.back().second;
  }

  // compile: the registry ref of `body`'s function, compiled on its first
  // use only; a syntax error → `failed`.
  bool compile(std::string_view body, const std::string& sha, int& ref, Reply& failed) {
    if (const int* known = scripts.find(sha)) {
      ref = *known;
      return true;
    }
    if (const auto it = shared.compiled.find(sha); it != shared.compiled.end()) {
      ref = it->second;
      scripts.emplace(sha, ref);
      return true;
    }
    lua_State* L = shared.lua.get();
    if (luaL_loadbuffer(L, body.data(), body.size(), "@user_script") != 0) {
      failed = error("ERR Error compiling script (new function): " + std::string(lua_tostring(L, -1)));
      lua_pop(L, 1);
      return false;
    }
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
    shared.compiled.emplace(sha, ref);
    scripts.emplace(sha, ref);
    return true;
  }

  // run_script calls a compiled script with KEYS and ARGV from EVAL's
  // arguments (numkeys already checked); its reply goes into `out`.
  void run_script(int ref, std::string_view sha, Args a, long long numkeys, Reply& out) {
    lua_State* L = shared.lua.get();
    const auto n = static_cast<std::size_t>(numkeys);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    set_global_array(L, LuaShared::name_keys, a.subspan(3, n));
    set_global_array(L, LuaShared::name_argv, a.subspan(3 + n));
    shared.current = this;  // scripts do not nest (EVAL is refused from a script)
    if (lua_pcall(L, 0, 1, 0) == 0) {
      from_lua(L, lua_gettop(L), out);
    } else {
      out = script_error(L, sha);
    }
    shared.current = nullptr;
    lua_settop(L, 0);
    check_args(L);
  }

  // set_global_array: the global `name` (KEYS or ARGV) is the array of
  // `values`, in its kept table (LuaShared::ArgTable), or a new one when
  // they do not fit; set again for every call, as a script may have
  // assigned the global itself.
  void set_global_array(lua_State* L, LuaShared::Name name, Args values) {
    std::vector<LuaShared::ArgTable>& by_count = shared.args[name];
    if (by_count.size() <= values.size()) by_count.resize(values.size() + 1);
    shared.in_use[name] = values.size();
    LuaShared::ArgTable& t = by_count[values.size()];
    const int n = static_cast<int>(values.size());
    shared.push_name(name);
    if (t.ref == LUA_NOREF || n > t.capacity) {
      if (t.ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, t.ref);
      lua_createtable(L, n, 0);
      lua_pushvalue(L, -1);
      t = {luaL_ref(L, LUA_REGISTRYINDEX), n, 0};
    } else {
      lua_rawgeti(L, LUA_REGISTRYINDEX, t.ref);
    }
    for (int i = 0; i < n; ++i) {
      const std::string_view v = values[static_cast<std::size_t>(i)];
      // The masters of a round get the same arguments one after another:
      // a slot that holds them already is left as it is (interning a
      // string again hashes it and searches Lua's string table).
      if (i < t.used) {
        lua_rawgeti(L, -1, i + 1);
        std::size_t len = 0;
        const char* old = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
        const bool same = old != nullptr && len == v.size() && std::memcmp(old, v.data(), len) == 0;
        lua_pop(L, 1);
        if (same) continue;
      }
      lua_pushlstring(L, v.data(), v.size());
      lua_rawseti(L, -2, i + 1);
    }
    for (int i = n + 1; i <= t.used; ++i) {
      lua_pushnil(L);
      lua_rawseti(L, -2, i);
    }
    t.used = n;
    lua_rawset(L, LUA_GLOBALSINDEX);
  }

  // check_args: after a call, each kept table it used must hold nothing past its
  // arguments (the array's rest nil, no other key); one that does is
  // dropped, and the next call makes a new one. The library's scripts
  // only read KEYS and ARGV.
  void check_args(lua_State* L) {
    for (std::size_t name = 0; name < shared.args.size(); ++name) {
      LuaShared::ArgTable& t = shared.args[name][shared.in_use[name]];
      if (t.ref == LUA_NOREF) continue;
      lua_rawgeti(L, LUA_REGISTRYINDEX, t.ref);
      bool clean = true;
      for (int i = t.used + 1; clean && i <= t.capacity; ++i) {
        lua_rawgeti(L, -1, i);
        clean = lua_isnil(L, -1);
        lua_pop(L, 1);
      }
      if (clean && t.capacity > 0) {
        // next() may start from the last argument only while that key is
        // there: a script that cleared it and added others may have made
        // the table give it up, and next() from a key the table lacks
        // raises an error — outside any pcall here, which would abort.
        lua_rawgeti(L, -1, t.capacity);
        clean = !lua_isnil(L, -1);
        lua_pop(L, 1);
      }
      if (clean) {
        // What follows the array part: the hash part, which must be empty.
        if (t.capacity > 0) {
          lua_pushinteger(L, t.capacity);
        } else {
          lua_pushnil(L);
        }
        if (lua_next(L, -2) != 0) {
          lua_pop(L, 2);
          clean = false;
        }
      }
      lua_pop(L, 1);
      if (!clean) {
        luaL_unref(L, LUA_REGISTRYINDEX, t.ref);
        t = {};
      }
    }
  }

  // script_error: the reply of a script that raised. A redis.call that
  // failed raised the command's error table ({err = "ERR …"}): its text
  // keeps the command's error code, as in Redis 7.
  static Reply script_error(lua_State* L, std::string_view sha) {
    std::string text = "ERR Error running script (unknown error)";
    if (lua_istable(L, -1)) {
      lua_pushstring(L, "err");
      lua_rawget(L, -2);
      if (lua_isstring(L, -1)) text = lua_tostring(L, -1);
      lua_pop(L, 1);
    } else if (lua_isstring(L, -1)) {
      text = "ERR " + std::string(lua_tostring(L, -1));
    }
    return error(text + " script: " + std::string(sha));
  }

  // from_lua converts the Lua value at `index` by Redis' rules: number →
  // integer (truncated), string → bulk, true → :1, false/nil → nil,
  // {err=…} → error, {ok=…} → status, else an array up to the first nil.
  // Nesting is bounded (a table may hold itself): past max_nesting, or
  // past Lua's stack, an error stands in for the rest, as in Redis.
  static constexpr int max_nesting = 1000;
  // The reply goes into `out`, whose buffers (text, elements and theirs)
  // are reused.
  static void from_lua(lua_State* L, int index, Reply& out, int depth = 0) {
    switch (lua_type(L, index)) {
      case LUA_TNUMBER:
        return assign(out, Reply::Type::integer, lua_to_ll(lua_tonumber(L, index)));
      case LUA_TSTRING: {
        std::size_t len = 0;
        const char* s = lua_tolstring(L, index, &len);
        return assign(out, Reply::Type::string, 0, std::string_view(s, len));
      }
      case LUA_TBOOLEAN:
        if (lua_toboolean(L, index)) return assign(out, Reply::Type::integer, 1);
        return assign(out, Reply::Type::nil);
      case LUA_TTABLE:
        break;
      default:
        return assign(out, Reply::Type::nil);
    }
    if (depth >= max_nesting || !lua_checkstack(L, 2)) {
      return assign(out, Reply::Type::error, 0, "ERR reached lua stack limit");
    }
    const LuaShared& sh = LuaShared::get();
    for (const LuaShared::Name field : {LuaShared::name_err, LuaShared::name_ok}) {
      sh.push_name(field);
      lua_rawget(L, index);
      if (lua_type(L, -1) == LUA_TSTRING) {
        // (lua_tostring's text up to its first NUL, as before.)
        assign(out, field == LuaShared::name_err ? Reply::Type::error : Reply::Type::status, 0,
               std::string_view(lua_tostring(L, -1)));
        lua_pop(L, 1);
        return;
      }
      lua_pop(L, 1);
    }
    out.type = Reply::Type::array;
    out.integer = 0;
    out.str.clear();
    // The elements already there are overwritten one by one (each keeps
    // its buffers), the rest dropped at the end; the loop decides where
    // the array ends.
    std::size_t n = 0;
    for (int j = 1;; ++j) {
      lua_rawgeti(L, index, j);
      if (lua_isnil(L, -1)) break;
      if (n == out.elements.size()) out.elements.emplace_back();
      from_lua(L, lua_gettop(L), out.elements[n++], depth + 1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    out.elements.resize(n);
  }

  // push_reply converts a command's reply for redis.call: bulk → string,
  // nil → false, integer → number, status → {ok=…}, error → {err=…},
  // array → table.
  static void push_reply(lua_State* L, const Reply& r) {
    if (!lua_checkstack(L, 3)) {
      lua_pushboolean(L, 0);  // nesting past Lua's stack: never from these commands
      return;
    }
    switch (r.type) {
      case Reply::Type::string:
        lua_pushlstring(L, r.str.data(), r.str.size());
        return;
      case Reply::Type::nil:
        lua_pushboolean(L, 0);
        return;
      case Reply::Type::integer:
        lua_pushnumber(L, static_cast<lua_Number>(r.integer));
        return;
      case Reply::Type::status:
      case Reply::Type::error:
        lua_createtable(L, 0, 1);
        LuaShared::get().push_name(r.type == Reply::Type::status ? LuaShared::name_ok : LuaShared::name_err);
        lua_pushlstring(L, r.str.data(), r.str.size());
        lua_rawset(L, -3);  // a new table: no metatable, as setfield
        return;
      case Reply::Type::array:
        lua_createtable(L, static_cast<int>(r.elements.size()), 0);
        for (std::size_t i = 0; i < r.elements.size(); ++i) {
          push_reply(L, r.elements[i]);
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return;
    }
  }

  // call_from_lua runs one redis.call/pcall and pushes its reply; true when
  // that is an error. Every C++ object it makes is destroyed before it
  // returns: redis.call then raises with lua_error, a longjmp.
  bool call_from_lua(lua_State* L) {
    const int n = lua_gettop(L);
    Reply& reply = call_reply;
    assign(reply, Reply::Type::nil);
    call_scratch.clear();
    number_scratch.resize(static_cast<std::size_t>(n));
    for (int i = 1; i <= n; ++i) {
      const int type = lua_type(L, i);
      if (type == LUA_TNUMBER) {
        // Redis formats numbers with %.17g (Lua's own %.14g loses digits);
        // the text is only read by the command, so it stays out of Lua (no
        // string interned, nothing for the collector).
        call_scratch.push_back(format_g17(lua_tonumber(L, i), number_scratch[static_cast<std::size_t>(i - 1)].text));
        continue;
      }
      if (type != LUA_TSTRING) {
        reply = error("ERR Lua redis lib command arguments must be strings or integers");
        break;
      }
      std::size_t len = 0;
      const char* s = lua_tolstring(L, i, &len);
      call_scratch.emplace_back(s, len);
    }
    if (n == 0) reply = error("ERR Please specify at least one argument for this redis lib call");
    if (!reply.is_error() && get_to_lua(L)) return false;
    if (!reply.is_error()) {
      try {
        dispatch_into(call_scratch, true, reply);
      } catch (const std::exception& e) {  // must not unwind through Lua's C frames
        reply = error(std::string("ERR ") + e.what());
      }
    }
    push_reply(L, reply);
    return reply.is_error();
  }

  // get_to_lua: a script's GET of a missing key or of a string, answered
  // as dispatch and push_reply would (false, or the value as a Lua string)
  // without the reply's copy of the value; false for anything else (a
  // WRONGTYPE, another command), which goes the general way.
  bool get_to_lua(lua_State* L) {
    if (call_scratch.size() != 2) return false;
    const Command* cmd = find_command(call_scratch[0]);
    if (cmd == nullptr || cmd->run != &Impl::get) return false;
    const auto it = find_live(call_scratch[1]);
    const std::string* text = it == keys.end() ? nullptr : it->second.string();
    if (it != keys.end() && text == nullptr) return false;
    if (!lua_checkstack(L, 3) || text == nullptr) {
      lua_pushboolean(L, 0);
    } else {
      lua_pushlstring(L, text->data(), text->size());
    }
    return true;
  }

  template <bool Raise>
  static int lua_redis_call(lua_State* L) {
    auto* self = static_cast<Impl*>(static_cast<LuaShared*>(lua_touserdata(L, lua_upvalueindex(1)))->current);
    if (self->call_from_lua(L) && Raise) return lua_error(L);
    return 1;
  }

  static int lua_status_reply(lua_State* L) {
    if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING) return luaL_error(L, "wrong number or type of arguments");
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, "ok");
    return 1;
  }

  // lua_error_reply: {err = text}. As Redis 7: a leading '-' is dropped and
  // the first word is the code; one word alone gets the code "ERR".
  static int lua_error_reply(lua_State* L) {
    if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING) return luaL_error(L, "wrong number or type of arguments");
    std::size_t len = 0;
    const char* s = lua_tolstring(L, 1, &len);
    if (len > 0 && s[0] == '-') ++s, --len;
    while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == '\n')) --len;
    lua_createtable(L, 0, 1);
    if (std::string_view(s, len).find(' ') == std::string_view::npos) {
      lua_pushliteral(L, "ERR ");
      lua_pushlstring(L, s, len);
      lua_concat(L, 2);
    } else {
      lua_pushlstring(L, s, len);
    }
    lua_setfield(L, -2, "err");
    return 1;
  }

  // lua_panic: a Lua error outside any pcall; only running out of memory
  // gets here (every script runs under lua_pcall).
  static int lua_panic(lua_State* L) {
    std::fprintf(stderr, "sim master: Lua panic: %s\n", lua_tostring(L, -1));
    std::abort();
  }

  // new_lua: the master's process (re)starts or flushes its scripts: it
  // knows none; the shared interpreter is opened at the first master, with
  // the libraries the scripts use (as Redis: base, table, string, math; not
  // io, os, package or file loading).
  void new_lua() {
    scripts.clear();
    if (!shared.lua) open_lua(shared);
  }

  static void open_lua(LuaShared& sh) {
    sh.lua.reset(lua_newstate(&LuaHeap::alloc, &sh.heap));
    if (!sh.lua) throw std::bad_alloc();
    lua_State* L = sh.lua.get();
    lua_atpanic(L, &lua_panic);
    const std::pair<LuaShared::Name, const char*> names[] = {
        {LuaShared::name_keys, "KEYS"},
        {LuaShared::name_argv, "ARGV"},
        {LuaShared::name_err, "err"},
        {LuaShared::name_ok, "ok"}};
    for (const auto& [n, text] : names) {
      lua_pushstring(L, text);
      sh.names[n] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    // Collect when the heap has grown 3× (default 2×). The live set is
    // tiny (about 50 KB: the libraries and the compiled scripts), and a
    // script call leaves a few small strings and tables behind. A pause of
    // 10× collects fewer times (0.4 % fewer instructions) but over half a
    // megabyte of heap, which has left the cache by the time the sweep, the
    // string table and the free lists come back to it: 7 % more CPU time.
    lua_gc(L, LUA_GCSETPAUSE, 300);
    const std::pair<const char*, lua_CFunction> libs[] = {{"", luaopen_base},
                                                          {LUA_TABLIBNAME, luaopen_table},
                                                          {LUA_STRLIBNAME, luaopen_string},
                                                          {LUA_MATHLIBNAME, luaopen_math}};
    for (const auto& [name, open] : libs) {
      lua_pushcfunction(L, open);
      lua_pushstring(L, name);
      lua_call(L, 1, 0);
    }
    lua_pushcfunction(L, &lua_tonumber_base);
    lua_setglobal(L, "tonumber");
    for (const char* name : {"dofile", "loadfile"}) {
      lua_pushnil(L);
      lua_setglobal(L, name);
    }
    lua_createtable(L, 0, 4);
    lua_pushlightuserdata(L, &sh);
    lua_pushcclosure(L, &Impl::lua_redis_call<true>, 1);
    lua_setfield(L, -2, "call");
    lua_pushlightuserdata(L, &sh);
    lua_pushcclosure(L, &Impl::lua_redis_call<false>, 1);
    lua_setfield(L, -2, "pcall");
    lua_pushcfunction(L, &Impl::lua_status_reply);
    lua_setfield(L, -2, "status_reply");
    lua_pushcfunction(L, &Impl::lua_error_reply);
    lua_setfield(L, -2, "error_reply");
    lua_setglobal(L, "redis");
    if (luaL_dostring(L, protect_globals) != 0) throw std::logic_error(lua_tostring(L, -1));
  }

  void flush_scripts() { new_lua(); }  // SCRIPT FLUSH: this master's scripts are gone
};

// The command table, the commands the simulation sends most first.
const Master::Impl::Command* Master::Impl::find_command(std::string_view name) {
  static constexpr Command commands[] = {
      {"evalsha", -3, true, &Impl::evalsha, &Impl::evalsha_into},
      {"set", -3, false, &Impl::set},
      {"get", 2, false, &Impl::get, &Impl::get_into},
      {"pttl", 2, false, &Impl::pttl},
      {"pexpire", -3, false, &Impl::pexpire},
      {"del", -2, false, &Impl::del},
      {"publish", 3, false, &Impl::publish},
      {"eval", -3, true, &Impl::eval},
      {"script", -2, true, &Impl::script},
      {"time", 1, false, &Impl::time},
      {"info", -1, false, &Impl::info},
      {"ping", -1, false, &Impl::ping},
      {"auth", -2, true, &Impl::auth},
      {"select", 2, false, &Impl::select},
      {"exists", -2, false, &Impl::exists},
      {"incr", 2, false, &Impl::incr},
      {"flushall", -1, false, &Impl::flushall},
      {"zadd", -4, false, &Impl::zadd},
      {"zrange", -4, false, &Impl::zrange},
      {"zrem", -3, false, &Impl::zrem},
      {"zcard", 2, false, &Impl::zcard},
      {"zrank", 3, false, &Impl::zrank},
      {"zscore", 3, false, &Impl::zscore},
  };
  // Longer names, compared whole (none is sent often).
  static constexpr Command long_commands[] = {
      {"zremrangebyscore", 4, false, &Impl::zremrangebyscore},
  };
  // A name of up to 8 bytes packed into one word, each byte ORed with 0x20:
  // that maps a letter to its lowercase and nothing else to a letter, and
  // every command name is lowercase letters only. A lookup packs the name
  // it is given and compares words and lengths (no memcmp per entry).
  // (Byte by byte: a memcpy of a length not known at compile time is a
  // call into the C library, for a name of a few bytes.)
  constexpr auto pack = [](std::string_view text) {
    std::uint64_t word = 0;
    for (std::size_t i = 0; i < text.size(); ++i) word |= std::uint64_t{static_cast<unsigned char>(text[i])} << (8 * i);
    return word | (0x2020202020202020ULL >> (8 * (8 - text.size())));
  };
  static const auto packed = [&pack] {
    std::array<std::uint64_t, std::size(commands)> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = pack(commands[i].name);
    return out;
  }();
  if (name.size() > 8) {
    for (const auto& c : long_commands)
      if (iequals(name, c.name)) return &c;
    return nullptr;
  }
  if (name.empty()) return nullptr;
  const std::uint64_t word = pack(name);
  for (std::size_t i = 0; i < packed.size(); ++i) {
    if (packed[i] == word && commands[i].name.size() == name.size()) return &commands[i];
  }
  return nullptr;
}

Master::Master(std::string run_id_seed_name, std::function<long long()> wall_ms)
    : impl_(std::make_unique<Impl>(*this, std::move(run_id_seed_name), std::move(wall_ms))) {}

Master::~Master() = default;

Reply Master::execute(const std::vector<std::string>& argv) {
  auto& views = impl_->argv_scratch;
  views.assign(argv.begin(), argv.end());
  return execute_view(views);
}

Reply Master::execute_view(std::span<const std::string_view> argv) {
  impl_->now = impl_->wall_ms();
  return impl_->dispatch(argv, false);
}

void Master::execute_into(std::span<const std::string_view> argv, Reply& out) {
  impl_->now = impl_->wall_ms();
  impl_->dispatch_into(argv, false, out);
}

void Master::restart(bool keep_data) {
  if (!keep_data) impl_->keys.clear();
  impl_->start();
}

void Master::fail_over(long long synced_ms, long long uptime_ms) { impl_->fail_over(synced_ms, uptime_ms); }
void Master::resync(long long synced_ms) { impl_->resync(synced_ms); }
void Master::flushall() { impl_->keys.clear(); }
void Master::flush_scripts() { impl_->flush_scripts(); }
void Master::set_maxmemory(long long bytes) { impl_->maxmemory = bytes; }
void Master::set_maxmemory_policy(std::string policy) { impl_->maxmemory_policy = std::move(policy); }

bool Master::evict(std::string_view key) {
  impl_->now = impl_->wall_ms();
  const auto it = impl_->find_live(key);
  if (it == impl_->keys.end()) return false;
  impl_->keys.erase(it);
  return true;
}

const std::string& Master::run_id() const { return impl_->run_id; }

std::size_t Master::key_count() {
  impl_->now = impl_->wall_ms();
  impl_->purge_expired();
  return impl_->keys.size();
}

std::vector<std::pair<std::string, std::string>> Master::keys() {
  impl_->now = impl_->wall_ms();
  impl_->purge_expired();
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(impl_->keys.size());
  for (auto& [key, value] : impl_->keys) {
    if (const std::string* text = value.string()) {
      out.emplace_back(key, *text);
      continue;
    }
    std::string members = "zset{";  // e.g. zset{a:1,b:2}, in order
    for (const auto& [score, member] : value.zset()->entries) {
      members += (members.size() > 5 ? "," : "") + member + ":" + format_score(score);
    }
    out.emplace_back(key, members + "}");
  }
  std::sort(out.begin(), out.end());
  return out;
}

long long Master::pttl(std::string_view key) {
  impl_->now = impl_->wall_ms();
  return impl_->ttl_of(key);
}

}  // namespace redlock::sim
