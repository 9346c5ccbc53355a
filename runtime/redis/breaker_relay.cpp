#include "sluice/runtime/redis/breaker_relay.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/system_hold.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/redis/client.hpp"

namespace sluice {

namespace {

using json = nlohmann::json;

} // namespace

std::optional<peer_message> parse_peer_message(std::string_view payload,
                                               std::string_view own_node) {
  auto msg = json::parse(payload, nullptr, false);
  if (!msg.is_object())
    return std::nullopt;
  auto field = [&](const char* name) -> const json* {
    auto i = msg.find(name);
    return i == msg.end() ? nullptr : &*i;
  };
  auto node = field("node");
  auto source = field("source");
  auto state = field("state");
  if (!node || !node->is_string() || !source || !source->is_string() ||
      !state || !state->is_string())
    return std::nullopt;
  if (node->get_ref<const std::string&>() == own_node)
    return std::nullopt; // our own, back from the channel
  auto to = policy::parse_breaker_state(state->get_ref<const std::string&>());
  // Only what a node decides by itself is published.
  if (to != breaker_state::open && to != breaker_state::closed)
    return std::nullopt;
  peer_message out;
  out.source = source->get<std::string>();
  out.to = *to;
  if (out.source.empty())
    return std::nullopt;
  if (auto ms = field("open_for_ms")) {
    // Whole milliseconds only; saturated, never wrapped (SPEC §7). The
    // breaker bounds it further by its own open_duration_max.
    int64_t v = 0;
    if (ms->is_number_unsigned())
      v = ms->get<uint64_t>() > uint64_t(max_peer_open_ms)
              ? max_peer_open_ms
              : static_cast<int64_t>(ms->get<uint64_t>());
    else if (ms->is_number_integer())
      v = ms->get<int64_t>();
    else
      return std::nullopt;
    out.open_for = std::chrono::milliseconds{std::clamp<int64_t>(
        v, 0, max_peer_open_ms)};
  }
  return out;
}

namespace {

// The listener: a blocking SUBSCRIBE on a connection and thread of its own,
// forwarding each peer message to the relay. Stopped by interrupting its
// connection, which wakes the blocked read.
//
// The thread holds the listener too (`start`): forwarding a message may drop
// the last reference to the relay, whose state then goes -- on this very
// thread -- and with it the relay's own reference to the listener, which
// must outlive the loop that is still running.
class listener : public std::enable_shared_from_this<listener> {
public:
  listener(caf::actor_system& sys, redis_config cfg, std::string channel,
           std::string node, caf::weak_actor_ptr relay,
           std::shared_ptr<breaker_relay_stats> stats)
      : hold_(sys)
      , client_(cfg)
      , pause_(cfg.reconnect_after)
      , channel_(std::move(channel))
      , node_(std::move(node))
      , relay_(std::move(relay))
      , stats_(std::move(stats)) {
    // nop
  }

  void start() {
    thread_ = std::thread{[self = shared_from_this()] { self->run(); }};
  }

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
      while (auto payload = client_.next_message(max_peer_message))
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

  // Anyone who may PUBLISH on the channel can send anything: each field is
  // read only if it has the right type, and nothing a message holds may
  // end the thread.
  void handle(const std::string& payload) noexcept {
    try {
      if (auto m = parse_peer_message(payload, node_)) {
        if (auto relay = caf::actor_cast<caf::actor>(relay_.lock()))
          caf::anon_send(relay, peer_heard_atom_v, std::move(m->source), m->to,
                         m->open_for);
      } else {
        ++stats_->ignored;
      }
    } catch (...) {
      ++stats_->errors; // no memory: this one message is lost
    }
  }

  /// First, so released last: the thread may drop the relay's last
  /// reference (see `system_hold`); the system waits for the listener.
  system_hold hold_;
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
  std::shared_ptr<listener> listen;

  ~relay_state() {
    if (listen)
      listen->stop();
  }

  static inline const char* name = "sluice.breaker_relay";
};

using relay_actor = caf::stateful_actor<relay_state>;

caf::behavior relay(relay_actor* self, redis_config cfg,
                    std::shared_ptr<breaker_relay_stats> stats) {
  auto& st = self->state;
  st.channel = cfg.key_prefix + "breakers";
  st.node = random_node_id();
  st.stats = std::move(stats);
  st.listen = std::make_shared<listener>(
      self->system(), cfg, st.channel, st.node,
      caf::actor_cast<caf::weak_actor_ptr>(self), st.stats);
  st.listen->start();
  st.redis.emplace(std::move(cfg));
  // The listener stops (and its thread is joined) with the state, which
  // CAF 0.17 destroys as soon as the actor terminates (on_exit), not when
  // the last reference goes. (Not in an attached functor: those run after
  // the state is gone.)
  return {
      [self](relay_watch_atom, const std::string& source, const caf::actor& b) {
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
        // A source name is the operator's text: invalid UTF-8 in it is
        // replaced, never a throw that ends the relay.
        auto text = msg.dump(-1, ' ', false, json::error_handler_t::replace);
        if (st.redis->command({"PUBLISH", st.channel, text}).ok())
          ++st.stats->published;
        else
          ++st.stats->errors;
      },
      // Another node's breaker moved: tell ours.
      [self](peer_heard_atom, const std::string& source, breaker_state to,
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
