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

} // namespace sluice::node
