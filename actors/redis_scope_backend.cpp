#include "actors/scope_backend.hpp"

#include <string>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "messages/atoms.hpp"
#include "messages/errors.hpp"
#include "runtime/redis_client.hpp"

namespace sluice {

namespace {

// Written with the server's clock, so nodes whose clocks differ agree on
// ages: the marker is Redis's TIME in milliseconds, kept `ttl` seconds.
constexpr const char* progress_script = R"(
local t = redis.call('TIME')
local ms = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('SET', KEYS[1], ms, 'EX', ARGV[1])
return ms
)";

// The age in milliseconds by the server's clock; -1 if the scope never
// progressed (or its marker expired).
constexpr const char* age_script = R"(
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
return math.max(0, now - tonumber(v))
)";

struct redis_backend_state {
  std::optional<redis_client> redis;
  std::string ttl;
  std::shared_ptr<redis_backend_stats> stats;

  static inline const char* name = "sluice.scope_backend.redis";

  std::string key(const std::string& scope) const {
    return redis->key("progress:" + scope);
  }
};

caf::behavior redis_backend(caf::stateful_actor<redis_backend_state>* self,
                            redis_config cfg, duration ttl,
                            std::shared_ptr<redis_backend_stats> stats) {
  auto& st = self->state;
  st.redis.emplace(std::move(cfg));
  st.ttl = std::to_string(
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(
                               ttl).count()));
  st.stats = std::move(stats);
  return {
      // Telemetry: a failed write never fails a call; it is counted.
      [self](progress_atom, const std::string& scope) {
        auto& st = self->state;
        auto r = st.redis->eval(progress_script, {st.key(scope)}, {st.ttl});
        if (!r.ok())
          ++st.stats->write_errors;
      },
      // Fail-closed: no answer from Redis, no verdict but an error.
      [self](progress_age_atom,
             const std::string& scope) -> caf::result<progress_age> {
        auto& st = self->state;
        auto r = st.redis->eval(age_script, {st.key(scope)}, {});
        if (!r.ok() || r.reply->type != redis_reply::kind::integer) {
          ++st.stats->read_errors;
          return make_error(errc::governance_backend_error,
                            r.ok() ? "unexpected answer" : r.error);
        }
        if (r.reply->integer < 0)
          return progress_age{};
        return progress_age{std::chrono::duration_cast<duration>(
            std::chrono::milliseconds{r.reply->integer})};
      },
  };
}

} // namespace

caf::actor spawn_redis_scope_backend(caf::actor_system& sys, redis_config cfg,
                                     duration progress_ttl,
                                     std::shared_ptr<redis_backend_stats> stats) {
  validate(cfg);
  if (!stats)
    stats = std::make_shared<redis_backend_stats>();
  // Detached: hiredis blocks its thread for up to the command timeout,
  // which must never be a CAF worker.
  return sys.spawn<caf::detached>(redis_backend, std::move(cfg), progress_ttl,
                                  std::move(stats));
}

} // namespace sluice
