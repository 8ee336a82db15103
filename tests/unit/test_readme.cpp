// test_readme.cpp — the README's C++ example is the compiled one: the code
// block in README.md equals the marked lines of examples/readme.cpp.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string trim_indent(const std::string& s) {
  const auto at = s.find_first_not_of(' ');
  return at == std::string::npos ? std::string() : s.substr(at);
}

}  // namespace

TEST_CASE("the README's C++ block is examples/readme.cpp's marked code") {
  const char* root = std::getenv("REDLOCK_SOURCE_ROOT");
  REQUIRE_MESSAGE(root != nullptr, "REDLOCK_SOURCE_ROOT is not set (run through meson test)");
  std::vector<std::string> readme_block;
  bool in_block = false;
  for (const auto& line : lines_of(std::string(root) + "/README.md")) {
    if (line == "```cpp") {
      in_block = true;
    } else if (in_block && line == "```") {
      break;
    } else if (in_block) {
      readme_block.push_back(line);
    }
  }
  std::vector<std::string> example;
  bool marked = false;
  for (const auto& line : lines_of(std::string(root) + "/examples/readme.cpp")) {
    const std::string t = trim_indent(line);
    if (t == "// README:begin") {
      marked = true;
    } else if (t == "// README:end") {
      marked = false;
      example.emplace_back();  // blocks are separated by one blank line in the README
    } else if (marked) {
      example.push_back(t);
    }
  }
  if (!example.empty()) example.pop_back();
  for (auto& line : readme_block) line = trim_indent(line);
  REQUIRE(!readme_block.empty());
  CHECK(readme_block == example);
}
