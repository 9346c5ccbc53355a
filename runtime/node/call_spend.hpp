#pragma once

// One call's part in the node's spend limits (SPEC §12): the estimate it
// reserves in its key's and its route's scopes before it is sent, its
// usage read from the answer (a stream's usage chunk, asked for by the
// gateway and taken out again when the client did not ask), its
// settlement when it ends, and the x-ratelimit-* headers of its answer.
// Owned by the connection, one per call; single-threaded.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/messages/call.hpp"
#include "sluice/runtime/node/client_keys.hpp"
#include "sluice/runtime/node/refusal.hpp"
#include "sluice/runtime/node/shared_spend.hpp"
#include "sluice/runtime/node/spend_ledger.hpp"
#include "sluice/runtime/node/stream_usage.hpp"
#include "sluice/runtime/policy/spend/spend.hpp"

namespace sluice::node {

class call_spend {
public:
  call_spend() = default;
  call_spend(const call_spend&) = delete;
  call_spend& operator=(const call_spend&) = delete;
  /// Gives back a reservation in Redis not settled.
  ~call_spend();

  /// For the next request: whatever the last call reserved and did not
  /// settle is given back, and nothing of it stays.
  void reset();

  using header_list = std::vector<std::pair<std::string, std::string>>;

  /// Before the call: reserves its estimate in `key`'s scope and `route`'s
  /// (each if it has one). For a streamed call `body` may be rewritten to
  /// ask the upstream for usage. A refusal when a limit refuses (429
  /// rate_limit_exceeded with type "tokens", or insufficient_quota) or a
  /// budget applies to a model with no price (403). With `shared` (the
  /// Redis backend) the limits are counted there: nothing is reserved yet,
  /// `shared_limits()` says in what, and `on_shared` takes the answer.
  std::optional<refusal> open(client_key* key, const spend_book& book,
                              const std::string& route,
                              const std::string& model, bool stream,
                              std::string& body, time_point now, wall_time wall,
                              std::shared_ptr<shared_spend> shared = nullptr);

  /// What to reserve in Redis before the call is sent (empty: nothing,
  /// `open` decided).
  const std::vector<shared_limit>& shared_limits() const noexcept {
    return waiting_ ? limits_ : no_limits_;
  }

  /// Redis's answer to the reservation of `shared_limits()`: a refusal, or
  /// the call may go. Redis not answering refuses the call (503
  /// governance_backend_error) or, with the ledger's `open_when_down`, has
  /// this node count alone.
  std::optional<refusal> on_shared(const shared_limits::outcome& o,
                                   time_point now, wall_time wall);

  /// The headers of `key`'s request rate and token limits, before the
  /// call is planned (a refusal of its rate carries them too).
  void key_limits(client_key* key, time_point now) {
    set_headers(key, nullptr, now);
  }

  /// Limits apply to the call (a reservation is held).
  bool active() const noexcept {
    return hold_.active() || !reservation_.empty();
  }

  /// The x-ratelimit-* headers of the call's answer (or refusal).
  const header_list& headers() const noexcept { return headers_; }

  /// A piece of the streamed answer on its way to the client: read, and
  /// the gateway's usage chunk taken out (it may come out empty).
  void on_piece(std::string& piece);

  /// The stream ended: what is still held back, for the client.
  std::string flush();

  /// The call ended: settles the reservation with what it used.
  void close(const call_result& r, time_point now, wall_time wall);

  /// What the call used (after `close`): nothing when no usage was read --
  /// not a call, no answer, or a stream of an unpriced model under no
  /// limit.
  const std::optional<policy::token_usage>& usage() const noexcept {
    return usage_;
  }
  policy::money cost() const noexcept { return cost_; }
  /// What the call reserves in tokens (0: no estimate was made).
  uint64_t tokens() const noexcept {
    return estimated_ ? estimate_.total() : 0;
  }

  /// The model has a price (`cost` means something).
  bool priced() const noexcept { return price_.has_value(); }

private:
  void set_headers(client_key* key, const spend_scope* route_scope,
                   time_point now);
  /// In this process: all of `scopes_` or none.
  std::optional<refusal> reserve_here(time_point now, wall_time wall);
  /// A reservation in Redis not settled is given back.
  void give_back();
  /// Reads the streamed answer's usage, asked of the upstream if need be.
  void watch_stream(std::string& body);

  spend_hold hold_;
  /// The scopes of the call, its estimate, and its key and route.
  std::vector<std::shared_ptr<spend_scope>> scopes_;
  uint64_t tokens_ = 0;
  policy::money estimated_cost_ = 0;
  client_key* key_ = nullptr;
  std::shared_ptr<spend_scope> route_scope_;
  /// With the Redis backend: the ledger, the call's limits there (with
  /// their scopes), whether their reservation is being asked, and its id
  /// once granted.
  std::shared_ptr<shared_spend> ledger_;
  std::vector<shared_limit> limits_;
  std::vector<const spend_scope*> owners_;
  bool waiting_ = false;
  std::string reservation_;
  /// `open` let the call go: `close` reads its usage. `estimate_` holds
  /// (an answer without usage counts it).
  bool metered_ = false;
  bool estimated_ = false;
  static inline const std::vector<shared_limit> no_limits_{};
  std::optional<stream_usage> stream_;
  policy::token_usage estimate_;
  std::optional<policy::model_price> price_;
  uint64_t relayed_bytes_ = 0;
  header_list headers_;
  std::optional<policy::token_usage> usage_;
  policy::money cost_ = 0;
};

} // namespace sluice::node
