// support.hpp — small helpers shared by the compose tests.
#pragma once

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace compose_test {

// The source tree (REDLOCK_SOURCE_ROOT, set by meson test), canonical.
inline std::string source_root() {
  const char* root = std::getenv("REDLOCK_SOURCE_ROOT");
  REQUIRE_MESSAGE(root != nullptr, "REDLOCK_SOURCE_ROOT is not set (run through meson test)");
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(root, ec);
  REQUIRE_MESSAGE(!ec, "REDLOCK_SOURCE_ROOT=" << root << ": " << ec.message());
  return canonical.string();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The scalar at KEY in the mapping MAP; a failed REQUIRE naming WHAT and KEY
// if it is missing or not a scalar.
inline std::string scalar(const YAML::Node& map, const std::string& key, const std::string& what) {
  const YAML::Node v = map[key];
  REQUIRE_MESSAGE((v.IsDefined() && v.IsScalar()), what << ": no " << key);
  return v.Scalar();
}

}  // namespace compose_test
