// escape.hpp — how `redlock` prints bytes it does not control: resource
// names (any bytes but NUL), tokens and text read from the masters, error
// messages that carry them. One escaped form, reversible, used by the text
// output and by JSON for strings that are not UTF-8 (docs/cli.md, "Names
// and other bytes in the output"):
//
//   \\      a backslash
//   \xHH    a byte (two lowercase hex digits) that is not part of valid
//           UTF-8, or that belongs to a control character: C0 (0x00-0x1f),
//           DEL, C1 (U+0080-U+009F), or a bidirectional formatting
//           character (U+061C, U+200E-F, U+202A-E, U+2066-9) — every byte
//           of its encoding
//   \"      a double quote, inside quote()'s quotes only
//
// Everything else is copied as it is, so a printable UTF-8 name reads the
// same as before and nothing printed can move the cursor, recolour the
// terminal or reorder the line.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace redlock::cli {

// escaped returns `s` in the escaped form (no quotes around it).
std::string escaped(std::string_view s);

// quote renders a user-given value or a name in a message: the escaped form
// between double quotes, a quote inside written \".
std::string quote(std::string_view s);

// terminal_safe is the backstop for a whole line about to be written: only
// the control and non-UTF-8 bytes as \xHH, backslashes left alone (the
// line's parts were escaped already; what was is unchanged).
std::string terminal_safe(std::string_view s);

// is_utf8: `s` is valid UTF-8 (no overlong forms, surrogates, or code
// points above U+10FFFF).
bool is_utf8(std::string_view s);

// printable_json returns `j` with every string that is not valid UTF-8
// replaced by its escaped form, so that dump() cannot throw; valid strings
// are unchanged (JSON's own escapes cover their control characters).
nlohmann::json printable_json(nlohmann::json j);

// put_name sets out[key] to the name `bytes`; when they are not valid UTF-8,
// out[key] is their escaped form and out[key + "_hex"] every byte in hex,
// so a program gets the exact name back either way.
void put_name(nlohmann::json& out, const std::string& key, std::string_view bytes);

}  // namespace redlock::cli
