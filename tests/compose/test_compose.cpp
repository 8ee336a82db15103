// test_compose.cpp — docker-compose.yml is the container twin of the local
// bed (scripts/testbed.sh): five independent redis 7 masters, node N on
// 127.0.0.1:700N only, each stating the same persistence as
// `testbed.sh --persistence always` (its PERSISTENCE_ALWAYS line), so the two
// beds cannot drift apart. No Docker engine is needed: the file is read with
// yaml-cpp, merge keys applied as Compose applies them (yaml_file.hpp), and
// testbed.sh is read as text and also asked (`testbed.sh config 1`, which
// starts nothing).
#include <doctest/doctest.h>

#include "support.hpp"
#include "yaml_file.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace compose_test;

namespace {

constexpr int kNodes = 5;
constexpr int kBasePort = 7000;

// redis-server's "--name value..." arguments, in order. A value is the
// following arguments up to the next "--", joined by one space, as
// redis-server itself reads them.
using Options = std::vector<std::pair<std::string, std::string>>;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Options parse_redis_args(const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::pair<std::string, std::vector<std::string>>> raw;
  for (const auto& arg : args) {
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      raw.emplace_back(lower(arg.substr(2)), std::vector<std::string>{});
    } else {
      REQUIRE_MESSAGE(!raw.empty(), what << ": argument '" << arg
                                         << "' before any --option (a config file? every setting must be stated)");
      raw.back().second.push_back(arg);
    }
  }
  Options out;
  for (const auto& [name, values] : raw) {
    CHECK_MESSAGE(!values.empty(), what << ": --" << name << " has no value");
    for (const auto& [seen, _] : out) {
      CHECK_MESSAGE(seen != name, what << ": option --" << name << " is given twice");
    }
    std::string joined;
    for (std::size_t i = 0; i < values.size(); ++i) joined += (i == 0 ? "" : " ") + values[i];
    out.emplace_back(name, joined);
  }
  return out;
}

const std::string* find_option(const Options& options, const std::string& name) {
  for (const auto& [n, v] : options) {
    if (n == name) return &v;
  }
  return nullptr;
}

// The words of a one-line bash array assignment NAME=(...) in TEXT: plain
// words and "..." or '...' strings only; anything that bash would expand is
// refused, so what the test reads is what bash runs.
std::vector<std::string> bash_array(const std::string& text, const std::string& name) {
  const std::string prefix = name + "=(";
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  REQUIRE_MESSAGE(lines.size() == 1, "scripts/testbed.sh must have exactly one line starting '"
                                         << prefix << "', found " << lines.size());
  std::string body = lines[0].substr(prefix.size());
  while (!body.empty() && (body.back() == ' ' || body.back() == '\r')) body.pop_back();
  REQUIRE_MESSAGE((!body.empty() && body.back() == ')'),
                  name << " must be on one line ending with ')': " << lines[0]);
  body.pop_back();
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < body.size()) {
    if (body[i] == ' ') {
      ++i;
      continue;
    }
    std::string word;
    while (i < body.size() && body[i] != ' ') {
      const char c = body[i];
      if (c == '"' || c == '\'') {
        const auto end = body.find(c, i + 1);
        REQUIRE_MESSAGE(end != std::string::npos, name << ": unterminated quote in " << lines[0]);
        const std::string quoted = body.substr(i + 1, end - i - 1);
        REQUIRE_MESSAGE((c == '\'' || quoted.find_first_of("$`\\") == std::string::npos),
                        name << ": expansions are not allowed in " << lines[0]);
        word += quoted;
        i = end + 1;
      } else {
        REQUIRE_MESSAGE(std::string("$`\\*?[]{}()#;&|<>~").find(c) == std::string::npos,
                        name << ": '" << c << "' is not allowed in " << lines[0]);
        word += c;
        ++i;
      }
    }
    words.push_back(word);
  }
  return words;
}

// `key value` / `key "value"` lines (redis.conf style, '#' comments skipped).
std::map<std::string, std::string> parse_conf_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.find(' ');
    if (sp == std::string::npos) {
      out[line] = "";
      continue;
    }
    std::string value = line.substr(sp + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out[line.substr(0, sp)] = value;
  }
  return out;
}

// Every string in V (keys and values), for whole-document searches.
void collect_strings(const YAML::Node& v, std::vector<std::string>& out) {
  if (v.IsScalar()) {
    out.push_back(v.Scalar());
  } else if (v.IsMap()) {
    for (const auto& entry : v) {
      collect_strings(entry.first, out);
      collect_strings(entry.second, out);
    }
  } else if (v.IsSequence()) {
    for (const auto& child : v) collect_strings(child, out);
  }
}

struct Bed {
  std::string root;
  YAML::Node compose;
  std::string testbed_text;
};

Bed load_bed() {
  Bed bed;
  bed.root = source_root();
  const std::string file = bed.root + "/docker-compose.yml";
  REQUIRE_MESSAGE(std::filesystem::exists(file), file << " is missing");
  try {
    bed.compose = load_yaml_file(file);
  } catch (const std::exception& e) {
    FAIL(std::string(e.what()));
  }
  REQUIRE_MESSAGE(bed.compose.IsMap(), "docker-compose.yml is not a mapping");
  bed.testbed_text = read_text(bed.root + "/scripts/testbed.sh");
  return bed;
}

// The list of strings at KEY in MAP.
std::vector<std::string> string_list(const YAML::Node& map, const std::string& key, const std::string& what) {
  const YAML::Node v = map[key];
  REQUIRE_MESSAGE(v.IsDefined(), what << ": no " << key);
  REQUIRE_MESSAGE(v.IsSequence(), what << "." << key << " must be a list (the exec form [\"…\", …])");
  std::vector<std::string> out;
  for (const auto& item : v) {
    REQUIRE_MESSAGE(item.IsScalar(), what << "." << key << ": every item must be a string, found " << YAML::Dump(item));
    out.push_back(item.Scalar());
  }
  return out;
}

}  // namespace

TEST_CASE("compose bed: five independent redis 7 masters, node N on 127.0.0.1:700N only") {
  const Bed bed = load_bed();
  const auto& doc = bed.compose;

  // The project name: compose-faults.sh reads it to pass -p and find volumes.
  const std::string project = scalar(doc, "name", "docker-compose.yml (compose-faults.sh uses its top-level name)");
  CHECK_MESSAGE((!project.empty() && project.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") ==
                                         std::string::npos),
                "project name '" << project << "' must be lower-case letters, digits, '_' or '-'");

  const YAML::Node services = doc["services"];
  REQUIRE_MESSAGE((services.IsDefined() && services.IsMap()), "no services");
  std::vector<std::string> names;
  for (const auto& entry : services) names.push_back(entry.first.Scalar());
  REQUIRE_MESSAGE(names.size() == kNodes, "exactly five services expected, found " << names.size());
  for (int n = 1; n <= kNodes; ++n) {
    CHECK_MESSAGE(names[static_cast<std::size_t>(n - 1)] == "node" + std::to_string(n),
                  "service " << n << " must be node" << n << " (in order), found " << names[static_cast<std::size_t>(n - 1)]);
  }

  // No replication anywhere in the file: Redlock needs independent masters.
  std::vector<std::string> strings;
  collect_strings(doc, strings);
  for (const auto& s : strings) {
    CHECK_MESSAGE(!contains(lower(s), "replicaof"), "replication is configured: '" << s << "'");
    CHECK_MESSAGE(!contains(lower(s), "slaveof"), "replication is configured: '" << s << "'");
  }

  const YAML::Node volumes = doc["volumes"];
  REQUIRE_MESSAGE((volumes.IsDefined() && volumes.IsMap()), "no top-level volumes");

  for (int n = 1; n <= kNodes; ++n) {
    const std::string node = "node" + std::to_string(n);
    CAPTURE(node);
    const YAML::Node svc = services[node];
    REQUIRE_MESSAGE((svc.IsDefined() && svc.IsMap()), node << " is missing or not a mapping");

    // Image: redis, major version 7.
    const std::string image = scalar(svc, "image", node);
    CHECK_MESSAGE(image.find('@') == std::string::npos, node << ": pin the image by tag, not digest: " << image);
    const auto colon = image.rfind(':');
    REQUIRE_MESSAGE((colon != std::string::npos && image.find('/', colon) == std::string::npos),
                    node << ": image needs an explicit tag: " << image);
    const std::string repo = image.substr(0, colon);
    const std::string tag = image.substr(colon + 1);
    CHECK_MESSAGE((repo == "redis" || repo == "library/redis" || repo == "docker.io/library/redis"),
                  node << ": image must be the official redis image: " << image);
    const std::string major = tag.substr(0, tag.find_first_of(".-"));
    CHECK_MESSAGE(major == "7", node << ": redis major version must be 7 (the local bed's redis-server 7.0): " << image);

    // Ports: exactly 127.0.0.1:700N -> 6379, nothing on other interfaces.
    const auto ports = string_list(svc, "ports", node);
    const std::string want_port = "127.0.0.1:" + std::to_string(kBasePort + n) + ":6379";
    CHECK_MESSAGE((ports == std::vector<std::string>{want_port} ||
                   ports == std::vector<std::string>{want_port + "/tcp"}),
                  node << ": ports must be exactly [\"" << want_port << "\"] (loopback only)");
    CHECK_MESSAGE(!svc["network_mode"].IsDefined(), node << ": network_mode would bypass the loopback-only ports");
    CHECK_MESSAGE(!svc["expose"].IsDefined(), node << ": expose is not needed");

    // Command: redis-server with every setting stated, no config file.
    const auto command = string_list(svc, "command", node + " (persistence must be stated explicitly)");
    REQUIRE_MESSAGE((!command.empty() && command[0] == "redis-server"),
                    node << ": command must start with redis-server");
    const Options options = parse_redis_args({command.begin() + 1, command.end()}, node + ".command");
    const std::string* protected_mode = find_option(options, "protected-mode");
    CHECK_MESSAGE((protected_mode != nullptr && *protected_mode == "no"), node << ": needs --protected-mode no");
    CHECK_MESSAGE(find_option(options, "bind") == nullptr,
                  node << ": no --bind inside the container (the port mapping does loopback-only)");
    if (const std::string* port = find_option(options, "port")) {
      CHECK_MESSAGE(*port == "6379", node << ": --port must be 6379 (the ports map to it)");
    }

    // restart "no", a healthcheck with redis-cli ping, its own volume at /data.
    CHECK_MESSAGE(scalar(svc, "restart", node) == "no", node << ": restart must be \"no\"");
    const YAML::Node healthcheck = svc["healthcheck"];
    REQUIRE_MESSAGE((healthcheck.IsDefined() && healthcheck.IsMap()), node << ": no healthcheck");
    const auto health = string_list(healthcheck, "test", node + ".healthcheck");
    CHECK_MESSAGE((health == std::vector<std::string>{"CMD", "redis-cli", "ping"} ||
                   health == std::vector<std::string>{"CMD-SHELL", "redis-cli ping"}),
                  node << ": healthcheck must be redis-cli ping");
    const auto vols = string_list(svc, "volumes", node);
    const std::string volume = node + "-data";
    CHECK_MESSAGE(vols == std::vector<std::string>{volume + ":/data"},
                  node << ": volumes must be [\"" << volume << ":/data\"] (its own named volume)");
    CHECK_MESSAGE(volumes[volume].IsDefined(), "top-level volumes lacks " << volume);
  }
  CHECK_MESSAGE(volumes.size() == kNodes, "top-level volumes must be node1-data..node5-data only");
}

TEST_CASE("compose bed: every node's persistence is testbed.sh's PERSISTENCE_ALWAYS") {
  const Bed bed = load_bed();

  // testbed.sh's marked line, read as text ...
  const auto always_words = bash_array(bed.testbed_text, "PERSISTENCE_ALWAYS");
  const Options always = parse_redis_args(always_words, "testbed.sh PERSISTENCE_ALWAYS");
  for (const char* key : {"appendonly", "appendfsync", "save"}) {
    REQUIRE_MESSAGE(find_option(always, key) != nullptr, "testbed.sh PERSISTENCE_ALWAYS does not state --" << key);
  }
  CHECK(*find_option(always, "appendonly") == "yes");
  CHECK(*find_option(always, "appendfsync") == "always");
  const auto none = parse_redis_args(bash_array(bed.testbed_text, "PERSISTENCE_NONE"), "testbed.sh PERSISTENCE_NONE");
  REQUIRE(find_option(none, "appendonly") != nullptr);
  CHECK(*find_option(none, "appendonly") == "no");
  // ... is the line the script really uses.
  CHECK_MESSAGE(contains(bed.testbed_text, "\"${PERSISTENCE_ALWAYS[@]}\""),
                "testbed.sh does not use PERSISTENCE_ALWAYS");

  // ... and what `testbed.sh config 1` says a node started with
  // --persistence always runs with (node 1 is down in a fresh state dir, so
  // this starts nothing and needs no redis).
  TempDir state;
  std::filesystem::create_directories(state.path() + "/node1");
  std::ofstream(state.path() + "/node1/persistence") << "always\n";
  Env env = current_environment();
  env["REDLOCK_TESTBED_DIR"] = state.path();
  const std::string bash = find_program("bash", env["PATH"]);
  REQUIRE_MESSAGE(!bash.empty(), "bash not found on PATH");
  const RunResult config = run({bash, bed.root + "/scripts/testbed.sh", "config", "1"}, env);
  REQUIRE_MESSAGE(config.exit_code == 0, "testbed.sh config 1 failed: " << config.err << config.out);
  CHECK(contains(config.out, "persistence always"));
  const auto conf = parse_conf_lines(config.out);
  for (const auto& [key, value] : always) {
    REQUIRE_MESSAGE(conf.count(key) == 1, "testbed.sh config 1 does not print " << key);
    CHECK_MESSAGE(conf.at(key) == value, "testbed.sh config 1: " << key << " is '" << conf.at(key)
                                                                 << "', PERSISTENCE_ALWAYS says '" << value << "'");
  }

  // Every compose node states exactly those settings, and nothing else but
  // --protected-mode and --port: the same redis config as the local bed.
  const YAML::Node services = bed.compose["services"];
  REQUIRE((services.IsDefined() && services.IsMap()));
  for (int n = 1; n <= kNodes; ++n) {
    const std::string node = "node" + std::to_string(n);
    CAPTURE(node);
    const YAML::Node svc = services[node];
    REQUIRE((svc.IsDefined() && svc.IsMap()));
    const auto command = string_list(svc, "command", node);
    REQUIRE(!command.empty());
    const Options options = parse_redis_args({command.begin() + 1, command.end()}, node + ".command");
    for (const auto& [key, value] : always) {
      const std::string* got = find_option(options, key);
      CHECK_MESSAGE(got != nullptr, node << ": persistence not stated: --" << key << " missing (testbed.sh says '"
                                         << value << "')");
      if (got != nullptr) {
        CHECK_MESSAGE(*got == value, node << ": --" << key << " is '" << *got
                                          << "' but testbed.sh --persistence always uses '" << value << "'");
      }
    }
    for (const auto& [key, value] : options) {
      const bool allowed = key == "protected-mode" || key == "port" || find_option(always, key) != nullptr;
      CHECK_MESSAGE(allowed, node << ": --" << key << " " << value
                                  << " is not in testbed.sh's PERSISTENCE_ALWAYS: the beds would differ");
    }
  }
}
