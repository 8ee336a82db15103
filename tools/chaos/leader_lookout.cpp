// leader_lookout.cpp — see leader_lookout.hpp.
#include "leader_lookout.hpp"

#include <cstdlib>
#include <stdexcept>

namespace redlock::chaos {

LeaderLookout::LeaderLookout(ChaosBed& bed, bool quarantine, std::chrono::milliseconds node_timeout,
                             std::string name)
    : name_(std::move(name)) {
  Config config;
  auto nodes = parse_node_list(bed.direct_urls());
  if (!nodes) throw std::runtime_error("lookout: " + nodes.error().to_string());
  config.nodes = *nodes;
  config.options.node_timeout = node_timeout;
  config.options.quarantine = quarantine;  // as the workers: fresh masters answer at once
  auto client = Client::create(config);
  if (!client) throw std::runtime_error("lookout: " + client.error().to_string());
  client_ = std::move(*client);
  auto watch = client_->observe(name_, [this](const Result<LeaderStatus>& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      leading_ = status && status->leader.has_value();
      ++readings_;
    }
    cv_.notify_all();
  });
  if (!watch) throw std::runtime_error("lookout: " + watch.error().to_string());
  watch_ = std::move(*watch);
}

LeaderLookout::~LeaderLookout() { watch_.stop(); }

int LeaderLookout::leader(std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const std::uint64_t seen = readings_;
    if (leading_) {
      lock.unlock();
      auto now = client_->leader(name_);
      lock.lock();
      if (now && now->leader && now->leader->identity.rfind("chaos-", 0) == 0)
        return std::atoi(now->leader->identity.c_str() + 6);
    }
    // No leader now: the watch tells the next change.
    if (!cv_.wait_until(lock, until, [&] { return readings_ != seen; })) return -1;
  }
}

}  // namespace redlock::chaos
