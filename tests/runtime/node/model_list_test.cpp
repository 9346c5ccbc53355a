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

// -- the cache of GET /v1/models (issue 30, finding 8) -----------------------

TEST_CASE_METHOD(fixture, "models: the list is built once per routes version "
                          "and key filter, and served from the cache") {
  model_list_cache cache;
  int built = 0;
  auto build_for = [&](const client_key* key) {
    return [&, key] {
      ++built;
      return models_answer(models, key, "", 7)->dump();
    };
  };
  auto fresh = models_answer(models, nullptr, "", 7)->dump();
  for (int i = 0; i < 100; ++i)
    CHECK(*cache.get(1, model_filter_of(nullptr), build_for(nullptr)) == fresh);
  CHECK(built == 1);
  // The key's filter is a list of its own.
  auto narrow_list = cache.get(1, model_filter_of(&narrow), build_for(&narrow));
  CHECK(*narrow_list == models_answer(models, &narrow, "", 7)->dump());
  CHECK(built == 2);
  // Another key with the same globs shares it.
  client_key same{make_config({"gpt-4o*"}), tier_handle{}, time_point{}};
  cache.get(1, model_filter_of(&same), build_for(&same));
  CHECK(built == 2);
  // A new routes version (a reload): built again, the old ones dropped.
  models.push_back("mistral");
  auto v2 = cache.get(2, model_filter_of(nullptr), build_for(nullptr));
  CHECK(built == 3);
  CHECK(ids(nlohmann::json::parse(*v2)).back() == "mistral");
  CHECK(cache.size() == 1);
  CHECK(cache.builds() == 3);
}

TEST_CASE_METHOD(fixture, "models: the cache keeps at most "
                          "max_cached_model_lists lists") {
  model_list_cache cache;
  for (size_t i = 0; i < 3 * max_cached_model_lists; ++i)
    cache.get(1, "filter " + std::to_string(i), [] { return std::string{}; });
  CHECK(cache.size() == max_cached_model_lists);
  // The most recent are kept.
  auto builds = cache.builds();
  cache.get(1, "filter " + std::to_string(3 * max_cached_model_lists - 1),
            [] { return std::string{}; });
  CHECK(cache.builds() == builds);
}
