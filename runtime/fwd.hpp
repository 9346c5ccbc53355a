#pragma once

// Forward declarations of the runtime layer's types, for headers that name
// them only by reference or pointer: including this instead of the header
// that defines one keeps CAF and the actors out of such a header's readers
// (the config file's reader, the fuzz targets).

namespace sluice {

// runtime.hpp: the embedding facade.
class runtime;
struct runtime_config;
struct call_options;
class call_handle;
struct route_match;

// config/file_config.hpp: what the config file declares.
struct file_config;
struct node_settings;
struct auth_settings;
struct client_key_config;
struct source_decl;
struct route_decl;

// config_reload.hpp, http_front.hpp: the node's reloads and HTTP front.
class config_reloader;
struct reload_outcome;
struct reload_status;
class http_front;

// Redis and remote sources.
struct redis_config;
struct breaker_relay_stats;
struct remote_source_config;
class remote_link_health;

} // namespace sluice
