// test_compose_faults.cpp — scripts/compose-faults.sh: bad arguments exit 2
// naming the bad one (before docker is touched); without docker, its compose
// plugin or a reachable engine it exits 3 with a message naming docker; and,
// against a recording stand-in for the docker CLI (fake_docker.sh), each
// fault issues the docker commands it documents. No test here needs a
// Docker engine, and none is skipped when there is none.
#include <doctest/doctest.h>

#include "support.hpp"
#include "yaml_file.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace compose_test;

namespace {

struct Script {
  std::string root;
  std::string bash;
  std::string path;
  Env env;

  RunResult operator()(const std::vector<std::string>& args, const Env& with_env) const {
    std::vector<std::string> argv{bash, path};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, with_env, std::chrono::seconds(120));
  }
};

Script script() {
  Script s;
  s.root = source_root();
  s.env = current_environment();
  s.bash = find_program("bash", s.env["PATH"]);
  REQUIRE_MESSAGE(!s.bash.empty(), "bash not found on PATH");
  s.path = s.root + "/scripts/compose-faults.sh";
  REQUIRE_MESSAGE(std::filesystem::exists(s.path), s.path << " is missing");
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

// A PATH directory holding a few everyday tools but no docker: "docker is
// not installed at all".
void make_docker_free_bin(const std::string& dir, const std::string& real_path) {
  std::filesystem::create_directories(dir);
  for (const char* tool : {"bash", "sh", "env", "timeout", "cat", "sed", "grep", "head", "tr", "sleep",
                           "mktemp", "rm", "dirname", "basename", "find", "awk"}) {
    const std::string found = find_program(tool, real_path);
    if (!found.empty()) std::filesystem::create_symlink(found, dir + "/" + tool);
  }
  REQUIRE_FALSE(std::filesystem::exists(dir + "/docker"));
}

void write_executable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), 0755) == 0);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("compose-faults.sh: bad arguments exit 2 and name the bad one, before docker is touched") {
  const Script faults = script();
  TempDir tmp;
  // A docker that records calls: there must be none for bad arguments.
  const std::string bin = tmp.path() + "/bin";
  std::filesystem::create_directories(bin);
  write_executable(bin + "/docker", "#!/bin/sh\nexec '" + faults.bash + "' '" + faults.root +
                                        "/tests/compose/fake_docker.sh' \"$@\"\n");
  const std::string log = tmp.path() + "/docker.log";
  Env recorded = faults.env;
  recorded["PATH"] = bin + ":" + faults.env.at("PATH");
  recorded["FAKE_DOCKER_LOG"] = log;
  Env no_docker = faults.env;
  no_docker["PATH"] = tmp.path() + "/nodocker";
  make_docker_free_bin(no_docker["PATH"], faults.env.at("PATH"));

  struct Case {
    std::vector<std::string> args;
    std::string named;  // what the message must name
  };
  const std::vector<Case> cases = {
      {{}, "missing command"},
      {{"frobnicate", "1"}, "'frobnicate'"},
      {{"kill"}, "kill needs a node number"},
      {{"kill", "9"}, "'9'"},
      {{"pause", "0"}, "'0'"},
      {{"unpause", "x1"}, "'x1'"},
      {{"restart", "--all"}, "'--all'"},
      {{"wipe", "2", "3"}, "'3'"},
      {{"wipe", "12"}, "'12'"},
      {{"status", "extra"}, "'extra'"},
      {{"KILL", "1"}, "'KILL'"},
  };
  for (const auto& c : cases) {
    for (const Env* env : std::vector<const Env*>{&faults.env, &recorded, &no_docker}) {
      CAPTURE(join(c.args));
      const RunResult r = faults(c.args, *env);
      CHECK_MESSAGE(r.exit_code == 2, "exit " << r.exit_code << ", stderr: " << r.err);
      CHECK_MESSAGE(contains(r.err, c.named), "stderr does not name " << c.named << ": " << r.err);
      CHECK(contains(r.err, "usage:"));
      CHECK(r.out.empty());
    }
  }
  CHECK_MESSAGE(!std::filesystem::exists(log), "docker was called for a bad argument: " << read_text(log));

  const RunResult help = faults({"--help"}, no_docker);
  CHECK(help.exit_code == 0);
  CHECK(contains(help.err, "usage:"));
}

TEST_CASE("compose-faults.sh: no docker, no compose or no engine is exit 3 with a message naming docker") {
  const Script faults = script();
  TempDir tmp;

  SUBCASE("docker not installed at all") {
    Env env = faults.env;
    env["PATH"] = tmp.path() + "/nodocker";
    make_docker_free_bin(env["PATH"], faults.env.at("PATH"));
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"status"}, {"kill", "1"}, {"wipe", "5"}, {"pause", "3"}}) {
      CAPTURE(join(args));
      const RunResult r = faults(args, env);
      CHECK_MESSAGE(r.exit_code == 3, "exit " << r.exit_code << ", stderr: " << r.err);
      CHECK_MESSAGE(contains(r.err, "docker not found"), r.err);
      CHECK(contains(r.err, "scripts/testbed.sh"));  // points at the local bed
      CHECK(r.out.empty());
    }
  }

  SUBCASE("no engine at DOCKER_HOST (whatever this machine has)") {
    Env env = faults.env;
    env["DOCKER_HOST"] = "unix://" + tmp.path() + "/no-engine.sock";
    env.erase("DOCKER_CONTEXT");
    const RunResult r = faults({"status"}, env);
    CHECK_MESSAGE(r.exit_code == 3, "exit " << r.exit_code << ", stderr: " << r.err);
    if (find_program("docker", env["PATH"]).empty()) {
      CHECK_MESSAGE(contains(r.err, "docker not found"), r.err);
    } else {
      CHECK_MESSAGE(contains(r.err, "Docker engine is not reachable"), r.err);
      CHECK_MESSAGE(contains(r.err, "no-engine.sock"), "the docker error is passed on: " << r.err);
    }
  }

  SUBCASE("this machine as it is") {
    const RunResult r = faults({"status"}, faults.env);
    if (r.exit_code == 0) {
      MESSAGE("a Docker engine and compose are reachable here: status ran");
    } else {
      CHECK_MESSAGE(r.exit_code == 3, "exit " << r.exit_code << ", stderr: " << r.err);
      CHECK_MESSAGE(contains(r.err, "docker"), r.err);
    }
  }

  SUBCASE("docker CLI without compose, and docker whose engine is down (stand-in)") {
    const std::string bin = tmp.path() + "/bin";
    std::filesystem::create_directories(bin);
    write_executable(bin + "/docker", "#!/bin/sh\nexec '" + faults.bash + "' '" + faults.root +
                                          "/tests/compose/fake_docker.sh' \"$@\"\n");
    Env env = faults.env;
    env["PATH"] = bin + ":" + tmp.path() + "/nodocker";
    make_docker_free_bin(tmp.path() + "/nodocker", faults.env.at("PATH"));
    env["FAKE_DOCKER_LOG"] = tmp.path() + "/docker.log";

    env["FAKE_DOCKER_COMPOSE"] = "missing";
    RunResult r = faults({"restart", "2"}, env);
    CHECK_MESSAGE(r.exit_code == 3, "exit " << r.exit_code << ", stderr: " << r.err);
    CHECK_MESSAGE(contains(r.err, "docker compose is not available"), r.err);

    env.erase("FAKE_DOCKER_COMPOSE");
    env["FAKE_DOCKER_ENGINE"] = "down";
    r = faults({"kill", "4"}, env);
    CHECK_MESSAGE(r.exit_code == 3, "exit " << r.exit_code << ", stderr: " << r.err);
    CHECK_MESSAGE(contains(r.err, "Docker engine is not reachable"), r.err);
    CHECK_MESSAGE(contains(r.err, "Cannot connect to the Docker daemon"), r.err);

    // Nothing but the checks ran: no compose action was attempted.
    for (const auto& line : read_lines(env["FAKE_DOCKER_LOG"])) {
      CHECK_MESSAGE((line.rfind("info|", 0) == 0 || line == "compose|version"), "unexpected docker call: " << line);
    }
  }
}

TEST_CASE("compose-faults.sh: each fault issues its docker compose commands (recording stand-in)") {
  const Script faults = script();
  const YAML::Node compose = load_yaml_file(faults.root + "/docker-compose.yml");
  REQUIRE(compose.IsMap());
  const std::string project = scalar(compose, "name", "docker-compose.yml");
  TempDir tmp;
  const std::string bin = tmp.path() + "/bin";
  std::filesystem::create_directories(bin);
  write_executable(bin + "/docker", "#!/bin/sh\nexec '" + faults.bash + "' '" + faults.root +
                                        "/tests/compose/fake_docker.sh' \"$@\"\n");
  Env env = faults.env;
  env["PATH"] = bin + ":" + faults.env.at("PATH");
  const std::string log = tmp.path() + "/docker.log";
  env["FAKE_DOCKER_LOG"] = log;

  const std::string c = "compose|-f|" + faults.root + "/docker-compose.yml|-p|" + project + "|";
  const std::vector<std::string> checks = {"info|--format|{{.ServerVersion}}", "compose|version"};
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> calls;  // after the checks
  };
  const std::vector<Case> cases = {
      {{"kill", "3"}, {c + "kill|-s|SIGKILL|node3"}},
      {{"pause", "2"}, {c + "pause|node2"}},
      {{"unpause", "2"}, {c + "unpause|node2"}},
      {{"restart", "4"}, {c + "restart|node4", c + "exec|-T|node4|redis-cli|ping"}},
      {{"wipe", "5"},
       {"volume|ls|-q|--filter|label=com.docker.compose.project=" + project +
            "|--filter|label=com.docker.compose.volume=node5-data",
        c + "rm|-s|-f|node5", "volume|inspect|labelled-node5-data", "volume|rm|labelled-node5-data",
        c + "up|-d|--no-deps|node5", c + "exec|-T|node5|redis-cli|ping"}},
      {{"status"}, {c + "ps|--all"}},
  };
  for (const auto& k : cases) {
    CAPTURE(join(k.args));
    std::filesystem::remove(log);
    // Run from another directory: the script finds the compose file itself.
    const RunResult r = faults(k.args, env);
    CHECK_MESSAGE(r.exit_code == 0, "exit " << r.exit_code << ", stderr: " << r.err);
    std::vector<std::string> want = checks;
    want.insert(want.end(), k.calls.begin(), k.calls.end());
    const auto got = read_lines(log);
    CHECK(got == want);
  }
}
