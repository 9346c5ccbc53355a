#include "actors/breaker_relay.hpp"

#include <mutex>
#include <thread>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include "messages/atoms.hpp"

namespace sluice {

namespace {

using json = nlohmann::json;

// The listener: a blocking SUBSCRIBE on its own connection and thread,
// forwarding each peer message to the relay. Stopped by shutting its
// socket down, which wakes the blocked read.
class listener {
public:
  listener(redis_config cfg, std::string channel, std::string node,
           caf::weak_actor_ptr relay,
           std::shared_ptr<breaker_relay_stats> stats)
      : cfg_(std::move(cfg))
      , channel_(std::move(channel))
      , node_(std::move(node))
      , relay_(std::move(relay))
      , stats_(std::move(stats)) {
    thread_ = std::thread{[this] { run(); }};
  }

  ~listener() { stop(); }

  /// Stops listening and joins the thread; idempotent.
  void stop() {
    std::unique_lock<std::mutex> guard{mx_};
    if (stop_)
      return;
    stop_ = true;
    if (ctx_ != nullptr)
      ::shutdown(ctx_->fd, SHUT_RDWR);
    guard.unlock();
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach(); // never join ourselves
    else if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    while (!stop_) {
      if (!connect()) {
        ++stats_->errors;
        pause();
        continue;
      }
      for (;;) {
        void* raw = nullptr;
        if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr)
          break; // closed: by Redis, or by us to stop
        handle(static_cast<redisReply*>(raw));
        freeReplyObject(raw);
      }
      {
        std::lock_guard<std::mutex> guard{mx_};
        redisFree(ctx_);
        ctx_ = nullptr;
      }
      if (!stop_) {
        ++stats_->errors;
        pause();
      }
    }
  }

  bool connect() {
    auto* ctx = redisConnectWithTimeout(cfg_.host.c_str(), cfg_.port,
                                        to_timeval(cfg_.connect_timeout));
    if (ctx == nullptr || ctx->err != 0) {
      if (ctx)
        redisFree(ctx);
      return false;
    }
    // Blocking reads without a timeout from here on: messages may be
    // minutes apart.
    redisSetTimeout(ctx, timeval{0, 0});
    auto ok = [&](redisReply* r) {
      bool good = r != nullptr && r->type != REDIS_REPLY_ERROR;
      if (r)
        freeReplyObject(r);
      return good;
    };
    if (!cfg_.password.empty() &&
        !ok(static_cast<redisReply*>(
            redisCommand(ctx, "AUTH %s", cfg_.password.c_str())))) {
      redisFree(ctx);
      return false;
    }
    if (!ok(static_cast<redisReply*>(
            redisCommand(ctx, "SUBSCRIBE %s", channel_.c_str())))) {
      redisFree(ctx);
      return false;
    }
    std::lock_guard<std::mutex> guard{mx_};
    if (stop_) {
      redisFree(ctx);
      return false;
    }
    ctx_ = ctx;
    return true;
  }

  void pause() {
    auto end = std::chrono::steady_clock::now() + cfg_.reconnect_after;
    while (!stop_ && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }

  void handle(redisReply* r) {
    // ["message", channel, payload]
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING)
      return;
    auto msg = json::parse(std::string{r->element[2]->str, r->element[2]->len},
                           nullptr, false);
    if (!msg.is_object() || msg.value("node", "") == node_)
      return; // malformed, or our own
    auto state = msg.value("state", "");
    breaker_state to;
    if (state == "open")
      to = breaker_state::open;
    else if (state == "closed")
      to = breaker_state::closed;
    else
      return;
    duration open_for = std::chrono::milliseconds{msg.value("open_for_ms", 0)};
    if (auto relay = caf::actor_cast<caf::actor>(relay_.lock()))
      caf::anon_send(relay, peer_state_atom_v, msg.value("source", ""), to,
                     open_for);
  }

  redis_config cfg_;
  std::string channel_;
  std::string node_;
  /// Weak: the relay owns the listener, not the other way round.
  caf::weak_actor_ptr relay_;
  std::shared_ptr<breaker_relay_stats> stats_;
  std::atomic<bool> stop_{false};
  std::mutex mx_;
  redisContext* ctx_ = nullptr;
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
                 {"state", ev.to == breaker_state::open ? "open" : "closed"},
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
