#pragma once

// The answers of `GET /v1/models` and `GET /v1/models/ID`, in OpenAI's
// shapes. Pure: the route table's models and the caller's key are given.

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
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

/// Bodies of `GET /v1/models` kept (one per routes version and key filter
/// seen): beyond, the least recently used goes. A body is ~80 bytes per
/// model listed: 64 lists of 10,000 models are ~50 MiB at most.
constexpr size_t max_cached_model_lists = 64;

/// What identifies a caller's view of the models: its key's model globs
/// ("*" for a caller without a key). Keys with the same globs share a list.
std::string model_filter_of(const client_key* key);

/// The bodies of `GET /v1/models`, built once per routes version and model
/// filter, and served from here (issue 30, finding 8: building the list of
/// 10,000 models took 317 ms of a loop per request). A reload changes the
/// routes version, so its lists are built anew. Thread-safe: every loop
/// asks it.
class model_list_cache {
public:
  using builder = std::function<std::string()>;

  /// The body for `version` and `filter`, built by `build()` on a miss.
  /// The build runs under the cache's lock: callers asking for a list
  /// being built wait for it rather than build it again.
  std::shared_ptr<const std::string>
  get(uint64_t version, const std::string& filter, const builder& build);

  /// Lists built so far (misses).
  uint64_t builds() const noexcept { return builds_; }

  size_t size() const;

private:
  struct entry {
    uint64_t version;
    std::string filter;
    std::shared_ptr<const std::string> body;
  };
  mutable std::mutex mx_;
  /// Most recently used first.
  std::list<entry> entries_;
  std::atomic<uint64_t> builds_{0};
};

} // namespace sluice::node
