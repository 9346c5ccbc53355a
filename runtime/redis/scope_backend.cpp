#include "sluice/runtime/redis/scope_backend.hpp"

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/loops/back_to_actor.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/redis/client.hpp"
#include "sluice/runtime/redis/lua.hpp"

namespace sluice {

namespace {

// Written with the server's clock, so nodes whose clocks differ agree on
// ages: the marker is Redis's TIME in milliseconds, kept `ttl` seconds.
const std::string progress_script = redis_lua::timed(R"(
redis.call('SET', KEYS[1], now, 'EX', ARGV[1])
return now
)");

// The age in milliseconds by the server's clock; -1 if the scope never
// progressed (or its marker expired).
const std::string age_script = redis_lua::timed(R"(
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
return math.max(0, now - tonumber(v))
)");

struct redis_backend_state;

using redis_backend_actor = caf::stateful_actor<redis_backend_state>;

struct redis_backend_state {
  /// The connection and its thread (hiredis blocks): this actor never does.
  std::unique_ptr<redis_worker> redis;
  std::string ttl;
  std::shared_ptr<redis_backend_stats> stats;
  /// Reads waiting for Redis, by id.
  std::unordered_map<uint64_t, caf::response_promise> reads;
  uint64_t next_read = 1;

  static inline const char* name = "sluice.scope_backend.redis";

  std::string key(const std::string& scope) const {
    return redis->config().key_prefix + "progress:" + scope;
  }
};

// Answers read `id` with `answer` (a progress_age or an error).
template <class T>
void answer(redis_backend_actor* self, uint64_t id, T answer) {
  auto& reads = self->state.reads;
  auto i = reads.find(id);
  if (i == reads.end())
    return;
  i->second.deliver(std::move(answer));
  reads.erase(i);
}

caf::behavior redis_backend(redis_backend_actor* self, redis_config cfg,
                            duration ttl,
                            std::shared_ptr<redis_backend_stats> stats) {
  auto& st = self->state;
  st.redis = std::make_unique<redis_worker>(for_role(std::move(cfg), "scopes"),
                                            "scope backend", &self->system());
  st.ttl = std::to_string(std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(ttl).count()));
  st.stats = std::move(stats);
  // The worker stops (its thread joined) with the state, which CAF 0.17
  // destroys as soon as the actor terminates.
  return {
      // Telemetry: a failed write never fails a call; it is counted.
      [self](progress_atom, const std::string& scope) {
        auto& st = self->state;
        auto stats = st.stats;
        if (st.redis->down()) {
          ++stats->write_errors;
          return;
        }
        auto deadline = steady::now() + st.redis->config().command_timeout;
        st.redis->submit(
            deadline,
            [stats, key = st.key(scope), ttl = st.ttl](redis_client& c) {
              if (!c.eval(progress_script, {key}, {ttl}).ok())
                ++stats->write_errors;
            },
            [stats](const std::string&) { ++stats->write_errors; });
      },
      // Fail-closed: no answer from Redis within one command timeout of
      // the request, no verdict but an error -- at once while it is down.
      [self](progress_age_atom,
             const std::string& scope) -> caf::result<progress_age> {
        auto& st = self->state;
        if (st.redis->down()) {
          ++st.stats->read_errors;
          return backend_fault("redis down (failing closed until it answers "
                               "again)");
        }
        auto id = st.next_read++;
        auto rp = self->make_response_promise<progress_age>();
        st.reads.emplace(id, rp);
        weak_self<redis_backend_actor> me{self};
        auto stats = st.stats;
        auto fail = [me, id, stats](std::string why) {
          ++stats->read_errors;
          back_to(me, [id, why = std::move(why)](redis_backend_actor* self) {
            answer(self, id, backend_fault(std::move(why)));
          });
        };
        // NOTE: the caller's own deadline is not in the message; one
        // command timeout from now bounds queueing and the command together.
        auto deadline = steady::now() + st.redis->config().command_timeout;
        st.redis->submit(
            deadline,
            [me, id, fail, key = st.key(scope)](redis_client& c) {
              auto r = c.eval(age_script, {key}, {});
              if (!r.ok() || r.reply->type != redis_reply::kind::integer) {
                fail(r.ok() ? "unexpected answer" : r.error);
                return;
              }
              progress_age age;
              if (r.reply->integer >= 0)
                age.age = std::chrono::duration_cast<duration>(
                    std::chrono::milliseconds{r.reply->integer});
              back_to(me, [id, age](redis_backend_actor* self) {
                answer(self, id, age);
              });
            },
            fail);
        return rp;
      },
      [self](actor_thunk& t) { t.run(self); },
  };
}

} // namespace

caf::actor
spawn_redis_scope_backend(caf::actor_system& sys, redis_config cfg,
                          duration progress_ttl,
                          std::shared_ptr<redis_backend_stats> stats) {
  validate(cfg);
  if (!stats)
    stats = std::make_shared<redis_backend_stats>();
  // Detached: the actor itself never blocks (Redis has a thread of its
  // own), but stopping it joins that thread, which may wait for the
  // command in flight -- never on a CAF worker.
  return sys.spawn<caf::detached>(redis_backend, std::move(cfg), progress_ttl,
                                  std::move(stats));
}

} // namespace sluice
