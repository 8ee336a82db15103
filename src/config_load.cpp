// config_load.cpp — where a Config comes from outside the program: a JSON
// config file, a password file, REDLOCK_NODES; every error names the file or
// the variable, with the OS reason.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "config_text.hpp"
#include "redlock/config.hpp"

namespace redlock {
namespace {

using namespace detail::config_text;

std::string os_reason() { return std::error_code(errno, std::generic_category()).message(); }

// std::FILE rather than ifstream: only the C API reliably leaves errno set.
Result<std::string> read_file(const std::string& path) {
  struct Closer {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  const std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) return config_error(os_reason());
  std::string text;
  char buffer[4096];
  while (const auto n = std::fread(buffer, 1, sizeof buffer, file.get())) text.append(buffer, n);
  if (std::ferror(file.get())) return config_error(os_reason());
  return text;
}

}  // namespace

Result<std::string> read_password_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return in_context(quote(path), std::move(text).error());
  std::string password = text->substr(0, text->find_first_of("\r\n"));
  if (password.empty()) return config_error(cat(quote(path), ": empty password"));
  return password;
}

void apply_default_credentials(std::vector<NodeAddress>& nodes, const std::string& user, const std::string& password) {
  for (NodeAddress& node : nodes) {
    if (!node.password.empty()) continue;
    node.user = user;
    node.password = password;
  }
}

Result<Config> load_config_file(const std::string& path) {
  const auto context = cat("config file ", quote(path));
  auto text = read_file(path);
  if (!text) return in_context(context, std::move(text).error());
  auto config = parse_config_json(*text);
  if (!config) return in_context(context, std::move(config).error());
  return config;
}

Result<Config> config_from_env() {
  constexpr std::string_view variable = "REDLOCK_NODES";
  const char* value = std::getenv(variable.data());
  if (value == nullptr || *value == '\0') return config_error(cat(variable, ": not set"));
  auto nodes = parse_node_list(value);
  if (!nodes) return in_context(variable, std::move(nodes).error());
  Config config;
  config.nodes = std::move(*nodes);
  if (auto valid = validate_config(config); !valid) return in_context(variable, valid.error());
  return config;
}

}  // namespace redlock
