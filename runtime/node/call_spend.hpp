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
#include "sluice/runtime/node/spend_ledger.hpp"
#include "sluice/runtime/node/stream_usage.hpp"
#include "sluice/runtime/policy/spend/spend.hpp"

namespace sluice::node {

class call_spend {
public:
  using header_list = std::vector<std::pair<std::string, std::string>>;

  /// Before the call: reserves its estimate in `key`'s scope and `route`'s
  /// (each if it has one). For a streamed call `body` may be rewritten to
  /// ask the upstream for usage. A refusal when a limit refuses (429
  /// rate_limit_exceeded with type "tokens", or insufficient_quota) or a
  /// budget applies to a model with no price (403).
  std::optional<refusal> open(client_key* key, const spend_book& book,
                              const std::string& route,
                              const std::string& model, bool stream,
                              std::string& body, time_point now,
                              wall_time wall);

  /// The headers of `key`'s request rate and token limits, before the
  /// call is planned (a refusal of its rate carries them too).
  void key_limits(client_key* key, time_point now) {
    set_headers(key, nullptr, now);
  }

  /// Limits apply to the call (a reservation is held).
  bool active() const noexcept { return hold_.active(); }

  /// The x-ratelimit-* headers of the call's answer (or refusal).
  const header_list& headers() const noexcept { return headers_; }

  /// A piece of the streamed answer on its way to the client: read, and
  /// the gateway's usage chunk taken out (it may come out empty).
  void on_piece(std::string& piece);

  /// The stream ended: what is still held back, for the client.
  std::string flush();

  /// The call ended: settles the reservation with what it used.
  void close(const call_result& r, time_point now, wall_time wall);

  /// What the call used and cost (after `close`).
  const std::optional<policy::token_usage>& usage() const noexcept {
    return usage_;
  }
  policy::money cost() const noexcept { return cost_; }

private:
  void set_headers(client_key* key, const spend_scope* route_scope,
                   time_point now);

  spend_hold hold_;
  std::optional<stream_usage> stream_;
  policy::token_usage estimate_;
  std::optional<policy::model_price> price_;
  uint64_t relayed_bytes_ = 0;
  header_list headers_;
  std::optional<policy::token_usage> usage_;
  policy::money cost_ = 0;
};

} // namespace sluice::node
