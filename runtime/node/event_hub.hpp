#pragma once

// The `GET /events` subscribers of a node: each gets every published frame
// (breaker transitions, verdicts, pings). Bounded: at most `max_subscribers`
// at once; a subscriber leaves when its connection ends (not when the next
// event happens to find it gone), so connect-and-close floods cost nothing
// that stays.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace sluice::node {

class event_hub {
public:
  /// Hands one frame to a subscriber (posts it to its connection).
  using push_fn = std::function<void(const std::string&)>;

  explicit event_hub(size_t max_subscribers)
      : max_(max_subscribers) {
    // nop
  }

  /// Adds subscriber `id`; false when `max_subscribers` are subscribed.
  bool subscribe(uint64_t id, push_fn push);

  /// Removes subscriber `id` (idempotent).
  void unsubscribe(uint64_t id);

  /// Sends `frame` (whole SSE events) to every subscriber.
  void publish(const std::string& frame);

  size_t size() const;

  size_t max_subscribers() const noexcept { return max_; }

private:
  size_t max_;
  mutable std::mutex mx_;
  std::map<uint64_t, push_fn> subscribers_;
};

} // namespace sluice::node
