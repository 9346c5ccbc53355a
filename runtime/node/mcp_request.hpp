#pragma once

// What /mcp's two eras share in reading a request and writing its answer
// (connection_mcp.cpp, connection_mcp_stateless.cpp).

#include <string>
#include <string_view>

#include <boost/beast/http/fields.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/mcp/jsonrpc.hpp"
#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/runtime/node/client_keys.hpp"
#include "sluice/runtime/policy/mcp/request_envelope.hpp"

namespace sluice::node {

/// The gateway's `initialize` result: tools, prompts and resources (read,
/// listed; no subscriptions, no list_changed to clients); sampling,
/// elicitation, roots, completion and logging are not relayed.
/// `server/discover` says the same.
nlohmann::json initialize_result(const std::string& version);

/// Whether `key` (none: anonymous) may read the resources of the server
/// with tool prefix `prefix`.
bool may_read_prefix(const client_key* key, const std::string& prefix);

/// A header's value ("" when absent).
std::string header_text(const http_fields& h, std::string_view name);

/// Whether the `Accept` header allows `type` (or */*).
bool accepts(const http_fields& h, std::string_view type);

/// What request `m` with headers `h` says of its era. The decoded
/// `Mcp-Name` (from `=?base64?...?=`) is kept in `name_store`, which must
/// outlive the result, as must `m` and `h`.
policy::mcp::request_envelope read_envelope(const http_fields& h,
                                            const mcp::message& m,
                                            std::string& name_store);

/// A 2026-07-28 result as its clients read it: `resultType` "complete"
/// (the gateway relays no multi-round results), and on lists and reads the
/// cache hints (`ttlMs` 0: lists change, and are filtered per key).
void stateless_result(std::string_view method, nlohmann::json& result);

/// The error message of a method the gateway does not serve.
constexpr const char* mcp_unknown_method =
    "method not supported by the gateway (tools, prompts and resources; no "
    "subscriptions, completion or logging)";

} // namespace sluice::node
