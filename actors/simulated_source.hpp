#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "sluice/messages/source.hpp"

namespace sluice {

/// One phase of a simulated source's script, e.g. "healthy for 10 s", then
/// "100 % 503 for 20 s".
struct sim_phase {
  /// How long the phase lasts; zero means "until the end" (last phase).
  duration length{};
  /// Each answer takes a uniform random time in [latency_min, latency_max].
  duration latency_min = std::chrono::milliseconds{10};
  duration latency_max = std::chrono::milliseconds{50};
  /// Shares of attempts (the rest succeed), each in [0, 1], sum <= 1.
  double transient_rate = 0;  // 503
  double rate_limit_rate = 0; // 429
  double permanent_rate = 0;  // 400
  double hang_rate = 0;       // never answers (the runtime's timeout ends it)
  /// Share of streamed successes that break off after their first chunk
  /// (the upstream closed mid-answer), in [0, 1].
  double stream_break_rate = 0;
  /// Retry-After sent with 429 and 503 answers, if any.
  std::optional<duration> retry_after;
};

/// A scripted, seeded simulated upstream for tests, demos and benchmarks.
struct sim_config {
  std::vector<sim_phase> phases = std::vector<sim_phase>(1);
  /// Start again at the first phase after the last (instead of staying in
  /// the last one).
  bool repeat = false;
  uint64_t seed = 1;
  /// Body of every successful answer. Unset: OpenAI-shaped answers built
  /// from the request (actors/sim_answers.hpp), and `fallback_body` for a
  /// request that is neither a chat nor an embeddings call.
  std::optional<std::string> body;
  /// Embeddings: the vectors' length unless the request asks for one.
  uint32_t embedding_dimensions = 1536;
};

/// A simulated success's body for a request that is not OpenAI-shaped.
inline constexpr const char* fallback_body = R"({"object":"simulated","ok":true})";

/// Throws `std::invalid_argument` naming the field of a nonsense setting.
void validate(const sim_config& cfg);

/// What a simulated source has seen; readable from any thread.
struct sim_stats {
  std::atomic<uint64_t> attempts{0};
  /// Attempts started and not yet answered or abandoned.
  std::atomic<int64_t> in_flight{0};
  /// Attempts abandoned because the requester terminated or cancelled them.
  std::atomic<uint64_t> cancelled{0};
  /// Attempts answered `timeout` because their fate (a hang, or a latency
  /// over `call_request::timeout`) would have outlasted the attempt.
  std::atomic<uint64_t> timed_out{0};
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> rate_limited{0};
  std::atomic<uint64_t> transient{0};
  std::atomic<uint64_t> permanent{0};
  std::atomic<uint64_t> hung{0};
  std::atomic<uint64_t> stream_breaks{0};
};

struct simulated_source {
  source_actor actor;
  std::shared_ptr<const sim_stats> stats;
};

/// Spawns a simulated source. Its script starts when it is spawned and runs
/// on the actor system's clock (virtual under the testing scheduler).
simulated_source spawn_simulated_source(caf::actor_system& sys, sim_config cfg);

} // namespace sluice
