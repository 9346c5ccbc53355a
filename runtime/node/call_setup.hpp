#pragma once

// What a governed call takes from its request before it starts: the
// session it joins, its model and stream flag (or the refusal), and the
// headers it carries upstream. Pure: no I/O, no state.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/fields.hpp>

#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/runtime/node/refusal.hpp"
#include "sluice/runtime/policy/route_config.hpp"

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

/// What a call's body decides before the call starts: its model and
/// stream flag, or why it is refused (`error` set).
struct call_plan : refusal {
  std::string model;
  bool stream = false;
};

/// Plans the call of `body` on its route: the body must be a JSON object
/// (`inspect_body`); a client key (`key_name`, null: anonymous) may call
/// only the models `may_use` lets it (as OpenAI: another model does not
/// exist for it; no model at all is refused when the key is limited, since
/// the route's default would serve any); `route_of` says whether the route
/// serves the model (`route_miss`). The refusals name `model` where it is
/// the field at fault.
call_plan plan_call(std::string_view body, const std::string* key_name,
                    const std::function<bool(const std::string&)>& may_use,
                    const std::function<route_miss(const std::string&)>& route_of,
                    const std::string& path);

/// A model that does not exist for the caller (404 `model_not_found`).
refusal model_refusal(const std::string& model);

} // namespace sluice::node
