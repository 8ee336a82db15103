// proxy.cpp — see proxy.hpp.
#include "faultproxy/proxy.hpp"

#include <unistd.h>

#include <stdexcept>

#include "faultproxy/control_protocol.hpp"
#include "faultproxy/control_server.hpp"
#include "faultproxy/listener.hpp"

namespace faultproxy {

Proxy::Proxy(uv_loop_t* loop, ProxyConfig config) : loop_(loop), config_(std::move(config)) {}

Proxy::~Proxy() { shutdown(); }

void Proxy::start() {
  for (std::size_t i = 0; i < config_.listen.size(); ++i) {
    auto* l = new Listener(loop_, i, config_.listen[i], config_.target, config_.max_queue, config_.seed,
                           config_.keep_in_flight);
    listeners_.push_back(l);
    if (int rc = l->listen(); rc != 0)
      throw std::runtime_error("cannot listen on " + config_.listen[i].text() + ": " + uv_strerror(rc));
  }
  control_ = new ControlServer(loop_, config_.control, [this](std::string_view line) { return execute(line); });
  if (int rc = control_->listen(); rc != 0)
    throw std::runtime_error("cannot listen for control on " + config_.control.text() + ": " + uv_strerror(rc));
}

void Proxy::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (control_ != nullptr) control_->close();
  control_ = nullptr;
  for (Listener* l : listeners_) l->close();
  listeners_.clear();
}

nlohmann::json Proxy::startup_info() const {
  nlohmann::json names = nlohmann::json::array();
  for (const Listener* l : listeners_) names.push_back(l->name());
  return {{"control", control_ != nullptr ? control_->address() : std::string()},
          {"listeners", names},
          {"target", config_.target.text()},
          {"seed", config_.seed},
          {"pid", static_cast<long long>(::getpid())}};
}

nlohmann::json Proxy::status() const {
  nlohmann::json ls = nlohmann::json::array();
  for (const Listener* l : listeners_) ls.push_back(l->status());
  return {{"target", config_.target.text()},
          {"control", control_ != nullptr ? control_->address() : std::string()},
          {"seed", config_.seed},
          {"max_queue", config_.max_queue},
          {"keep_in_flight", config_.keep_in_flight},
          {"listeners", ls}};
}

std::string Proxy::execute(std::string_view line) { return execute_command(*this, line); }

}  // namespace faultproxy
