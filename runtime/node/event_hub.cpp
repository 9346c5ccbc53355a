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

void transition_log::add(std::string json, clock::time_point at) {
  std::lock_guard<std::mutex> guard{mx_};
  entries_.emplace_back(at, std::move(json));
  while (entries_.size() > max_entries)
    entries_.pop_front();
  drop_old(at);
}

std::string transition_log::json_array(clock::time_point now) const {
  std::lock_guard<std::mutex> guard{mx_};
  drop_old(now);
  // The newest entries whose texts (and commas) fit in the budget.
  auto first = entries_.size();
  size_t bytes = 2;
  while (first > 0 && bytes + entries_[first - 1].second.size() + 1 <= max_bytes)
    bytes += entries_[--first].second.size() + 1;
  std::string out = "[";
  for (auto i = first; i < entries_.size(); ++i) {
    if (out.size() > 1)
      out += ',';
    out += entries_[i].second;
  }
  out += ']';
  return out;
}

void transition_log::drop_old(clock::time_point now) const {
  while (!entries_.empty() && now - entries_.front().first > max_age)
    entries_.pop_front();
}

} // namespace sluice::node
