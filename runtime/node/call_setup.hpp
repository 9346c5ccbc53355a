#pragma once

// What a governed call takes from its request's headers before it starts:
// the session it joins and the headers it carries upstream. Pure: no I/O,
// no state.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/fields.hpp>

#include "sluice/actors/wire/block_allocator.hpp"

namespace sluice::node {

/// The session a call joins, from its `X-Session-Id`.
struct call_session {
  /// Why `X-Session-Id` is refused (400); empty when accepted.
  std::string error;
  /// The session's name. Empty for a key's call without `X-Session-Id`:
  /// the key itself is the session (its own tier).
  std::string name;
};

/// Session ids live in namespaces no client can write into: a key's
/// sub-sessions under its name (`key/NAME/ID`), anonymous ones under
/// `anon/ID`, apart from the per-connection fallback `conn/N`, so no
/// client can join another's session. `key_name`: null when anonymous.
call_session session_for(const http_fields& headers,
                         const std::string* key_name, uint64_t connection_id);

/// The headers a call sends upstream on its client's behalf: its request
/// id, then each trace header the client sent once with a valid value.
std::vector<std::pair<std::string, std::string>>
forwarded_headers(const http_fields& headers,
                  const std::string& request_id);

} // namespace sluice::node
