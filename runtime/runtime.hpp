#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/actors/cluster_tier.hpp"
#include "sluice/actors/governor.hpp"
#include "sluice/actors/http_source.hpp"
#include "sluice/actors/simulated_source.hpp"
#include "sluice/runtime/admission_config.hpp"
#include "sluice/runtime/admission_tiers.hpp"
#include "sluice/runtime/policy/admission/session_cache.hpp"
#include "sluice/runtime/policy/model_match.hpp"
#include "sluice/runtime/policy/route_config.hpp"
#include "sluice/runtime/policy/source/source_settings.hpp"
#include "sluice/runtime/redis/config.hpp"
#include "sluice/runtime/runtime_config.hpp"

namespace sluice {

struct breaker_relay_stats;
struct remote_source_config;
class remote_link_health;
class mcp_server_view;
struct mcp_server_settings;

/// The plan a call's route and model select (null with a miss).
struct route_match {
  std::shared_ptr<const route_plan> plan;
  route_miss miss = route_miss::none;
};

/// Per-call options.
struct call_options {
  /// Session identity: calls with the same id share the session tier.
  std::string session = "default";
  /// A session tier of the caller's own, used instead of the runtime's tier
  /// for `session` (the node: a client key's tier, see
  /// `admission_tiers::new_tier`).
  std::optional<tier_handle> session_tier{};
  /// A tier shared by a group of sessions, taken right after the session's
  /// own (the node: the key of an `X-Session-Id` sub-session, so a key's
  /// sub-sessions are capped each and together).
  std::optional<tier_handle> session_group{};
  /// Connection tier; empty: the runtime's shared "embedded" connection.
  std::optional<tier_handle> connection;
  /// For a streamed call (`call_request::stream`) through the callback form
  /// of `runtime::call`: runs on an actor thread for each piece of the
  /// answer, in order, all before the result callback.
  std::function<void(std::string)> on_chunk;
};

/// A call in flight; `cancel()` terminates its governor, which returns
/// everything the call held.
class call_handle {
public:
  call_handle() = default;
  explicit call_handle(caf::actor governor)
      : governor_(std::move(governor)) {
    // nop
  }

  void cancel() const;

  const caf::actor& governor() const noexcept { return governor_; }

private:
  caf::actor governor_;
};

/// What the runtime knows of its actors' deaths, and what a source handle's
/// `lifetime` points at (runtime/source_lifetime.hpp).
struct actor_health;
struct source_lifetime;

/// The route of MCP server `server`'s tool calls: `mcp:NAME`, of kind
/// `kind`, to its source `mcp:NAME` alone (one place for the node's start
/// and a reload's plan).
route_config mcp_route(const std::string& server, const std::string& kind);

/// The facade an embedding service uses without knowing actors: build it
/// from a config, register sources (built-in or the service's own actors) and
/// routes, then make calls and get a `call_result` through a callback, a
/// future, or as an actor request to the governor.
///
/// Thread-safe: every member may be called from any thread.
class runtime {
public:
  /// Validates `cfg` (throws `config_error` naming the key) and starts the
  /// process-global tier and the scope backend.
  runtime(caf::actor_system& sys, runtime_config cfg);

  /// Stops the actors the runtime made: built-in sources, breakers, source
  /// gates and the scope backend (sources registered with `add_source` are
  /// the service's own and stay). Their pending timers then no longer keep
  /// the actor system from shutting down. Calls still in flight find no
  /// source and end with their verdicts; cancel them first to end them now.
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Registers a source implemented by the service (see messages/source.hpp).
  /// Throws `config_error` if the name is taken or the settings are nonsense.
  void add_source(const std::string& name, source_actor actor,
                  const source_settings& settings = {});

  /// Registers a built-in simulated source; returns it (for its stats).
  simulated_source add_simulated_source(const std::string& name,
                                        const sim_config& sim,
                                        const source_settings& settings = {});

  /// Registers a built-in HTTP source; returns it (for its stats). Throws
  /// `config_error` naming the key of nonsense settings.
  http_source add_http_source(const std::string& name,
                              const http_source_config& http,
                              const source_settings& settings = {});

  /// Registers a source served by another process (runtime/remote_source
  /// .hpp): a connector actor of the runtime's, stopped with it. The actor
  /// system needs `enable_remote_sources`. Throws `config_error` naming the
  /// key of nonsense settings.
  void add_remote_source(const std::string& name,
                         const remote_source_config& remote,
                         const source_settings& settings = {});

  /// Registers an upstream MCP server (SPEC §13) run as a stdio child:
  /// source `mcp:NAME` (its breaker, gate and tier as any source's) and
  /// route `mcp:NAME` of kind `kind` to it, which the node's `tools/call`s
  /// for its tools take. Returns what the node reads of it (its tools).
  /// Throws `config_error` naming the key of nonsense settings.
  std::shared_ptr<const mcp_server_view>
  add_mcp_server(const mcp_server_settings& server,
                 const source_settings& settings, const std::string& kind);

  /// The view of MCP server `name` added with `add_mcp_server` (null: none;
  /// a reload's `update` may add, replace and retire servers: their source
  /// `mcp:NAME` is added, or retired, and the route comes from the plan,
  /// `mcp_route`).
  std::shared_ptr<const mcp_server_view>
  mcp_server(const std::string& name) const;

  /// Every MCP server added, in the order of their names.
  std::vector<std::shared_ptr<const mcp_server_view>> mcp_servers() const;

  /// Registers a route. Throws `config_error` naming the key if its kind or
  /// a source is unknown, its weights do not match its sources, or a model
  /// pattern is malformed or listed twice.
  void add_route(route_config route);

  /// The plan for a call on `route` naming `model` (empty: none): the
  /// route's model entry the model matches, else its default sources.
  route_match find_route(const std::string& route,
                         const std::string& model) const;

  /// The model names the routes list exactly (globs are not models), each
  /// once, in the order the routes were added.
  std::vector<std::string> models() const;

  /// Changes whenever the route table does (a route added, a reload
  /// applied): what a cache of anything built from the routes, such as
  /// the node's `/v1/models` bodies, is keyed by.
  uint64_t routes_version() const noexcept {
    return routes_version_.load(std::memory_order_acquire);
  }

  /// Starts a call; `done` runs once, on an actor thread, with the result
  /// (`call_status::cancelled` if the call was cancelled). Throws
  /// `std::invalid_argument` for an unknown route, or a model the route
  /// cannot serve (see `find_route`).
  call_handle call(call_request request, std::function<void(call_result)> done,
                   const call_options& options = {});

  /// Starts a call and returns the future of its result. Not for streamed
  /// calls (throws `std::invalid_argument`).
  std::future<call_result> call(call_request request,
                                const call_options& options = {});

  /// Spawns the governor of a call without starting it, for actors: send it
  /// `call_atom` and await a `call_result` (monitor it to see a cancel).
  caf::actor spawn_call(call_request request, const call_options& options = {});

  /// The tier of session `id`, made on first use. A session's tier is kept
  /// while calls in it are in flight and for `session_idle_ttl` after its
  /// last call began; then it is dropped (its counts are zero) and made
  /// anew on the next call. (Dropping it at once made every request of a
  /// keep-alive client spawn a tier actor.)
  tier_handle session(const std::string& id);

  /// How long an idle session's tier is kept for its next call.
  static constexpr duration session_idle_ttl = std::chrono::seconds{60};

  /// Most session tiers kept (in use or idle). Beyond it, the least
  /// recently used idle ones go at once, TTL or not: a flood of distinct
  /// session ids costs at most this many tiers (~2.5 KiB each, with the
  /// id). Sessions with calls in flight are never dropped; their number is
  /// bounded by the global cap.
  static constexpr size_t max_kept_sessions = 10000;

  /// Session tiers kept right now.
  size_t kept_session_count() const;

  /// The sessions with calls in flight and their tiers' counts.
  std::vector<std::pair<std::string, tier_status>> live_sessions() const;

  /// A tier for a new client connection.
  tier_handle new_connection() const { return tiers_.new_connection(); }

  const admission_tiers& tiers() const noexcept { return tiers_; }

  /// The source named `name` (throws `std::out_of_range` if unknown).
  source_handle source(const std::string& name) const;

  /// Whether a route with this name exists.
  bool has_route(const std::string& name) const;

  /// The scopes of all routes (each once), whose progress the backend keeps.
  std::vector<std::string> scopes() const;

  /// One source list's retry budget, as `/status` shows it.
  struct budget_status {
    /// Names the list: the route's name, or "ROUTE model PATTERN".
    std::string label;
    /// The scope its calls' progress is judged in.
    std::string scope;
    uint32_t active = 0;
    uint32_t retrying = 0;
    uint32_t allowed = 0;
    uint64_t refused = 0;
  };

  /// The retry budgets of all routes that have one, in route order.
  std::vector<budget_status> retry_budgets() const;

  /// The routes' ejection limits and which sources they hold in service.
  const shared_ejections& ejections() const { return *ejections_; }

  /// Every registered source, by name.
  std::vector<source_handle> sources() const;

  /// The built-in HTTP source registered as `name`, if that is one (for its
  /// stats and TLS settings in /status).
  std::optional<http_source> find_http_source(const std::string& name) const;

  /// The actor system the runtime runs on.
  caf::actor_system& system() const noexcept { return sys_; }

  /// The scope-state backend.
  const caf::actor& backend() const noexcept { return backend_; }

  /// The configuration the runtime was built from.
  const runtime_config& config() const noexcept { return cfg_; }

  // -- health of the actors the runtime spawned
  // --------------------------------

  /// Whether an actor the runtime spawned for source `name` -- its breaker,
  /// its source gate, or the built-in source itself -- has terminated while
  /// the runtime lives. Such a source is broken: never report it healthy
  /// (the front's /status shows it). Lock-free when nothing broke: one
  /// relaxed load; else a short lock. Thread-safe.
  bool broken(const std::string& name) const;

  /// Every broken source with what ended its actor (e.g. "breaker: an
  /// exception escaped: std::bad_alloc"), by name -- and every remote
  /// source that cannot serve now, with why ("remote: lost: closed by the
  /// peer"; healthy again once it reconnects).
  std::vector<std::pair<std::string, std::string>> broken_sources() const;

  /// The startup check (and `sluice-node --check-config`'s dry run): asks
  /// every source's breaker and gate for their status within `timeout` --
  /// an answer proves the actor started -- then throws a `config_error`
  /// with key `sources.NAME` for the first broken source. Blocks the
  /// calling thread (a `scoped_actor`): call it from a thread of the
  /// service's own, with the real scheduler (not CAF's testing one).
  void check_started(duration timeout = std::chrono::seconds{5}) const;

  /// This node's side of the global tier across nodes (null: none).
  const std::shared_ptr<cluster_tier_stats>& cluster_stats() const noexcept {
    return cluster_stats_;
  }

  /// What this node's breaker relay published and applied (null: breakers
  /// are not shared).
  const std::shared_ptr<breaker_relay_stats>& relay_stats() const noexcept {
    return relay_stats_;
  }

  /// A reload's new kinds, sources and routes, applied in one step by
  /// `update`.
  struct update_plan {
    /// The call kinds of the new config (all of them).
    std::map<std::string, policy::call_policy> kinds;
    /// Sources taken out: removed from the config, or replaced (built
    /// afresh by `update`'s `add_sources` under the same name).
    std::vector<std::string> retire;
    /// Sources kept with new settings of their own, applied in place:
    /// breaker and AIMD settings (state, generation, open period and limit
    /// reached stay), a new quota (starting full) and model names.
    std::vector<std::pair<std::string, source_settings>> tune;
    /// Every route of the new config, in its order.
    std::vector<route_config> routes;
    /// Of those, the ones whose plans (and retry budgets) stay as they
    /// are: unchanged, naming no replaced source.
    std::vector<std::string> keep_routes;
  };

  /// Applies `plan` (config reload). `add_sources()` adds the new and the
  /// replaced sources with `add_*_source`, whose names the retired ones no
  /// longer take; then every route is checked and built against the new
  /// set of sources and kinds. If anything throws, all it built is stopped
  /// and the runtime serves on as before (the exception propagates, a
  /// `config_error` naming the key). Otherwise, in one step under the
  /// lock, calls find the new routes, sources and kinds. Calls in flight
  /// finish on the plans they started with; a retired source serves them
  /// and its actors stop when the last of them is done
  /// (`draining_sources`). Kept sources keep their breaker, pools and AIMD
  /// limit. One update at a time (others wait); not thread-safe against
  /// `add_source` / `add_route` from another thread.
  void update(const update_plan& plan,
              const std::function<void()>& add_sources);

  /// Sources a reload took out that still serve calls started before it.
  std::vector<std::string> draining_sources() const;

private:
  // Built-in sources are self-timed (see messages/source.hpp); an HTTP
  // source on the loops also takes its attempts from governors directly.
  void add_source(const std::string& name, source_actor actor,
                  const source_settings& settings, bool self_timed,
                  std::weak_ptr<direct_attempts> direct = {},
                  bool own_actor = false,
                  std::shared_ptr<const remote_link_health> link = nullptr);

  struct route_entry {
    /// The default plan (null: none).
    std::shared_ptr<const route_plan> fallback;
    policy::model_rules rules;
    std::vector<std::shared_ptr<const route_plan>> by_model;
  };

  /// Checks `r` against `kinds` and the sources `find` knows, and builds
  /// its plans (throws `config_error`). Registers nothing.
  route_entry
  build_route(const route_config& r,
              const std::map<std::string, policy::call_policy>& kinds,
              const std::function<const source_handle*(const std::string&)>&
                  find) const;

  std::shared_ptr<const route_plan> route(const call_request& request) const;

  governor_config make_governor_config(call_request request,
                                       const call_options& options,
                                       std::function<void(call_result)> done);

  caf::actor_system& sys_;
  runtime_config cfg_;
  admission_tiers tiers_;
  tier_handle embedded_connection_;
  caf::actor backend_;
  /// The global tier across nodes (null: none).
  std::shared_ptr<cluster_tier_stats> cluster_stats_;
  caf::actor cluster_;
  /// Shares breaker state through Redis (null: none).
  std::shared_ptr<breaker_relay_stats> relay_stats_;
  caf::actor relay_;
  /// Sources and routes: written while the service sets up, read by every
  /// call (readers share the lock).
  mutable std::shared_mutex mx_;
  std::map<std::string, source_handle> sources_;
  std::map<std::string, std::shared_ptr<const mcp_server_view>> mcp_servers_;
  std::map<std::string, http_source> http_sources_;
  /// The routes' ejection limits, obeyed by every source's breaker.
  std::shared_ptr<shared_ejections> ejections_ =
      std::make_shared<shared_ejections>();
  /// Actors of the runtime's that are not self-timed sources (remote
  /// sources' connectors): stopped with it.
  std::vector<caf::actor> owned_;

  std::map<std::string, route_entry> routes_;
  /// During `update` (guarded by `mx_`): what `add_sources` adds goes to
  /// `staged_`, and the names in `staging_free_` (retired) are free.
  bool staging_ = false;
  std::set<std::string> staging_free_;
  std::map<std::string, source_handle> staged_;
  std::map<std::string, source_handle> tuned_;
  std::map<std::string, http_source> staged_http_;
  std::map<std::string, std::shared_ptr<const mcp_server_view>> staged_mcp_;
  std::vector<caf::actor> staged_owned_;
  /// Sources a reload took out, while calls still hold them.
  std::vector<std::pair<std::string, std::weak_ptr<source_lifetime>>> retired_;
  /// One update at a time.
  std::mutex update_mx_;
  /// Route names in the order they were added.
  std::vector<std::string> route_order_;
  /// Bumped (under `mx_`, after the change) by every change of the routes.
  std::atomic<uint64_t> routes_version_{1};
  mutable std::mutex sessions_mx_;
  policy::session_cache<tier_handle> sessions_{session_idle_ttl,
                                               max_kept_sessions};
  time_point last_sweep_{};
  std::atomic<uint64_t> next_seed_;
  /// Filled by functors attached to the actors of each source.
  std::shared_ptr<actor_health> health_;
};

} // namespace sluice
