// yaml_subset.hpp — a reader for the small subset of YAML that
// docker-compose.yml is written in, so the compose test needs no YAML library.
//
// Accepted (everything else is an error naming the line, never a guess):
//   - block mappings, indented with spaces, one `key: value` per line; keys are
//     plain or quoted scalars; duplicate keys are errors;
//   - block sequences (`- value`, also at the key's own indentation), whose
//     items are scalars, flow collections or nested blocks;
//   - flow collections on one line: `[a, "b", 'c']`, `{}`, `{k: v}`;
//   - scalars: double-quoted (escapes \" \\ \/ \b \f \n \r \t \0 \xXX \uXXXX),
//     single-quoted ('' for '), or plain; plain scalars resolve as YAML 1.2's
//     core schema: null/Null/NULL/~ → null, true/false (3 spellings) → bool,
//     decimal integers → number, anything else → string;
//   - comments (`#` at a line start or after whitespace), blank lines.
// Rejected: tabs in indentation, anchors (&), aliases (*), tags (!), block
// scalars (| >), multi-line plain or quoted scalars, flow collections over
// several lines, document markers (--- ...), directives (%), complex keys (?),
// mappings written inside sequence items (`- key: value`), and the YAML 1.1
// booleans yes/no/on/off/y/n unquoted (parsers disagree on them: quote them).
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace yaml_subset {

struct Error : std::runtime_error {
  Error(int line, const std::string& message);
  int line;
};

// Parses TEXT (one YAML document); mappings keep their key order.
nlohmann::ordered_json parse(const std::string& text);

// Reads and parses the file at PATH; errors are prefixed with PATH.
nlohmann::ordered_json parse_file(const std::string& path);

}  // namespace yaml_subset
