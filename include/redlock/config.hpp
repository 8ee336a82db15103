// redlock/config.hpp — where the masters are and how to talk to them.
//
// A Config comes from a JSON file, from a list of URLs, or from the
// environment variable REDLOCK_NODES (comma-separated URLs). Every parser
// returns Errc::config with a message that names the field and the value
// that is wrong, e.g. `nodes[2]: "redis://h:99999": port out of range (1-65535)`,
// with any password masked (mask_credentials): `"redis://***@h:99999": …`.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/options.hpp"

namespace redlock {

// Endpoint — one host and port: a seed of a cluster member, or one of a
// sentinel member's sentinels. host is a name, IPv4, or IPv6 without
// brackets ("::1"). A plain value, copied freely, no thread concerns;
// validate_config refuses an empty host and a port outside 1–65535.
struct REDLOCK_API Endpoint {
  std::string host;
  int port = 6379;

  bool operator==(const Endpoint&) const = default;
};

// NodeAddress — one member: one vote, whatever is deployed behind it.
//   redis://[user:password@]host[:port][/db][?query]   TCP; host is a name,
//                                  IPv4, or [IPv6]; port defaults to 6379
//   rediss://…                     the same over TLS (Config::tls)
//   unix://[user:password@]/path/to.sock[?query]   unix socket (?db=N)
//   redis+cluster://[user:password@]host:port[,host:port…][/0][?query]
//                                  a Redis Cluster, found from its seeds
//   redis+sentinel://[user:password@]host:port[,host:port…]/name[/db][?query]
//                                  the primary that the sentinels
//                                  (port defaults to 26379) call "name"
//   rediss+cluster://…, rediss+sentinel://…   the same over TLS: every
//                                  connection of the member (seeds,
//                                  sentinels, data nodes)
// The query is key=value pairs joined by '&' (docs/config.md):
// wait_replicas=N|all and wait_timeout=MS on every kind, replicated=1|0 on
// redis://, rediss:// and unix://, db=N on unix://, sentinel_user= and
// sentinel_password= on sentinel members. user and password (the data
// nodes' AUTH), the master name and the sentinel_* values may be
// percent-encoded; unencoded, a password may hold '/', '@' and ':' (the
// userinfo ends at the last '@' before the query; for unix://, at the
// first "@/"), and a query value writes '&' and ',' as %26 and %2C. A URL
// with ":password@" and no user authenticates with the password alone
// (AUTH password); with a user, as an ACL user (AUTH user password).
// A plain value, copied freely, no thread concerns. A client of this
// version refuses a cluster member with wait_replicas when it is created
// (Errc::config naming the member).
struct REDLOCK_API NodeAddress {
  enum class Kind { tcp, unix_socket, cluster, sentinel };
  Kind kind = Kind::tcp;
  std::string host;      // tcp: without brackets ("::1")
  int port = 6379;       // tcp
  std::string path;      // unix_socket
  std::string user;      // empty: no ACL user (the data nodes'; cluster: every shard's)
  std::string password;  // empty: no AUTH (the data nodes')
  int db = 0;            // SELECT db when not 0 (a cluster has only db 0)
  bool tls = false;      // rediss://, rediss+…: TLS, verified as Config::tls says

  // seeds — cluster: the nodes the slot map is first learned from (any
  // nodes of the cluster; the map then names the rest). sentinel: the
  // sentinels, asked in turn where the primary is. Empty for tcp and
  // unix_socket. 1 to 64 of them, no two the same.
  std::vector<Endpoint> seeds;

  // master_name — sentinel: the name the sentinels monitor the primary
  // under ("sentinel monitor NAME …"); 1–255 printable ASCII characters
  // without blanks. Empty for the other kinds.
  std::string master_name;

  // sentinel_user, sentinel_password — sentinel: the AUTH at the sentinels
  // (the userinfo is the data nodes'). Empty: none; a user needs a
  // password. apply_default_credentials leaves them alone.
  std::string sentinel_user;
  std::string sentinel_password;

  // replicated — tcp and unix_socket: the address is a name that may fail
  // over to another server (a managed primary with replicas), so the
  // client checks the server's role and replication id as well as its run
  // id. Cluster and sentinel members are checked so anyway (false there).
  // wait_replicas on tcp or unix_socket needs it (the URL sets it).
  bool replicated = false;

  // wait_replicas — after each write that keeps a lock, WAIT until this
  // many replicas have it before the member's yes counts: 0 off, 1–16,
  // or all_replicas (every replica connected to the primary).
  int wait_replicas = 0;
  static constexpr int all_replicas = -1;

  // wait_timeout — how long a WAIT may take (1–60000 ms); 0 (unset):
  // half of Options::node_timeout. validate_config requires it below
  // Options::node_timeout, so a slow replica costs a vote, not a round.
  std::chrono::milliseconds wait_timeout{0};

  // display is the member without credentials, db or query: "127.0.0.1:7001",
  // "[::1]:7001", "unix:///tmp/r.sock",
  // "redis+cluster://10.0.0.1:7001,10.0.0.2:7001",
  // "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster" (rediss+… with
  // TLS; the name percent-encoded where it is not [A-Za-z0-9-._~]). Used in
  // outcomes and errors; mask_credentials leaves it as it is.
  std::string display() const;

  bool operator==(const NodeAddress&) const = default;
};

// TlsSettings — how rediss:// nodes are reached (docs/security.md). Files
// are PEM; they are read when the client is created, and a file that
// cannot be loaded is an Errc::config error naming the field and the file.
struct REDLOCK_API TlsSettings {
  std::string ca_file;      // CAs to trust; with ca_dir empty too, the system's store
  std::string ca_dir;       // a directory of CAs (c_rehash layout)
  std::string cert_file;    // client certificate (chain), for mutual TLS
  std::string key_file;     // its private key; required with cert_file
  std::string server_name;  // name to send (SNI) and verify; empty: each node's host
  // false accepts any certificate from anyone: the connection is encrypted
  // but not authenticated, so any machine on the path can pose as a master
  // and hand out locks. For tests only.
  bool verify = true;

  bool operator==(const TlsSettings&) const = default;
};

// Config — the masters and the options.
struct REDLOCK_API Config {
  std::vector<NodeAddress> nodes;
  Options options;
  TlsSettings tls;
};

// parse_node_url parses one URL (the forms above; a cluster's or a
// sentinel member's comma-separated seeds included). Errc::config names
// what is wrong and quotes the URL masked (mask_credentials); a query
// key's value is quoted only where it cannot be a secret. Any thread.
REDLOCK_API Result<NodeAddress> parse_node_url(std::string_view url);

// mask_credentials returns `text` with whatever may be a password replaced
// by "***", whatever the spelling. It works word by word (white space and
// commas separate words, so a list of URLs is masked URL by URL): a word
// with an '@' is masked from its start, or from after "scheme://" or a
// leading "//", up to its last '@' ("redis://u:a/b@c@h:1" →
// "redis://***@h:1", "u:pw@h" → "***@h"), unless it is a unix:// URL whose
// path starts at once (a path may hold '@'). A word without '@' whose
// host:port has a port that is not all digits may be "user:password" with
// "@host" forgotten: it is masked from that port on ("redis://u:pw" →
// "redis://u:***"). Before that, the value of every key=value whose key
// ends in "password", "passwd", "pass", "pwd" or "secret" (in any case,
// percent-escapes decoded) is masked up to the next white space, commas
// included ("…/m?sentinel_password=s3cret&x=1" → "…/m?sentinel_password=***").
// The one mask for every message that echoes a URL or config text
// (docs/security.md). Any thread.
REDLOCK_API std::string mask_credentials(std::string_view text);

// parse_node_list parses comma-separated URLs (spaces around commas are
// ignored), as in REDLOCK_NODES and --nodes. An item without "://"
// continues the seed list of the redis+cluster:// or redis+sentinel:// URL
// before it while that URL has not reached its '/' or '?' (so a sentinel
// URL's seeds end at the item carrying "/name"): "redis+cluster://a:1,b:2,
// redis://c:3" is two members. Anywhere else such an item is an error, as
// are empty items; errors name the item (or "items 2-4" for a URL and its
// seeds). Any thread.
REDLOCK_API Result<std::vector<NodeAddress>> parse_node_list(std::string_view urls);

// read_password_file reads a password from a file: its first line, without
// the line end (so `echo secret > file` works). An unreadable file, or an
// empty password, is an Errc::config error naming the path.
REDLOCK_API Result<std::string> read_password_file(const std::string& path);

// apply_default_credentials gives every node whose URL carries no
// credentials `password` (and `user`, when not empty: an ACL user), so
// the password need not be written in URLs, configs or `ps`. These are
// the data nodes' credentials (a cluster's shards, a sentinel member's
// primary); sentinel_user and sentinel_password are left as they are.
REDLOCK_API void apply_default_credentials(std::vector<NodeAddress>& nodes, const std::string& user,
                                           const std::string& password);

// parse_config_json parses a JSON object: "nodes" (an array of URLs, one
// per member, a cluster's or sentinel member's seeds inside its one
// string; required, non-empty) and any of the option keys — each sets the Options
// or TlsSettings field it names (`"node_timeout_ms": 50` sets
// Options::node_timeout), e.g.
//   {"nodes": ["redis://127.0.0.1:7001", …], "node_timeout_ms": 50}
// Every key, with its type, default and meaning, is in docs/config.md,
// generated from the one table that parses them (src/config_json.cpp).
// "password_file" (with "user" for an ACL user) gives the nodes whose URLs
// carry no credentials their password (read_password_file,
// apply_default_credentials).
// Unknown keys and wrong types are errors. The result is validated.
REDLOCK_API Result<Config> parse_config_json(std::string_view json_text);

// load_config_file reads and parses a JSON config file; an unreadable file
// is an error naming the path and the OS reason.
REDLOCK_API Result<Config> load_config_file(const std::string& path);

// config_from_env builds a Config (default options) from REDLOCK_NODES;
// unset or empty is an error naming the variable.
REDLOCK_API Result<Config> config_from_env();

// validate_config checks every rule: at least one node, no server twice
// among the redis://, rediss:// and unix:// members (the same host, in any
// case, and port, or socket path, whatever the db numbers: one server, one
// vote; cluster seeds and sentinels are only where the member is found,
// and the servers behind them are told apart by run id when connected),
// ports 1–65535, db ≥ 0 (0 on a cluster), 1–64 distinct seeds on a
// cluster or sentinel member and none on the others, a master name of
// 1–255 printable ASCII characters without blanks on a sentinel member
// only, sentinel_* only there (a user with a password), replicated only on
// tcp and unix members and with wait_replicas there, wait_replicas 0,
// 1–16 or all_replicas, wait_timeout 0–60000 ms and only with
// wait_replicas, the wait_timeout in force (0: half of node_timeout) from
// 1 ms to below node_timeout,
// default_ttl > 0, default_ttl ≤ max_ttl, default_ttl larger than
// node_timeout + drift (default_ttl · drift_factor + 2 ms), drift_factor in
// [0, 0.5), node_timeout > 0, connect_timeout > 0, 0 < reconnect_min ≤
// reconnect_max, tls_key_file set exactly when tls_cert_file is, retry_delay ≥ 0, retry_jitter ≥ 0, release_settle ≥ 0, min_validity ≥ 0,
// stall_timeout > node_timeout, max_pending > 0, prefix may be empty.
REDLOCK_API Result<void> validate_config(const Config& config);

}  // namespace redlock
