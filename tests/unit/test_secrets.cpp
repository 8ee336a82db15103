// test_secrets.cpp — no password reaches a message: a corpus of node URLs
// and JSON configs, malformed and well-formed, each holding a distinctive
// password, run through every parser; neither the error text nor a parsed
// node's display() may contain the password, its percent-decoded form or
// any 4-character slice of either.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "redlock/config.hpp"

using namespace redlock;

namespace {

// Passwords with what breaks a naive mask: '/', '@', ':', '+', '=', a
// percent-escape, '&' (which ends a query value).
const std::vector<std::string> passwords = {
    "S3cr/et@pw", "p%2Fw0rdZ", "aB3+xY/9kL==", "Qw:er@ty/Ui", "Zz9:Yy8!Xx7", "hUnt3r2Xq", "Mn/Op/Qr", "Ab&Cd3Ef4Gh",
};

bool has_at(const std::string& password) { return password.find('@') != std::string::npos; }

std::string replaced(std::string text, const std::string& password) {
  for (auto at = text.find("{pw}"); at != std::string::npos; at = text.find("{pw}", at + password.size()))
    text.replace(at, 4, password);
  return text;
}

// The first of the secret's 4-character slices (its own or its
// percent-decoded form's) that `text` contains; empty when none.
std::string leaked(const std::string& text, const std::string& password) {
  std::vector<std::string> forms{password};
  if (auto decoded = password; decoded.find("%2F") != std::string::npos) {
    decoded.replace(decoded.find("%2F"), 3, "/");
    forms.push_back(decoded);
  }
  for (const auto& form : forms)
    for (std::size_t i = 0; i + 4 <= form.size(); ++i)
      if (text.find(form.substr(i, 4)) != std::string::npos) return form.substr(i, 4);
  return {};
}

void check_clean(const std::string& input, const std::string& password, const std::string& output) {
  const auto slice = leaked(output, password);
  CHECK_MESSAGE(slice.empty(), "input: ", input, "\noutput: ", output, "\nleaks: ", slice);
}

// The message of a failure, or the display of every node of a success.
template <class T>
std::string shown(const Result<T>& result);

template <>
std::string shown(const Result<NodeAddress>& result) {
  return result ? result->display() : result.error().message;
}

template <>
std::string shown(const Result<std::vector<NodeAddress>>& result) {
  if (!result) return result.error().message;
  std::string text;
  for (const auto& node : *result) text += node.display() + "\n";
  return text;
}

template <>
std::string shown(const Result<Config>& result) {
  if (!result) return result.error().message;
  std::string text;
  for (const auto& node : result->nodes) text += node.display() + "\n";
  return text;
}

// URLs in every spelling. "{pw}" is the password. These have a host after
// the password, so any password fits.
const std::vector<std::string> urls_with_host = {
    "redis://user:{pw}@host:6379",
    "redis://:{pw}@host:6379",
    "redis://{pw}@host",  // the ':' before the password forgotten
    "redis://user:{pw}@host:99999",
    "redis://user:{pw}@host:bad",
    "redis://user:{pw}@ho!st",
    "redis://user:{pw}@host/abc",
    "redis://user:{pw}@host@other:1",
    "rediss://user:{pw}@[zz]:1",
    "REDIS://user:{pw}@host:0",
    "redis://user:{pw}@host:6379/2147483648",
    "redis://u%zz:{pw}@host",
    "redis://user:{pw}%@host",
    "redis://user:{pw}%4@host",
    "redis://user:{pw}@",
    "redis://user:{pw}@:6379",
    "redis://user:{pw}@[::1",
    "user:{pw}@host:6379",  // no scheme
    ":{pw}@host",
    "//:{pw}@host",
    "redis:/:{pw}@host",
    "redis//:{pw}@host",
    "http://user:{pw}@host",
    "user:{pw}@redis://host",
    "redis://user:{pw}@host:6379 ",
    "unix://:{pw}@/tmp/r.sock?db=x",
    "unix://:{pw}@/tmp/r.sock?x=1",
    "unix://:{pw}@tmp/r.sock",
    "unix://user:{pw}@",
    "UNIX://:{pw}@/tmp/r.sock?db=99999999999",
    // Cluster and sentinel members: the userinfo, and a password in the query.
    "redis+cluster://user:{pw}@a:1,b:2",
    "redis+cluster://user:{pw}@a:1,b:x",
    "redis+cluster://user:{pw}@a:1/3",
    "redis+cluster://user:{pw}@a:1,[zz]:2?wait_replicas=1",
    "rediss+cluster://:{pw}@a:1?replicated=1",
    "redis://user:{pw}@h:1?wait_timeout=5",
    "redis://user:{pw}@h?wait_replicas=0",
    "redis+sentinel://user:{pw}@s1,s2/m?wait_replicas=1",
    "redis+sentinel://user:{pw}@s1,s2",
    "redis+sentinel://h:1/m?sentinel_password={pw}",
    "rediss+sentinel://user:{pw}@h:1,h:2/m?sentinel_user=u&sentinel_password={pw}",
    "redis+sentinel://h:1/m?sentinel_password={pw}&wait_replicas=x",
    "redis+sentinel://h:1/m?wait_replicas=x&sentinel_password={pw}",
    "redis+sentinel://h:1/m?sentinel_password={pw}&bogus=1",
    "redis+sentinel://h:1/m?sentinel_password={pw}&sentinel_password={pw}",
    "redis+sentinel://h:1/m?sentinel_password={pw}%zz",
    "redis+sentinel://h:1/m?sentinel_user=u%zz&sentinel_password={pw}",
    "redis+sentinel://h:99999/m?sentinel_password={pw}",
    "redis+sentinel://h:1?sentinel_password={pw}",
    "redis+sentinel://h:1/?sentinel_password={pw}",
    "redis+sentinel://h:1/m/x?sentinel_password={pw}",
    "redis+sentinel://h:1/m%20x?sentinel_password={pw}",
    "redis+cluster://h:1?sentinel_password={pw}",
    "redis://h:1?sentinel_password={pw}",
    "unix:///tmp/r.sock?sentinel_password={pw}",
    "REDIS+SENTINEL://h:1/m?SENTINEL_PASSWORD={pw}",
    "redis+sentinel://h:1/m?sentinel_p%61ssword={pw}",
    "redis+sentinel://h:1/m?sentinel_password=\"{pw}\"",
    "redis+sentinel://h:1/m?sentinel_password={pw}?wait_replicas=1",
};

// With "@host" forgotten a password with '@' reads as a password and a
// host: these take the passwords without '@'.
const std::vector<std::string> urls_without_host = {
    "redis://user:{pw}", "redis://:{pw}", "redis://user:{pw}/0", "rediss://:{pw}:6379", "user:{pw}",
    "unix://user:{pw}",  "unix://:{pw}",  "redis://[::1]:{pw}", "redis://user:{pw} @host",
    "redis+cluster://user:{pw}", "redis+cluster://a:1,user:{pw}", "redis+sentinel://:{pw}",
    "redis+sentinel://user:{pw}/m", "redis://user:{pw}?wait_replicas=1",
};

std::vector<std::string> urls_for(const std::string& password) {
  std::vector<std::string> urls = urls_with_host;
  if (!has_at(password)) urls.insert(urls.end(), urls_without_host.begin(), urls_without_host.end());
  return urls;
}

// JSON configs; the password is JSON-safe (no '"' or '\').
const std::vector<std::string> configs = {
    R"({"nodes": {"a": "redis://:{pw}@h"}})",
    R"({"nodes": [["redis://:{pw}@h"]]})",
    R"({"nodes": [123, "redis://:{pw}@h"]})",
    R"({"nodes": ["redis://h", 123, "redis://:{pw}@h"]})",
    R"({"nodes": "redis://:{pw}@h"})",
    R"({"nodes": "redis://user:{pw}@h:bad"})",
    R"({"nodes": ["redis://:{pw}@h:99999"]})",
    R"({"nodes": ["user:{pw}@h:6379"]})",
    R"({"nodes": [{"url": "redis://h", "password": "{pw}"}]})",
    R"({"nodes": ["redis://h"], "password": "{pw}"})",
    R"({"nodes": ["redis://h"], "redis://:{pw}@h": 1})",
    R"({"nodes": ["redis://h"], "default_ttl_ms": "redis://:{pw}@h"})",
    R"({"nodes": ["redis://h"], "tls_verify": "redis://u:{pw}@h"})",
    R"({"nodes": ["redis://h"], "prefix": ["redis://:{pw}@h"]})",
    R"({"nodes": ["redis://h"], "prefix": "redis://:{pw}@h{x}"})",
    R"({"nodes": ["redis://h"], "user": {"password": "{pw}"}})",
    R"({"nodes": ["redis://:{pw}@h", "redis://:{pw}@h"]})",
    R"({"nodes": ["redis://:{pw}@h/1", "redis://:{pw}@h/2"]})",
    R"(["redis://:{pw}@h"])",
    R"("redis://:{pw}@h")",
    // syntax errors: the parser's "last read" text would hold the password
    R"({"nodes": ["redis://:{pw}@h")",
    R"({"nodes": ["redis://:{pw}@h"] x})",
    R"({"nodes": [redis://:{pw}@h]})",
    R"({"nodes": ["redis://h"], "user": "{pw})",
    R"({"nodes": ["redis://:{pw})" "\x01" R"(@h"]})",
    R"({"nodes": ["redis://:{pw}\q@h"]})",
    R"({"nodes": ["redis://:{pw}\u12@h"]})",
    R"({"nodes": ["redis://h"], "prefix": "{pw})" "\n" R"("})",
    R"({pw})",
    R"({"{pw}")",
    R"({"nodes": ["redis://h"]} {pw})",
};

}  // namespace

TEST_CASE("no password in a parse_node_url error or a display, in any spelling") {
  for (const auto& password : passwords) {
    for (const auto& url_template : urls_for(password)) {
      const auto url = replaced(url_template, password);
      check_clean(url, password, shown(parse_node_url(url)));
      check_clean(url, password, shown(parse_node_list("redis://a:1, " + url)));
      check_clean(url, password, mask_credentials(url));
      check_clean(url, password, mask_credentials("--nodes=" + url + ": (" + url + ")"));
    }
  }
}

TEST_CASE("no password in a JSON config's error, nor in a syntax error's") {
  for (const auto& password : passwords) {
    for (const auto& config_template : configs) {
      const auto text = replaced(config_template, password);
      check_clean(text, password, shown(parse_config_json(text)));
    }
    for (const auto& url_template : urls_for(password)) {
      const auto url = replaced(url_template, password);
      check_clean(url, password, shown(parse_config_json(R"({"nodes": [")" + url + R"("]})")));
      check_clean(url, password, shown(parse_config_json(R"({"nodes": ")" + url + R"("})")));
    }
  }
}

TEST_CASE("no password in REDLOCK_NODES errors") {
  for (const auto& password : passwords) {
    for (const auto& url_template : urls_for(password)) {
      const auto url = replaced(url_template, password);
      REQUIRE(setenv("REDLOCK_NODES", ("redis://a:1," + url).c_str(), 1) == 0);
      check_clean(url, password, shown(config_from_env()));
    }
  }
  unsetenv("REDLOCK_NODES");
}

TEST_CASE("no password in a list's error when a ',' cuts a query password in two") {
  for (const auto& password : passwords) {
    for (const auto& list : {"redis+sentinel://s:1/m?sentinel_password=ab,{pw}", "redis+sentinel://s:1/m?sentinel_password=ab,{pw},redis://c:1",
                             "redis+sentinel://s:1/m?sentinel_password={pw},{pw}", "redis://a:1,redis+sentinel://s:1/m?sentinel_password=x&wait_replicas=1,{pw}"}) {
      const auto text = replaced(list, password);
      check_clean(text, password, shown(parse_node_list(text)));
      check_clean(text, password, mask_credentials(text));
      check_clean(text, password, mask_credentials("--nodes " + text + " nodes"));
    }
  }
}

TEST_CASE("a password file's content is never in its error") {
  char path[] = "/tmp/redlock-secret-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string content = "\nS3cr/et@pw\n";
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  close(fd);
  const auto read = read_password_file(path);
  REQUIRE_FALSE(read.ok());
  check_clean(path, "S3cr/et@pw", read.error().message);
  const auto config = parse_config_json(std::string(R"({"nodes": ["redis://h"], "password_file": ")") + path + "\"}");
  REQUIRE_FALSE(config.ok());
  check_clean(path, "S3cr/et@pw", config.error().message);
  unlink(path);
}

TEST_CASE("mask_credentials: what is masked") {
  CHECK(mask_credentials("redis://user:pw@h:1") == "redis://***@h:1");
  CHECK(mask_credentials("redis://user:a/b@c@h:1/2") == "redis://***@h:1/2");
  CHECK(mask_credentials("redis://secret@h") == "redis://***@h");
  CHECK(mask_credentials("user:pw@h:6379") == "***@h:6379");
  CHECK(mask_credentials("//:pw@h") == "//***@h");
  CHECK(mask_credentials("user:pw@redis://h") == "***@redis://h");
  CHECK(mask_credentials("redis://user:pw") == "redis://user:***");
  CHECK(mask_credentials("redis://user:pw/0") == "redis://user:***");
  CHECK(mask_credentials("redis://[::1]:pw") == "redis://[::1]:***");
  CHECK(mask_credentials("unix://:pw@/tmp/a@b.sock") == "unix://***@b.sock");  // when in doubt, more
  // Left alone: what holds no credentials.
  for (const char* plain : {"redis://h:6379/2", "redis://[::1]:6379", "redis://::1:7001", "redis://h:",
                            "unix:///tmp/a@b.sock", "unix:///tmp/r.sock?db=1", "redlock:", "no URL here"})
    CHECK(mask_credentials(plain) == plain);
  CHECK(mask_credentials("item 2: \"redis://u:pw@h\": bad\tx:y") == "item 2: \"redis://***@h\": bad\tx:***");
  CHECK(mask_credentials("--nodes=redis://u:pw@h,(redis://u:pw)") == "--nodes=redis://***@h,(redis://u:***");
  CHECK(mask_credentials("\"redis://h:6379\": \"redis://[::1]:1\",") == "\"redis://h:6379\": \"redis://[::1]:1\",");
  CHECK(mask_credentials("\"user:pw@h\": (//:pw@h)") == "\"***@h\": (//***@h)");
  // A query password, up to the next blank (its end is not known before that).
  CHECK(mask_credentials("redis+sentinel://h:1/m?sentinel_password=s3cret") == "redis+sentinel://h:1/m?sentinel_password=***");
  CHECK(mask_credentials("redis+sentinel://h:1/m?sentinel_password=s3cret&wait_replicas=1 next") ==
        "redis+sentinel://h:1/m?sentinel_password=*** next");
  CHECK(mask_credentials("\"redis+sentinel://u:pw@h:1/m?sentinel_password=s3cret\": bad") ==
        "\"redis+sentinel://***@h:1/m?sentinel_password=*** bad");
  CHECK(mask_credentials("--nodes=redis://a:1,redis+sentinel://h:1/m?sentinel_password=s,3cr3t redis://b:2") ==
        "--nodes=redis://a:1,redis+sentinel://h:1/m?sentinel_password=*** redis://b:2");
  CHECK(mask_credentials("redis+sentinel://h/m?sentinel_password=a@b") == "redis+sentinel://h/m?sentinel_password=***");
  CHECK(mask_credentials("?SENTINEL_PASSWORD=x&pass=y") == "?SENTINEL_PASSWORD=***");
  CHECK(mask_credentials("sentinel_p%61ssword=x") == "sentinel_p%61ssword=***");
  CHECK(mask_credentials("--sentinel-password=x y") == "--sentinel-password=*** y");
  for (const char* secret : {"pass=x", "pwd=x", "passwd=x", "client_secret=x", "PassWord=x"})
    CHECK(mask_credentials(secret).ends_with("=***"));
  CHECK(mask_credentials("redis+cluster://u:pw@a:1,b:2") == "redis+cluster://***@a:1,b:2");
  for (const char* plain : {"redis+cluster://a:1,b:2", "redis+sentinel://[::1]:26379,h:1/m?wait_replicas=all&wait_timeout=20",
                            "redis://h:1?wait_replicas=1", "unix:///tmp/r.sock?db=1&replicated=1", "password_file=/etc/pw",
                            "sentinel_password=", "wait_timeout=20", "rediss+sentinel://s:1,s:2/my%2Fmaster%40x"})
    CHECK(mask_credentials(plain) == plain);
  // Masking a masked text changes nothing (the CLI masks the library's messages again).
  for (const char* masked : {"\"redis://***@h:1\":", "\"***@h:6379\":", "\"redis://user:***\":", "--bogus=redis://***@h",
                             "\"redis+sentinel://***@s:1/m?sentinel_password=***\": bad", "sentinel_password=***,"})
    CHECK(mask_credentials(masked) == masked);
}

TEST_CASE("a password may hold '/', '@' and ':' unescaped") {
  const auto tcp = parse_node_url("redis://user:S3cr/et@p:w@host:6380/2");
  REQUIRE_MESSAGE(tcp.ok(), tcp.error().message);
  CHECK(tcp->user == "user");
  CHECK(tcp->password == "S3cr/et@p:w");
  CHECK(tcp->host == "host");
  CHECK(tcp->port == 6380);
  CHECK(tcp->db == 2);
  const auto base64 = parse_node_url("rediss://:aB3+xY/9kL==@10.0.0.1");
  REQUIRE_MESSAGE(base64.ok(), base64.error().message);
  CHECK(base64->password == "aB3+xY/9kL==");
  // unix: the userinfo ends at the first "@/", so the path may hold '@'.
  const auto unix_node = parse_node_url("unix://:a/b@c@/run/x@y/r.sock?db=1");
  REQUIRE_MESSAGE(unix_node.ok(), unix_node.error().message);
  CHECK(unix_node->password == "a/b@c");
  CHECK(unix_node->path == "/run/x@y/r.sock");
  CHECK(unix_node->db == 1);
  const auto no_credentials = parse_node_url("unix:///run/x@y/r.sock");
  REQUIRE(no_credentials.ok());
  CHECK(no_credentials->path == "/run/x@y/r.sock");
  CHECK(no_credentials->password.empty());
}

TEST_CASE("a JSON syntax error gives the position and the kind, not the text") {
  const auto config = parse_config_json(R"({"nodes": ["redis://:pw)" "\x01" R"(@h"]})");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().message ==
        "invalid JSON: parse error at line 1, column 24: syntax error while parsing value - invalid string: "
        "control character U+0001 (SOH) must be escaped to \\u0001 (byte 24)");
}
