#include "sluice/actors/payload.hpp"

#include <nlohmann/json.hpp>

namespace sluice {

std::string with_model(std::string_view payload, const std::string& model) {
  using json = nlohmann::json;
  auto doc = json::parse(payload, nullptr, false);
  if (!doc.is_object())
    return std::string{payload};
  doc["model"] = model;
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace sluice
