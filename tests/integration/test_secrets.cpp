// test_secrets.cpp — passwords against a real master: one with '/', '@'
// and ':' unescaped in the URL authenticates, and a wrong one is refused
// (WRONGPASS) without being shown — neither the library's error and
// outcomes nor the `redlock` command's output (path from REDLOCK_CLI) hold
// any 4-character slice of either password.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace redlock::test::cli_harness;

namespace {

const std::string right_password = "R1/ght@pw:x+Y=";
const std::string wrong_password = "Wr/0ng@pw:z+Q=";

// The first 4-character slice of `secret` that `text` holds; empty when none.
std::string leaked(const std::string& text, const std::string& secret) {
  for (std::size_t i = 0; i + 4 <= secret.size(); ++i)
    if (text.find(secret.substr(i, 4)) != std::string::npos) return secret.substr(i, 4);
  return {};
}

void check_clean(const std::string& text) {
  INFO("output: " << text);
  CHECK(leaked(text, right_password).empty());
  CHECK(leaked(text, wrong_password).empty());
}

}  // namespace

TEST_CASE("a password with '/', '@' and ':' unescaped authenticates; a wrong one is refused unseen") {
  ServerOptions so;
  so.password = right_password;
  so.acl_users = {{"locker", right_password}};
  RedisServer server(so);
  const std::string base = "127.0.0.1:" + std::to_string(server.port());

  for (const std::string& url : {"redis://:" + right_password + "@" + base,
                                 "redis://locker:" + right_password + "@" + base}) {
    INFO("url: " << url);
    auto client = client_for({url});
    auto lock = client->try_acquire("secret");
    REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
    check_clean(lock->nodes[0].address);
    CHECK(client->release(*lock)->released);
    const auto taken = cli({"--no-quarantine", "--nodes", url, "acquire", "secret-cli", "--json"});
    CHECK(taken.exit_code == 0);
    check_clean(taken.out + taken.err);
    const auto nodes = cli({"--nodes", url, "nodes", "--json"});
    check_clean(nodes.out + nodes.err);
    CHECK(json_of(nodes)["nodes"][0]["reachable"] == true);
    server.command({"DEL", "redlock:{secret-cli}:lock"});
  }

  for (const std::string& url : {"redis://:" + wrong_password + "@" + base,
                                 "redis://locker:" + wrong_password + "@" + base}) {
    INFO("url: " << url);
    auto client = client_for({url});
    auto refused = client->try_acquire("secret");
    REQUIRE_FALSE(refused.ok());
    const auto& node = refused.error().nodes.at(0);
    CHECK(node.error.find("WRONGPASS") != std::string::npos);
    check_clean(refused.error().to_string() + "\n" + node.address + "\n" + node.error);
    const auto nodes = cli({"--nodes", url, "nodes", "--json"});
    CHECK(nodes.exit_code != 0);
    CHECK(nodes.out.find("WRONGPASS") != std::string::npos);
    check_clean(nodes.out + nodes.err);
    const auto acquire = cli({"--no-quarantine", "acquire", "secret", "--json"}, {{"REDLOCK_NODES", url}});
    CHECK(acquire.exit_code != 0);
    CHECK(acquire.out.find("WRONGPASS") != std::string::npos);
    check_clean(acquire.out + acquire.err);
  }
}
