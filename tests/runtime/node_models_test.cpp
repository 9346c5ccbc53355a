// Routing by model through the node (SPEC §8): each model reaches its own
// upstream with the upstream's name for it, an unknown model is OpenAI's
// 404 model_not_found, a route without a default needs a model, and
// /v1/models lists what the routes name. Over real sockets on loopback.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fakes/script_upstream.hpp"
#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/http_front.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::script_upstream;
using namespace sluice::testing::loopback;

namespace {

// An upstream that answers every request 200 with {"upstream": NAME,
// "model": the model its body named}, and records the bodies.
struct echo_upstream {
  explicit echo_upstream(std::string name)
      : server{[this, name](script_upstream& self, tcp::socket& s,
                            const std::string& request) {
          auto at = request.find("\r\n\r\n");
          auto body = at == std::string::npos ? "" : request.substr(at + 4);
          {
            std::lock_guard<std::mutex> guard{mx};
            bodies.push_back(body);
          }
          auto doc = json::parse(body, nullptr, false);
          json answer{{"upstream", name},
                      {"model", doc.is_object() && doc.contains("model")
                                    ? doc["model"]
                                    : json(nullptr)}};
          auto text = answer.dump();
          return self.send(s, "HTTP/1.1 200 OK\r\nContent-Type: "
                              "application/json\r\nContent-Length: " +
                                  std::to_string(text.size()) + "\r\n\r\n" +
                                  text);
        }} {
  }

  std::string last_body() {
    std::lock_guard<std::mutex> guard{mx};
    return bodies.empty() ? "" : bodies.back();
  }

  std::mutex mx;
  std::vector<std::string> bodies;
  script_upstream server;
};

struct models_fixture {
  echo_upstream openai{"openai"};
  echo_upstream other{"other"};
  sluice::testing::node_under_test node{
      "[sources.openai]\ntype = \"http\"\nbase_url = \"" +
          openai.server.url() +
          "\"\n"
          "  [sources.openai.models]\n"
          "  \"gpt-4o\" = \"gpt-4o-2024-08-06\"\n"
          "[sources.other]\ntype = \"http\"\nbase_url = \"" +
          other.server.url() +
          "\"\n"
          "[sources.sim]\ntype = \"simulated\"\n"
          "  [[sources.sim.phases]]\n  latency_min_ms = 0\n"
          "  latency_max_ms = 0\n"
          // Chat: by model only, no default.
          "[routes.\"/v1/chat/completions\"]\nkind = \"chat\"\n"
          "  [routes.\"/v1/chat/completions\".models]\n"
          "  \"gpt-4o\" = [\"openai\"]\n"
          "  \"gpt-4o*\" = { sources = [\"openai\", \"other\"], "
          "weights = [1, 1] }\n"
          "  \"llama-3\" = [\"other\"]\n"
          // Embeddings: a default and one model.
          "[routes.\"/v1/embeddings\"]\nkind = \"embeddings\"\n"
          "sources = [\"sim\"]\n"
          "  [routes.\"/v1/embeddings\".models]\n"
          "  \"text-embedding-3-small\" = [\"openai\"]\n",
      {}, "models_test.toml"};
  std::unique_ptr<http_front>& front = node.front;

  reply post(const std::string& route, const std::string& body) {
    return exchange(front->port(), http::verb::post, route, body);
  }
};

} // namespace

TEST_CASE_METHOD(models_fixture, "models: each model reaches its own "
                                 "upstream, under the upstream's name",
                 "[node][models]") {
  auto r = post("/v1/chat/completions",
                R"({"model":"gpt-4o","messages":[]})");
  REQUIRE(r.status == 200);
  CHECK(r.doc()["upstream"] == "openai");
  // The upstream saw its own name; the rest of the body is kept.
  CHECK(r.doc()["model"] == "gpt-4o-2024-08-06");
  CHECK(json::parse(openai.last_body())["messages"] == json::array());
  r = post("/v1/chat/completions", R"({"model":"llama-3","messages":[]})");
  REQUIRE(r.status == 200);
  CHECK(r.doc()["upstream"] == "other");
  CHECK(r.doc()["model"] == "llama-3"); // no rename there
  // A glob: gpt-4o-mini goes to openai or other, never renamed.
  for (int i = 0; i < 10; ++i) {
    r = post("/v1/chat/completions", R"({"model":"gpt-4o-mini"})");
    REQUIRE(r.status == 200);
    CHECK(r.doc()["model"] == "gpt-4o-mini");
  }
  // Embeddings: the named model to openai, any other to the default.
  r = post("/v1/embeddings", R"({"model":"text-embedding-3-small",
                                 "input":"x"})");
  CHECK(r.doc()["upstream"] == "openai");
  r = post("/v1/embeddings", R"({"model":"whatever","input":["x","y"]})");
  REQUIRE(r.status == 200);
  CHECK(r.doc()["object"] == "list");
  CHECK(r.doc()["data"].size() == 2);
  r = post("/v1/embeddings", R"({"input":"no model"})");
  CHECK(r.status == 200);
  CHECK(r.doc()["object"] == "list");
}

TEST_CASE_METHOD(models_fixture, "models: an unknown model is OpenAI's 404, "
                                 "a missing one a 400, and no upstream is "
                                 "called",
                 "[node][models]") {
  auto before = openai.server.requests.load() + other.server.requests.load();
  auto r = post("/v1/chat/completions", R"({"model":"claude-3","messages":[]})");
  CHECK(r.status == 404);
  auto e = r.doc()["error"];
  CHECK(e["type"] == "invalid_request_error");
  CHECK(e["param"] == "model");
  CHECK(e["code"] == "model_not_found");
  CHECK(e["sluice_code"] == describe(errc::model_not_found).json_code);
  CHECK(e["message"].get<std::string>().find("claude-3") != std::string::npos);
  r = post("/v1/chat/completions", R"({"messages":[]})");
  CHECK(r.status == 400);
  CHECK(r.doc()["error"]["param"] == "model");
  CHECK(r.doc()["error"]["code"] == "bad_request");
  // Not a string: also no model.
  r = post("/v1/chat/completions", R"({"model":42})");
  CHECK(r.status == 400);
  CHECK(openai.server.requests.load() + other.server.requests.load() == before);
  // Nothing leaked.
  CHECK(node.rt->tiers().global().status().in_use == 0);
}

TEST_CASE_METHOD(models_fixture, "models: GET /v1/models lists the exact "
                                 "names in OpenAI's list shape",
                 "[node][models]") {
  auto r = exchange(front->port(), http::verb::get, "/v1/models");
  REQUIRE(r.status == 200);
  auto doc = r.doc();
  CHECK(doc["object"] == "list");
  std::vector<std::string> ids;
  for (auto& m : doc["data"]) {
    CHECK(m["object"] == "model");
    CHECK(m["owned_by"].is_string());
    CHECK(m["created"].is_number_integer());
    ids.push_back(m["id"]);
  }
  // Globs are not models. (TOML tables read in key order.)
  CHECK(ids == std::vector<std::string>{"gpt-4o", "llama-3",
                                        "text-embedding-3-small"});
  r = exchange(front->port(), http::verb::get, "/v1/models/llama-3");
  CHECK(r.status == 200);
  CHECK(r.doc()["id"] == "llama-3");
  r = exchange(front->port(), http::verb::get, "/v1/models/llama%2D3");
  CHECK(r.doc()["id"] == "llama-3"); // percent-decoded
  r = exchange(front->port(), http::verb::get, "/v1/models/bad%zz");
  CHECK(r.status == 400);
  r = exchange(front->port(), http::verb::get, "/v1/models/nope");
  CHECK(r.status == 404);
  CHECK(r.doc()["error"]["code"] == "model_not_found");
  r = exchange(front->port(), http::verb::post, "/v1/models", "{}");
  CHECK(r.status == 405);
}
