#include "sluice/runtime/node/event_hub.hpp"

namespace sluice::node {

bool event_hub::subscribe(uint64_t id, push_fn push) {
  std::lock_guard<std::mutex> guard{mx_};
  if (subscribers_.size() >= max_)
    return false;
  subscribers_[id] = std::move(push);
  return true;
}

void event_hub::unsubscribe(uint64_t id) {
  std::lock_guard<std::mutex> guard{mx_};
  subscribers_.erase(id);
}

void event_hub::publish(const std::string& frame) {
  std::lock_guard<std::mutex> guard{mx_};
  for (auto& [id, push] : subscribers_)
    push(frame);
}

size_t event_hub::size() const {
  std::lock_guard<std::mutex> guard{mx_};
  return subscribers_.size();
}

} // namespace sluice::node
