// yaml_file.hpp — docker-compose.yml read with yaml-cpp, as Compose reads it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace compose_test {

// load_yaml parses TEXT (one YAML document) with yaml-cpp and resolves merge
// keys (`<<: *anchor`, or `<<: [*a, *b]`), which yaml-cpp 0.7 leaves as an
// ordinary key named "<<" but Compose applies: a mapping's own keys win over
// merged ones, and an earlier merged mapping over a later one. Duplicate keys
// in one mapping are an error, as they are for Compose. The result shares no
// mutable state with the caller. Throws std::runtime_error
// "WHERE: line L, column C: what is wrong" (yaml-cpp's message and position
// for syntax errors) and never returns a partial document.
YAML::Node load_yaml(const std::string& text, const std::string& where);

// load_yaml_file reads the file at PATH and returns load_yaml(its text, PATH);
// an unreadable file is a std::runtime_error naming PATH too.
YAML::Node load_yaml_file(const std::string& path);

}  // namespace compose_test
