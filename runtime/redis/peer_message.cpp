#include "sluice/runtime/redis/peer_message.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace sluice {

namespace {

using json = nlohmann::json;

// A whole number of milliseconds in [0, max_peer_open_ms], saturated,
// never wrapped (SPEC §7); nothing if it is not an integer.
std::optional<int64_t> read_ms(const json& v) {
  int64_t x = 0;
  if (v.is_number_unsigned())
    x = v.get<uint64_t>() > uint64_t(max_peer_open_ms)
            ? max_peer_open_ms
            : static_cast<int64_t>(v.get<uint64_t>());
  else if (v.is_number_integer())
    x = v.get<int64_t>();
  else
    return std::nullopt;
  return std::clamp<int64_t>(x, 0, max_peer_open_ms);
}

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
  if (!own_node.empty() && node->get_ref<const std::string&>() == own_node)
    return std::nullopt; // our own, back from the channel
  auto to = policy::parse_breaker_state(state->get_ref<const std::string&>());
  // Only what a node decides by itself is published.
  if (to != breaker_state::open && to != breaker_state::closed)
    return std::nullopt;
  peer_message out;
  out.node = node->get<std::string>();
  out.source = source->get<std::string>();
  out.to = *to;
  if (out.source.empty())
    return std::nullopt;
  // The breaker bounds the period further by its own open_duration_max.
  if (auto ms = field("open_for_ms")) {
    auto v = read_ms(*ms);
    if (!v)
      return std::nullopt;
    out.open_for = std::chrono::milliseconds{*v};
  }
  if (auto g = field("gen")) {
    // Generations are the server's clock in µs plus a count: far below
    // 2^53. A larger one is forged, and would make this node drop every
    // later transition of the source as stale.
    if (!g->is_number_unsigned() || g->get<uint64_t>() > max_peer_gen)
      return std::nullopt;
    out.gen = g->get<uint64_t>();
  }
  if (auto u = field("until_ms")) {
    // An instant, not a period: any non-negative integer, saturated.
    if (u->is_number_unsigned())
      out.until_ms = static_cast<int64_t>(std::min<uint64_t>(
          u->get<uint64_t>(), uint64_t(INT64_MAX)));
    else if (u->is_number_integer() && u->get<int64_t>() >= 0)
      out.until_ms = u->get<int64_t>();
    else
      return std::nullopt;
  }
  return out;
}

peer_gen_check check_peer_gen(std::optional<uint64_t> last,
                              uint64_t gen) noexcept {
  if (!last)
    return peer_gen_check::confirm;
  if (gen < *last)
    return peer_gen_check::stale;
  if (*last < UINT64_MAX && gen == *last + 1)
    return peer_gen_check::next;
  return peer_gen_check::confirm;
}

} // namespace sluice
