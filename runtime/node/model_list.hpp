#pragma once

// The answers of `GET /v1/models` and `GET /v1/models/ID`, in OpenAI's
// shapes. Pure: the route table's models and the caller's key are given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sluice/runtime/node/client_keys.hpp"

namespace sluice::node {

/// OpenAI's model object for `id`; `created`: Unix seconds.
nlohmann::json model_object(const std::string& id, int64_t created);

/// The body answering a caller with `key` (null: anonymous): the list of
/// `models` when `id` is empty, else the one model `id`; nothing when `id`
/// does not exist for this caller (404 model_not_found). A key sees only
/// the models it may use: for it, as in OpenAI, the others do not exist.
std::optional<nlohmann::json> models_answer(std::vector<std::string> models,
                                            const client_key* key,
                                            const std::string& id,
                                            int64_t created);

} // namespace sluice::node
