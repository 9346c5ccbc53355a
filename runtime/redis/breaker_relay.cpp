#include "runtime/redis/breaker_relay.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <nlohmann/json.hpp>

#include "messages/atoms.hpp"

namespace sluice {

namespace {

using json = nlohmann::json;

// The listener: a blocking SUBSCRIBE on a connection and thread of its own,
// forwarding each peer message to the relay. Stopped by interrupting its
// connection, which wakes the blocked read.
class listener {
public:
  listener(redis_config cfg, std::string channel, std::string node,
           caf::weak_actor_ptr relay,
           std::shared_ptr<breaker_relay_stats> stats)
      : client_(cfg)
      , pause_(cfg.reconnect_after)
      , channel_(std::move(channel))
      , node_(std::move(node))
      , relay_(std::move(relay))
      , stats_(std::move(stats)) {
    thread_ = std::thread{[this] { run(); }};
  }

  ~listener() { stop(); }

  /// Stops listening and joins the thread; idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> guard{mx_};
      if (stop_)
        return;
      stop_ = true;
    }
    cv_.notify_all();
    client_.interrupt();
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach(); // never join ourselves
    else if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    while (!stopping()) {
      if (!client_.subscribe(channel_).ok()) {
        if (!stopping())
          ++stats_->errors;
        pause();
        continue;
      }
      while (auto payload = client_.next_message())
        handle(*payload);
      if (!stopping()) { // closed by Redis
        ++stats_->errors;
        pause();
      }
    }
  }

  bool stopping() {
    std::lock_guard<std::mutex> guard{mx_};
    return stop_;
  }

  // Before reconnecting: no reconnect storm while Redis is down.
  void pause() {
    std::unique_lock<std::mutex> lk{mx_};
    cv_.wait_for(lk, pause_, [this] { return stop_; });
  }

  void handle(const std::string& payload) {
    auto msg = json::parse(payload, nullptr, false);
    if (!msg.is_object() || msg.value("node", "") == node_)
      return; // malformed, or our own
    auto to = policy::parse_breaker_state(msg.value("state", ""));
    if (to != breaker_state::open && to != breaker_state::closed)
      return; // only what a node decides by itself is published
    duration open_for = std::chrono::milliseconds{msg.value("open_for_ms", 0)};
    if (auto relay = caf::actor_cast<caf::actor>(relay_.lock()))
      caf::anon_send(relay, peer_state_atom_v, msg.value("source", ""), *to,
                     open_for);
  }

  redis_client client_;
  duration pause_;
  std::string channel_;
  std::string node_;
  /// Weak: the relay owns the listener, not the other way round.
  caf::weak_actor_ptr relay_;
  std::shared_ptr<breaker_relay_stats> stats_;
  std::mutex mx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

struct relay_state {
  std::optional<redis_client> redis;
  std::string channel;
  std::string node;
  std::shared_ptr<breaker_relay_stats> stats;
  std::unordered_map<std::string, caf::actor> breakers;
  std::unique_ptr<listener> listen;

  static inline const char* name = "sluice.breaker_relay";
};

using relay_actor = caf::stateful_actor<relay_state>;

caf::behavior relay(relay_actor* self, redis_config cfg,
                    std::shared_ptr<breaker_relay_stats> stats) {
  auto& st = self->state;
  st.channel = cfg.key_prefix + "breakers";
  st.node = random_node_id();
  st.stats = std::move(stats);
  st.listen = std::make_unique<listener>(
      cfg, st.channel, st.node, caf::actor_cast<caf::weak_actor_ptr>(self),
      st.stats);
  st.redis.emplace(std::move(cfg));
  // The listener stops (and its thread is joined) with the state, which
  // CAF 0.17 destroys as soon as the actor terminates (on_exit), not when
  // the last reference goes. (Not in an attached functor: those run after
  // the state is gone.)
  return {
      [self](watch_atom, const std::string& source, const caf::actor& b) {
        self->state.breakers[source] = b;
        self->request(b, caf::infinite, subscribe_atom_v)
            .then([](const breaker_status&) {}, [](caf::error&) {});
      },
      // One of our breakers moved: publish what it decided by itself.
      [self](const breaker_event& ev) {
        auto& st = self->state;
        if (ev.from_peer || (ev.to != breaker_state::open &&
                             ev.to != breaker_state::closed))
          return;
        json msg{{"node", st.node},
                 {"source", ev.source},
                 {"state", std::string{to_string(ev.to)}},
                 {"open_for_ms",
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      ev.open_for)
                      .count()}};
        if (st.redis->command({"PUBLISH", st.channel, msg.dump()}).ok())
          ++st.stats->published;
        else
          ++st.stats->errors;
      },
      // Another node's breaker moved: tell ours.
      [self](peer_state_atom, const std::string& source, breaker_state to,
             duration open_for) {
        auto& st = self->state;
        auto i = st.breakers.find(source);
        if (i == st.breakers.end())
          return; // a source this node does not have
        ++st.stats->applied;
        self->send(i->second, peer_state_atom_v, to, open_for);
      },
  };
}

} // namespace

caf::actor spawn_breaker_relay(caf::actor_system& sys, redis_config cfg,
                               std::shared_ptr<breaker_relay_stats> stats) {
  validate(cfg);
  if (!stats)
    stats = std::make_shared<breaker_relay_stats>();
  return sys.spawn<caf::detached>(relay, std::move(cfg), std::move(stats));
}

} // namespace sluice
