// support.hpp — small helpers shared by the compose tests.
#pragma once

#include <doctest/doctest.h>

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

}  // namespace compose_test
