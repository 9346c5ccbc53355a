#include "sluice/actors/mcp/mcp_source.hpp"

#include <algorithm>
#include <charconv>
#include <future>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <boost/asio/post.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/attempt_book.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/back_to_actor.hpp"
#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/mcp/jsonrpc.hpp"
#include "sluice/actors/mcp/stdio_child.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/mcp/protocol_version.hpp"
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

void validate(const mcp_server_settings& cfg) {
  if (cfg.command.empty())
    throw field_error("command", "a stdio server needs a command");
  auto positive = [](duration d, const char* field) {
    if (d <= duration::zero())
      throw field_error(field, "must be positive");
  };
  positive(cfg.init_timeout, "init_timeout_s");
  positive(cfg.idle_timeout, "idle_timeout_s");
  positive(cfg.call_timeout, "call_timeout_s");
  positive(cfg.restart_backoff, "restart_backoff_s");
  positive(cfg.stop_grace, "stop_grace_s");
  if (cfg.restart_backoff_max < cfg.restart_backoff)
    throw field_error("restart_backoff_max_s",
                      "must be at least restart_backoff_s");
  if (cfg.max_message_bytes < 1024 ||
      cfg.max_message_bytes > mcp::max_message_bytes)
    throw field_error("max_message_bytes",
                      "must be between 1024 and " +
                          std::to_string(mcp::max_message_bytes));
}

namespace {

/// The most tools/list pages read in one listing (a server whose cursor
/// never ends is not followed for ever).
constexpr size_t max_tool_pages = 64;

/// The JSON-RPC error of a call that timed out (the TypeScript SDK's
/// `ErrorCode.RequestTimeout`).
constexpr int mcp_request_timeout = -32001;

/// The most tools kept of one server.
constexpr size_t max_server_tools = 4096;

// One tool call sent to the server.
struct pending_call {
  caf::response_promise promise;
  caf::actor_addr requester;
  caf::actor stream_to;
  uint64_t stream_tag = 0;
  /// The progressToken sent (JSON text), and whether it is the client's
  /// (its notifications are passed on) or ours.
  std::string token;
  bool relay = false;
  pmcp::tool_hints hints;
  /// Written to the server (else it waits for the server to be ready, in
  /// `line`).
  bool written = false;
  std::string line;
  time_point sent{};
  bool progressed = false;
  std::optional<time_point> attempt_deadline;
  time_point deadline{};
};

enum class internal_kind : uint8_t { initialize, tools_list };

struct mcp_state {
  mcp_server_settings cfg;
  std::shared_ptr<mcp_server_view> view;
  std::unique_ptr<upstream::io_thread> io;
  /// Lives on the I/O loop: touched only by what is posted there.
  std::shared_ptr<mcp::stdio_child> child;
  /// Which start of the child the I/O's messages belong to.
  uint64_t gen = 0;
  bool ready = false;
  bool ever_ready_this_gen = false;
  uint32_t failed_starts = 0;
  uint64_t next_id = 1;
  attempt_book<pending_call> calls;
  std::unordered_map<std::string, uint64_t> by_token;
  std::unordered_map<uint64_t, internal_kind> internal;
  std::vector<json> listing;
  size_t pages = 0;
  bool relist = false; // a list_changed came while listing

  ~mcp_state() {
    if (io && child)
      boost::asio::post(io->loop(), [c = child, g = cfg.stop_grace] {
        c->stop(std::chrono::duration_cast<std::chrono::milliseconds>(g));
      });
    // The loop stops: a child still there is killed and reaped with it.
    child.reset();
    io.reset();
  }

  static inline const char* name = "sluice.mcp_source";
};

using mcp_actor = caf::stateful_actor<mcp_state>;

log_limit& server_log_limit() {
  static log_limit lim{20};
  return lim;
}

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

// Writes `line` to the child, if it is still this start's; `on_refused`
// (in the actor) when it cannot take it.
template <class F>
void send_line(mcp_actor* self, std::string line, F on_refused) {
  auto& st = self->state;
  if (!st.child || !st.io) {
    on_refused(self);
    return;
  }
  weak_self<mcp_actor> me{self};
  boost::asio::post(st.io->loop(), [c = st.child, line = std::move(line), me,
                                    on_refused]() mutable {
    if (!c->write(std::move(line)))
      back_to(me, on_refused);
  });
}

void send_line(mcp_actor* self, std::string line) {
  send_line(self, std::move(line), [](mcp_actor*) {});
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

// Ends call `id` with `r` (nothing if it ended already).
void end_call(mcp_actor* self, uint64_t id, source_reply r) {
  auto& st = self->state;
  auto p = st.calls.take(self, id);
  if (!p)
    return;
  st.by_token.erase(p->token);
  p->promise.deliver(std::move(r));
}

// A sent call failed: retried only if that is safe (SPEC §13).
void fail_sent(mcp_actor* self, uint64_t id, outcome_kind kind, int code,
               const std::string& message, std::string reason) {
  auto& st = self->state;
  auto* p = st.calls.find(id);
  if (!p)
    return;
  auto how = p->written ? pmcp::delivery::sent : pmcp::delivery::not_sent;
  bool unsafe = !pmcp::may_retry(how, p->hints);
  end_call(self, id, failed(kind, code, message, std::move(reason), unsafe));
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
  auto at = p->deadline;
  self->delayed_send(self, at - now, actor_thunk{[id, at](caf::local_actor* a) {
    auto* self = static_cast<mcp_actor*>(a);
    auto* p = self->state.calls.find(id);
    if (!p || p->deadline != at)
      return; // answered, or progress moved it
    bool silent = !p->attempt_deadline || at < *p->attempt_deadline;
    fail_sent(self, id, outcome_kind::timeout, mcp_request_timeout,
              "server " + self->state.cfg.name + " did not answer in time",
              silent ? "timeout: no answer or progress (idle_timeout_s)"
                     : "timeout: call");
  }});
}

// -- the child's life -----------------------------------------------------------

void start_child(mcp_actor* self);

void request_internal(mcp_actor* self, internal_kind kind,
                      const std::string& method, const json& params) {
  auto& st = self->state;
  auto id = st.next_id++;
  st.internal.emplace(id, kind);
  send_line(self, mcp::request_text(std::to_string(id), method, params));
}

void list_tools(mcp_actor* self, const std::string& cursor) {
  json params = json::object();
  if (!cursor.empty())
    params["cursor"] = cursor;
  request_internal(self, internal_kind::tools_list, "tools/list", params);
}

// The child is gone (or never started): every call it had fails, and it is
// started again after a backoff.
void on_exit(mcp_actor* self, const std::string& how) {
  auto& st = self->state;
  st.ready = false;
  st.child.reset();
  ++st.gen; // what the old child still says is stale
  if (!st.ever_ready_this_gen)
    ++st.failed_starts;
  else
    st.failed_starts = 1;
  st.ever_ready_this_gen = false;
  st.internal.clear();
  st.view->update([&](mcp_server_view::snapshot& s) {
    s.state = mcp_server_view::state_kind::down;
    s.pid = -1;
    s.last_exit = how;
  });
  log_limited(server_log_limit(), spdlog::level::warn,
              "mcp server {}: {}; starting it again", st.cfg.name, how);
  // Calls in flight: each failed (retried only where safe).
  // Calls written to it fail (retried only where safe); those still
  // waiting wait for the next start (their deadlines still run).
  for (auto id : st.calls.ids())
    if (auto* p = st.calls.find(id); p && p->written)
      fail_sent(self, id, outcome_kind::transient, mcp::internal_error,
                "server " + st.cfg.name + " exited", "server exited");
  auto n = std::min<uint32_t>(st.failed_starts, 30);
  auto delay = st.cfg.restart_backoff;
  for (uint32_t i = 1; i < n && delay < st.cfg.restart_backoff_max; ++i)
    delay *= 2;
  delay = std::min(delay, st.cfg.restart_backoff_max);
  auto gen = st.gen;
  self->delayed_send(self, delay, actor_thunk{[gen](caf::local_actor* a) {
    auto* self = static_cast<mcp_actor*>(a);
    if (self->state.gen != gen || self->state.child)
      return;
    self->state.view->update([](auto& s) { ++s.restarts; });
    start_child(self);
  }});
}

void on_message(mcp_actor* self, const mcp::message& m);
void write_call(mcp_actor* self, uint64_t id);

void start_child(mcp_actor* self) {
  auto& st = self->state;
  if (!st.io) {
    try {
      st.io = std::make_unique<upstream::io_thread>(self->system(),
                                                    "mcp server " + st.cfg.name);
      st.io->start();
    } catch (const std::exception& e) {
      st.io.reset();
      on_exit(self, std::string{"cannot start its I/O thread: "} + e.what());
      return;
    }
  }
  auto gen = st.gen;
  weak_self<mcp_actor> me{self};
  mcp::stdio_child::handlers h;
  h.line = [me, gen](std::string_view line) {
    back_to(me, [gen, text = std::string{line}](mcp_actor* self) {
      auto& st = self->state;
      if (st.gen != gen)
        return;
      auto read = mcp::read_message(text);
      if (auto* err = std::get_if<mcp::read_error>(&read)) {
        ++st.view->bad_lines;
        log_limited(server_log_limit(), spdlog::level::warn,
                    "mcp server {}: a line that is no JSON-RPC message: {}",
                    st.cfg.name, err->message);
        return;
      }
      on_message(self, std::get<mcp::message>(read));
    });
  };
  h.log_line = [me, name = st.cfg.name](std::string_view line) {
    static log_limit lim{20};
    log_limited(lim, spdlog::level::info, "mcp server {} says: {}", name,
                line);
  };
  h.dropped = [me, gen] {
    back_to(me, [gen](mcp_actor* self) {
      if (self->state.gen != gen)
        return;
      ++self->state.view->bad_lines;
      log_limited(server_log_limit(), spdlog::level::warn,
                  "mcp server {}: a line over max_message_bytes ({}) dropped",
                  self->state.cfg.name, self->state.cfg.max_message_bytes);
    });
  };
  h.exited = [me, gen](int status) {
    back_to(me, [gen, status](mcp_actor* self) {
      if (self->state.gen != gen)
        return;
      std::string how = "exited";
      if (status >= 0 && WIFEXITED(status))
        how = "exited with status " + std::to_string(WEXITSTATUS(status));
      else if (status >= 0 && WIFSIGNALED(status))
        how = "killed by signal " + std::to_string(WTERMSIG(status));
      on_exit(self, how);
    });
  };
  mcp::child_command cmd{st.cfg.command, st.cfg.args, st.cfg.env, st.cfg.cwd};
  try {
    // Spawned on the caller's thread, before its descriptors are read on
    // the loop (spawn starts the reads: posted, they run there).
    std::shared_ptr<mcp::stdio_child> child;
    std::exception_ptr failure;
    auto max = st.cfg.max_message_bytes;
    std::promise<void> done;
    boost::asio::post(st.io->loop(), [&] {
      try {
        child = mcp::stdio_child::spawn(st.io->loop(), cmd, std::move(h), max);
      } catch (...) {
        failure = std::current_exception();
      }
      done.set_value();
    });
    done.get_future().wait();
    if (failure)
      std::rethrow_exception(failure);
    st.child = std::move(child);
  } catch (const std::exception& e) {
    on_exit(self, std::string{"cannot be started: "} + e.what());
    return;
  }
  auto pid = st.child->pid();
  st.view->update([&](mcp_server_view::snapshot& s) {
    s.state = mcp_server_view::state_kind::starting;
    s.pid = pid;
  });
  json params{{"protocolVersion", pmcp::supported_versions().front()},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", "sluice"}, {"version", "0"}}}};
  request_internal(self, internal_kind::initialize, "initialize", params);
  self->delayed_send(self, st.cfg.init_timeout,
                     actor_thunk{[gen](caf::local_actor* a) {
                       auto* self = static_cast<mcp_actor*>(a);
                       auto& st = self->state;
                       if (st.gen != gen || st.ready || !st.child)
                         return;
                       log_limited(server_log_limit(), spdlog::level::warn,
                                   "mcp server {}: no answer to initialize "
                                   "within init_timeout_s; stopping it",
                                   st.cfg.name);
                       boost::asio::post(st.io->loop(), [c = st.child] {
                         c->stop(std::chrono::milliseconds{500});
                       });
                     }});
}

// -- what the server says -------------------------------------------------------

void publish_tools(mcp_actor* self) {
  auto& st = self->state;
  auto tools = std::make_shared<const std::vector<json>>(std::move(st.listing));
  st.listing.clear();
  st.pages = 0;
  st.view->update([&](mcp_server_view::snapshot& s) {
    s.tools = tools;
    ++s.tools_version;
  });
  if (st.relist) {
    st.relist = false;
    list_tools(self, "");
  }
}

void on_internal_answer(mcp_actor* self, internal_kind kind,
                        const mcp::message& m) {
  auto& st = self->state;
  bool ok = m.what == mcp::message::kind::response && m.result.is_object();
  switch (kind) {
  case internal_kind::initialize: {
    if (!ok) {
      log_limited(server_log_limit(), spdlog::level::err,
                  "mcp server {}: initialize failed: {}; stopping it",
                  st.cfg.name, m.error.dump(-1, ' ', false,
                                            json::error_handler_t::replace));
      boost::asio::post(st.io->loop(), [c = st.child] {
        c->stop(std::chrono::milliseconds{500});
      });
      return;
    }
    auto version = m.result.value("protocolVersion", std::string{});
    st.ready = true;
    st.ever_ready_this_gen = true;
    st.view->update([&](mcp_server_view::snapshot& s) {
      s.state = mcp_server_view::state_kind::ready;
      s.protocol_version = version;
      auto info = m.result.find("serverInfo");
      s.server_info = info != m.result.end() && info->is_object() ? *info
                                                                  : json{};
    });
    logger().info("mcp server {}: ready (protocol {})", st.cfg.name, version);
    send_line(self, mcp::notification_text("notifications/initialized",
                                           json::object()));
    list_tools(self, "");
    for (auto id : st.calls.ids()) // the calls that waited for it
      write_call(self, id);
    return;
  }
  case internal_kind::tools_list: {
    if (!ok) {
      log_limited(server_log_limit(), spdlog::level::warn,
                  "mcp server {}: tools/list failed", st.cfg.name);
      st.listing.clear();
      st.pages = 0;
      return;
    }
    auto tools = m.result.find("tools");
    if (tools != m.result.end() && tools->is_array())
      for (auto& t : *tools)
        if (t.is_object() && t.contains("name") && t["name"].is_string() &&
            st.listing.size() < max_server_tools)
          st.listing.push_back(t);
    auto next = m.result.find("nextCursor");
    if (next != m.result.end() && next->is_string() &&
        ++st.pages < max_tool_pages)
      return list_tools(self, next->get<std::string>());
    publish_tools(self);
    return;
  }
  }
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
  if (auto c = m.error.find("code"); c != m.error.end() && c->is_number_integer())
    code = c->get<int>();
  auto body = m.error.dump(-1, ' ', false, json::error_handler_t::replace);
  if (code == mcp::internal_error) {
    auto* p = st.calls.find(id);
    bool unsafe = p && !pmcp::may_retry(pmcp::delivery::sent, p->hints);
    source_reply r;
    r.kind = outcome_kind::transient;
    r.body = std::move(body);
    r.reason = "internal error";
    r.unsafe_to_retry = unsafe;
    return end_call(self, id, std::move(r));
  }
  source_reply r;
  r.kind = outcome_kind::permanent;
  r.body = std::move(body);
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
  if (p->relay && p->stream_to)
    self->send(p->stream_to, stream_chunk_atom_v, p->stream_tag,
               mcp::notification_text("notifications/progress", m.params));
  arm(self, id);
}

void on_message(mcp_actor* self, const mcp::message& m) {
  auto& st = self->state;
  using kind = mcp::message::kind;
  if (m.what == kind::response || m.what == kind::error_response) {
    uint64_t id = 0;
    auto [end, ec] =
        std::from_chars(m.id.data(), m.id.data() + m.id.size(), id);
    if (ec != std::errc{} || end != m.id.data() + m.id.size()) {
      ++st.view->bad_lines;
      return;
    }
    if (auto i = st.internal.find(id); i != st.internal.end()) {
      auto what = i->second;
      st.internal.erase(i);
      return on_internal_answer(self, what, m);
    }
    if (st.calls.find(id))
      return on_call_answer(self, id, m);
    ++st.view->bad_lines; // an answer to nothing (twice, or made up)
    return;
  }
  if (m.what == kind::notification) {
    if (m.method == "notifications/progress")
      return on_progress(self, m);
    if (m.method == "notifications/tools/list_changed") {
      if (st.pages > 0 || !st.listing.empty())
        st.relist = true;
      else
        list_tools(self, "");
    }
    return; // others (logging, resources) are not relayed yet
  }
  // A request from the server: ping is answered; sampling, elicitation and
  // roots are not relayed to the client yet.
  if (m.method == "ping")
    return send_line(self, mcp::result_response(m.id, json::object()));
  send_line(self, mcp::error_response(m.id, mcp::method_not_found,
                                      "not supported by the gateway"));
}

// -- attempts -------------------------------------------------------------------

// Writes call `id` to the server; a server that cannot take it never saw it.
void write_call(mcp_actor* self, uint64_t id) {
  auto* p = self->state.calls.find(id);
  if (!p || p->written)
    return;
  p->written = true;
  auto line = std::move(p->line);
  p->line.clear();
  send_line(self, std::move(line), [id](mcp_actor* self) {
    if (auto* p = self->state.calls.find(id))
      p->written = false; // it never reached the server
    fail_sent(self, id, outcome_kind::transient, mcp::internal_error,
              "server " + self->state.cfg.name + " does not read its input",
              "not sent: input full");
  });
}

caf::result<source_reply> attempt(mcp_actor* self, const call_request& req) {
  auto& st = self->state;
  ++st.view->calls;
  json params;
  try {
    params = json::parse(req.payload);
  } catch (const std::exception&) {
  }
  if (!params.is_object() || !params.contains("name") ||
      !params["name"].is_string()) {
    source_reply r;
    r.kind = outcome_kind::permanent;
    r.body = error_body(mcp::invalid_params, "a tools/call needs a name");
    return r;
  }
  auto id = st.next_id++;
  pending_call p;
  // The requester first: making the promise takes the sender away.
  p.requester = caf::actor_cast<caf::actor_addr>(self->current_sender());
  p.promise = self->make_response_promise();
  p.hints = hints_of_tool(*st.view, params["name"].get<std::string>());
  // Progress tells the gateway the call is alive: the client's token is
  // kept (and its notifications passed on), else one of ours is added.
  auto& meta = params["_meta"];
  if (!meta.is_object())
    meta = json::object();
  auto token = meta.find("progressToken");
  if (token != meta.end() && (token->is_string() || token->is_number_integer())) {
    p.token = token->dump();
    p.relay = true;
    p.stream_to = req.stream_to;
    p.stream_tag = req.stream_tag;
  } else {
    meta["progressToken"] = "sluice-" + std::to_string(id);
    p.token = meta["progressToken"].dump();
  }
  if (st.by_token.count(p.token) != 0) { // two calls with one token
    source_reply r;
    r.kind = outcome_kind::permanent;
    r.body = error_body(mcp::invalid_params,
                        "a progressToken already in use on this server");
    return r;
  }
  auto now = self->clock().now();
  p.sent = now;
  if (req.timeout > duration::zero())
    p.attempt_deadline = now + req.timeout;
  auto promise = p.promise;
  st.by_token.emplace(p.token, id);
  st.calls.add(self, id, std::move(p));
  st.calls.find(id)->line =
      mcp::request_text(std::to_string(id), "tools/call", params);
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
    if (auto* p = st.calls.find(id); p && p->written)
      written.push_back(id);
  for (auto id : st.calls.drop_requester(requester)) {
    for (auto i = st.by_token.begin(); i != st.by_token.end(); ++i)
      if (i->second == id) {
        st.by_token.erase(i);
        break;
      }
    if (std::find(written.begin(), written.end(), id) == written.end())
      continue; // never sent: nothing to tell the server
    ++st.view->cancels_sent;
    send_line(self, mcp::notification_text(
                        "notifications/cancelled",
                        json{{"requestId", id},
                             {"reason", "the client cancelled the call"}}));
  }
}

caf::behavior mcp_source_actor(mcp_actor* self, mcp_server_settings cfg,
                               std::shared_ptr<mcp_server_view> view) {
  self->state.cfg = std::move(cfg);
  self->state.view = std::move(view);
  self->set_down_handler(
      [self](caf::down_msg& dm) { cancel_requester(self, dm.source); });
  start_child(self);
  return {
      [self](cancel_atom) {
        cancel_requester(self,
                         caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [self](attempt_atom, const call_request& req) -> caf::result<source_reply> {
        return attempt(self, req);
      },
      [self](actor_thunk& t) { t.run(self); },
  };
}

} // namespace

mcp_source spawn_mcp_stdio_source(caf::actor_system& sys,
                                  mcp_server_settings cfg) {
  validate(cfg);
  auto view = std::make_shared<mcp_server_view>(cfg.name, cfg.prefix);
  auto a = sys.spawn(mcp_source_actor, std::move(cfg), view);
  return {caf::actor_cast<source_actor>(a), std::move(view)};
}

} // namespace sluice
