#include "sluice/runtime/redis/breaker_relay.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <nlohmann/json.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/redis/client.hpp"
#include "sluice/runtime/redis/lua.hpp"
#include "sluice/runtime/redis/subscriber.hpp"

namespace sluice {

namespace {

using json = nlohmann::json;

// -- scripts ------------------------------------------------------------------

// Publishes one transition. KEYS: the state hash, the generation hash, the
// source's probe lease. ARGV: source, node, the message without its closing
// brace, open-for ms (0 unless opening), the channel. The generation and the
// open-until instant (server clock) are spliced into the message here, so
// that the stored state and the published message are one text.
//
// A source's first generation is the server's clock in µs, not 1: after
// Redis restarted empty, the generations go on from past the ones the nodes
// saw, never repeating one. Numbers are formatted with %d: Lua's own
// formatting of large numbers loses digits (1.7e+15).
const std::string publish_script = redis_lua::timed(R"(
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', now * 1000))
end
local gen = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
local until_ms = 0
if tonumber(ARGV[4]) > 0 then until_ms = now + tonumber(ARGV[4]) end
local msg = ARGV[3] .. ',"gen":' .. string.format('%d', gen) ..
  ',"until_ms":' .. string.format('%d', until_ms) .. '}'
redis.call('HSET', KEYS[1], ARGV[1], msg)
if redis.call('GET', KEYS[3]) == ARGV[2] then
  redis.call('DEL', KEYS[3])
end
redis.call('PUBLISH', ARGV[5], msg)
return gen
)");

// The shared state: {now, {source, message, ...}} (one source: ARGV[1]).
const std::string state_script = redis_lua::timed(R"(
if ARGV[1] then
  local m = redis.call('HGET', KEYS[1], ARGV[1])
  if not m then return {now, {}} end
  return {now, {ARGV[1], m}}
end
return {now, redis.call('HGETALL', KEYS[1])}
)");

// Claims a source's probe lease for this node (ARGV: node, ttl ms): 0 if
// taken (or held already), else the holder's time left in ms (at least 1).
const std::string claim_script = R"(
local cur = redis.call('GET', KEYS[1])
if not cur or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 0
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  -- no TTL (written by hand, PERSIST): a lease that never ends is broken
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 0
end
if left < 1 then left = 1 end
return left
)";

/// The shortest gap between two reads of one source's shared state asked
/// for by channel messages: a flood of forged generations costs Redis one
/// read per source per gap, not one per message.
constexpr duration confirm_gap = std::chrono::milliseconds{100};

struct relay_state {
  std::optional<redis_client> redis;
  std::string channel;
  std::string state_key;
  std::string gen_key;
  std::string node;
  std::shared_ptr<breaker_relay_stats> stats;
  std::unordered_map<std::string, caf::actor> breakers;
  /// The last generation seen per source (published here or applied), and
  /// the node whose transition it was.
  struct seen_gen {
    uint64_t gen = 0;
    std::string node;
    breaker_state to = breaker_state::closed;
  };
  std::unordered_map<std::string, seen_gen> last_gen;
  std::shared_ptr<redis_subscriber> listen;
  /// This node's last transition per source that Redis could not be told.
  std::map<std::string, breaker_event> unpublished;
  /// A retry of `unpublished` is due.
  bool retrying = false;
  /// Per watched source: when its shared state was last read for a channel
  /// message, and whether a read is due at the end of the gap.
  struct confirming {
    time_point last{};
    bool due = false;
  };
  std::unordered_map<std::string, confirming> confirms;
  duration retry_after{};

  std::string probe_key(const std::string& source) const {
    return redis->key("breakers:probe:" + source);
  }

  ~relay_state() {
    if (listen)
      listen->stop();
  }

  static inline const char* name = "sluice.breaker_relay";
};

using relay_actor = caf::stateful_actor<relay_state>;

// Runs a script on the relay's connection. A connection Redis dropped (it
// restarted) fails the first command on it: tried once more, on a new one.
redis_client::result run_script(relay_state& st, const std::string& script,
                                const std::vector<std::string>& keys,
                                const std::vector<std::string>& args) {
  auto r = st.redis->eval(script, keys, args);
  if (!r.ok() && r.fault)
    r = st.redis->eval(script, keys, args);
  return r;
}

// Hands a newer transition to the breaker of its source. `server_now`:
// the message is from the shared state, read at that instant of the
// server's clock (its period is left from `until_ms`), else from the
// channel (its period is `open_for`, as sent).
bool apply(relay_actor* self, const peer_message& m,
           std::optional<int64_t> server_now) {
  auto& st = self->state;
  // Only sources this node has are tracked: anyone may publish any name.
  auto i = st.breakers.find(m.source);
  if (i == st.breakers.end())
    return false;
  if (m.gen != 0) {
    auto& last = st.last_gen[m.source];
    // The same generation with another node or state than the one applied
    // under it: the shared state says the one applied was not the real one
    // (forged on the channel as the next, perhaps under a real node's
    // name). Only a read of the shared state may overrule it.
    bool overrules = server_now && m.gen == last.gen &&
                     (m.node != last.node || m.to != last.to);
    if (m.gen <= last.gen && !overrules) {
      ++st.stats->stale;
      return false;
    }
    last = {m.gen, m.node, m.to};
  }
  if (m.node == st.node)
    return false; // our own (read back in a catch-up)
  auto open_for = m.open_for;
  if (server_now && m.to == breaker_state::open) {
    if (m.until_ms <= *server_now)
      return false; // its period is over: nothing to hold open
    open_for = std::chrono::milliseconds{
        std::min(m.until_ms - *server_now, max_peer_open_ms)};
  }
  ++st.stats->applied;
  // A peer decided after this node's untold transition: the peer's stands.
  st.unpublished.erase(m.source);
  self->send(i->second, peer_state_atom_v, m.to, open_for);
  return true;
}

// Reads the shared state (of `source`, or of all) and applies what is newer
// than what this node saw; returns the sources it moved. A full read also
// forgets generations Redis no longer has (it restarted empty): counting
// starts again from its own.
std::optional<std::set<std::string>> catch_up(relay_actor* self,
                                              const std::string* source) {
  std::set<std::string> applied;
  auto& st = self->state;
  std::vector<std::string> args;
  if (source)
    args.push_back(*source);
  auto r = run_script(st, state_script, {st.state_key}, args);
  if (!r.ok() || r.reply->elements.size() != 2 ||
      r.reply->elements[0].type != redis_reply::kind::integer) {
    ++st.stats->errors;
    return std::nullopt;
  }
  auto now = r.reply->elements[0].integer;
  auto& entries = r.reply->elements[1].elements;
  std::vector<peer_message> found;
  for (size_t k = 0; k + 1 < entries.size(); k += 2) {
    if (auto m = parse_peer_message(entries[k + 1].text, ""))
      found.push_back(std::move(*m));
    else
      ++st.stats->ignored;
  }
  if (!source) {
    ++st.stats->resyncs;
    // What Redis holds is the truth about generations: a source it no
    // longer has, or has at a lower one, was lost (it restarted empty).
    decltype(st.last_gen) kept;
    for (auto& m : found) {
      auto i = st.last_gen.find(m.source);
      if (i != st.last_gen.end() && i->second.gen <= m.gen)
        kept.emplace(m.source, std::move(i->second));
    }
    st.last_gen = std::move(kept);
  }
  for (auto& m : found)
    if (apply(self, m, now))
      applied.insert(m.source);
  return applied;
}

// Publishes `ev` (an opening: for what is left of its period); false if
// Redis was not told.
bool publish(relay_actor* self, const breaker_event& ev) {
  auto& st = self->state;
  int64_t open_ms = 0;
  if (ev.to == breaker_state::open) {
    auto left = ev.at + ev.open_for - self->clock().now();
    if (left <= duration::zero())
      return true; // over: nothing left to tell
    open_ms = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
  }
  json msg{{"node", st.node},
           {"source", ev.source},
           {"state", std::string{to_string(ev.to)}},
           {"open_for_ms", open_ms}};
  // A source name is the operator's text: invalid UTF-8 in it is replaced,
  // never a throw that ends the relay.
  auto text = msg.dump(-1, ' ', false, json::error_handler_t::replace);
  text.pop_back(); // the script adds the generation and closes it
  auto r = run_script(
      st, publish_script, {st.state_key, st.gen_key, st.probe_key(ev.source)},
      {ev.source, st.node, text, std::to_string(open_ms), st.channel});
  if (!r.ok() || r.reply->type != redis_reply::kind::integer) {
    ++st.stats->errors;
    return false;
  }
  ++st.stats->published;
  auto& last = st.last_gen[ev.source];
  if (uint64_t(r.reply->integer) >= last.gen) // ours, counted by Redis
    last = {uint64_t(r.reply->integer), st.node, ev.to};
  return true;
}

// Publishes what this node decided while Redis could not be told; while
// some of it still cannot be, tries again after `reconnect_after`.
void publish_untold(relay_actor* self) {
  auto& st = self->state;
  for (auto i = st.unpublished.begin(); i != st.unpublished.end();)
    if (publish(self, i->second))
      i = st.unpublished.erase(i);
    else
      ++i;
  if (!st.unpublished.empty() && !st.retrying) {
    st.retrying = true;
    self->delayed_send(self, st.retry_after, retry_publish_atom_v);
  }
}

// The listener (re)subscribed: catch up -- a peer's newer transition drops
// this node's untold one (`apply`) -- then tell the rest. Not if the
// shared state could not be read: what is newer is unknown.
void resync(relay_actor* self) {
  if (catch_up(self, nullptr))
    publish_untold(self);
}

caf::behavior relay(relay_actor* self, redis_config cfg,
                    std::shared_ptr<breaker_relay_stats> stats) {
  auto& st = self->state;
  st.channel = cfg.key_prefix + "breakers";
  st.state_key = cfg.key_prefix + "breakers:state";
  st.gen_key = cfg.key_prefix + "breakers:gen";
  st.node = random_node_id();
  st.stats = std::move(stats);
  st.retry_after = cfg.reconnect_after;
  st.redis.emplace(for_role(cfg, "breakers"));
  redis_subscriber::handlers h;
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  auto to_relay = [weak](auto&&... xs) {
    if (auto relay = caf::actor_cast<caf::actor>(weak.lock()))
      caf::anon_send(relay, std::forward<decltype(xs)>(xs)...);
  };
  // Anyone who may PUBLISH on the channel can send anything: the relay
  // reads each field only if it has the right type.
  h.message = [to_relay](const std::string& payload) {
    to_relay(peer_heard_atom_v, payload);
  };
  h.subscribed = [to_relay] { to_relay(relay_sync_atom_v); };
  h.error = [stats = st.stats] { ++stats->errors; };
  st.listen = redis_subscriber::start(&self->system(),
                                      for_role(std::move(cfg), "breakers-sub"),
                                      st.channel, max_peer_message,
                                      std::move(h));
  // The listener stops (and its thread is joined) with the state, which
  // CAF 0.17 destroys as soon as the actor terminates (on_exit), not when
  // the last reference goes. (Not in an attached functor: those run after
  // the state is gone.)
  return {
      [self](relay_watch_atom, const std::string& source, const caf::actor& b) {
        self->state.breakers[source] = b;
        self->request(b, caf::infinite, subscribe_atom_v)
            .then([](const breaker_status&) {}, [](caf::error&) {});
        self->send(b, probe_gate_atom_v, caf::actor{self});
        // What the other nodes decided before this breaker was here.
        catch_up(self, &source);
      },
      // One of our breakers moved: publish what it decided by itself.
      [self](const breaker_event& ev) {
        if (ev.from_peer || (ev.to != breaker_state::open &&
                             ev.to != breaker_state::closed))
          return;
        auto& st = self->state;
        if (publish(self, ev)) {
          st.unpublished.erase(ev.source);
        } else { // told when Redis is back
          st.unpublished[ev.source] = ev;
          publish_untold(self);
        }
      },
      // A message on the channel.
      [self](peer_heard_atom, const std::string& payload) {
        auto& st = self->state;
        auto m = parse_peer_message(payload, st.node);
        if (!m) {
          ++st.stats->ignored;
          return;
        }
        if (m->gen == 0 || st.breakers.count(m->source) == 0) {
          apply(self, *m, std::nullopt); // no order to keep; or not ours
          return;
        }
        auto i = st.last_gen.find(m->source);
        auto last = i == st.last_gen.end()
                        ? std::nullopt
                        : std::optional<uint64_t>{i->second.gen};
        switch (check_peer_gen(last, m->gen)) {
        case peer_gen_check::stale:
          ++st.stats->stale;
          return;
        case peer_gen_check::next:
          apply(self, *m, std::nullopt);
          return;
        case peer_gen_check::confirm: {
          // The message only says that something happened: what did is in
          // the shared state, which the publish script wrote before it
          // published. Read at most once per gap per source.
          ++st.stats->confirmed;
          auto& c = st.confirms[m->source];
          auto now = self->clock().now();
          if (now - c.last >= confirm_gap) {
            c.last = now;
            catch_up(self, &m->source);
          } else if (!c.due) {
            c.due = true;
            self->delayed_send(self, c.last + confirm_gap - now,
                               confirm_gen_atom_v, m->source);
          }
          return;
        }
        }
      },
      [self](confirm_gen_atom, const std::string& source) {
        auto& c = self->state.confirms[source];
        c.due = false;
        c.last = self->clock().now();
        catch_up(self, &source);
      },
      [self](relay_sync_atom) { resync(self); },
      [self](retry_publish_atom) {
        self->state.retrying = false;
        publish_untold(self);
      },
      [self](probe_claim_atom, const std::string& source,
             duration ttl) -> duration {
        auto& st = self->state;
        auto ms = std::max<int64_t>(
            1, std::chrono::duration_cast<std::chrono::milliseconds>(ttl)
                   .count());
        auto r = run_script(st, claim_script, {st.probe_key(source)},
                            {st.node, std::to_string(ms)});
        if (!r.ok() || r.reply->type != redis_reply::kind::integer) {
          ++st.stats->errors;
          return probe_claim_unanswered;
        }
        if (r.reply->integer == 0) {
          ++st.stats->probes_claimed;
          return duration::zero();
        }
        ++st.stats->probes_deferred;
        // The breaker caps a wait by its open_duration_max; a year here
        // keeps the conversion to nanoseconds from overflowing.
        return std::chrono::milliseconds{
            std::min<int64_t>(r.reply->integer, max_peer_open_ms)};
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
