#pragma once

// The `GET /events` subscribers of a node: each gets every published frame
// (breaker transitions, verdicts, pings). Bounded: at most `max_subscribers`
// at once; a subscriber leaves when its connection ends (not when the next
// event happens to find it gone), so connect-and-close floods cost nothing
// that stays.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

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

/// The last breaker transitions, each as its JSON object's text, for the
/// snapshot that opens every `/events` stream: a page opened now still
/// draws the last minutes. Bounded by count and by age; thread-safe.
class transition_log {
public:
  using clock = std::chrono::steady_clock;

  /// Transitions kept at most (older ones are dropped first).
  static constexpr size_t max_entries = 512;

  /// Transitions older than this are dropped.
  static constexpr std::chrono::minutes max_age{10};

  /// The array's text at most (the newest transitions that fit): the
  /// snapshot must fit an /events client's queue however long the source
  /// names are.
  static constexpr size_t max_bytes = 64 * 1024;

  /// Adds one transition (`json`: an object's text) seen at `at`.
  void add(std::string json, clock::time_point at);

  /// The transitions of the last `max_age` before `now`, oldest first, as
  /// a JSON array's text.
  std::string json_array(clock::time_point now) const;

private:
  void drop_old(clock::time_point now) const;

  mutable std::mutex mx_;
  mutable std::deque<std::pair<clock::time_point, std::string>> entries_;
};

} // namespace sluice::node
