#pragma once

// The start's rules for `[node]` and `[auth]` that need no network: the
// front applies them before it binds anything, `sluice-node
// --check-config` applies the same, so what the check accepts the start
// does not refuse for these reasons. Each throws a `config_error` naming
// the key (and its line when the file gave one).

#include <optional>
#include <string>

#include "sluice/runtime/config_file.hpp"

namespace sluice::node {

/// Whether `host` is a loopback address, when its text says (a numeric
/// address, or "localhost"); nothing for any other name, which only its
/// resolution can tell (the front then applies the rules below to the
/// address it bound).
std::optional<bool> loopback_host(const std::string& host);

/// A listener that is not on loopback needs client keys unless
/// `auth.allow_anonymous` (at the start, and on each config reload, whose
/// `auth` meets the running listener `s`).
void check_open_to_anyone(bool loopback, const node_settings& s,
                          const auth_settings& auth);

/// `node.admin_listen` must not take the main listener's port on an
/// address that overlaps it (the same host, or either on all addresses):
/// the second bind would fail, or, with SO_REUSEPORT, split connections.
void check_listeners_apart(const node_settings& s);

/// `node.access_log`, a path: the file must be one the start can open for
/// appending without creating anything but the file -- its directory
/// exists, it is not a directory, and it (or, while it does not exist, its
/// directory) is writable. Checked with stat()/access(), nothing created:
/// --check-config leaves no trace.
void check_access_log(const node_settings& s);

} // namespace sluice::node
