// test_config.cpp — node URLs, node lists, JSON configs, REDLOCK_NODES and
// validate_config: what parses, what is refused, and what the message says.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redlock/config.hpp"

#include "config_keys.hpp"

using namespace redlock;
using namespace std::chrono_literals;
using Kind = NodeAddress::Kind;

namespace {

// The message of a failed result, after checking it is a config error.
template <class T>
std::string config_failure(const Result<T>& result) {
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == Errc::config);
  CHECK(result.error().nodes.empty());
  return result.error().message;
}

NodeAddress parsed(std::string_view url) {
  auto node = parse_node_url(url);
  REQUIRE_MESSAGE(node.ok(), node.error().message);
  return *node;
}

NodeAddress tcp(std::string host, int port, int db = 0) {
  NodeAddress node;
  node.host = std::move(host);
  node.port = port;
  node.db = db;
  return node;
}

NodeAddress unix_node(std::string path, int db = 0) {
  NodeAddress node;
  node.kind = Kind::unix_socket;
  node.path = std::move(path);
  node.db = db;
  return node;
}

Config one_node_config() {
  Config config;
  config.nodes = {tcp("127.0.0.1", 7001)};
  return config;
}

std::string validation_failure(const Options& options) {
  Config config = one_node_config();
  config.options = options;
  return config_failure(validate_config(config));
}

std::string json_with_nodes(const std::string& extra) {
  return R"({"nodes": ["redis://127.0.0.1:7001"])" + (extra.empty() ? "" : ", " + extra) + "}";
}

// Sets or unsets REDLOCK_NODES for one test and restores it afterwards.
class NodesEnv {
 public:
  explicit NodesEnv(const char* value) {
    if (const char* old = std::getenv("REDLOCK_NODES")) saved_ = old;
    if (value)
      ::setenv("REDLOCK_NODES", value, 1);
    else
      ::unsetenv("REDLOCK_NODES");
  }
  ~NodesEnv() {
    if (saved_)
      ::setenv("REDLOCK_NODES", saved_->c_str(), 1);
    else
      ::unsetenv("REDLOCK_NODES");
  }
  NodesEnv(const NodesEnv&) = delete;
  NodesEnv& operator=(const NodesEnv&) = delete;

 private:
  std::optional<std::string> saved_;
};

// A file with the given content, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& content)
      : path_(std::filesystem::temp_directory_path() /
              ("redlock_test_config_" + std::to_string(::getpid()) + ".json")) {
    std::ofstream(path_) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace

// ---- display ----------------------------------------------------------------

TEST_CASE("display: tcp node is host:port") {
  CHECK(tcp("127.0.0.1", 7001).display() == "127.0.0.1:7001");
}

TEST_CASE("display: IPv6 host gets brackets") {
  CHECK(tcp("::1", 7001).display() == "[::1]:7001");
}

TEST_CASE("display: unix node is unix:// plus the path") {
  CHECK(unix_node("/tmp/r.sock").display() == "unix:///tmp/r.sock");
}

TEST_CASE("display: never includes credentials or db") {
  NodeAddress node = tcp("h", 1, 3);
  node.user = "alice";
  node.password = "secret";
  CHECK(node.display() == "h:1");
}

// ---- parse_node_url: accepted forms -------------------------------------------

TEST_CASE("parse_node_url: host alone gets port 6379, db 0, no credentials") {
  const auto node = parsed("redis://redis.example.com");
  CHECK(node.kind == Kind::tcp);
  CHECK(node.host == "redis.example.com");
  CHECK(node.port == 6379);
  CHECK(node.db == 0);
  CHECK(node.user.empty());
  CHECK(node.password.empty());
}

TEST_CASE("parse_node_url: IPv4 host, port and db") {
  CHECK(parsed("redis://127.0.0.1:7001/3") == tcp("127.0.0.1", 7001, 3));
}

TEST_CASE("parse_node_url: trailing slash means db 0") {
  CHECK(parsed("redis://h:7001/") == tcp("h", 7001, 0));
}

TEST_CASE("parse_node_url: bracketed IPv6 is stored without brackets") {
  CHECK(parsed("redis://[::1]:7001") == tcp("::1", 7001));
  CHECK(parsed("redis://[fe80::1:2]") == tcp("fe80::1:2", 6379));
}

TEST_CASE("parse_node_url: port and db limits are accepted") {
  CHECK(parsed("redis://h:1").port == 1);
  CHECK(parsed("redis://h:65535").port == 65535);
  CHECK(parsed("redis://h/2147483647").db == 2147483647);
}

TEST_CASE("parse_node_url: scheme is case-insensitive") {
  CHECK(parsed("REDIS://h:1").kind == Kind::tcp);
  CHECK(parsed("Unix:///tmp/r.sock").kind == Kind::unix_socket);
}

TEST_CASE("parse_node_url: :password@ authenticates with the password alone") {
  const auto node = parsed("redis://:s3cret@h:7001");
  CHECK(node.user.empty());
  CHECK(node.password == "s3cret");
  CHECK(node.host == "h");
}

TEST_CASE("parse_node_url: user:password@ is an ACL user") {
  const auto node = parsed("redis://alice:s3cret@h:7001/2");
  CHECK(node.user == "alice");
  CHECK(node.password == "s3cret");
  CHECK(node == [] {
    NodeAddress expected = tcp("h", 7001, 2);
    expected.user = "alice";
    expected.password = "s3cret";
    return expected;
  }());
}

TEST_CASE("parse_node_url: user and password are percent-decoded") {
  const auto node = parsed("redis://al%69ce:p%40ss%3Aw%2F%2f@h");
  CHECK(node.user == "alice");
  CHECK(node.password == "p@ss:w//");
}

TEST_CASE("parse_node_url: an unencoded '@' in a password belongs to the password") {
  const auto node = parsed("redis://u:p@ss@h:1");
  CHECK(node.password == "p@ss");
  CHECK(node.host == "h");
}

TEST_CASE("parse_node_url: unix socket path") {
  const auto node = parsed("unix:///tmp/redis.sock");
  CHECK(node.kind == Kind::unix_socket);
  CHECK(node.path == "/tmp/redis.sock");
  CHECK(node.db == 0);
  CHECK(node.host.empty());
}

TEST_CASE("parse_node_url: unix socket with ?db=N") {
  CHECK(parsed("unix:///tmp/r.sock?db=5") == unix_node("/tmp/r.sock", 5));
}

TEST_CASE("parse_node_url: unix socket with credentials") {
  const auto node = parsed("unix://alice:pw@/tmp/r.sock");
  CHECK(node.user == "alice");
  CHECK(node.password == "pw");
  CHECK(node.path == "/tmp/r.sock");
}

TEST_CASE("parse_node_url: '@' inside a unix path is not userinfo") {
  const auto node = parsed("unix:///tmp/a@b.sock");
  CHECK(node.path == "/tmp/a@b.sock");
  CHECK(node.user.empty());
  CHECK(node.password.empty());
}

// ---- parse_node_url: refused forms --------------------------------------------

TEST_CASE("parse_node_url: empty URL") {
  CHECK(config_failure(parse_node_url("")) == R"("": empty URL)");
}

TEST_CASE("parse_node_url: missing scheme separator") {
  CHECK(config_failure(parse_node_url("redis//x")) ==
        R"("redis//x": missing "://" (expected redis://host or unix:///path))");
  CHECK(config_failure(parse_node_url("127.0.0.1:6379")).find("missing \"://\"") != std::string::npos);
}

TEST_CASE("parse_node_url: unknown scheme is named") {
  CHECK(config_failure(parse_node_url("http://h:1")) ==
        R"("http://h:1": unknown scheme "http" (expected redis, rediss, unix, redis+cluster, rediss+cluster, )"
        R"(redis+sentinel or rediss+sentinel))");
}

TEST_CASE("parse_node_url: rediss:// is TCP over TLS, with everything redis:// has") {
  const auto node = parse_node_url("rediss://locker:pw@db.example.org:6380/2");
  REQUIRE(node.ok());
  CHECK(node->tls);
  CHECK(node->kind == NodeAddress::Kind::tcp);
  CHECK(node->host == "db.example.org");
  CHECK(node->port == 6380);
  CHECK(node->user == "locker");
  CHECK(node->db == 2);
  CHECK_FALSE(parse_node_url("redis://h")->tls);
  CHECK(parse_node_url("REDISS://h")->tls);
  CHECK(config_failure(parse_node_url("rediss://u:secret@h:99999")).find("secret") == std::string::npos);
}

TEST_CASE("parse_config_json: password_file (and user) give the nodes without credentials their password") {
  TempFile pw("s3cret\nignored second line\n");
  const auto config = parse_config_json(R"({"nodes": ["redis://127.0.0.1:7001", "redis://:own@127.0.0.1:7002"],)"
                                        R"( "user": "locker", "password_file": ")" + pw.path() + R"("})");
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->nodes[0].user == "locker");
  CHECK(config->nodes[0].password == "s3cret");
  CHECK(config->nodes[1].user.empty());  // its URL's credentials stay
  CHECK(config->nodes[1].password == "own");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("password_file": "/nonexistent/pw")"))) ==
        R"(password_file: "/nonexistent/pw": No such file or directory)");
  TempFile empty("\n");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("password_file": ")" + empty.path() + R"(")"))) ==
        "password_file: \"" + empty.path() + "\": empty password");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("user": "locker")"))) ==
        "user: set without password_file");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("password_file": 7)"))) ==
        "password_file: 7: wrong type (expected string)");
}

TEST_CASE("parse_config_json: the tls_* keys") {
  const auto config = parse_config_json(json_with_nodes(
      R"("tls_ca_file": "/ca.pem", "tls_ca_dir": "/cas", "tls_cert_file": "/c.pem", "tls_key_file": "/k.pem",)"
      R"( "tls_server_name": "redis.internal", "tls_verify": false)"));
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->tls.ca_file == "/ca.pem");
  CHECK(config->tls.ca_dir == "/cas");
  CHECK(config->tls.cert_file == "/c.pem");
  CHECK(config->tls.key_file == "/k.pem");
  CHECK(config->tls.server_name == "redis.internal");
  CHECK_FALSE(config->tls.verify);
  CHECK((*parse_config_json(json_with_nodes(""))).tls.verify);
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("tls_verify": "no")"))) ==
        R"(tls_verify: "no": wrong type (expected true or false))");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("tls_ca_file": 1)"))) ==
        R"(tls_ca_file: 1: wrong type (expected string))");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("tls_cert_file": "/c.pem")"))) ==
        "tls_cert_file: set without tls_key_file");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("tls_key_file": "/k.pem")"))) ==
        "tls_key_file: set without tls_cert_file");
}

TEST_CASE("parse_node_url: missing host") {
  CHECK(config_failure(parse_node_url("redis://")) == R"("redis://": missing host)");
  CHECK(config_failure(parse_node_url("redis://:7001")) == R"("redis://:7001": missing host)");
  CHECK(config_failure(parse_node_url("redis:///0")) == R"("redis:///0": missing host)");
}

TEST_CASE("parse_node_url: unclosed IPv6 bracket") {
  CHECK(config_failure(parse_node_url("redis://[::1:7001")) == R"("redis://[::1:7001": unclosed "[" in host)");
}

TEST_CASE("parse_node_url: junk after the IPv6 bracket") {
  CHECK(config_failure(parse_node_url("redis://[::1]7001")) == R"("redis://[::1]7001": junk after "]": "7001")");
}

TEST_CASE("parse_node_url: bracketed host must be an IPv6 address") {
  CHECK(config_failure(parse_node_url("redis://[zz]:1")) == R"("redis://[zz]:1": bad IPv6 address "zz")");
  CHECK(config_failure(parse_node_url("redis://[]:1")) == R"("redis://[]:1": bad IPv6 address "")");
}

TEST_CASE("parse_node_url: IPv6 without brackets is refused") {
  CHECK(config_failure(parse_node_url("redis://::1:7001")) ==
        R"("redis://::1:7001": IPv6 address must be in brackets, e.g. [::1]:6379)");
}

TEST_CASE("parse_node_url: port out of range") {
  CHECK(config_failure(parse_node_url("redis://h:99999")) == R"("redis://h:99999": port out of range (1-65535))");
  CHECK(config_failure(parse_node_url("redis://h:0")) == R"("redis://h:0": port out of range (1-65535))");
  CHECK(config_failure(parse_node_url("redis://h:99999999999999999999999")).ends_with("port out of range (1-65535)"));
}

TEST_CASE("parse_node_url: port must be decimal digits only") {
  CHECK(config_failure(parse_node_url("redis://h:12x")) == R"("redis://h:***": bad port (expected 1-65535))");
  CHECK(config_failure(parse_node_url("redis://h:+1")).ends_with(R"("redis://h:***": bad port (expected 1-65535))"));
  CHECK(config_failure(parse_node_url("redis://h:-1")).ends_with(R"("redis://h:***": bad port (expected 1-65535))"));
  CHECK(config_failure(parse_node_url("redis://h:")).ends_with(R"("redis://h:": bad port (expected 1-65535))"));
  CHECK(config_failure(parse_node_url("redis://[::1]:0x1")).ends_with(R"("redis://[::1]:***": bad port (expected 1-65535))"));
}

TEST_CASE("parse_node_url: db must be a non-negative decimal below 2^31") {
  CHECK(config_failure(parse_node_url("redis://h/x")) == R"("redis://h/x": bad db "x" (expected a decimal number >= 0))");
  CHECK(config_failure(parse_node_url("redis://h/-1")).ends_with(R"(bad db "-1" (expected a decimal number >= 0))"));
  CHECK(config_failure(parse_node_url("redis://h/+1")).ends_with(R"(bad db "+1" (expected a decimal number >= 0))"));
  CHECK(config_failure(parse_node_url("redis://h/2147483648")) ==
        R"("redis://h/2147483648": db 2147483648 out of range (0-2147483647))");
}

TEST_CASE("parse_node_url: trailing garbage is refused") {
  CHECK(config_failure(parse_node_url("redis://h:1/0/extra")).ends_with(R"(bad db "0/extra" (expected a decimal number >= 0))"));
  CHECK(config_failure(parse_node_url("redis://h?x=1")).ends_with(R"(: unknown query key "x" (known: db, wait_replicas, )"
                                                                 R"(wait_timeout, replicated, sentinel_user, sentinel_password))"));
  CHECK(config_failure(parse_node_url("redis://h#x")) == R"("redis://h#x": bad character "#" in host "h#x")");
  CHECK(config_failure(parse_node_url("redis://h 1")).ends_with(R"(bad character " " in host "h 1")"));
}

TEST_CASE("parse_node_url: user without password is refused") {
  CHECK(config_failure(parse_node_url("redis://alice@h")) ==
        R"("redis://***@h": user without password (use user:password@ or :password@))");
}

TEST_CASE("parse_node_url: empty credentials are refused") {
  CHECK(config_failure(parse_node_url("redis://@h")) == R"("redis://***@h": empty credentials before "@")");
  CHECK(config_failure(parse_node_url("redis://:@h")) == R"("redis://***@h": empty password)");
  CHECK(config_failure(parse_node_url("redis://alice:@h")) == R"("redis://***@h": empty password)");
}

TEST_CASE("parse_node_url: bad percent-escape is refused") {
  CHECK(config_failure(parse_node_url("redis://al%zzce:pw@h")).ends_with("bad percent-escape in user"));
  CHECK(config_failure(parse_node_url("redis://u:pw%4@h")).ends_with("bad percent-escape in password"));
  CHECK(config_failure(parse_node_url("redis://u:pw%@h")).ends_with("bad percent-escape in password"));
  CHECK(config_failure(parse_node_url("redis://u:pw%-1@h")).ends_with("bad percent-escape in password"));
}

TEST_CASE("parse_node_url: error messages mask the password") {
  const auto message = config_failure(parse_node_url("redis://alice:hunter2@h:99999"));
  CHECK(message == R"("redis://***@h:99999": port out of range (1-65535))");
  CHECK(message.find("hunter2") == std::string::npos);
}

TEST_CASE("parse_node_url: unix path must be absolute") {
  CHECK(config_failure(parse_node_url("unix://tmp/r.sock")) ==
        R"("unix://tmp/r.sock": socket path is not absolute)");
}

TEST_CASE("parse_node_url: unix path must not be empty") {
  CHECK(config_failure(parse_node_url("unix://")) == R"("unix://": empty socket path)");
  CHECK(config_failure(parse_node_url("unix://?db=1")) == R"("unix://?db=1": empty socket path)");
}

TEST_CASE("parse_node_url: a unix query takes the known keys only") {
  CHECK(config_failure(parse_node_url("unix:///tmp/r.sock?timeout=1")).starts_with(
      R"("unix:///tmp/r.sock?timeout=1": unknown query key "timeout" (known: db, )"));
  CHECK(config_failure(parse_node_url("unix:///tmp/r.sock?db=1&x=2")).starts_with(
      R"("unix:///tmp/r.sock?db=1&x=2": unknown query key "x" (known: )"));
  CHECK(config_failure(parse_node_url("unix:///tmp/r.sock?db=x")).ends_with(R"(bad db "x" (expected a decimal number >= 0))"));
}

// ---- parse_node_list ----------------------------------------------------------

TEST_CASE("parse_node_list: comma-separated URLs with spaces around them") {
  const auto nodes = parse_node_list(" redis://a:1 ,redis://b:2,\tunix:///tmp/c.sock ");
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 3);
  CHECK((*nodes)[0] == tcp("a", 1));
  CHECK((*nodes)[1] == tcp("b", 2));
  CHECK((*nodes)[2] == unix_node("/tmp/c.sock"));
}

TEST_CASE("parse_node_list: a single URL") {
  const auto nodes = parse_node_list("redis://a:1");
  REQUIRE(nodes.ok());
  CHECK(*nodes == std::vector{tcp("a", 1)});
}

TEST_CASE("parse_node_list: an empty item names its (1-based) index") {
  CHECK(config_failure(parse_node_list("redis://a:1, ,redis://b:2")) == R"(item 2: "": empty URL)");
  CHECK(config_failure(parse_node_list("redis://a:1,")) == R"(item 2: "": empty URL)");
  CHECK(config_failure(parse_node_list(",redis://a:1")) == R"(item 1: "": empty URL)");
}

TEST_CASE("parse_node_list: a bad URL names the item and the URL") {
  CHECK(config_failure(parse_node_list("redis://a:1, redis//x")) ==
        R"(item 2: "redis//x": missing "://" (expected redis://host or unix:///path))");
}

TEST_CASE("parse_node_list: an empty list is refused") {
  CHECK(config_failure(parse_node_list("")) == "empty list (at least one URL is required)");
  CHECK(config_failure(parse_node_list("  \t")) == "empty list (at least one URL is required)");
}

// ---- parse_config_json --------------------------------------------------------

TEST_CASE("parse_config_json: every documented key is applied") {
  const auto config = parse_config_json(R"({
    "nodes": ["redis://127.0.0.1:7001", "redis://:pw@[::1]:7002/1", "unix:///tmp/r.sock"],
    "prefix": "app:", "default_ttl_ms": 5000, "max_ttl_ms": 30000,
    "drift_factor": 0.02, "min_validity_ms": 3, "node_timeout_ms": 40,
    "connect_timeout_ms": 150, "reconnect_min_ms": 10, "reconnect_max_ms": 500,
    "retry_delay_ms": 30, "retry_jitter_ms": 0, "release_settle_ms": 7, "stall_timeout_ms": 800,
    "release_retries": 4, "max_pending": 1024, "quarantine": false, "node_outcomes": true,
    "wake_ups": false, "wake_jitter_ms": 5, "wake_safety_net_ms": 250,
    "extend_batch_window_ms": 4, "extend_batch_max": 64})");
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  REQUIRE(config->nodes.size() == 3);
  CHECK(config->nodes[1].host == "::1");
  CHECK(config->nodes[1].password == "pw");
  CHECK(config->nodes[1].db == 1);
  CHECK(config->nodes[2].path == "/tmp/r.sock");
  const Options& o = config->options;
  CHECK(o.prefix == "app:");
  CHECK(o.default_ttl == 5000ms);
  CHECK(o.max_ttl == 30000ms);
  CHECK(o.drift_factor == doctest::Approx(0.02));
  CHECK(o.min_validity == 3ms);
  CHECK(o.release_settle == 7ms);
  CHECK(o.release_retries == 4);
  CHECK(o.node_timeout == 40ms);
  CHECK(o.connect_timeout == 150ms);
  CHECK(o.reconnect_min == 10ms);
  CHECK(o.reconnect_max == 500ms);
  CHECK(o.retry_delay == 30ms);
  CHECK(o.retry_jitter == 0ms);
  CHECK(o.stall_timeout == 800ms);
  CHECK(o.max_pending == 1024);
  CHECK(o.quarantine == false);
  CHECK(o.node_outcomes == true);
  CHECK(o.wake_ups == false);
  CHECK(o.wake_jitter == std::chrono::milliseconds{5});
  CHECK(o.wake_safety_net == std::chrono::milliseconds{250});
  CHECK(o.extend_batch_window == 4ms);
  CHECK(o.extend_batch_max == 64);
}

TEST_CASE("parse_config_json: omitted keys keep the Options defaults") {
  const auto config = parse_config_json(json_with_nodes(""));
  REQUIRE(config.ok());
  const Options defaults;
  CHECK(config->options.prefix == defaults.prefix);
  CHECK(config->options.default_ttl == defaults.default_ttl);
  CHECK(config->options.node_timeout == defaults.node_timeout);
  CHECK(config->options.max_pending == defaults.max_pending);
  CHECK(config->options.quarantine == defaults.quarantine);
}

TEST_CASE("parse_config_json: an integral drift_factor is accepted") {
  const auto config = parse_config_json(json_with_nodes(R"("drift_factor": 0)"));
  REQUIRE(config.ok());
  CHECK(config->options.drift_factor == 0.0);
}

TEST_CASE("parse_config_json: syntax error reports the parser's position and reason") {
  const auto message = config_failure(parse_config_json("{\"nodes\": [\"redis://h\",]}"));
  CHECK(message.starts_with("invalid JSON: "));
  CHECK(message.find("line 1, column 24") != std::string::npos);
  CHECK(message.find("syntax error") != std::string::npos);
  CHECK(message.find("json.exception") == std::string::npos);
}

TEST_CASE("parse_config_json: empty document is a syntax error") {
  CHECK(config_failure(parse_config_json("")).starts_with("invalid JSON: "));
}

TEST_CASE("parse_config_json: the document must be an object") {
  CHECK(config_failure(parse_config_json(R"(["redis://h"])")) ==
        R"(top level: an array: wrong type (expected an object))");
}

TEST_CASE("parse_config_json: unknown key lists the known keys") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("ttl": 5000)"))) ==
        R"(unknown key "ttl" (known: nodes, prefix, owner, default_ttl_ms, max_ttl_ms, drift_factor, )"
        R"(min_validity_ms, node_timeout_ms, connect_timeout_ms, reconnect_min_ms, reconnect_max_ms, )"
        R"(retry_delay_ms, retry_jitter_ms, release_settle_ms, release_retries, stall_timeout_ms, max_pending, extend_batch_window_ms, extend_batch_max, quarantine, node_outcomes, wake_ups, wake_jitter_ms, wake_safety_net_ms, fair_grace_ms, data_check_interval_ms, accept_eviction, )"
        R"(tls_ca_file, tls_ca_dir, tls_cert_file, tls_key_file, tls_server_name, tls_verify, user, password_file))");
}

TEST_CASE("parse_config_json: nodes is required") {
  CHECK(config_failure(parse_config_json(R"({"prefix": "x"})")) == "nodes: missing (at least one node is required)");
}

TEST_CASE("parse_config_json: empty nodes array is refused") {
  CHECK(config_failure(parse_config_json(R"({"nodes": []})")) == "nodes: empty (at least one node is required)");
}

TEST_CASE("parse_config_json: nodes must be an array") {
  CHECK(config_failure(parse_config_json(R"({"nodes": {"a": 1}})")) ==
        R"(nodes: an object: wrong type (expected array of URL strings))");
}

TEST_CASE("parse_config_json: nodes given as one string is refused with the password masked") {
  CHECK(config_failure(parse_config_json(R"({"nodes": "redis://:secret@h"})")) ==
        R"(nodes: "redis://***@h": wrong type (expected array of URL strings))");
}

TEST_CASE("parse_config_json: a node must be a string") {
  CHECK(config_failure(parse_config_json(R"({"nodes": ["redis://h", 5]})")) ==
        "nodes[1]: 5: wrong type (expected URL string)");
}

TEST_CASE("parse_config_json: a bad node URL names its index and the URL") {
  CHECK(config_failure(parse_config_json(R"({"nodes": ["redis://a", "redis://b", "redis://h:99999"]})")) ==
        R"(nodes[2]: "redis://h:99999": port out of range (1-65535))");
}

TEST_CASE("parse_config_json: duration given as a string is a wrong type") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("default_ttl_ms": "10s")"))) ==
        R"(default_ttl_ms: "10s": wrong type (expected integer milliseconds))");
}

TEST_CASE("parse_config_json: duration given as a fraction is a wrong type") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("node_timeout_ms": 1.5)"))) ==
        "node_timeout_ms: 1.5: wrong type (expected integer milliseconds)");
}

TEST_CASE("parse_config_json: duration beyond 64 bits is out of range") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("max_ttl_ms": 18446744073709551615)"))) ==
        "max_ttl_ms: 18446744073709551615: out of range");
}

TEST_CASE("parse_config_json: drift_factor must be a number") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("drift_factor": "x")"))) ==
        R"(drift_factor: "x": wrong type (expected number))");
}

TEST_CASE("parse_config_json: quarantine must be a bool") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("quarantine": "yes")"))) ==
        R"(quarantine: "yes": wrong type (expected true or false))");
}

TEST_CASE("parse_config_json: prefix must be a string") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("prefix": 5)"))) ==
        "prefix: 5: wrong type (expected string)");
}

TEST_CASE("parse_config_json: owner is a label of printable ASCII without blanks, never echoed when wrong") {
  const auto config = parse_config_json(json_with_nodes(R"("owner": "nightly/db")"));
  REQUIRE(config.ok());
  CHECK(config->options.owner == "nightly/db");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("owner": "two words")"))) ==
        "owner: a label of 9 bytes: must be 1-64 printable ASCII characters without blanks (or empty)");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("owner": "\u001b[2J")"))) ==
        "owner: a label of 4 bytes: must be 1-64 printable ASCII characters without blanks (or empty)");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("owner": ")" + std::string(65, 'x') + R"(")"))) ==
        "owner: a label of 65 bytes: must be 1-64 printable ASCII characters without blanks (or empty)");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("owner": 7)"))) == "owner: 7: wrong type (expected string)");
}

TEST_CASE("parse_config_json: an empty prefix is allowed") {
  const auto config = parse_config_json(json_with_nodes(R"("prefix": "")"));
  REQUIRE(config.ok());
  CHECK(config->options.prefix.empty());
}

TEST_CASE("parse_config_json: a long wrong value is shortened in the message, an array or object only named") {
  const auto message = config_failure(parse_config_json(json_with_nodes(
      R"("quarantine": "1111111111 2222222222 3333333333 4444444444 5555555555 6666666666")")));
  CHECK(message == "quarantine: \"1111111111 2222222222 3333333333 4444444444 5555555555 6666...: "
                   "wrong type (expected true or false)");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("prefix": [1, 2])"))) ==
        "prefix: an array: wrong type (expected string)");
}

TEST_CASE("parse_config_json: max_pending must be a positive integer") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("max_pending": -1)"))) == "max_pending: -1: must be > 0");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("max_pending": 0)"))) == "max_pending: 0: must be > 0");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("max_pending": 2.5)"))) ==
        "max_pending: 2.5: wrong type (expected positive integer)");
}

TEST_CASE("parse_config_json: the result is validated") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("node_timeout_ms": -5)"))) ==
        "node_timeout_ms: -5: must be > 0");
  CHECK(config_failure(parse_config_json(R"({"nodes": ["redis://h:1", "redis://H:1"]})")) ==
        "nodes[1]: the same server as nodes[0] (h:1; the db number does not make another master: one server, one vote)");
}

// ---- load_config_file ---------------------------------------------------------

TEST_CASE("load_config_file: reads and parses a file") {
  TempFile file(R"({"nodes": ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002"], "default_ttl_ms": 2000})");
  const auto config = load_config_file(file.path());
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->nodes.size() == 2);
  CHECK(config->options.default_ttl == 2000ms);
}

TEST_CASE("load_config_file: a missing file names the path and the OS reason") {
  CHECK(config_failure(load_config_file("/nonexistent-redlock-dir/config.json")) ==
        R"(config file "/nonexistent-redlock-dir/config.json": No such file or directory)");
}

TEST_CASE("load_config_file: a directory is unreadable") {
  const auto dir = std::filesystem::temp_directory_path().string();
  CHECK(config_failure(load_config_file(dir)) == "config file \"" + dir + "\": Is a directory");
}

TEST_CASE("load_config_file: parse errors are prefixed with the path") {
  TempFile file("{\"nodes\": [");
  CHECK(config_failure(load_config_file(file.path())).starts_with("config file \"" + file.path() + "\": invalid JSON: "));
}

TEST_CASE("load_config_file: validation errors are prefixed with the path") {
  TempFile file(R"({"nodes": []})");
  CHECK(config_failure(load_config_file(file.path())) ==
        "config file \"" + file.path() + "\": nodes: empty (at least one node is required)");
}

// ---- config_from_env ----------------------------------------------------------

TEST_CASE("config_from_env: unset variable is an error naming it") {
  NodesEnv env(nullptr);
  CHECK(config_failure(config_from_env()) == "REDLOCK_NODES: not set");
}

TEST_CASE("config_from_env: empty variable is an error naming it") {
  NodesEnv env("");
  CHECK(config_failure(config_from_env()) == "REDLOCK_NODES: not set");
}

TEST_CASE("config_from_env: nodes from the variable, default options") {
  NodesEnv env("redis://127.0.0.1:7001, redis://127.0.0.1:7002");
  const auto config = config_from_env();
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->nodes == std::vector{tcp("127.0.0.1", 7001), tcp("127.0.0.1", 7002)});
  CHECK(config->options.default_ttl == Options{}.default_ttl);
  CHECK(config->options.prefix == Options{}.prefix);
}

TEST_CASE("config_from_env: a bad item is prefixed with the variable") {
  NodesEnv env("redis://a:1,redis//x");
  CHECK(config_failure(config_from_env()) ==
        R"(REDLOCK_NODES: item 2: "redis//x": missing "://" (expected redis://host or unix:///path))");
}

TEST_CASE("config_from_env: duplicate nodes are refused") {
  NodesEnv env("redis://a:1,redis://a:1");
  CHECK(config_failure(config_from_env()) == "REDLOCK_NODES: nodes[1]: the same server as nodes[0] (a:1; the db number does not make another master: one server, one vote)");
}

// ---- validate_config: nodes ---------------------------------------------------

TEST_CASE("validate_config: default options with one node pass") {
  CHECK(validate_config(one_node_config()).ok());
}

TEST_CASE("validate_config: no nodes") {
  CHECK(config_failure(validate_config(Config{})) == "nodes: empty (at least one node is required)");
}

TEST_CASE("validate_config: more than 100 masters") {
  {
    // More masters than any vote count holds: refused, not counted wrong.
    Config many;
    for (int port = 1; port <= 101; ++port) {
      NodeAddress n;
      n.host = "10.0.0.1";
      n.port = port;
      many.nodes.push_back(n);
    }
    CHECK(config_failure(validate_config(many)) == "nodes: 101 masters (at most 100; a Redlock group is 3 to 7)");
    many.nodes.pop_back();
    CHECK(validate_config(many).ok());
  }
}

TEST_CASE("validate_config: duplicate names both indexes and the address") {
  Config config;
  config.nodes = {tcp("127.0.0.1", 7000), tcp("127.0.0.1", 7001), tcp("127.0.0.1", 7002), tcp("127.0.0.1", 7001)};
  CHECK(config_failure(validate_config(config)) == "nodes[3]: the same server as nodes[1] (127.0.0.1:7001; the db number does not make another master: one server, one vote)");
}

TEST_CASE("validate_config: host comparison is case-insensitive") {
  Config config;
  config.nodes = {tcp("Redis.Example", 1), tcp("redis.example", 1)};
  CHECK(config_failure(validate_config(config)) == "nodes[1]: the same server as nodes[0] (Redis.Example:1; the db number does not make another master: one server, one vote)");
}

TEST_CASE("validate_config: credentials do not make a node distinct") {
  Config config;
  config.nodes = {tcp("h", 1), tcp("h", 1)};
  config.nodes[1].password = "pw";
  CHECK(config_failure(validate_config(config)) == "nodes[1]: the same server as nodes[0] (h:1; the db number does not make another master: one server, one vote)");
}

TEST_CASE("validate_config: another port or path is another server") {
  Config config;
  config.nodes = {tcp("h", 1, 0), tcp("h", 2, 0), unix_node("/tmp/a.sock"), unix_node("/tmp/b.sock")};
  CHECK(validate_config(config).ok());
}

TEST_CASE("validate_config: two db numbers of one server are one server (one vote)") {
  Config config;
  config.nodes = {tcp("h", 1, 0), tcp("h", 2, 0), tcp("h", 1, 1)};
  CHECK(config_failure(validate_config(config)) ==
        "nodes[2]: the same server as nodes[0] (h:1; the db number does not make another master: one server, one vote)");
  config.nodes = {unix_node("/tmp/a.sock", 1), unix_node("/tmp/a.sock", 2)};
  CHECK(config_failure(validate_config(config)).starts_with("nodes[1]: the same server as nodes[0] (unix:///tmp/a.sock;"));
}

TEST_CASE("validate_config: unix duplicates are the same path") {
  Config config;
  config.nodes = {unix_node("/tmp/a.sock", 2), unix_node("/tmp/a.sock", 2)};
  CHECK(config_failure(validate_config(config)) == "nodes[1]: the same server as nodes[0] (unix:///tmp/a.sock; the db number does not make another master: one server, one vote)");
}

TEST_CASE("validate_config: node port out of range") {
  Config config;
  config.nodes = {tcp("h", 1), tcp("h", 0)};
  CHECK(config_failure(validate_config(config)) == R"(nodes[1]: "h:0": port out of range (1-65535))");
  config.nodes[1].port = 65536;
  CHECK(config_failure(validate_config(config)) == R"(nodes[1]: "h:65536": port out of range (1-65535))");
}

TEST_CASE("validate_config: negative db") {
  Config config;
  config.nodes = {tcp("h", 6379, -1)};
  CHECK(config_failure(validate_config(config)) == R"(nodes[0]: "h:6379": db -1: must be >= 0)");
}

TEST_CASE("validate_config: tcp node without host") {
  Config config;
  config.nodes = {tcp("", 6379)};
  CHECK(config_failure(validate_config(config)) == R"(nodes[0]: ":6379": missing host)");
}

TEST_CASE("validate_config: unix node with relative path") {
  Config config;
  config.nodes = {unix_node("r.sock")};
  CHECK(config_failure(validate_config(config)) == R"(nodes[0]: "unix://r.sock": socket path is not absolute)");
}

TEST_CASE("validate_config: user without password") {
  Config config = one_node_config();
  config.nodes[0].user = "alice";
  CHECK(config_failure(validate_config(config)) == R"(nodes[0]: "127.0.0.1:7001": user without password)");
}

// ---- validate_config: options -------------------------------------------------

TEST_CASE("validate_config: default_ttl must be positive") {
  Options o;
  o.default_ttl = 0ms;
  CHECK(validation_failure(o) == "default_ttl_ms: 0: must be > 0");
}

TEST_CASE("validate_config: default_ttl must not exceed max_ttl") {
  Options o;
  o.default_ttl = 70000ms;
  CHECK(validation_failure(o) == "default_ttl_ms: 70000: must be <= max_ttl_ms (60000)");
  o.max_ttl = 70000ms;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: default_ttl must exceed node_timeout plus drift") {
  Options o;
  o.default_ttl = 40ms;  // drift = ceil(40 * 0.01) + 2 = 3 ms
  CHECK(validation_failure(o) == "default_ttl_ms: 40: must be larger than node_timeout_ms (50) + drift (3 ms)");
}

TEST_CASE("validate_config: ttl versus node_timeout plus drift at the boundary") {
  Options o;
  o.drift_factor = 0.0;  // drift = 2 ms
  o.default_ttl = 52ms;
  CHECK(validation_failure(o) == "default_ttl_ms: 52: must be larger than node_timeout_ms (50) + drift (2 ms)");
  o.default_ttl = 53ms;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: drift_factor must be in [0, 0.5)") {
  Options o;
  o.drift_factor = 0.5;
  CHECK(validation_failure(o) == "drift_factor: 0.5: must be in [0, 0.5)");
  o.drift_factor = -0.01;
  CHECK(validation_failure(o) == "drift_factor: -0.01: must be in [0, 0.5)");
  o.drift_factor = std::nan("");
  CHECK(validation_failure(o) == "drift_factor: nan: must be in [0, 0.5)");
  o.drift_factor = 0.49;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: node_timeout must be positive") {
  Options o;
  o.node_timeout = 0ms;
  CHECK(validation_failure(o) == "node_timeout_ms: 0: must be > 0");
}

TEST_CASE("validate_config: connect_timeout must be positive") {
  Options o;
  o.connect_timeout = 0ms;
  CHECK(validation_failure(o) == "connect_timeout_ms: 0: must be > 0");
}

TEST_CASE("validate_config: reconnect_min must be positive") {
  Options o;
  o.reconnect_min = 0ms;
  CHECK(validation_failure(o) == "reconnect_min_ms: 0: must be > 0");
}

TEST_CASE("validate_config: reconnect_min must not exceed reconnect_max") {
  Options o;
  o.reconnect_min = 2000ms;
  CHECK(validation_failure(o) == "reconnect_min_ms: 2000: must be <= reconnect_max_ms (1000)");
  o.reconnect_max = 2000ms;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: retry_delay, retry_jitter and min_validity must not be negative") {
  Options o;
  o.retry_delay = -1ms;
  CHECK(validation_failure(o) == "retry_delay_ms: -1: must be >= 0");
  o = Options{};
  o.retry_jitter = -1ms;
  CHECK(validation_failure(o) == "retry_jitter_ms: -1: must be >= 0");
  o = Options{};
  o.release_settle = -1ms;
  CHECK(validation_failure(o) == "release_settle_ms: -1: must be >= 0");
  o = Options{};
  o.min_validity = -1ms;
  CHECK(validation_failure(o) == "min_validity_ms: -1: must be >= 0");
  o = Options{};
  o.wake_jitter = -1ms;
  CHECK(validation_failure(o) == "wake_jitter_ms: -1: must be >= 0");
  o = Options{};
  o.wake_safety_net = 0ms;
  CHECK(validation_failure(o) == "wake_safety_net_ms: 0: must be > 0");
  o = Options{};
  o.fair_grace = 0ms;
  CHECK(validation_failure(o) == "fair_grace_ms: 0: must be > 0");
}

TEST_CASE("release_retries is a count from 0 to 10, in a config file and in Options") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("release_retries": 11)"))) ==
        "release_retries: 11: must be from 0 to 10");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("release_retries": -1)"))) ==
        "release_retries: -1: must be from 0 to 10");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("release_retries": "2")"))).find("release_retries") !=
        std::string::npos);
  const auto zero = parse_config_json(json_with_nodes(R"("release_retries": 0)"));
  REQUIRE(zero.ok());
  CHECK(zero->options.release_retries == 0);
  Options o;
  CHECK(o.release_retries == 2);
  o.release_retries = 11;
  CHECK(validation_failure(o) == "release_retries: 11: must be from 0 to 10");
}

TEST_CASE("validate_config: zero retry_delay, retry_jitter and min_validity are allowed") {
  Options o;
  o.retry_delay = 0ms;
  o.retry_jitter = 0ms;
  o.min_validity = 0ms;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: stall_timeout must exceed node_timeout") {
  Options o;
  o.stall_timeout = 50ms;
  CHECK(validation_failure(o) == "stall_timeout_ms: 50: must be larger than node_timeout_ms (50)");
}

TEST_CASE("validate_config: max_pending must be positive") {
  Options o;
  o.max_pending = 0;
  CHECK(validation_failure(o) == "max_pending: 0: must be > 0");
}

TEST_CASE("validate_config: extend_batch_max from 1 to 100000; the window at most 1 s and a quarter of default_ttl") {
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("extend_batch_max": 0)"))) ==
        "extend_batch_max: 0: must be > 0");
  CHECK(config_failure(parse_config_json(json_with_nodes(R"("extend_batch_window_ms": -1)"))) ==
        "extend_batch_window_ms: -1: must be >= 0");
  Options o;
  o.extend_batch_max = 100001;
  CHECK(validation_failure(o) == "extend_batch_max: 100001: must be from 1 to 100000");
  o.extend_batch_max = 1;  // no batching: allowed
  o.extend_batch_window = 0ms;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
  o.default_ttl = 2000ms;
  o.extend_batch_window = 501ms;
  CHECK(validation_failure(o) ==
        "extend_batch_window_ms: 501: must be at most 1000 and at most a quarter of default_ttl_ms (2000)");
  o.extend_batch_window = 500ms;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: empty prefix is allowed") {
  Options o;
  o.prefix.clear();
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: extreme durations are judged without overflow") {
  constexpr auto huge = milliseconds{std::numeric_limits<milliseconds::rep>::max()};
  Options o;
  o.default_ttl = huge;
  o.max_ttl = huge;
  o.node_timeout = huge;
  o.stall_timeout = huge;
  CHECK(validation_failure(o) == "default_ttl_ms: 9223372036854775807: must be <= 2147483647 (about 24.8 days)");
}

TEST_CASE("validate_config: every duration has an upper bound, so no deadline arithmetic overflows") {
  // A max_ttl of 9223372036854775 ms once overflowed the quarantine
  // arithmetic on the nanosecond clock and switched the quarantine off.
  Options o;
  o.max_ttl = milliseconds{9223372036854775};
  CHECK(validation_failure(o) == "max_ttl_ms: 9223372036854775: must be <= 2147483647 (about 24.8 days)");
  o = Options{};
  o.data_check_interval = milliseconds{0};
  CHECK(validation_failure(o) == "data_check_interval_ms: 0: must be > 0");
  o = Options{};
  o.wake_safety_net = milliseconds{std::numeric_limits<std::int32_t>::max() + 1LL};
  CHECK(validation_failure(o).starts_with("wake_safety_net_ms: 2147483648: must be <= 2147483647"));
  o = Options{};
  o.max_ttl = milliseconds{std::numeric_limits<std::int32_t>::max()};
  o.default_ttl = o.max_ttl;
  CHECK(validate_config(Config{one_node_config().nodes, o, {}}).ok());
}

TEST_CASE("validate_config: a prefix may not hold a brace (keys could then collide)") {
  Options o;
  o.prefix = "app{x}:";
  CHECK(validation_failure(o) == R"(prefix: "app{x}:": may not contain '{' or '}' (they mark the resource in every key))");
}

// ---- members as deployed: cluster, sentinel, the query --------------------------

namespace {

std::vector<Endpoint> endpoints(std::initializer_list<std::pair<const char*, int>> list) {
  std::vector<Endpoint> out;
  for (const auto& [host, port] : list) out.push_back(Endpoint{host, port});
  return out;
}

NodeAddress cluster_node(std::vector<Endpoint> seeds) {
  NodeAddress node;
  node.kind = Kind::cluster;
  node.seeds = std::move(seeds);
  return node;
}

NodeAddress sentinel_node(std::vector<Endpoint> seeds, std::string name) {
  NodeAddress node;
  node.kind = Kind::sentinel;
  node.seeds = std::move(seeds);
  node.master_name = std::move(name);
  return node;
}

std::string node_failure(const NodeAddress& node, Options options = {}) {
  return config_failure(validate_config(Config{{node}, std::move(options), {}}));
}

}  // namespace

TEST_CASE("parse_node_url: redis+cluster:// is a cluster found from its seeds; rediss+cluster:// over TLS") {
  const auto node = parsed("redis+cluster://10.0.0.1:7001,10.0.0.2:7002, db.example:7003");
  CHECK(node.kind == Kind::cluster);
  CHECK(node.seeds == endpoints({{"10.0.0.1", 7001}, {"10.0.0.2", 7002}, {"db.example", 7003}}));
  CHECK_FALSE(node.tls);
  CHECK(node.host.empty());
  CHECK(node.db == 0);
  CHECK(node.wait_replicas == 0);
  CHECK(node.wait_timeout == 0ms);
  CHECK_FALSE(node.replicated);
  CHECK(parsed("redis+cluster://h").seeds == endpoints({{"h", 6379}}));
  const auto tls = parsed("REDISS+Cluster://h:1/");
  CHECK(tls.kind == Kind::cluster);
  CHECK(tls.tls);
  CHECK(parsed("redis+cluster://h:1/0").db == 0);
}

TEST_CASE("parse_node_url: IPv6 seeds in brackets, stored without") {
  CHECK(parsed("redis+cluster://[::1]:7001,[fe80::1:2]").seeds == endpoints({{"::1", 7001}, {"fe80::1:2", 6379}}));
  CHECK(parsed("redis+sentinel://[::1],127.0.0.1:5/m").seeds == endpoints({{"::1", 26379}, {"127.0.0.1", 5}}));
}

TEST_CASE("parse_node_url: a cluster URL's credentials may hold '@', ':' and '/' (the last '@' ends them)") {
  const auto node = parsed("redis+cluster://locker:p@ss:w/rd@a:1,b:2");
  CHECK(node.user == "locker");
  CHECK(node.password == "p@ss:w/rd");
  CHECK(node.seeds == endpoints({{"a", 1}, {"b", 2}}));
  CHECK(parsed("redis+cluster://:a%2Cb%40c@h:1").password == "a,b@c");
  CHECK(parsed("redis://u:a?b@h:1").password == "a?b");  // a '?' before the '@' is the password's
}

TEST_CASE("parse_node_url: redis+sentinel:// is the primary the sentinels call /name (default port 26379)") {
  const auto node = parsed("redis+sentinel://s1:26380,s2/mymaster");
  CHECK(node.kind == Kind::sentinel);
  CHECK(node.seeds == endpoints({{"s1", 26380}, {"s2", 26379}}));
  CHECK(node.master_name == "mymaster");
  CHECK(node.db == 0);
  CHECK(node.sentinel_user.empty());
  CHECK(node.sentinel_password.empty());
  CHECK(parsed("redis+sentinel://s/m/2").db == 2);
  CHECK(parsed("redis+sentinel://s/m/").db == 0);
  CHECK(parsed("redis+sentinel://s/my%2Fmaster").master_name == "my/master");
  const auto tls = parsed("rediss+sentinel://:pw@s1/m?sentinel_user=admin&sentinel_password=s%40cr%26t");
  CHECK(tls.tls);
  CHECK(tls.password == "pw");
  CHECK(tls.sentinel_user == "admin");
  CHECK(tls.sentinel_password == "s@cr&t");
  // An unescaped '@' in a query value does not end the userinfo there.
  const auto at = parsed("redis+sentinel://:pw@h:1/m?sentinel_password=a@b");
  CHECK(at.password == "pw");
  CHECK(at.seeds == endpoints({{"h", 1}}));
  CHECK(at.sentinel_password == "a@b");
}

TEST_CASE("parse_node_url: the query — wait_replicas, wait_timeout, replicated, db") {
  const auto tcp_node = parsed("redis://h:1/2?wait_replicas=2&wait_timeout=20");
  CHECK(tcp_node.db == 2);
  CHECK(tcp_node.wait_replicas == 2);
  CHECK(tcp_node.wait_timeout == 20ms);
  CHECK(tcp_node.replicated);  // waiting for replicas: a member that may fail over
  const auto no_db = parsed("redis://h:1?replicated=1");
  CHECK(no_db.replicated);
  CHECK(no_db.wait_replicas == 0);
  CHECK(no_db.port == 1);
  CHECK_FALSE(parsed("redis://h?replicated=0").replicated);
  CHECK(parsed("redis://h/?wait_replicas=all").wait_replicas == NodeAddress::all_replicas);
  CHECK(parsed("redis://h?wait_replicas=16").wait_replicas == 16);
  CHECK(parsed("redis://h?replicated=1&wait_replicas=1").replicated);
  const auto unix_socket = parsed("unix:///tmp/r.sock?db=3&replicated=1");
  CHECK(unix_socket.db == 3);
  CHECK(unix_socket.replicated);
  const auto cluster = parsed("redis+cluster://h:1?wait_replicas=1&wait_timeout=10");
  CHECK(cluster.wait_replicas == 1);
  CHECK(cluster.wait_timeout == 10ms);
  CHECK_FALSE(cluster.replicated);  // a cluster member is checked for failovers anyway
  CHECK(parsed("redis+sentinel://h/m?wait_replicas=ALL&wait_timeout=60000").wait_replicas == NodeAddress::all_replicas);
}

TEST_CASE("parse_node_url: cluster and sentinel errors") {
  CHECK(config_failure(parse_node_url("redis+cluster://h:1/2")) ==
        R"("redis+cluster://h:1/2": db 2 on a cluster (a cluster has only db 0))");
  CHECK(config_failure(parse_node_url("redis+cluster://")) == R"("redis+cluster://": seed 1: missing host)");
  CHECK(config_failure(parse_node_url("redis+cluster://a:1,,b:2")) == R"("redis+cluster://a:1,,b:2": seed 2: missing host)");
  CHECK(config_failure(parse_node_url("redis+cluster://a:1,[zz]:2")) ==
        R"("redis+cluster://a:1,[zz]:2": seed 2: bad IPv6 address "zz")");
  CHECK(config_failure(parse_node_url("redis+cluster://a:1,b:x")) ==
        R"("redis+cluster://a:1,b:***": seed 2: bad port (expected 1-65535))");
  CHECK(config_failure(parse_node_url("redis+cluster://a:1,b:0")) ==
        R"("redis+cluster://a:1,b:0": seed 2: port out of range (1-65535))");
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1")) ==
        R"("redis+sentinel://s:1": missing "/name" (the master name: redis+sentinel://host:port[,host:port...]/name))");
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1/")) == R"("redis+sentinel://s:1/": empty master name)");
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1/m%zz")).ends_with(": bad percent-escape in the master name"));
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1/a%20b")) ==
        R"("redis+sentinel://s:1/a%20b": master name: printable ASCII without blanks only)");
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1/" + std::string(256, 'm')))
            .ends_with(": master name of 256 bytes (at most 255)"));
  CHECK(parsed("redis+sentinel://s:1/" + std::string(255, 'm')).master_name.size() == 255);
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1/m/x")).ends_with(R"(: bad db "x" (expected a decimal number >= 0))"));
  CHECK(config_failure(parse_node_url("redis+sentinel://s:1/m?sentinel_user=u")) ==
        R"("redis+sentinel://s:1/m?sentinel_user=u": sentinel_user without sentinel_password)");
  CHECK(config_failure(parse_node_url("redis+sentinel://s/m?sentinel_password=")) ==
        R"("redis+sentinel://s/m?sentinel_password=": empty sentinel_password)");
  CHECK(config_failure(parse_node_url("redis+sentinel://s/m?sentinel_user=&sentinel_password=x")) ==
        R"("redis+sentinel://s/m?sentinel_user=&sentinel_password=***": empty sentinel_user)");
  CHECK(config_failure(parse_node_url("redis+sentinel://s/m?sentinel_password=a%zzsecret")) ==
        R"("redis+sentinel://s/m?sentinel_password=***": bad percent-escape in sentinel_password)");
  // An unescaped '&' in a password: what follows is not shown.
  CHECK(config_failure(parse_node_url("redis+sentinel://s/m?sentinel_password=ab&cdefgh")) ==
        R"("redis+sentinel://s/m?sentinel_password=***": a query parameter after sentinel_password that is no key )"
        R"((write '&' in a password as %26))");
}

TEST_CASE("parse_node_url: query errors name the key and the value") {
  const auto failure = [](std::string_view url) { return config_failure(parse_node_url(url)); };
  // "1?" could be a password's start, "@host" forgotten: masked.
  CHECK(failure("redis://h:1?") == R"("redis://h:***": empty query after "?")");
  CHECK(failure("redis://h:1?wait_replicas=1&") == R"("redis://h:1?wait_replicas=1&": empty query parameter ("&&", or '&' at an end))");
  CHECK(failure("redis://h:1?wait_replicas=1&wait_replicas=2") ==
        R"("redis://h:1?wait_replicas=1&wait_replicas=2": repeated query key "wait_replicas")");
  CHECK(failure("redis://h:1/?wait_replicas") == R"("redis://h:1/?wait_replicas": query key "wait_replicas" without "=value")");
  for (const char* bad : {"0", "17", "-1", "x", "", "1.5", "99999999999999999999999"})
    CHECK(failure(std::string("redis://h?wait_replicas=") + bad)
              .ends_with(std::string(R"(: bad wait_replicas ")") + bad + R"(" (expected 1-16 or all))"));
  for (const char* bad : {"0", "60001", "20ms", "", "-5"})
    CHECK(failure(std::string("redis://h?wait_replicas=1&wait_timeout=") + bad)
              .ends_with(std::string(R"(: bad wait_timeout ")") + bad + R"(" (expected milliseconds, 1-60000))"));
  CHECK(failure("redis://h?wait_timeout=20") == R"("redis://h?wait_timeout=20": wait_timeout without wait_replicas)");
  CHECK(failure("redis://h?replicated=yes") == R"("redis://h?replicated=yes": bad replicated "yes" (expected 1 or 0))");
  CHECK(failure("redis://h?replicated=0&wait_replicas=1") ==
        R"("redis://h?replicated=0&wait_replicas=1": wait_replicas with replicated=0 (a member with replicas may fail over))");
  CHECK(failure("redis+cluster://h?replicated=1") ==
        R"("redis+cluster://h?replicated=1": query key "replicated": for redis://, rediss:// and unix:// members only )"
        R"((cluster and sentinel members are checked for failovers anyway))");
  CHECK(failure("redis+sentinel://h/m?replicated=0").ends_with(R"(: query key "replicated": for redis://, rediss:// and unix:// members only )"
                                                              R"((cluster and sentinel members are checked for failovers anyway))"));
  CHECK(failure("redis://h?db=1") == R"("redis://h?db=1": query key "db": for unix:// members only (elsewhere the db is the path: .../db))");
  CHECK(failure("redis+cluster://h?db=0").ends_with(R"(: query key "db": for unix:// members only (elsewhere the db is the path: .../db))"));
  CHECK(failure("redis://h?sentinel_password=x") ==
        R"("redis://h?sentinel_password=***": query key "sentinel_password": for redis+sentinel:// and rediss+sentinel:// members only)");
  CHECK(failure("unix:///tmp/r.sock?sentinel_user=u").ends_with(
      R"(: query key "sentinel_user": for redis+sentinel:// and rediss+sentinel:// members only)"));
  CHECK(failure("redis://h?Wait_Replicas=1") ==
        R"("redis://h?Wait_Replicas=1": unknown query key "Wait_Replicas" (known: db, wait_replicas, wait_timeout, )"
        R"(replicated, sentinel_user, sentinel_password))");
  CHECK(failure("unix:///tmp/r.sock?db=1&db=2") == R"("unix:///tmp/r.sock?db=1&db=2": repeated query key "db")");
}

TEST_CASE("display: a cluster or sentinel member is its URL without credentials, db or query") {
  auto cluster = parsed("rediss+cluster://u:secret@10.0.0.1:7001,[::1]:7002/0?wait_replicas=1");
  CHECK(cluster.display() == "rediss+cluster://10.0.0.1:7001,[::1]:7002");
  cluster.tls = false;
  CHECK(cluster.display() == "redis+cluster://10.0.0.1:7001,[::1]:7002");
  const auto sentinel = parsed("redis+sentinel://:pw@s1,s2:5/my%2Fmaster%40x/3?sentinel_password=secret");
  CHECK(sentinel.display() == "redis+sentinel://s1:26379,s2:5/my%2Fmaster%40x");
  CHECK(sentinel_node(endpoints({{"s", 1}}), "a\x1b[2J b").display() == "redis+sentinel://s:1/a%1B%5B2J%20b");
  for (const auto& node : {cluster, sentinel}) {
    CHECK(mask_credentials(node.display()) == node.display());
    const std::string message = "nodes[1]: \"" + node.display() + "\": refused";
    CHECK(mask_credentials(message) == message);
  }
}

// ---- parse_node_list: a URL's seeds in the list ---------------------------------

TEST_CASE("parse_node_list: items without \"://\" continue the seeds of the cluster or sentinel URL before them") {
  const auto nodes = parse_node_list("redis+cluster://a:1,b:2, c:3 ,redis://d:4,redis://e:5");
  REQUIRE_MESSAGE(nodes.ok(), nodes.error().message);
  REQUIRE(nodes->size() == 3);
  CHECK((*nodes)[0] == cluster_node(endpoints({{"a", 1}, {"b", 2}, {"c", 3}})));
  CHECK((*nodes)[1] == tcp("d", 4));
  CHECK((*nodes)[2] == tcp("e", 5));
  // A sentinel URL's seeds end at the item carrying "/name".
  const auto sentinels = parse_node_list("redis://a:1, redis+sentinel://:pw@s1:1,s2:2,s3:3/m?wait_replicas=1, redis://c:3");
  REQUIRE_MESSAGE(sentinels.ok(), sentinels.error().message);
  REQUIRE(sentinels->size() == 3);
  CHECK((*sentinels)[1].seeds == endpoints({{"s1", 1}, {"s2", 2}, {"s3", 3}}));
  CHECK((*sentinels)[1].master_name == "m");
  CHECK((*sentinels)[1].wait_replicas == 1);
  CHECK((*sentinels)[1].password == "pw");
  // A password's comma is one more item, and comes back with its URL.
  const auto comma = parse_node_list("redis+cluster://u:a,b@h:1,h:2");
  REQUIRE_MESSAGE(comma.ok(), comma.error().message);
  CHECK((*comma)[0].password == "a,b");
  CHECK((*comma)[0].seeds == endpoints({{"h", 1}, {"h", 2}}));
  // Two cluster members in a row, each with its seeds.
  const auto two = parse_node_list("redis+cluster://a:1,a:2,redis+cluster://b:1,b:2");
  REQUIRE(two.ok());
  CHECK(*two == std::vector{cluster_node(endpoints({{"a", 1}, {"a", 2}})), cluster_node(endpoints({{"b", 1}, {"b", 2}}))});
  // parse_node_url takes the whole URL too.
  CHECK(parsed("redis+cluster://a:1,b:2,c:3") == (*nodes)[0]);
}

TEST_CASE("parse_node_list: an item without \"://\" anywhere else stays an error") {
  CHECK(config_failure(parse_node_list("redis://a:1, b:2")) ==
        R"(item 2: "b:2": missing "://" (expected redis://host or unix:///path))");
  CHECK(config_failure(parse_node_list("b:2, redis://a:1")) ==
        R"(item 1: "b:2": missing "://" (expected redis://host or unix:///path))");
  CHECK(config_failure(parse_node_list("redis+cluster://a:1,b:2, redis://c:3, d:4")) ==
        R"(item 4: "d:4": missing "://" (expected redis://host or unix:///path))");
  const std::string after_end =
      R"(: missing "://" (an item without one continues the seeds of a redis+cluster:// or redis+sentinel:// URL )"
      R"(only before its '/' or '?'))";
  CHECK(config_failure(parse_node_list("redis+sentinel://s1:1/m, s2:2")) == R"(item 2: "s2:2")" + after_end);
  CHECK(config_failure(parse_node_list("redis+cluster://a:1/, b:2")) == R"(item 2: "b:2")" + after_end);
  CHECK(config_failure(parse_node_list("redis+cluster://a:1?wait_replicas=1,b:2")) == R"(item 2: "b:2")" + after_end);
  CHECK(config_failure(parse_node_list("redis+cluster://a:1,b:2/,c:3")) == R"(item 3: "c:3")" + after_end);
  // A bad seed names the URL's items; an empty item is empty, as before.
  CHECK(config_failure(parse_node_list("redis://x:1, redis+cluster://a:1, b:99999")) ==
        R"(items 2-3: "redis+cluster://a:1,b:99999": seed 2: port out of range (1-65535))");
  CHECK(config_failure(parse_node_list("redis+sentinel://s1:1, s2:2, redis://c:3")) ==
        R"(items 1-2: "redis+sentinel://s1:1,s2:2": missing "/name" (the master name: )"
        R"(redis+sentinel://host:port[,host:port...]/name))");
  CHECK(config_failure(parse_node_list("redis+cluster://a:1,,b:2")) == R"(item 2: "": empty URL)");
  // After a password in a query, a stray item may be the password's tail.
  const auto tail = config_failure(parse_node_list("redis+sentinel://s:1/m?sentinel_password=ab,cdefgh"));
  CHECK(tail == R"(item 2: missing "://" (not shown: it follows a URL with a password in its query; write ',' in a )"
                R"(password as %2C))");
}

TEST_CASE("config_from_env: REDLOCK_NODES with a cluster's seeds") {
  NodesEnv env("redis+cluster://a:1,b:2,redis://c:3,redis+sentinel://s1,s2/m");
  const auto config = config_from_env();
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  REQUIRE(config->nodes.size() == 3);
  CHECK(config->nodes[0].seeds.size() == 2);
  CHECK(config->nodes[2].seeds == endpoints({{"s1", 26379}, {"s2", 26379}}));
}

TEST_CASE("parse_config_json: nodes takes the cluster and sentinel URLs, one string per member") {
  const auto config = parse_config_json(
      R"({"nodes": ["redis+cluster://a:1,b:2", "redis+sentinel://s1,s2/m?wait_replicas=1&wait_timeout=20",)"
      R"( "redis://h:3?replicated=1"], "node_timeout_ms": 40})");
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  REQUIRE(config->nodes.size() == 3);
  CHECK(config->nodes[0].seeds == endpoints({{"a", 1}, {"b", 2}}));
  CHECK(config->nodes[1].master_name == "m");
  CHECK(config->nodes[1].wait_timeout == 20ms);
  CHECK(config->nodes[2].replicated);
  CHECK(config_failure(parse_config_json(R"({"nodes": ["redis+cluster://a:1", "b:2"]})")) ==
        R"(nodes[1]: "b:2": missing "://" (expected redis://host or unix:///path))");
  CHECK(config_failure(parse_config_json(R"({"nodes": ["redis://h:1?wait_replicas=1&wait_timeout=60"], "node_timeout_ms": 50})")) ==
        R"(nodes[0]: "h:1": wait_timeout 60 ms: must be at least 1 and below node_timeout_ms (50))");
}

TEST_CASE("apply_default_credentials: the data nodes' credentials, never the sentinels'") {
  auto nodes = *parse_node_list("redis+sentinel://s/m?sentinel_password=sp,redis+cluster://c:1,redis+sentinel://t/n");
  apply_default_credentials(nodes, "locker", "pw");
  for (const auto& node : nodes) {
    CHECK(node.user == "locker");
    CHECK(node.password == "pw");
  }
  CHECK(nodes[0].sentinel_password == "sp");
  CHECK(nodes[0].sentinel_user.empty());
  CHECK(nodes[2].sentinel_password.empty());
}

TEST_CASE("validate_config: cluster and sentinel members, and the seeds' rules") {
  // Seeds are where to look, not servers that vote: shared seeds are no duplicate.
  Config config;
  config.nodes = {tcp("a", 1), cluster_node(endpoints({{"a", 1}, {"b", 2}})), cluster_node(endpoints({{"a", 1}})),
                  sentinel_node(endpoints({{"a", 1}}), "m")};
  CHECK(validate_config(config).ok());
  CHECK(node_failure(cluster_node({})) == R"(nodes[0]: "redis+cluster://": no seeds (at least one host:port))");
  CHECK(node_failure(sentinel_node({}, "m")) == R"(nodes[0]: "redis+sentinel:///m": no seeds (at least one host:port))");
  std::vector<Endpoint> many;
  for (int port = 1; port <= 65; ++port) many.push_back(Endpoint{"h", port});
  CHECK(node_failure(cluster_node(many)).ends_with(R"(,h:65": 65 seeds (at most 64))"));
  many.pop_back();
  CHECK(validate_config(Config{{cluster_node(many)}, {}, {}}).ok());
  CHECK(node_failure(cluster_node(endpoints({{"h", 1}, {"h", 0}}))) ==
        R"(nodes[0]: "redis+cluster://h:1,h:0": seeds[1]: port out of range (1-65535))");
  CHECK(node_failure(sentinel_node(endpoints({{"", 1}}), "m")) ==
        R"(nodes[0]: "redis+sentinel://:1/m": seeds[0]: missing host)");
  CHECK(node_failure(cluster_node(endpoints({{"a", 1}, {"b", 1}, {"A", 1}}))) ==
        R"(nodes[0]: "redis+cluster://a:1,b:1,A:1": seeds[2]: the same as seeds[0] (a:1))");
  auto with_db = cluster_node(endpoints({{"a", 1}}));
  with_db.db = 3;
  CHECK(node_failure(with_db) == R"(nodes[0]: "redis+cluster://a:1": db 3 on a cluster (a cluster has only db 0))");
  CHECK(node_failure(sentinel_node(endpoints({{"s", 1}}), "")) == R"(nodes[0]: "redis+sentinel://s:1/": empty master name)");
  CHECK(node_failure(sentinel_node(endpoints({{"s", 1}}), "a\x1b")) ==
        R"(nodes[0]: "redis+sentinel://s:1/a%1B": master name: printable ASCII without blanks only)");
  CHECK(node_failure(sentinel_node(endpoints({{"s", 1}}), std::string(256, 'm'))).ends_with(": master name of 256 bytes (at most 255)"));
}

TEST_CASE("validate_config: a field of another kind is refused") {
  auto seeded = tcp("h", 1);
  seeded.seeds = endpoints({{"a", 1}});
  CHECK(node_failure(seeded) == R"(nodes[0]: "h:1": seeds: for redis+cluster:// and redis+sentinel:// members only)");
  auto named = cluster_node(endpoints({{"a", 1}}));
  named.master_name = "m";
  CHECK(node_failure(named) ==
        R"(nodes[0]: "redis+cluster://a:1": master_name: for redis+sentinel:// and rediss+sentinel:// members only)");
  auto sentinel_auth = unix_node("/tmp/r.sock");
  sentinel_auth.sentinel_password = "x";
  CHECK(node_failure(sentinel_auth) == R"(nodes[0]: "unix:///tmp/r.sock": sentinel_user, sentinel_password: )"
                                       R"(for redis+sentinel:// and rediss+sentinel:// members only)");
  auto replicated = sentinel_node(endpoints({{"s", 1}}), "m");
  replicated.replicated = true;
  CHECK(node_failure(replicated) == R"(nodes[0]: "redis+sentinel://s:1/m": replicated: for redis://, rediss:// and )"
                                    R"(unix:// members only (cluster and sentinel members are checked for failovers anyway))");
  auto user_only = sentinel_node(endpoints({{"s", 1}}), "m");
  user_only.sentinel_user = "u";
  CHECK(node_failure(user_only) == R"(nodes[0]: "redis+sentinel://s:1/m": sentinel_user without sentinel_password)");
}

TEST_CASE("validate_config: wait_replicas and wait_timeout") {
  auto node = tcp("h", 1);
  node.replicated = true;
  node.wait_replicas = 17;
  CHECK(node_failure(node) == R"(nodes[0]: "h:1": wait_replicas 17: must be 1-16, -1 (all) or 0 (off))");
  node.wait_replicas = -2;
  CHECK(node_failure(node) == R"(nodes[0]: "h:1": wait_replicas -2: must be 1-16, -1 (all) or 0 (off))");
  node.wait_replicas = NodeAddress::all_replicas;
  node.wait_timeout = 60001ms;
  CHECK(node_failure(node) == R"(nodes[0]: "h:1": wait_timeout 60001 ms: must be 1-60000 (or 0: half of node_timeout_ms))");
  node.wait_timeout = -1ms;
  CHECK(node_failure(node) == R"(nodes[0]: "h:1": wait_timeout -1 ms: must be 1-60000 (or 0: half of node_timeout_ms))");
  node.wait_timeout = 0ms;
  CHECK(validate_config(Config{{node}, {}, {}}).ok());  // 25 ms, half of node_timeout
  node.replicated = false;
  CHECK(node_failure(node) == R"(nodes[0]: "h:1": wait_replicas without replicated (a member with replicas may fail over))");
  auto off = tcp("h", 1);
  off.wait_timeout = 20ms;
  CHECK(node_failure(off) == R"(nodes[0]: "h:1": wait_timeout without wait_replicas)");
  // The timeout in force must end before the node deadline.
  auto waits = cluster_node(endpoints({{"a", 1}}));
  waits.wait_replicas = 1;
  waits.wait_timeout = 50ms;
  CHECK(node_failure(waits) ==
        R"(nodes[0]: "redis+cluster://a:1": wait_timeout 50 ms: must be at least 1 and below node_timeout_ms (50))");
  waits.wait_timeout = 49ms;
  CHECK(validate_config(Config{{waits}, {}, {}}).ok());
  Options tight;
  tight.node_timeout = 1ms;
  waits.wait_timeout = 0ms;
  CHECK(node_failure(waits, tight) == R"(nodes[0]: "redis+cluster://a:1": wait_timeout 0 ms (unset: half of )"
                                      R"(node_timeout_ms): must be at least 1 and below node_timeout_ms (1))");
  tight.node_timeout = 2ms;
  CHECK(validate_config(Config{{waits}, tight, {}}).ok());
}

// ---- the keys' documentation ----------------------------------------------------------

TEST_CASE("docs/config.md's table of keys is the one generated from the parser's table") {
  const char* root = std::getenv("REDLOCK_SOURCE_ROOT");
  REQUIRE_MESSAGE(root != nullptr, "REDLOCK_SOURCE_ROOT is not set (run through meson test)");
  std::ifstream in(std::string(root) + "/docs/config.md");
  REQUIRE(in.good());
  std::string table, line;
  bool inside = false, closed = false;
  while (std::getline(in, line)) {
    if (line.starts_with("<!-- keys:begin")) {
      inside = true;
    } else if (line.starts_with("<!-- keys:end")) {
      closed = inside;
      inside = false;
    } else if (inside) {
      table += line + "\n";
    }
  }
  REQUIRE(closed);
  const std::string generated = detail::config_keys_markdown();
  CHECK_MESSAGE(table == generated, "docs/config.md between the keys markers should read:\n" << generated);
}

TEST_CASE("every key of the generated table is one parse_config_json accepts, and no other is") {
  const std::string table = detail::config_keys_markdown();
  std::size_t rows = 0;
  for (std::size_t at = table.find("\n| `"); at != std::string::npos; at = table.find("\n| `", at + 1)) {
    const std::size_t begin = at + 4;
    const std::string key = table.substr(begin, table.find('`', begin) - begin);
    ++rows;
    // An unknown key is refused before any value is looked at: a wrong
    // value (or a missing node) gives another message.
    const auto r = parse_config_json("{\"nodes\": [\"redis://127.0.0.1:1\"], \"" + key + "\": [[]]}");
    const std::string message = r.ok() ? std::string() : r.error().message;
    CHECK_MESSAGE(message.find("unknown key") == std::string::npos, key);
  }
  CHECK(rows == 35);
  CHECK(config_failure(parse_config_json(R"({"nodes": ["redis://127.0.0.1:1"], "no_such_key": 1})"))
            .find("unknown key") != std::string::npos);
}
