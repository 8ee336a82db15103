// demo_input.cpp — see demo_input.hpp.
#include "demo_input.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace redlock::demo {
namespace {

using nlohmann::json;
using chaos::Event;
using chaos::EventType;

// A field problem inside one line; add() prefixes the source and line.
struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const json& field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) throw FieldError(std::string("missing field \"") + name + "\"");
  return *it;
}

std::int64_t integer(const json& j, const char* name) {
  const json& v = field(j, name);
  if (!v.is_number_integer()) throw FieldError(std::string("field \"") + name + "\" is not an integer");
  return v.get<std::int64_t>();
}

// us_to_ns converts a unix-µs field; a negative time means a broken record.
std::int64_t time_ns(const json& j, const char* name) {
  const std::int64_t us = integer(j, name);
  if (us < 0) throw FieldError(std::string("field \"") + name + "\" is negative");
  return us * 1000;
}

bool boolean(const json& j, const char* name) {
  const json& v = field(j, name);
  if (!v.is_boolean()) throw FieldError(std::string("field \"") + name + "\" is not true or false");
  return v.get<bool>();
}

// text is a string field, or "" when absent or null.
std::string text(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) throw FieldError(std::string("field \"") + name + "\" is not a string");
  return it->get<std::string>();
}

bool present(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && !it->is_null();
}

Event event(EventType type, int client, std::int64_t t, std::string resource) {
  Event e;
  e.type = type;
  e.client = client;
  e.t = t;
  e.resource = std::move(resource);
  return e;
}

Event fault(std::int64_t start, std::int64_t end, std::string what) {
  if (end < start) throw FieldError("fault \"" + what + "\" ends before it starts");
  Event e = event(EventType::fault, -1, start, "");
  e.deadline = end;
  e.error = std::move(what);
  return e;
}

}  // namespace

void DemoInput::push(Event e) {
  first_ns = std::min(first_ns, e.t);
  last_ns = std::max(last_ns, e.type == EventType::fault ? e.deadline : e.t);
  events.push_back(std::move(e));
}

void DemoInput::add(const std::string& text_in, const std::string& source, int worker) {
  std::size_t line_no = 0, pos = 0;
  while (pos < text_in.size()) {
    std::size_t nl = text_in.find('\n', pos);
    if (nl == std::string::npos) nl = text_in.size();
    const std::string line = text_in.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      add_line(line, worker);
    } catch (const std::exception& e) {
      throw InputError(source + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
}

void DemoInput::finish() {
  std::string only;
  bool one = true;
  for (const auto& e : events) {
    if (e.type != EventType::invoke) continue;
    if (!only.empty() && e.resource != only) one = false;  // several: leave the writes alone
    only = e.resource;
  }
  if (one)
    for (auto& e : events)
      if (e.type == EventType::write && e.resource.empty()) e.resource = only;

  // The lease deadline check.
  auto deadline_of = [&](const std::string& token) -> std::optional<std::int64_t> {
    auto it = leases.find(token);
    return it == leases.end() ? std::nullopt : it->second.deadline_mono_us;
  };
  late_issued_writes = unmatched_writes = 0;
  closest_issue_us.reset();
  for (auto& w : issued) {
    w.deadline_mono_us = deadline_of(w.token);
    if (!w.deadline_mono_us || !w.issued_mono_us) {
      ++unmatched_writes;
      continue;
    }
    const std::int64_t slack = *w.deadline_mono_us - *w.issued_mono_us;
    if (slack < 0) {
      ++late_issued_writes;
      ++leases[w.token].late_writes;
    } else if (!closest_issue_us || slack < *closest_issue_us) {
      closest_issue_us = slack;
    }
  }
  delayed_in_time = delayed_arrived_late = 0;
  for (auto& d : delayed) {
    d.deadline_mono_us = deadline_of(d.token);
    if (!d.deadline_mono_us) continue;
    if (d.issued_mono_us <= *d.deadline_mono_us) {
      ++delayed_in_time;
      if (d.delivered_mono_us > *d.deadline_mono_us) ++delayed_arrived_late;
    }
  }
  stall_kills_in_time = stall_kills_late = 0;
  for (auto& st : stall_records) {
    st.deadline_mono_us = deadline_of(st.token);
    if (st.deadline_mono_us && st.cmd_exit_mono_us && *st.cmd_exit_mono_us <= *st.deadline_mono_us)
      ++stall_kills_in_time;
    else
      ++stall_kills_late;
  }
}

void DemoInput::add_line(const std::string& line, int worker) {
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) throw FieldError("not a JSON line");
  if (!j.is_object()) throw FieldError("not a JSON object");

  if (j.contains("command")) {  // a `redlock run --json` result
    if (text(j, "command") != "run") throw FieldError("a \"command\" other than \"run\"");
    if (worker < 0) throw FieldError("a run result, but no --worker was given for this file");
    const std::string resource = text(j, "resource");
    const std::int64_t started = time_ns(j, "started_at_us");
    ++runs;
    push(event(EventType::invoke, worker, started, resource));
    if (boolean(j, "acquired")) {
      Event ok = event(EventType::ok, worker, time_ns(j, "acquired_at_us"), resource);
      ok.deadline = time_ns(j, "deadline_at_us");
      ok.latency_us = integer(j, "acquire_us");
      ok.token = text(j, "token");
      const std::int64_t deadline = ok.deadline;
      push(std::move(ok));
      RunLease& lease = leases[text(j, "token")];
      lease.worker = worker;
      if (present(j, "deadline_mono_us")) lease.deadline_mono_us = integer(j, "deadline_mono_us");
      if (present(j, "lost") && present(j, "child_signal")) ++killed_commands;
      if (present(j, "released_at_us")) {
        Event rel = event(EventType::release, worker, time_ns(j, "released_at_us"), resource);
        rel.released = true;
        if (rel.t > deadline) ++overdue_holds;
        push(std::move(rel));
      } else {
        ++overdue_holds;
      }
      if (present(j, "lost")) ++lost_leases;
    } else {
      const std::int64_t waited = present(j, "acquire_us") ? integer(j, "acquire_us") : 0;
      Event fail = event(EventType::fail, worker, started + waited * 1000, resource);
      fail.latency_us = waited;
      fail.code = text(j, "code");
      fail.error = text(j, "error");
      push(std::move(fail));
    }
  } else if (j.contains("what")) {  // a fault interval
    const std::string what = text(j, "what");
    if (what.empty()) throw FieldError("field \"what\" is empty");
    push(fault(time_ns(j, "start_us"), time_ns(j, "end_us"), what));
    ++faults;
  } else if (j.contains("kind")) {  // a line of one of fenced_increment's helpers
    const std::string kind = text(j, "kind");
    const int client = present(j, "worker") ? static_cast<int>(integer(j, "worker")) : worker;
    if (client < 0) throw FieldError("a \"" + kind + "\" line without a worker, and no --worker was given for this file");
    if (kind == "stall") {
      Stall st;
      st.worker = client;
      st.token = text(j, "token");
      if (present(j, "cmd_exit_mono_us")) st.cmd_exit_mono_us = integer(j, "cmd_exit_mono_us");
      push(fault(time_ns(j, "stall_start_us"), time_ns(j, "stall_end_us"),
                 "holder stalled (worker " + std::to_string(client) + ")"));
      stall_records.push_back(std::move(st));
      ++stalls;
    } else if (kind == "delayed_write") {
      DelayedWrite d;
      d.worker = client;
      d.token = text(j, "token");
      d.fence = static_cast<std::uint64_t>(integer(j, "fence"));
      d.issued_mono_us = integer(j, "t_mono_us");
      d.delivered_mono_us = integer(j, "delivered_mono_us");
      if (d.delivered_mono_us < d.issued_mono_us) throw FieldError("delivered before it was issued");
      const std::int64_t issued_ns = time_ns(j, "t_us"), delivered = time_ns(j, "delivered_us");
      push(fault(issued_ns, delivered, "write delayed (worker " + std::to_string(client) + ")"));
      if (present(j, "accepted")) {
        d.accepted = boolean(j, "accepted");
        d.highest = static_cast<std::uint64_t>(integer(j, "highest"));
        if (*d.accepted) {
          Event w = event(EventType::write, client, delivered, text(j, "resource"));
          w.read = integer(j, "read");
          w.wrote = integer(j, "wrote");
          push(std::move(w));
          ++accepted_writes;
          ++delayed_accepted;
        } else {
          ++rejected_writes;
          ++delayed_rejected;
        }
      } else {
        d.error = text(j, "error");
        ++delayed_failed;
      }
      issued.push_back({client, d.token, d.issued_mono_us, true, std::nullopt});
      delayed.push_back(std::move(d));
    } else {
      throw FieldError("unknown \"kind\": \"" + kind + "\"");
    }
  } else if (j.contains("accepted")) {  // a fenced_increment write
    const int client = present(j, "worker") ? static_cast<int>(integer(j, "worker")) : worker;
    if (client < 0) throw FieldError("a write without a worker, and no --worker was given for this file");
    const std::int64_t t = time_ns(j, "t_us");
    issued.push_back({client, text(j, "token"),
                      present(j, "t_mono_us") ? std::optional<std::int64_t>(integer(j, "t_mono_us")) : std::nullopt,
                      false, std::nullopt});
    if (boolean(j, "accepted")) {
      Event w = event(EventType::write, client, t, text(j, "resource"));
      w.read = integer(j, "read");
      w.wrote = integer(j, "wrote");
      push(std::move(w));
      ++accepted_writes;
    } else {
      ++rejected_writes;
    }
    if (present(j, "stalled") && boolean(j, "stalled")) {
      ++stalls;
      push(fault(time_ns(j, "stall_start_us"), time_ns(j, "stall_end_us"),
                 "holder stalled (worker " + std::to_string(client) + ")"));
    }
  } else {
    throw FieldError(
        "neither a run result (\"command\"), a write (\"accepted\"), a helper's line (\"kind\") nor a fault "
        "(\"what\")");
  }
}

}  // namespace redlock::demo
