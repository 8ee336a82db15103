// test_yaml_file.cpp — load_yaml applies merge keys as Compose does (yaml-cpp
// 0.7 does not), refuses what Compose refuses, and every error names the file,
// the line and the column.
#include <doctest/doctest.h>

#include "support.hpp"
#include "yaml_file.hpp"

#include <fstream>
#include <string>
#include <vector>

using namespace compose_test;

namespace {

// The message of the error LOAD() throws ("" if it does not throw).
template <typename Load>
std::string message_of(Load load) {
  try {
    load();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::string& text) {
  return message_of([&] { load_yaml(text, "in.yml"); });
}

std::vector<std::string> keys(const YAML::Node& map) {
  std::vector<std::string> out;
  for (const auto& entry : map) out.push_back(entry.first.Scalar());
  return out;
}

}  // namespace

TEST_CASE("yaml: a merge key copies the anchored mapping, the mapping's own keys win") {
  const YAML::Node doc = load_yaml(
      "x-node: &node\n"
      "  image: \"redis:7.0\"\n"
      "  restart: \"no\"\n"
      "  healthcheck: {test: [CMD, redis-cli, ping], retries: 30}\n"
      "services:\n"
      "  a:\n"
      "    <<: *node\n"
      "    ports: [\"127.0.0.1:7001:6379\"]\n"
      "  b:\n"
      "    restart: always\n"
      "    <<: *node\n",
      "in.yml");
  const YAML::Node a = doc["services"]["a"];
  CHECK(keys(a) == std::vector<std::string>{"image", "restart", "healthcheck", "ports"});
  CHECK(a["image"].Scalar() == "redis:7.0");
  CHECK(a["healthcheck"]["test"][2].Scalar() == "ping");
  CHECK(a["ports"][0].Scalar() == "127.0.0.1:7001:6379");
  const YAML::Node b = doc["services"]["b"];
  CHECK(keys(b) == std::vector<std::string>{"restart", "image", "healthcheck"});
  CHECK(b["restart"].Scalar() == "always");  // its own key, wherever << stands
  CHECK(doc["services"].IsMap());
  CHECK(keys(doc["services"]) == std::vector<std::string>{"a", "b"});  // order kept
}

TEST_CASE("yaml: merges from a list (earlier wins), nested merges, quoted << is a key") {
  const YAML::Node doc = load_yaml(
      "base: &base {image: one, user: root}\n"
      "mid: &mid {<<: *base, image: two}\n"
      "other: &other {image: three, tty: \"true\"}\n"
      "s: {<<: [*mid, *other]}\n"
      "q: {\"<<\": plain}\n",
      "in.yml");
  CHECK(doc["mid"]["image"].Scalar() == "two");
  CHECK(doc["mid"]["user"].Scalar() == "root");
  CHECK(doc["s"]["image"].Scalar() == "two");
  CHECK(doc["s"]["user"].Scalar() == "root");
  CHECK(doc["s"]["tty"].Scalar() == "true");
  CHECK(keys(doc["q"]) == std::vector<std::string>{"<<"});
  // The anchored mapping itself is left as written.
  CHECK(keys(doc["base"]) == std::vector<std::string>{"image", "user"});
}

TEST_CASE("yaml: what Compose would refuse is an error naming where and what") {
  CHECK(error_of("a: [1, 2\nb: 3\n") == "in.yml: line 2, column 2: end of sequence flow not found");
  CHECK(error_of("a: *missing\n") == "in.yml: line 1, column 4: the referenced anchor is not defined");
  CHECK(error_of("a: 1\nb: 2\na: 3\n") == "in.yml: line 3, column 1: duplicate key 'a'");
  CHECK(error_of("x: &x 1\ns:\n  <<: *x\n") == "in.yml: line 3, column 3: << needs a mapping or a list of mappings");
  CHECK(error_of("x: &x {a: 1}\ns: {<<: [*x, 2]}\n") ==
        "in.yml: line 2, column 5: << needs a mapping or a list of mappings");
  CHECK(error_of("a: &a\n  b: *a\n") == "in.yml: line 1, column 4: an alias refers to a collection that contains it");
  CHECK(error_of("? [k]\n: v\n") == "in.yml: line 1, column 3: a key must be a scalar");
  CHECK(load_yaml("", "in.yml").IsNull());
}

TEST_CASE("yaml: a malformed or missing file is an error naming the file, not a crash") {
  TempDir tmp;
  const std::string path = tmp.path() + "/docker-compose.yml";
  std::ofstream(path) << "name: bed\nservices:\n  node1:\n    ports: [\"127.0.0.1:7001:6379\"\n";
  CHECK(message_of([&] { load_yaml_file(path); }) == path + ": line 5, column 1: end of sequence flow not found");
  const std::string absent = tmp.path() + "/absent.yml";
  CHECK(message_of([&] { load_yaml_file(absent); }) == absent + ": cannot be read");
}
