// config_keys.hpp — the JSON config keys as documentation, from the one
// table that parses them (src/config_json.cpp).
#pragma once

#include <string>

namespace redlock::detail {

// config_keys_markdown: docs/config.md's table of keys — one row per key
// parse_config_json accepts, in the table's order: name, type, default
// (read from a default Options where it has one) and meaning.
std::string config_keys_markdown();

}  // namespace redlock::detail
