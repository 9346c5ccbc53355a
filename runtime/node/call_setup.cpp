#include "sluice/runtime/node/call_setup.hpp"

#include "sluice/runtime/node/router.hpp"

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

} // namespace sluice::node
