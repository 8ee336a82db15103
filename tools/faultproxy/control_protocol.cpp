// control_protocol.cpp — see control_protocol.hpp.
#include "faultproxy/control_protocol.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

#include "faultproxy/faults.hpp"
#include "faultproxy/listener.hpp"
#include "faultproxy/proxy.hpp"

namespace faultproxy {
namespace {

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    std::size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) words.push_back(line.substr(i, j - i));
    i = j;
  }
  return words;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

std::string listener_names(const std::vector<Listener*>& all) {
  std::string out;
  for (const Listener* l : all) {
    if (!out.empty()) out += ", ";
    out += std::to_string(l->index()) + "=" + l->name();
  }
  return out;
}

// resolve_listeners resolves "*", an index or an "ADDR:PORT" name; nullopt (and *err)
// when nothing matches.
std::optional<std::vector<Listener*>> resolve_listeners(const std::vector<Listener*>& all, std::string_view sel,
                                             std::string* err) {
  if (sel == "*") return all;
  std::size_t index = 0;
  auto [end, ec] = std::from_chars(sel.data(), sel.data() + sel.size(), index);
  const bool numeric = ec == std::errc() && end == sel.data() + sel.size();
  for (Listener* l : all) {
    if ((numeric && l->index() == index) || l->name() == sel) return std::vector<Listener*>{l};
  }
  *err = "unknown listener " + quote(sel) + " (listeners: " + listener_names(all) + ", or *)";
  return std::nullopt;
}

std::string err(const std::string& message) { return "ERR " + message; }

std::string cmd_set(Proxy& proxy, const std::vector<std::string_view>& w) {
  if (w.size() < 3) return err("SET needs a listener and at least one key=value: SET <listener|*> key=value ...");
  std::string e;
  auto targets = resolve_listeners(proxy.listeners(), w[1], &e);
  if (!targets) return err(e);
  // Validate every token against every target before changing anything, so
  // a typo in the third key does not leave the first two applied.
  bool reset = false;
  std::vector<Faults> updated;
  for (Listener* l : *targets) {
    Faults f = l->faults();
    for (std::size_t i = 2; i < w.size(); ++i) {
      if (auto problem = apply_setting(f, w[i], &reset)) return err(*problem);
    }
    updated.push_back(f);
  }
  for (std::size_t i = 0; i < targets->size(); ++i) (*targets)[i]->set_faults(updated[i]);
  if (reset) {
    for (Listener* l : *targets) l->reset_connections();
  }
  return "OK";
}

std::string cmd_clear_or_reset(Proxy& proxy, const std::vector<std::string_view>& w, bool is_reset) {
  const char* name = is_reset ? "RESET" : "CLEAR";
  if (w.size() != 2) return err(std::string(name) + " takes exactly one listener: " + name + " <listener|*>");
  std::string e;
  auto targets = resolve_listeners(proxy.listeners(), w[1], &e);
  if (!targets) return err(e);
  if (!is_reset) {
    for (Listener* l : *targets) l->set_faults(Faults{});
    return "OK";
  }
  std::uint64_t n = 0;
  for (Listener* l : *targets) {
    const auto before = l->stats().reset;
    l->reset_connections();
    n += l->stats().reset - before;
  }
  return "OK " + nlohmann::json{{"reset", n}}.dump();
}

}  // namespace

std::string execute_command(Proxy& proxy, std::string_view line) {
  const auto w = split_words(line);
  if (w.empty()) return err("empty command (commands: PING, STATUS, SET, CLEAR, RESET)");
  const std::string cmd = upper(w[0]);
  if (cmd == "PING" || cmd == "STATUS") {
    if (w.size() != 1) return err(cmd + " takes no arguments, got " + quote(w[1]));
    return cmd == "PING" ? "OK" : "OK " + proxy.status().dump();
  }
  if (cmd == "SET") return cmd_set(proxy, w);
  if (cmd == "CLEAR") return cmd_clear_or_reset(proxy, w, false);
  if (cmd == "RESET") return cmd_clear_or_reset(proxy, w, true);
  return err("unknown command " + quote(w[0]) + " (commands: PING, STATUS, SET, CLEAR, RESET)");
}

}  // namespace faultproxy
