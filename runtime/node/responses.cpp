#include "sluice/runtime/node/responses.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <boost/beast/http/field.hpp>

#include "sluice/runtime/policy/outcome.hpp"

namespace sluice::node {

namespace http = boost::beast::http;

std::string echo_text(std::string_view text) {
  if (text.size() <= max_echoed_path_bytes)
    return std::string{text};
  return std::string{text.substr(0, max_echoed_path_bytes)} + "...";
}

std::string json_text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

response make_response(unsigned status, std::string body, bool keep_alive,
                       unsigned version) {
  response res{static_cast<http::status>(status), version};
  res.set(http::field::server, "sluice-node");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

json error_body(errc code, const std::string& message) {
  auto info = describe(code);
  return json{{"error",
               {{"message", message},
                {"type", std::string{info.type}},
                {"param", nullptr},
                {"code", std::string{info.name}},
                {"sluice_code", info.json_code}}}};
}

void set_retry_after(response& res, double seconds) {
  // NaN or a huge value must not become a negative or absurd header.
  auto s =
      std::isfinite(seconds) ? std::clamp(std::ceil(seconds), 1.0, 1e9) : 1.0;
  res.set(http::field::retry_after, std::to_string(static_cast<long>(s)));
}

response error_response_from(errc code, const json& body, bool keep_alive,
                             unsigned version,
                             std::optional<double> retry_after_s) {
  auto status = static_cast<unsigned>(describe(code).http_status);
  auto res = make_response(status, json_text(body), keep_alive, version);
  if (retry_after_s)
    set_retry_after(res, *retry_after_s);
  else if (status == 503)
    set_retry_after(res, 1);
  return res;
}

response error_response(errc code, const std::string& message, bool keep_alive,
                        unsigned version) {
  return error_response_from(code, error_body(code, message), keep_alive,
                             version);
}

std::optional<errc> error_of(call_status s) noexcept {
  switch (s) {
  case call_status::ok:
    return std::nullopt;
  case call_status::tool_busy:
    return errc::tool_busy;
  case call_status::all_sources_exhausted:
    return errc::all_sources_exhausted;
  case call_status::upstream_error:
    return errc::upstream_error;
  case call_status::governance_backend_error:
    return errc::governance_backend_error;
  case call_status::cancelled:
    break;
  }
  return errc::shutting_down;
}

std::string access_error(const call_result& r) {
  if (r.status == call_status::cancelled)
    return "cancelled";
  auto code = error_of(r.status);
  if (!code)
    return {};
  auto out = std::string{describe(*code).name};
  if (!r.reason.empty())
    out += "/" + r.reason;
  return out;
}

response render(const call_result& r, bool keep_alive, unsigned version) {
  auto code = error_of(r.status);
  if (!code || *code == errc::upstream_error) {
    // Passed through with the upstream's body and media type; an upstream
    // error with its status too, if it has a plausible one.
    auto status = 200u;
    if (code)
      status = r.upstream_status >= 400 && r.upstream_status < 600
                   ? static_cast<unsigned>(r.upstream_status)
                   : static_cast<unsigned>(describe(*code).http_status);
    auto res = make_response(status, r.body, keep_alive, version);
    if (!r.content_type.empty())
      res.set(http::field::content_type, r.content_type);
    return res;
  }
  switch (r.status) {
  case call_status::tool_busy: {
    auto body =
        error_body(*code, "admission deadline passed while waiting for a "
                          "permit");
    body["error"]["tier"] =
        r.busy_tier ? std::string{to_string(*r.busy_tier)} : "unknown";
    body["error"]["retry_after_s"] = r.retry_after_s;
    return error_response_from(*code, body, keep_alive, version,
                               r.retry_after_s);
  }
  case call_status::all_sources_exhausted: {
    auto body = error_body(*code, "no source could complete the call");
    body["error"]["reason"] = r.reason;
    body["error"]["retry_after_s"] = r.retry_after_s;
    json attempts = json::array();
    for (auto& a : r.attempts) {
      attempts.push_back(
          {{"source", a.source},
           {"outcome", a.cancelled ? std::string{"cancelled"}
                                   : std::string{policy::to_string(a.kind)}},
           {"status", a.status},
           {"hedge", a.hedge},
           {"elapsed_s", std::chrono::duration<double>(a.elapsed).count()}});
      if (!a.reason.empty() && !a.cancelled)
        attempts.back()["reason"] = a.reason;
    }
    body["error"]["attempts"] = std::move(attempts);
    return error_response_from(*code, body, keep_alive, version,
                               r.retry_after_s);
  }
  case call_status::governance_backend_error:
    return error_response_from(
        *code,
        error_body(*code, "the governance backend is unavailable; the call "
                          "was not let through"),
        keep_alive, version, r.retry_after_s);
  default:
    break;
  }
  return error_response(*code, "the call was cancelled", false, version);
}

std::string stream_error_frame(const call_result& r) {
  auto body = error_body(errc::upstream_error,
                         "the upstream's stream broke off; the answer is "
                         "incomplete");
  body["error"]["reason"] = r.reason;
  body["error"]["source"] = r.source;
  return "event: error\ndata: " + json_text(body) + "\n\n";
}

} // namespace sluice::node
