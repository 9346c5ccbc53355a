#pragma once

// What the MCP source's hostile tests share (mcp_stdio_source_test.cpp,
// mcp_http_source_test.cpp): waiting in real time, a server ready with its
// two tools ("w" with effects, "r" read-only), and one tool call asked of
// the source with the fake server's `arguments.mode`.

#include <chrono>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/mcp/mcp_source.hpp"
#include "sluice/messages/atoms.hpp"

namespace mcp_source_test {

using namespace std::chrono_literals;

/// Whether `p` came true within `most` (looked at every 10 ms).
template <class Pred>
bool wait_until(Pred p, std::chrono::milliseconds most = 5s) {
  auto until = std::chrono::steady_clock::now() + most;
  while (!p()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

/// The server started and listed its two tools.
inline bool ready(const sluice::mcp_source& src) {
  return wait_until([&] {
    auto s = src.view->read();
    return s.state == sluice::mcp_server_view::state_kind::ready && s.tools &&
           s.tools->size() == 2;
  });
}

/// A tools/call of `tool` with `arguments.mode`, on route `route`.
inline sluice::call_request request(const std::string& route,
                                    const std::string& tool,
                                    const std::string& mode) {
  nlohmann::json payload{
      {"method", "tools/call"},
      {"params", {{"name", tool}, {"arguments", {{"mode", mode}}}}}};
  sluice::call_request req{route, payload.dump()};
  req.timeout = 5s;
  return req;
}

/// Its answer, or one whose reason says why none came.
inline sluice::source_reply call(caf::actor_system& sys,
                                 const sluice::mcp_source& src,
                                 const sluice::call_request& req) {
  sluice::source_reply out;
  out.reason = "no answer";
  caf::scoped_actor self{sys};
  self->request(src.actor, 10s, sluice::attempt_atom_v, req)
      .receive([&](sluice::source_reply& r) { out = std::move(r); },
               [&](caf::error& e) { out.reason = to_string(e); });
  return out;
}

} // namespace mcp_source_test
