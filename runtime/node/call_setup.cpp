#include "sluice/runtime/node/call_setup.hpp"

#include "sluice/runtime/node/responses.hpp"
#include "sluice/runtime/node/request_reading.hpp"

namespace sluice::node {

namespace {

// The most headers a call sends upstream on its client's behalf.
constexpr const char* forwarded_trace_headers[] = {"traceparent", "tracestate"};

} // namespace

call_session session_for(const http_fields& headers,
                         const std::string* key_name, uint64_t connection_id) {
  call_session out;
  if (headers.count("X-Session-Id") > 1) {
    out.error = "more than one X-Session-Id header";
    return out;
  }
  auto header = headers.find("X-Session-Id");
  bool given = header != headers.end();
  std::string id;
  if (given) {
    auto v = header->value();
    id.assign(v.data(), v.size());
    if (!valid_session_id(id)) {
      out.error = "X-Session-Id must be 1 to " +
                  std::to_string(max_session_id_bytes) +
                  " printable ASCII characters";
      return out;
    }
  }
  if (key_name)
    out.name = given ? "key/" + *key_name + "/" + id : std::string{};
  else
    out.name = given ? "anon/" + id : "conn/" + std::to_string(connection_id);
  return out;
}

std::vector<std::pair<std::string, std::string>>
forwarded_headers(const http_fields& headers,
                  const std::string& request_id) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("X-Request-Id", request_id);
  for (auto name : forwarded_trace_headers) {
    auto h = headers.find(name);
    if (h != headers.end() && headers.count(name) == 1 &&
        valid_trace_header(name, {h->value().data(), h->value().size()}))
      out.emplace_back(name, std::string{h->value()});
  }
  return out;
}

refusal model_refusal(const std::string& model) {
  return refused(errc::model_not_found,
                 "The model " + echo_text(model) + " does not exist", "model");
}

call_plan plan_call(std::string_view body, const std::string* key_name,
                    const std::function<bool(const std::string&)>& may_use,
                    const std::function<route_miss(const std::string&)>& route_of,
                    const std::string& path) {
  auto facts = inspect_body(body);
  if (!facts.error.empty())
    return refused<call_plan>(errc::bad_request, facts.error);
  auto model = facts.model.value_or("");
  auto refuse = [&](refusal r) {
    call_plan out;
    static_cast<refusal&>(out) = std::move(r);
    out.model = model;
    return out;
  };
  if (key_name != nullptr && may_use && !may_use(model)) {
    if (model.empty()) // the route's default would serve any model
      return refuse(refused(errc::bad_request,
                            "you must provide a model parameter (key " +
                                *key_name + " may use only its models)",
                            "model"));
    return refuse(model_refusal(model)); // as OpenAI: not there for this key
  }
  switch (route_of(model)) {
  case route_miss::none:
    break;
  case route_miss::no_route: // removed meanwhile
    return refuse(refused(errc::not_found, "no route " + echo_text(path)));
  case route_miss::model_required:
    return refuse(
        refused(errc::bad_request, "you must provide a model parameter",
                "model"));
  case route_miss::model_not_found:
    return refuse(model_refusal(model));
  }
  call_plan out;
  out.model = std::move(model);
  out.stream = facts.stream;
  return out;
}

} // namespace sluice::node
