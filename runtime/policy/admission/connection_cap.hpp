#pragma once

// How many client connections the front holds at once, and which one makes
// room for a new one at that cap (issue 30, finding 7: idle clients that
// hold every descriptor lock new clients out until the read timeout).

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace sluice::policy {

/// Descriptors kept back from client connections, at least: the listeners,
/// each event loop's epoll and wake-up descriptors, stdout/stderr, the
/// access log, Redis connections, a reload reading the config and its TLS
/// files.
constexpr uint64_t fd_reserve_min = 64;

/// Beyond `fd_reserve_min`, this share of the descriptor limit (1/4) is
/// kept back too: a call holds a second descriptor upstream (its HTTP
/// source's connection, pooled ones included) while its client holds one.
constexpr uint64_t fd_reserve_divisor = 4;

/// Fewest client connections the cap allows, however low the descriptor
/// limit (the node must still answer someone).
constexpr uint64_t min_connection_cap = 8;

/// Descriptors kept back from client connections under `fd_limit`.
constexpr uint64_t fd_reserve(uint64_t fd_limit) noexcept {
  auto share = fd_limit / fd_reserve_divisor;
  return share > fd_reserve_min ? share : fd_reserve_min;
}

/// The client connections served at once: `max_connections`, lowered so
/// that they, `admin_connections` (the admin listener's cap, 0 without one)
/// and `fd_reserve(fd_limit)` fit under the descriptor limit (`fd_limit` 0:
/// unknown, no lowering). At least `min_connection_cap`.
///
/// NOTE: a call's upstream connection is a descriptor too. The reserve
/// covers a quarter of the limit; with more calls in flight at once than
/// that, an upstream connect can fail with EMFILE: that attempt fails
/// (transient), never the node. Raise the limit (`ulimit -n`) for such
/// loads.
constexpr uint64_t connection_cap(uint64_t max_connections, uint64_t fd_limit,
                                  uint64_t admin_connections) noexcept {
  if (fd_limit == 0)
    return max_connections;
  auto kept = fd_reserve(fd_limit) + admin_connections;
  auto room = fd_limit > kept ? fd_limit - kept : 0;
  if (room < min_connection_cap)
    room = min_connection_cap;
  return max_connections < room ? max_connections : room;
}

/// Connections over the cap at most while the idle ones that make room for
/// them close (on their own loops, a moment later): a burst of new
/// connections beyond this is refused rather than served ahead of the
/// closes, so the descriptors in use pass the cap by at most this much.
constexpr uint64_t max_cap_overshoot = 32;

/// What a new connection gets when `open` connections (the new one not
/// counted, closes under way counted) hold its listener's `cap`.
enum class admission {
  /// Under the cap: served.
  serve,
  /// At the cap: served if an idle connection makes room, else refused.
  shed_idle,
  /// Too many closes under way: refused.
  refuse,
};

constexpr admission admit_connection(uint64_t open, uint64_t cap) noexcept {
  if (open < cap)
    return admission::serve;
  return open < cap + max_cap_overshoot ? admission::shed_idle
                                        : admission::refuse;
}

/// The idle connections of one listener, least recently idle first: at the
/// cap, a new connection closes the oldest of them (an idle keep-alive
/// connection costs its client one reconnect; refusing the new one would
/// let idle clients lock everyone else out). A connection is here only
/// while it waits for a request or for the rest of its header: never with
/// a whole header read, mid-call or streaming. (A client that sent one
/// byte of a header and stopped is no busier than an idle one.)
///
/// Pure and not thread-safe: the owner locks.
///
/// A connection becomes idle and busy once per request: the nodes of both
/// containers are kept for reuse (up to `spare_nodes` of each), so that
/// costs no allocation in steady state.
template <class Id>
class idle_order {
public:
  /// Nodes kept for reuse.
  static constexpr size_t spare_nodes = 64;

  /// `id` waits for its next request: it becomes the most recent.
  void idle(Id id) {
    busy(id);
    typename std::list<Id>::iterator it;
    if (!spare_order_.empty()) {
      order_.splice(order_.end(), spare_order_, spare_order_.begin());
      it = std::prev(order_.end());
      *it = id;
    } else {
      it = order_.insert(order_.end(), id);
    }
    if (!spare_at_.empty()) {
      auto node = std::move(spare_at_.back());
      spare_at_.pop_back();
      node.key() = id;
      node.mapped() = it;
      at_.insert(std::move(node));
    } else {
      at_[id] = it;
    }
  }

  /// `id` is no longer idle (its request began, or it is gone).
  void busy(Id id) {
    auto i = at_.find(id);
    if (i == at_.end())
      return;
    if (spare_order_.size() < spare_nodes)
      spare_order_.splice(spare_order_.end(), order_, i->second);
    else
      order_.erase(i->second);
    auto node = at_.extract(i);
    if (spare_at_.size() < spare_nodes) {
      if (spare_at_.capacity() == 0)
        spare_at_.reserve(spare_nodes);
      spare_at_.push_back(std::move(node));
    }
  }

  /// The oldest idle connection, taken out of the order (the caller sheds
  /// it); nothing when none is idle.
  std::optional<Id> take_oldest() {
    if (order_.empty())
      return std::nullopt;
    auto id = order_.front();
    busy(id);
    return id;
  }

  size_t size() const noexcept { return order_.size(); }

  bool contains(Id id) const { return at_.count(id) != 0; }

  /// Nodes kept for reuse now, of the order and of the index.
  size_t spares() const noexcept { return spare_order_.size() + spare_at_.size(); }

private:
  using index = std::unordered_map<Id, typename std::list<Id>::iterator>;
  std::list<Id> order_;
  index at_;
  std::list<Id> spare_order_;
  std::vector<typename index::node_type> spare_at_;
};

} // namespace sluice::policy
