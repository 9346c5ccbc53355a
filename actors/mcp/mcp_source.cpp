#include "sluice/actors/mcp/mcp_source.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <boost/asio/post.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "sluice/actors/http_source.hpp"
#include "sluice/actors/mcp/mcp_source_state.hpp"
#include "sluice/runtime/policy/mcp/retry_safety.hpp"
#include "sluice/runtime/policy/source/exchange_deadline.hpp"

namespace sluice {

using json = nlohmann::json;
using policy::outcome_kind;
namespace pmcp = policy::mcp;

policy::mcp::tool_hints tool_hints_of(const nlohmann::json& tool) {
  auto a = tool.find("annotations");
  auto flag = [&](const char* key) -> std::optional<bool> {
    if (a == tool.end() || !a->is_object())
      return std::nullopt;
    auto f = a->find(key);
    if (f == a->end() || !f->is_boolean())
      return std::nullopt;
    return f->get<bool>();
  };
  return pmcp::hints_of(flag("readOnlyHint"), flag("idempotentHint"),
                        flag("destructiveHint"));
}

std::string_view to_string(mcp_server_view::state_kind x) noexcept {
  switch (x) {
  case mcp_server_view::state_kind::starting:
    return "starting";
  case mcp_server_view::state_kind::ready:
    return "ready";
  case mcp_server_view::state_kind::down:
    return "down";
  case mcp_server_view::state_kind::stopped:
    return "stopped";
  }
  return "?";
}

namespace mcp_detail {

namespace {

/// The JSON-RPC error of a call that timed out (the TypeScript SDK's
/// `ErrorCode.RequestTimeout`).
constexpr int mcp_request_timeout = -32001;

// An error object as JSON-RPC's `error`: the body of a failed reply.
std::string error_body(int code, const std::string& message) {
  return json{{"code", code}, {"message", message}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

source_reply failed(outcome_kind kind, int code, const std::string& message,
                    std::string reason, bool unsafe) {
  source_reply r;
  r.kind = kind;
  r.body = error_body(code, message);
  r.reason = std::move(reason);
  r.unsafe_to_retry = unsafe;
  return r;
}

pmcp::tool_hints hints_of_tool(const mcp_server_view& view,
                               const std::string& name) {
  auto snap = view.read();
  if (snap.tools)
    for (auto& t : *snap.tools) {
      auto n = t.find("name");
      if (n != t.end() && n->is_string() &&
          n->get_ref<const std::string&>() == name)
        return tool_hints_of(t);
    }
  return tool_hints_of(json::object());
}

// MCP's notifications/cancelled for request `id`, which the server had:
// it may stop the work no one waits for any more.
void tell_cancelled(mcp_actor* self, uint64_t id, const char* reason) {
  auto& st = self->state;
  ++st.view->cancels_sent;
  send_text(self,
            mcp::notification_text("notifications/cancelled",
                                   json{{"requestId", id}, {"reason", reason}}),
            nullptr, st.cfg.init_timeout);
}

// -- a call's deadline: silence past idle_timeout, or past call_timeout ------

policy::exchange_timeouts call_timeouts(const mcp_server_settings& cfg) {
  policy::exchange_timeouts t;
  t.connect = cfg.init_timeout;
  t.first_byte = cfg.idle_timeout; // from sending to its first sign
  t.idle = cfg.idle_timeout;       // between two signs (progress)
  t.response = cfg.call_timeout;
  return t;
}

void arm(mcp_actor* self, uint64_t id) {
  auto& st = self->state;
  auto* p = st.calls.find(id);
  if (!p)
    return;
  auto now = self->clock().now();
  // The rule of a stream's pieces, in one place: progress is a piece.
  p->deadline = policy::read_deadline(call_timeouts(st.cfg), p->sent,
                                      p->progressed, now, p->attempt_deadline);
  // Not sent yet: it waits for the server's (re)start at most
  // init_timeout_s (a server that is down fails its calls, unsent, in
  // that time, and its breaker hears of it).
  if (!p->written)
    p->deadline = std::min(p->deadline, p->sent + st.cfg.init_timeout);
  // One timer per call: a flood of progress moves the deadline, and the
  // timer, when it fires early, sets itself again.
  if (p->timer_at && *p->timer_at <= p->deadline)
    return;
  auto at = p->deadline;
  p->timer_at = at;
  self->delayed_send(
      self, at - now, actor_thunk{[id, at](caf::local_actor* a) {
        auto* self = static_cast<mcp_actor*>(a);
        auto* p = self->state.calls.find(id);
        if (!p || p->timer_at != at)
          return; // answered, or an earlier timer took its place
        p->timer_at.reset();
        if (self->clock().now() < p->deadline)
          return arm(self, id); // progress moved it
        bool silent =
            !p->attempt_deadline || p->deadline < *p->attempt_deadline;
        auto& name = self->state.cfg.name;
        if (!p->written)
          return fail_call(self, id, outcome_kind::timeout, mcp_request_timeout,
                           "server " + name + " was not ready in time",
                           "timeout: server not ready (init_timeout_s)");
        tell_cancelled(self, id, "timed out at the gateway");
        fail_call(self, id, outcome_kind::timeout, mcp_request_timeout,
                  "server " + name + " did not answer in time",
                  silent ? "timeout: no answer or progress (idle_timeout_s)"
                         : "timeout: call");
      }});
}

// A call the server will not answer is dropped from its channel too (an
// HTTP exchange closed), and its progress token forgotten.
void forget(mcp_actor* self, const pending_call& p) {
  self->state.by_token.erase(p.token);
  if (p.written)
    cancel_exchange(self, p.exchange);
}

caf::result<source_reply> attempt(mcp_actor* self, const call_request& req) {
  auto& st = self->state;
  ++st.view->calls;
  json payload;
  try {
    payload = json::parse(req.payload);
  } catch (const std::exception&) {
  }
  std::string method;
  json params;
  if (payload.is_object()) {
    method = payload.value("method", std::string{});
    params = payload.value("params", json{});
  }
  auto refuse = [](const std::string& why) {
    source_reply r;
    r.kind = outcome_kind::permanent;
    r.body = error_body(mcp::invalid_params, why);
    return r;
  };
  if (method != "tools/call" && method != "resources/read" &&
      method != "prompts/get")
    return refuse("not a method the gateway sends on: " + method);
  if (!params.is_object())
    return refuse(method + " needs params");
  if (method == "tools/call" &&
      (!params.contains("name") || !params["name"].is_string()))
    return refuse("a tools/call needs a name");
  auto id = st.next_id++;
  pending_call p;
  // The requester first: making the promise takes the sender away.
  p.requester = caf::actor_cast<caf::actor_addr>(self->current_sender());
  p.promise = self->make_response_promise();
  if (method == "tools/call")
    p.hints = hints_of_tool(*st.view, params["name"].get<std::string>());
  else
    p.hints = pmcp::hints_of(true, true, false); // reads, no effects
  // Progress tells the gateway the call is alive. The server always sees
  // a token of ours, unique on this source (clients' tokens may repeat:
  // the SDK's is its message id), and a client's own token is put back
  // into the notifications passed on to it.
  auto& meta = params["_meta"];
  if (!meta.is_object())
    meta = json::object();
  auto token = meta.find("progressToken");
  if (token != meta.end() &&
      (token->is_string() || token->is_number_integer())) {
    p.client_token = *token;
    p.relay = true;
    p.stream_to = req.stream_to;
    p.stream_tag = req.stream_tag;
  }
  meta["progressToken"] = "sluice-" + std::to_string(id);
  p.token = meta["progressToken"].dump();
  auto now = self->clock().now();
  p.sent = now;
  if (req.timeout > duration::zero())
    p.attempt_deadline = now + req.timeout;
  auto promise = p.promise;
  st.by_token.emplace(p.token, id);
  st.calls.add(self, id, std::move(p));
  st.calls.find(id)->line =
      mcp::request_text(std::to_string(id), method, params);
  // A server (re)starting: the call waits for it, within its deadline.
  if (st.ready)
    write_call(self, id);
  arm(self, id);
  return promise;
}

// The calls of a requester that terminated or cancelled: the server is
// told (MCP's notifications/cancelled), their promises dropped.
void cancel_requester(mcp_actor* self, const caf::actor_addr& requester) {
  auto& st = self->state;
  std::vector<uint64_t> written;
  for (auto id : st.calls.ids_of(requester))
    if (auto* p = st.calls.find(id)) {
      if (p->written)
        written.push_back(id);
      forget(self, *p);
    }
  for (auto id : st.calls.drop_requester(requester)) {
    if (std::find(written.begin(), written.end(), id) == written.end())
      continue; // never sent: nothing to tell the server
    tell_cancelled(self, id, "the client cancelled the call");
  }
}

caf::behavior mcp_source_actor(mcp_actor* self, mcp_server_settings cfg,
                               std::shared_ptr<mcp_server_view> view) {
  self->state.cfg = std::move(cfg);
  self->state.view = std::move(view);
  self->set_down_handler(
      [self](caf::down_msg& dm) { cancel_requester(self, dm.source); });
  start_server(self);
  return {
      [self](cancel_atom) {
        cancel_requester(
            self, caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [self](attempt_atom, const call_request& req)
          -> caf::result<source_reply> { return attempt(self, req); },
      [self](actor_thunk& t) {
        // What a server sent is handled here: nothing it sends may end the
        // source (and lose its calls' promises); the message is dropped.
        try {
          t.run(self);
        } catch (const std::exception& e) {
          log_limited(server_log_limit(), spdlog::level::err,
                      "mcp server {}: a message dropped: {}",
                      self->state.cfg.name, e.what());
        }
      },
  };
}

} // namespace

// -- the channel's exchanges
// ------------------------------------------------------

uint64_t send_text(mcp_actor* self, std::string text,
                   std::function<void(mcp_actor*, mcp::send_outcome)> on_failed,
                   duration timeout) {
  auto& st = self->state;
  if (!st.link || !st.io) {
    if (on_failed) {
      mcp::send_outcome out;
      out.ok = false;
      out.delivery = pmcp::delivery::not_sent;
      out.reason = "not sent: the server is not running";
      on_failed(self, std::move(out));
    }
    return 0;
  }
  weak_self<mcp_actor> me{self};
  auto gen = st.gen;
  mcp::send_done done;
  if (on_failed)
    done = [me, gen, on_failed](mcp::send_outcome out) {
      back_to(me, [gen, on_failed, out = std::move(out)](mcp_actor* self) {
        if (self->state.gen == gen)
          on_failed(self, out);
      });
    };
  auto id = st.next_exchange++;
  boost::asio::post(st.io->loop(), [c = st.link, id, text = std::move(text),
                                    done = std::move(done), timeout] {
    try {
      c->send(id, std::move(text), done, timeout);
    } catch (const std::exception& e) {
      if (done) {
        mcp::send_outcome out;
        out.ok = false;
        out.delivery = pmcp::delivery::not_sent;
        out.reason = std::string{"not sent: "} + e.what();
        done(std::move(out));
      }
    }
  });
  return id;
}

void cancel_exchange(mcp_actor* self, uint64_t id) {
  auto& st = self->state;
  if (id == 0 || !st.link || !st.io)
    return;
  boost::asio::post(st.io->loop(), [c = st.link, id] { c->cancel(id); });
}

void end_call(mcp_actor* self, uint64_t id, source_reply r) {
  auto& st = self->state;
  auto p = st.calls.take(self, id);
  if (!p)
    return;
  forget(self, *p);
  p->promise.deliver(std::move(r));
}

void fail_call(mcp_actor* self, uint64_t id, outcome_kind kind, int code,
               const std::string& message, std::string reason,
               std::optional<pmcp::delivery> how) {
  auto& st = self->state;
  auto* p = st.calls.find(id);
  if (!p)
    return;
  if (!how)
    how = p->written ? pmcp::delivery::sent : pmcp::delivery::not_sent;
  bool unsafe = !pmcp::may_retry(*how, p->hints);
  end_call(self, id, failed(kind, code, message, std::move(reason), unsafe));
}

void on_call_answer(mcp_actor* self, uint64_t id, const mcp::message& m) {
  auto& st = self->state;
  if (m.what == mcp::message::kind::response) {
    source_reply r;
    r.kind = outcome_kind::ok;
    r.status = 200;
    r.body = m.result.dump(-1, ' ', false, json::error_handler_t::replace);
    return end_call(self, id, std::move(r));
  }
  // A JSON-RPC error: an internal one is the server failing (transient);
  // any other refuses this request (permanent: bad params, no such tool).
  int code = mcp::internal_error;
  if (auto c = m.error.find("code");
      c != m.error.end() && c->is_number_integer())
    code = c->get<int>();
  source_reply r;
  r.body = m.error.dump(-1, ' ', false, json::error_handler_t::replace);
  if (code == mcp::internal_error) {
    auto* p = st.calls.find(id);
    r.kind = outcome_kind::transient;
    r.reason = "internal error";
    r.unsafe_to_retry = p && !pmcp::may_retry(pmcp::delivery::sent, p->hints);
  } else {
    r.kind = outcome_kind::permanent;
  }
  end_call(self, id, std::move(r));
}

void on_progress(mcp_actor* self, const mcp::message& m) {
  auto& st = self->state;
  if (!m.params.is_object())
    return;
  auto token = m.params.find("progressToken");
  if (token == m.params.end())
    return;
  auto i = st.by_token.find(token->dump());
  if (i == st.by_token.end())
    return; // a call that ended, or no call of ours
  auto id = i->second;
  auto* p = st.calls.find(id);
  if (!p)
    return;
  ++st.view->progress;
  p->progressed = true;
  if (p->relay && p->stream_to) {
    auto params = m.params;
    params["progressToken"] = p->client_token;
    self->send(p->stream_to, stream_chunk_atom_v, p->stream_tag,
               mcp::notification_text("notifications/progress", params));
  }
  arm(self, id);
}

// Writes call `id` to the server; one that did not take it (a child's full
// input, an HTTP exchange that failed) fails the call, retried only where
// safe by how far it got.
void write_call(mcp_actor* self, uint64_t id) {
  auto* p = self->state.calls.find(id);
  if (!p || p->written)
    return;
  p->written = true;
  // Its silence is counted from now: the time it waited for a (re)start
  // is not the server's.
  p->sent = self->clock().now();
  p->progressed = false;
  arm(self, id);
  p->exchange = send_text(
      self, std::string{p->line}, [id](mcp_actor* self, mcp::send_outcome out) {
        auto& st = self->state;
        auto* p = st.calls.find(id);
        if (!p)
          return; // answered
        if (!out.ok && out.session_gone) {
          // Its session is gone (the server restarted or went away): the
          // calls that come meanwhile wait for the next one, and so does
          // this one, which the server never saw (while it may be sent
          // again).
          st.ready = false;
          if (p->resends < max_session_resends) {
            ++p->resends;
            p->written = false;
            p->sent = self->clock().now(); // it waits from now
            return arm(self, id);
          }
        }
        if (out.ok) { // an answer stream that ended without the answer
          out.delivery = pmcp::delivery::sent;
          out.kind = outcome_kind::transient;
          out.reason = "its answer stream ended without the answer";
        }
        auto code = out.kind == outcome_kind::timeout ? mcp_request_timeout
                                                      : mcp::internal_error;
        auto message = "server " + st.cfg.name + ": " + out.reason;
        if (out.delivery == pmcp::delivery::not_sent &&
            out.kind != outcome_kind::permanent)
          message = "server " + st.cfg.name + " did not take the call (" +
                    out.reason + ")";
        fail_call(self, id, out.kind, code, message, out.reason, out.delivery);
      });
}

} // namespace mcp_detail

mcp_source spawn_mcp_source(caf::actor_system& sys, mcp_server_settings cfg) {
  validate(cfg);
  auto view = std::make_shared<mcp_server_view>(cfg.name, cfg.prefix);
  // On a thread of its own: it waits for its I/O loop (a child's start,
  // and its end, up to stop_grace), which no event loop of the node's may.
  auto a = sys.spawn<caf::detached>(mcp_detail::mcp_source_actor,
                                    std::move(cfg), view);
  return {caf::actor_cast<source_actor>(a), std::move(view)};
}

mcp_source spawn_mcp_stdio_source(caf::actor_system& sys,
                                  mcp_server_settings cfg) {
  cfg.transport = mcp_transport::stdio;
  return spawn_mcp_source(sys, std::move(cfg));
}

} // namespace sluice
