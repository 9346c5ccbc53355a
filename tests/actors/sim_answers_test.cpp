// The simulated source's answers are what OpenAI's clients parse: chat
// completions, chunk streams with usage last, embeddings as floats or
// base64 float32, deterministic per input.

#include "sluice/actors/sim_answers.hpp"
#include "sluice/actors/payload.hpp"

#include <cmath>
#include <cstring>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sluice;
using json = nlohmann::json;

namespace {

json answer_to(const std::string& payload, uint32_t dims = 8) {
  auto a = sim::answer(sim::read_request(payload), 7, 1700000000, dims);
  REQUIRE(a);
  auto doc = json::parse(*a, nullptr, false);
  REQUIRE(doc.is_object());
  return doc;
}

std::vector<float> from_base64(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = value(c);
    if (v < 0)
      break;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

double norm(const std::vector<float>& v) {
  double n = 0;
  for (auto x : v)
    n += double{x} * x;
  return std::sqrt(n);
}

} // namespace

TEST_CASE("sim answers: a chat completion as OpenAI sends it") {
  auto a = answer_to(R"({"model":"gpt-4o","messages":[{"role":"user",
                        "content":"Say hello in twelve words please"}]})");
  CHECK(a["object"] == "chat.completion");
  CHECK(a["id"] == "chatcmpl-sim-7");
  CHECK(a["created"] == 1700000000);
  CHECK(a["model"] == "gpt-4o");
  REQUIRE(a["choices"].size() == 1);
  CHECK(a["choices"][0]["index"] == 0);
  CHECK(a["choices"][0]["message"]["role"] == "assistant");
  CHECK_FALSE(a["choices"][0]["message"]["content"].get<std::string>().empty());
  CHECK(a["choices"][0]["finish_reason"] == "stop");
  CHECK(a["usage"]["prompt_tokens"] == 8); // 32 bytes / 4
  CHECK(a["usage"]["total_tokens"] ==
        a["usage"]["prompt_tokens"].get<int>() +
            a["usage"]["completion_tokens"].get<int>());
  // No model named: "simulated".
  CHECK(answer_to(R"({"messages":[]})")["model"] == "simulated");
}

TEST_CASE("sim answers: a stream is chunks ending with finish_reason, then "
          "usage when asked") {
  auto req = sim::read_request(
      R"({"model":"m","stream":true,"stream_options":{"include_usage":true},
          "messages":[{"role":"user","content":"hi"}]})");
  auto events = sim::chat_events(req, 3, 1, 3);
  REQUIRE(events.size() == 1 + 3 + 1 + 1); // role, 3 pieces, stop, usage
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    auto& e = events[i];
    REQUIRE(e.rfind("data: ", 0) == 0);
    REQUIRE(e.size() > 8);
    REQUIRE(e.substr(e.size() - 2) == "\n\n");
    auto c = json::parse(e.substr(6), nullptr, false);
    REQUIRE(c.is_object());
    CHECK(c["object"] == "chat.completion.chunk");
    CHECK(c["id"] == "chatcmpl-sim-3");
    CHECK(c["model"] == "m");
    if (i + 1 < events.size()) {
      CHECK(c["usage"].is_null());
      REQUIRE(c["choices"].size() == 1);
      auto& d = c["choices"][0]["delta"];
      if (d.contains("content"))
        text += d["content"].get<std::string>();
    }
  }
  CHECK(json::parse(events[0].substr(6))["choices"][0]["delta"]["role"] ==
        "assistant");
  CHECK(json::parse(events[4].substr(6))["choices"][0]["finish_reason"] ==
        "stop");
  auto last = json::parse(events.back().substr(6));
  CHECK(last["choices"].empty());
  CHECK(last["usage"]["completion_tokens"].get<int>() > 0);
  auto whole = answer_to(R"({"messages":[]})");
  CHECK(text == whole["choices"][0]["message"]["content"]);
  // Without include_usage: no usage chunk, no usage member.
  auto plain = sim::chat_events(
      sim::read_request(R"({"messages":[],"stream":true})"), 3, 1, 3);
  CHECK(plain.size() == 5);
  CHECK_FALSE(json::parse(plain[1].substr(6)).contains("usage"));
}

TEST_CASE("sim answers: embeddings, one unit vector per input, the same for "
          "the same text") {
  auto a = answer_to(
      R"({"model":"text-embedding-3-small","input":["a","b","a"]})", 16);
  CHECK(a["object"] == "list");
  CHECK(a["model"] == "text-embedding-3-small");
  REQUIRE(a["data"].size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(a["data"][i]["object"] == "embedding");
    CHECK(a["data"][i]["index"] == i);
    REQUIRE(a["data"][i]["embedding"].size() == 16);
  }
  auto v0 = a["data"][0]["embedding"].get<std::vector<float>>();
  auto v1 = a["data"][1]["embedding"].get<std::vector<float>>();
  auto v2 = a["data"][2]["embedding"].get<std::vector<float>>();
  CHECK(norm(v0) == Approx(1.0).epsilon(1e-5));
  CHECK(v0 == v2);
  CHECK(v0 != v1);
  CHECK(a["usage"]["prompt_tokens"] == 3);
  // One string; token arrays; the request's own dimensions.
  CHECK(answer_to(R"({"input":"one"})")["data"].size() == 1);
  CHECK(answer_to(R"({"input":[1,2,3]})")["data"].size() == 1);
  CHECK(answer_to(R"({"input":[[1,2],[3]]})")["data"].size() == 2);
  CHECK(answer_to(R"({"input":"x","dimensions":4})")["data"][0]["embedding"]
            .size() == 4);
}

TEST_CASE("sim answers: embeddings requests over the limits get a 400's "
          "reason, not gigabytes") {
  auto refused = [](const std::string& payload, uint32_t dims = 1536) {
    auto req = sim::read_request(payload);
    CHECK_FALSE(sim::answer(req, 1, 1, dims));
    return sim::refusal(req, dims);
  };
  // 2049 inputs (OpenAI allows 2048).
  std::string many = R"({"input":[)";
  for (size_t i = 0; i <= sim::max_embedding_inputs; ++i)
    many += i == 0 ? "\"\"" : ",\"\"";
  many += "]}";
  CHECK_THAT(refused(many), Catch::Contains("2048 inputs"));
  // 2048 inputs of 8192 dimensions: 16M floats.
  std::string big = R"({"dimensions":8192,"input":[)";
  for (size_t i = 0; i < sim::max_embedding_inputs; ++i)
    big += i == 0 ? "\"a\"" : ",\"a\"";
  big += "]}";
  CHECK_THAT(refused(big), Catch::Contains("inputs x dimensions"));
  CHECK_THAT(refused(R"({"input":"x","dimensions":100000})"),
             Catch::Contains("dimensions"));
  CHECK_THAT(refused(R"({"input":"x","dimensions":"8"})"),
             Catch::Contains("dimensions"));
  CHECK_THAT(refused(R"({"input":[]})"), Catch::Contains("empty"));
  CHECK_THAT(refused(R"({"input":""})"), Catch::Contains("empty"));
  // Within the limits: answered, and no reason.
  auto ok = sim::read_request(R"({"input":["a","b"],"dimensions":16})");
  CHECK(sim::refusal(ok, 1536).empty());
  CHECK(sim::answer(ok, 1, 1, 1536));
}

TEST_CASE("sim answers: base64 embeddings are little-endian float32, as the "
          "openai client decodes them") {
  auto f = answer_to(R"({"input":"same text"})", 12);
  auto b = answer_to(R"({"input":"same text","encoding_format":"base64"})", 12);
  REQUIRE(b["data"][0]["embedding"].is_string());
  auto decoded = from_base64(b["data"][0]["embedding"].get<std::string>());
  auto floats = f["data"][0]["embedding"].get<std::vector<float>>();
  REQUIRE(decoded.size() == 12);
  for (size_t i = 0; i < 12; ++i)
    CHECK(decoded[i] == Approx(floats[i]).margin(1e-6));
}

TEST_CASE("sim answers: what is not OpenAI-shaped gets no answer, and never "
          "throws") {
  for (auto p : {"", "{}", "not json", "[1,2]", R"({"messages":"x"})",
                 "\xff\xfe", R"({"model":5,"input":null})"}) {
    INFO(p);
    auto req = sim::read_request(p);
    (void)sim::answer(req, 1, 1, 4);
  }
  CHECK_FALSE(sim::answer(sim::read_request("{}"), 1, 1, 4));
  CHECK_FALSE(sim::answer(sim::read_request("not json"), 1, 1, 4));
  // Invalid UTF-8 is no JSON: the request is not OpenAI-shaped (the
  // source answers its fixed body).
  CHECK_FALSE(sim::answer(
      sim::read_request("{\"model\":\"\xff\",\"messages\":[]}"), 1, 1, 4));
}

TEST_CASE("sim answers: errors in OpenAI's shape") {
  auto e = json::parse(sim::error_body("slow down", "rate_limit_error",
                                       "rate_limit_exceeded"));
  CHECK(e["error"]["message"] == "slow down");
  CHECK(e["error"]["type"] == "rate_limit_error");
  CHECK(e["error"]["code"] == "rate_limit_exceeded");
  CHECK(json::parse(sim::error_body("x", "server_error"))["error"]["code"]
            .is_null());
}

TEST_CASE("payload: with_model replaces the top-level model only") {
  auto out = nlohmann::json::parse(with_model(
      R"({"model":"gpt-4o","messages":[{"model":"inner"}],"n":1})",
      "gpt-4o-2024-08-06"));
  CHECK(out["model"] == "gpt-4o-2024-08-06");
  CHECK(out["messages"][0]["model"] == "inner");
  CHECK(out["n"] == 1);
  // Added when missing.
  CHECK(nlohmann::json::parse(with_model("{}", "m"))["model"] == "m");
  // Not an object, not JSON, or invalid UTF-8: unchanged.
  for (std::string p : {"[1]", "not json", "", "{\"a\":\"\xff\"}"}) {
    INFO(p);
    CHECK(with_model(p, "m") == p);
  }
}
