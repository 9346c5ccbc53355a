#include "sluice/actors/simulated_source.hpp"

#include <stdexcept>
#include <unordered_map>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/attempt_book.hpp"
#include "sluice/actors/sim_answers.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/rng.hpp"

namespace sluice {

void validate(const sim_config& cfg) {
  auto refuse = [](const std::string& field, const std::string& why) {
    throw field_error(field, why);
  };
  if (cfg.phases.empty())
    refuse("phases", "needs at least one phase");
  for (size_t i = 0; i < cfg.phases.size(); ++i) {
    auto& p = cfg.phases[i];
    auto at = "phases[" + std::to_string(i) + "].";
    if (p.length < duration::zero())
      refuse(at + "length", "must not be negative");
    if (p.latency_min < duration::zero() || p.latency_max < p.latency_min)
      refuse(at + "latency_max", "needs 0 <= latency_min <= latency_max");
    double sum = 0;
    for (auto [name, r] : {std::pair{"transient_rate", p.transient_rate},
                           std::pair{"rate_limit_rate", p.rate_limit_rate},
                           std::pair{"permanent_rate", p.permanent_rate},
                           std::pair{"hang_rate", p.hang_rate}}) {
      if (!(r >= 0.0 && r <= 1.0))
        refuse(at + name, "must be in [0, 1]");
      sum += r;
    }
    if (sum > 1.0 + 1e-9)
      refuse(at + "rates", "must add up to at most 1");
    if (!(p.stream_break_rate >= 0.0 && p.stream_break_rate <= 1.0))
      refuse(at + "stream_break_rate", "must be in [0, 1]");
  }
  if (cfg.embedding_dimensions < 1 ||
      cfg.embedding_dimensions > sim::max_embedding_dimensions)
    refuse("embedding_dimensions",
           "must be in [1, " + std::to_string(sim::max_embedding_dimensions) +
               "]");
}

namespace {

/// A streamed success comes as this many content chunks, spread over the
/// latency, then `data: [DONE]` with the reply.
constexpr int stream_chunks = 3;

struct pending_attempt {
  caf::response_promise promise;
  caf::actor_addr requester;
  source_reply reply;
  /// Streamed attempts: where the chunks go, and their tag.
  caf::actor stream_to;
  uint64_t tag = 0;
  /// This stream breaks off after its first chunk.
  bool breaks = false;
  /// Streamed attempts: the events still to send, in order.
  std::vector<std::string> events;
};

// Server-sent events of a streamed request that is not a chat: chunks of
// the fixed body's shape, one per piece.
std::vector<std::string> generic_events(uint64_t id) {
  std::vector<std::string> events;
  for (int k = 0; k < stream_chunks; ++k)
    events.push_back(
        "data: {\"id\":\"sim-" + std::to_string(id) +
        "\",\"object\":\"chat.completion.chunk\",\"created\":0,"
        "\"model\":\"simulated\",\"choices\":[{\"index\":0,\"delta\":{"
        "\"content\":\"simulated chunk " +
        std::to_string(k) + " \"},\"finish_reason\":null}]}\n\n");
  return events;
}

// The Unix time, for `created`.
int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct sim_state {
  sim_config cfg;
  std::shared_ptr<sim_stats> stats;
  policy::small_rng rng;
  time_point started{};
  uint64_t next_id = 1;
  attempt_book<pending_attempt> pending;

  static inline const char* name = "sluice.simulated_source";

  const sim_phase& phase_at(time_point now) const {
    auto elapsed = now - started;
    duration total{};
    for (auto& p : cfg.phases)
      total += p.length;
    if (cfg.repeat && total > duration::zero())
      elapsed = elapsed % total;
    for (auto& p : cfg.phases) {
      if (p.length == duration::zero() || elapsed < p.length)
        return p;
      elapsed -= p.length;
    }
    return cfg.phases.back();
  }

  double draw() { return rng.uniform(); }
};

using sim_actor = caf::stateful_actor<sim_state>;

// Picks this attempt's fate: its reply, or nothing for a hang.
std::optional<source_reply> fate(sim_state& st, const sim_phase& p) {
  using policy::outcome_kind;
  auto x = st.draw();
  auto pick = [&](double rate) {
    if (x < rate)
      return true;
    x -= rate;
    return false;
  };
  if (pick(p.hang_rate)) {
    ++st.stats->hung;
    return std::nullopt;
  }
  if (pick(p.transient_rate)) {
    ++st.stats->transient;
    return source_reply{outcome_kind::transient, 503,
                        sim::error_body("simulated 503", "server_error"),
                        p.retry_after};
  }
  if (pick(p.rate_limit_rate)) {
    ++st.stats->rate_limited;
    return source_reply{outcome_kind::rate_limited, 429,
                        sim::error_body("simulated 429", "rate_limit_error",
                                        "rate_limit_exceeded"),
                        p.retry_after};
  }
  if (pick(p.permanent_rate)) {
    ++st.stats->permanent;
    return source_reply{
        outcome_kind::permanent, 400,
        sim::error_body("simulated 400", "invalid_request_error"),
        std::nullopt};
  }
  ++st.stats->ok;
  return source_reply{outcome_kind::ok, 200, {}, std::nullopt};
}

caf::behavior sim_behavior(sim_actor* self, sim_config cfg,
                           std::shared_ptr<sim_stats> stats) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.stats = std::move(stats);
  st.rng.seed(st.cfg.seed);
  st.started = self->clock().now();
  // A requester that terminated, or sent `cancel_atom`, cancelled its
  // attempts.
  auto drop = [self](const caf::actor_addr& requester) {
    auto& st = self->state;
    for ([[maybe_unused]] auto id : st.pending.drop_requester(requester)) {
      --st.stats->in_flight;
      ++st.stats->cancelled;
    }
  };
  self->set_down_handler([drop](caf::down_msg& dm) { drop(dm.source); });
  return {
      [self](attempt_atom,
             const call_request& req) -> caf::result<source_reply> {
        auto& st = self->state;
        ++st.stats->attempts;
        ++st.stats->in_flight;
        auto now = self->clock().now();
        const auto& p = st.phase_at(now);
        auto latency = p.latency_min;
        if (p.latency_max > p.latency_min)
          latency += std::chrono::duration_cast<duration>(
              (p.latency_max - p.latency_min) * st.draw());
        auto reply = fate(st, p);
        auto id = st.next_id++;
        auto shaped = st.cfg.body ? sim::openai_request{}
                                  : sim::read_request(req.payload);
        if (reply && reply->kind == policy::outcome_kind::ok) {
          auto why = st.cfg.body
                         ? std::string{}
                         : sim::refusal(shaped, st.cfg.embedding_dimensions);
          if (st.cfg.body) {
            reply->body = *st.cfg.body;
          } else if (!why.empty()) {
            // What OpenAI answers a request it cannot serve: a 400.
            --st.stats->ok;
            ++st.stats->permanent;
            *reply = source_reply{policy::outcome_kind::permanent, 400,
                                  sim::error_body(why, "invalid_request_error"),
                                  std::nullopt};
          } else if (auto a = sim::answer(shaped, id, unix_now(),
                                          st.cfg.embedding_dimensions)) {
            reply->body = std::move(*a);
          } else {
            reply->body = fallback_body;
          }
        }
        // Self-timed: a fate that outlasts the attempt is a timeout at its
        // deadline.
        if (req.timeout > duration::zero() &&
            (!reply || latency > req.timeout)) {
          ++st.stats->timed_out;
          reply = source_reply{
              policy::outcome_kind::timeout, 0,
              sim::error_body("simulated source timed out", "timeout"),
              std::nullopt};
          latency = req.timeout;
        }
        // A zero-latency unary answer goes back at once: nothing to cancel,
        // so no bookkeeping, no monitor, no message to itself.
        if (reply && latency == duration::zero() &&
            !(reply->kind == policy::outcome_kind::ok && req.stream_to)) {
          --st.stats->in_flight;
          return std::move(*reply);
        }
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto promise = self->make_response_promise();
        pending_attempt pa{
            promise, requester, reply.value_or(source_reply{}), caf::actor{}, 0,
            false,   {}};
        // A streamed success: chunks spread over the latency, like tokens.
        if (reply && reply->kind == policy::outcome_kind::ok && req.stream_to) {
          pa.stream_to = req.stream_to;
          pa.tag = req.stream_tag;
          pa.reply.body.clear();
          if (p.stream_break_rate > 0 && st.draw() < p.stream_break_rate) {
            pa.breaks = true;
            pa.reply.kind = policy::outcome_kind::transient;
            pa.reply.body =
                sim::error_body("simulated stream broke off", "server_error");
            ++st.stats->stream_breaks;
          }
          pa.events =
              shaped.kind == sim::openai_request::shape::chat
                  ? sim::chat_events(shaped, id, unix_now(), stream_chunks)
                  : generic_events(id);
          // With no latency at all, in the mailbox ahead of the reply (a
          // delayed send of zero would go through the clock and come after
          // it: the stream was only `[DONE]`).
          auto n = static_cast<int>(pa.events.size());
          for (int k = 0; k < n; ++k)
            if (latency == duration::zero())
              self->send(self, sim_chunk_atom_v, id, k);
            else
              self->delayed_send(self, latency * (k + 1) / (n + 1),
                                 sim_chunk_atom_v, id, k);
        }
        st.pending.add(self, id, std::move(pa));
        // A zero latency answers without the clock thread.
        if (reply && latency == duration::zero())
          self->send(self, sim_reply_atom_v, id);
        else if (reply)
          self->delayed_send(self, latency, sim_reply_atom_v, id);
        return caf::delegated<source_reply>{};
      },
      [self, drop](cancel_atom) {
        drop(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [self](sim_chunk_atom, uint64_t id, int k) {
        auto* a = self->state.pending.find(id);
        if (a == nullptr)
          return; // cancelled meanwhile
        if (a->breaks && k > 0)
          return; // broke off after the first chunk
        self->send(a->stream_to, stream_chunk_atom_v, a->tag,
                   std::move(a->events.at(static_cast<size_t>(k))));
      },
      [self](sim_reply_atom, uint64_t id) {
        auto& st = self->state;
        auto p = st.pending.take(self, id);
        if (!p)
          return; // cancelled meanwhile
        --st.stats->in_flight;
        if (p->stream_to && !p->breaks)
          self->send(p->stream_to, stream_chunk_atom_v, p->tag,
                     std::string{"data: [DONE]\n\n"});
        p->promise.deliver(std::move(p->reply));
      },
  };
}

} // namespace

simulated_source spawn_simulated_source(caf::actor_system& sys,
                                        sim_config cfg) {
  validate(cfg);
  auto stats = std::make_shared<sim_stats>();
  auto a = sys.spawn(sim_behavior, std::move(cfg), stats);
  return {caf::actor_cast<source_actor>(a), std::move(stats)};
}

} // namespace sluice
