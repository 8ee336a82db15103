// redlock/config.hpp — where the masters are and how to talk to them.
//
// A Config comes from a JSON file, from a list of URLs, or from the
// environment variable REDLOCK_NODES (comma-separated URLs). Every parser
// returns Errc::config with a message that names the field and the value
// that is wrong, e.g. `nodes[2]: "redis://h:99999": port out of range (1-65535)`,
// with any password masked (mask_credentials): `"redis://***@h:99999": …`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/options.hpp"

namespace redlock {

// NodeAddress — one master.
//   redis://[user:password@]host[:port][/db]   TCP; host is a name, IPv4, or
//                                              [IPv6]; port defaults to 6379
//   rediss://…                                 the same over TLS (Config::tls)
//   unix://[user:password@]/path/to.sock[?db=N]  unix socket
// user and password may be percent-encoded; unencoded, a password may hold
// '/', '@' and ':' (the userinfo ends at the last '@'; for unix://, at the
// first "@/"). A URL with ":password@" and no
// user authenticates with the password alone (AUTH password); with a user,
// as an ACL user (AUTH user password).
struct REDLOCK_API NodeAddress {
  enum class Kind { tcp, unix_socket };
  Kind kind = Kind::tcp;
  std::string host;      // tcp: without brackets ("::1")
  int port = 6379;       // tcp
  std::string path;      // unix_socket
  std::string user;      // empty: no ACL user
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECT db when not 0
  bool tls = false;      // rediss://: TLS, verified as Config::tls says

  // display is the address without credentials: "127.0.0.1:7001",
  // "[::1]:7001", "unix:///tmp/r.sock". Used in outcomes and errors.
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

// parse_node_url parses one URL (forms above).
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
// "redis://u:***"). The one mask for every message that echoes a URL or
// config text (docs/security.md).
REDLOCK_API std::string mask_credentials(std::string_view text);

// parse_node_list parses comma-separated URLs (spaces around commas are
// ignored), as in REDLOCK_NODES and --nodes. Empty items are an error.
REDLOCK_API Result<std::vector<NodeAddress>> parse_node_list(std::string_view urls);

// read_password_file reads a password from a file: its first line, without
// the line end (so `echo secret > file` works). An unreadable file, or an
// empty password, is an Errc::config error naming the path.
REDLOCK_API Result<std::string> read_password_file(const std::string& path);

// apply_default_credentials gives every node whose URL carries no
// credentials `password` (and `user`, when not empty: an ACL user), so
// the password need not be written in URLs, configs or `ps`.
REDLOCK_API void apply_default_credentials(std::vector<NodeAddress>& nodes, const std::string& user,
                                           const std::string& password);

// parse_config_json parses a JSON object: "nodes" (an array of URLs,
// required, non-empty) and any of the option keys — each sets the Options
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
// (the same host, in any case, and port, or socket path, whatever the db
// numbers: one server, one vote), ports 1–65535, db ≥ 0,
// default_ttl > 0, default_ttl ≤ max_ttl, default_ttl larger than
// node_timeout + drift (default_ttl · drift_factor + 2 ms), drift_factor in
// [0, 0.5), node_timeout > 0, connect_timeout > 0, 0 < reconnect_min ≤
// reconnect_max, tls_key_file set exactly when tls_cert_file is, retry_delay ≥ 0, retry_jitter ≥ 0, release_settle ≥ 0, min_validity ≥ 0,
// stall_timeout > node_timeout, max_pending > 0, prefix may be empty.
REDLOCK_API Result<void> validate_config(const Config& config);

}  // namespace redlock
