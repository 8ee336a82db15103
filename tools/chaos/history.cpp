// history.cpp — see history.hpp. JSON in and out with nlohmann::json; the
// reader is strict about what the checker relies on (a missing "deadline"
// would silently make a zero-length hold window) and lenient about the rest
// (unknown keys are ignored, so workers may add fields later).
#include "history.hpp"

#include <nlohmann/json.hpp>
#include <time.h>

#include <stdexcept>
#include <string_view>

namespace redlock::chaos {
namespace {

using nlohmann::json;

constexpr const char* type_name(EventType t) {
  switch (t) {
    case EventType::invoke: return "invoke";
    case EventType::ok: return "ok";
    case EventType::fail: return "fail";
    case EventType::write: return "write";
    case EventType::release: return "release";
    case EventType::fault: return "fault";
    case EventType::lost: return "lost";
    case EventType::read: return "read";
    case EventType::elected: return "elected";
    case EventType::deposed: return "deposed";
    case EventType::resigned: return "resigned";
    case EventType::fenced: return "fenced";
  }
  return "?";
}

bool type_from_name(std::string_view s, EventType& out) {
  for (auto t : {EventType::invoke, EventType::ok, EventType::fail, EventType::write, EventType::release,
                 EventType::fault, EventType::lost, EventType::read, EventType::elected, EventType::deposed,
                 EventType::resigned, EventType::fenced}) {
    if (s == type_name(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

// A field error is thrown inside one line's parse and turned into
// "line N: …" by parse_history; nothing escapes parse_history.
struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// get_int reads an integral field. Floats are refused: every number in the
// contract is an integer (ns, µs, counter values), and 1.5e18 ns would lose
// precision silently.
bool get_int(const json& o, const char* key, std::int64_t& out, bool required) {
  auto it = o.find(key);
  if (it == o.end()) {
    if (required) throw FieldError(std::string("missing \"") + key + "\"");
    return false;
  }
  if (it->is_number_unsigned()) {
    if (it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      throw FieldError(std::string("\"") + key + "\" is out of range");
    out = static_cast<std::int64_t>(it->get<std::uint64_t>());
    return true;
  }
  if (!it->is_number_integer()) throw FieldError(std::string("\"") + key + "\" is not an integer");
  out = it->get<std::int64_t>();
  return true;
}

void get_string(const json& o, const char* key, std::string& out) {
  auto it = o.find(key);
  if (it == o.end()) return;
  if (!it->is_string()) throw FieldError(std::string("\"") + key + "\" is not a string");
  out = it->get<std::string>();
}

void get_bool(const json& o, const char* key, bool& out) {
  auto it = o.find(key);
  if (it == o.end()) return;
  if (!it->is_boolean()) throw FieldError(std::string("\"") + key + "\" is not a boolean");
  out = it->get<bool>();
}

Event event_from_json(const json& o) {
  if (!o.is_object()) throw FieldError("not a JSON object");
  Event e;
  auto type = o.find("type");
  if (type == o.end() || !type->is_string()) throw FieldError("missing \"type\"");
  if (!type_from_name(type->get_ref<const std::string&>(), e.type))
    throw FieldError("unknown type \"" + type->get<std::string>() + "\"");
  get_int(o, "t", e.t, true);
  if (e.type == EventType::fault) {
    get_int(o, "end", e.deadline, true);
    get_string(o, "what", e.error);
    return e;
  }
  std::int64_t client = 0;
  get_int(o, "client", client, true);
  if (client < INT32_MIN || client > INT32_MAX) throw FieldError("\"client\" is out of range");
  e.client = static_cast<int>(client);
  get_string(o, "resource", e.resource);
  get_string(o, "token", e.token);
  get_string(o, "code", e.code);
  get_string(o, "error", e.error);
  get_int(o, "latency_us", e.latency_us, false);
  // The checker builds hold windows from "deadline", replays the counter
  // from "read"/"wrote" and looks for torn reads in "read"/"reread":
  // without them its verdict would be meaningless.
  // An election's checks rest on the term of every event, the deadline
  // of every leadership and the send and answer times of every store write.
  const bool leadership = e.type == EventType::elected || e.type == EventType::deposed ||
                          e.type == EventType::resigned;
  get_int(o, "deadline", e.deadline, e.type == EventType::ok || leadership);
  get_int(o, "term", e.term, leadership || e.type == EventType::fenced);
  get_int(o, "beat", e.beat, false);
  get_int(o, "checked", e.checked, e.type == EventType::fenced);
  get_int(o, "replied", e.replied, false);
  get_int(o, "highest", e.highest, false);
  get_bool(o, "accepted", e.accepted);
  get_int(o, "read", e.read, e.type == EventType::write || e.type == EventType::read);
  get_int(o, "wrote", e.wrote, e.type == EventType::write);
  get_int(o, "reread", e.reread, e.type == EventType::read);
  get_bool(o, "released", e.released);
  get_bool(o, "shared", e.shared);  // absent (a writer, or a history from before read locks): false
  if (auto it = o.find("outcomes"); it != o.end()) {
    if (!it->is_array()) throw FieldError("\"outcomes\" is not an array");
    for (const auto& s : *it) {
      if (!s.is_string()) throw FieldError("\"outcomes\" holds a non-string");
      e.outcomes.push_back(s.get<std::string>());
    }
  }
  return e;
}

// parse_reason drops nlohmann's "[json.exception.parse_error.101] parse error
// at line 1, column 5: " prefix: its "line 1" is the line inside the single
// line we handed it, which would contradict our own line number.
std::string parse_reason(const json::parse_error& e) {
  std::string what = e.what();
  auto col = what.find("column ");
  auto colon = col == std::string::npos ? std::string::npos : what.find(": ", col);
  std::string rest = colon == std::string::npos ? what : what.substr(colon + 2);
  return "column " + std::to_string(e.byte) + ": invalid JSON: " + rest;
}

}  // namespace

std::string to_json_line(const Event& e) {
  json o;
  o["type"] = type_name(e.type);
  if (e.type == EventType::fault) {
    o["t"] = e.t;
    o["end"] = e.deadline;
    o["what"] = e.error;
  } else {
    o["client"] = e.client;
    o["t"] = e.t;
    o["resource"] = e.resource;
    switch (e.type) {
      case EventType::ok:
        o["token"] = e.token;
        o["deadline"] = e.deadline;
        o["latency_us"] = e.latency_us;
        if (e.shared) o["shared"] = true;  // a writer's line stays as it was before read locks
        break;
      case EventType::fail:
        o["latency_us"] = e.latency_us;
        o["code"] = e.code;
        o["error"] = e.error;
        o["outcomes"] = e.outcomes;
        break;
      case EventType::write:
        o["read"] = e.read;
        o["wrote"] = e.wrote;
        break;
      case EventType::read:
        o["read"] = e.read;
        o["reread"] = e.reread;
        break;
      case EventType::release: o["released"] = e.released; break;
      case EventType::lost: o["error"] = e.error; break;
      case EventType::elected:
      case EventType::deposed:
      case EventType::resigned:
        o["term"] = e.term;
        o["deadline"] = e.deadline;
        if (!e.error.empty()) o["error"] = e.error;
        break;
      case EventType::fenced:
        o["term"] = e.term;
        o["beat"] = e.beat;
        o["checked"] = e.checked;
        if (e.error.empty()) {
          o["replied"] = e.replied;
          o["accepted"] = e.accepted;
          o["highest"] = e.highest;
        } else {
          o["error"] = e.error;
        }
        break;
      default: break;
    }
  }
  // Error texts come from servers and sockets: invalid UTF-8 is replaced
  // rather than thrown, so a strange reply can never kill a worker.
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<Event> parse_history(const std::string& text, std::string& error) {
  error.clear();
  std::vector<Event> out;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // empty line
    try {
      out.push_back(event_from_json(json::parse(line)));
    } catch (const json::parse_error& e) {
      error = "line " + std::to_string(line_no) + ", " + parse_reason(e);
    } catch (const std::exception& e) {  // FieldError, or a json type_error
      error = "line " + std::to_string(line_no) + ": " + e.what();
    }
    if (!error.empty()) return {};
  }
  return out;
}

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

}  // namespace redlock::chaos
