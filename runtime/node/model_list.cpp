#include "sluice/runtime/node/model_list.hpp"

#include <algorithm>

namespace sluice::node {

using json = nlohmann::json;

json model_object(const std::string& id, int64_t created) {
  return json{{"id", id},
              {"object", "model"},
              {"created", created},
              {"owned_by", "sluice"}};
}

std::optional<json> models_answer(std::vector<std::string> models,
                                  const client_key* key, const std::string& id,
                                  int64_t created) {
  if (key)
    models.erase(
        std::remove_if(models.begin(), models.end(),
                       [&](const std::string& m) { return !key->may_use(m); }),
        models.end());
  if (id.empty()) {
    json data = json::array();
    for (auto& m : models)
      data.push_back(model_object(m, created));
    return json{{"object", "list"}, {"data", std::move(data)}};
  }
  if (std::find(models.begin(), models.end(), id) == models.end())
    return std::nullopt;
  return model_object(id, created);
}

std::string model_filter_of(const client_key* key) {
  if (key == nullptr)
    return "*";
  // Globs cannot hold '\n' (names are 1-256 printable bytes).
  std::string filter;
  for (auto& glob : key->config().models)
    filter += glob + '\n';
  return filter;
}

std::shared_ptr<const std::string>
model_list_cache::get(uint64_t version, const std::string& filter,
                      const builder& build) {
  std::lock_guard<std::mutex> guard{mx_};
  for (auto i = entries_.begin(); i != entries_.end(); ++i)
    if (i->version == version && i->filter == filter) {
      entries_.splice(entries_.begin(), entries_, i);
      return i->body;
    }
  auto body = std::make_shared<const std::string>(build());
  ++builds_;
  // Lists of earlier versions are never asked for again: they go first.
  entries_.remove_if([version](const entry& e) { return e.version < version; });
  if (entries_.size() >= max_cached_model_lists)
    entries_.pop_back();
  entries_.push_front({version, filter, body});
  return body;
}

size_t model_list_cache::size() const {
  std::lock_guard<std::mutex> guard{mx_};
  return entries_.size();
}

} // namespace sluice::node
