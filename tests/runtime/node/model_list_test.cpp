// GET /v1/models: OpenAI's shapes, and a key seeing only its own models.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sluice/runtime/node/model_list.hpp"

using namespace sluice;
using namespace sluice::node;

namespace {

// Three models; a key that may use the gpt-4o family only.
struct fixture {
  std::vector<std::string> models{"gpt-4o", "gpt-4o-mini", "llama-3"};
  client_key narrow{make_config({"gpt-4o*"}), tier_handle{}, time_point{}};

  static client_key_config make_config(std::vector<std::string> globs) {
    client_key_config cfg;
    cfg.name = "narrow";
    cfg.models = std::move(globs);
    return cfg;
  }

  static std::vector<std::string> ids(const nlohmann::json& list) {
    std::vector<std::string> out;
    for (auto& m : list.at("data"))
      out.push_back(m.at("id").get<std::string>());
    return out;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "models: a model object in OpenAI's shape") {
  auto m = model_object("gpt-4o", 1700000000);
  CHECK(m.at("id") == "gpt-4o");
  CHECK(m.at("object") == "model");
  CHECK(m.at("created") == 1700000000);
  CHECK(m.at("owned_by") == "sluice");
  CHECK(m.size() == 4);
}

TEST_CASE_METHOD(fixture, "models: the list, whole for anonymous callers") {
  auto list = models_answer(models, nullptr, "", 7);
  REQUIRE(list);
  CHECK(list->at("object") == "list");
  CHECK(ids(*list) == models);
  CHECK(list->at("data").at(0).at("created") == 7);
  auto none = models_answer({}, nullptr, "", 7);
  REQUIRE(none);
  CHECK(none->at("data").is_array());
  CHECK(none->at("data").empty());
}

TEST_CASE_METHOD(fixture, "models: a key sees only the models it may use") {
  auto list = models_answer(models, &narrow, "", 7);
  REQUIRE(list);
  CHECK(ids(*list) == std::vector<std::string>{"gpt-4o", "gpt-4o-mini"});
  CHECK(models_answer(models, &narrow, "gpt-4o-mini", 7));
  // Not there for this key, as not there at all.
  CHECK_FALSE(models_answer(models, &narrow, "llama-3", 7));
  CHECK_FALSE(models_answer(models, nullptr, "mistral", 7));
}

TEST_CASE_METHOD(fixture, "models: one model by its id") {
  auto one = models_answer(models, nullptr, "llama-3", 9);
  REQUIRE(one);
  CHECK(*one == model_object("llama-3", 9));
}
