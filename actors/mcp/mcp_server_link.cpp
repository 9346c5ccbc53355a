// The life of an MCP server behind its source: started over its channel (a
// child, or Streamable HTTP), initialized, its tools listed, what it says
// read, and started again with backoff when it is gone.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <future>

#include <boost/asio/post.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/mcp/http_channel.hpp"
#include "sluice/actors/mcp/mcp_source_state.hpp"
#include "sluice/actors/mcp/stdio_child.hpp"
#include "sluice/runtime/policy/call/backoff.hpp"
#include "sluice/runtime/policy/mcp/protocol_version.hpp"

namespace sluice::mcp_detail {

namespace pmcp = policy::mcp;
using policy::outcome_kind;

namespace {

std::chrono::milliseconds as_ms(duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

// Stops the current channel; its `gone` follows (and a start after it).
void stop_link(mcp_actor* self, duration grace) {
  auto& st = self->state;
  if (st.link && st.io)
    boost::asio::post(st.io->loop(),
                      [c = st.link, g = as_ms(grace)] { c->stop(g); });
}

// How each list is asked for and answered.
struct list_method {
  const char* method;
  const char* field; // the result's array
  const char* key;   // what each item must have, a string
};

constexpr std::array<list_method, list_kinds> list_methods{{
    {"tools/list", "tools", "name"},
    {"resources/list", "resources", "uri"},
    {"resources/templates/list", "resourceTemplates", "uriTemplate"},
    {"prompts/list", "prompts", "name"},
}};

const list_method& method_of(list_kind k) {
  return list_methods[static_cast<size_t>(k)];
}

// An internal request that got no answer: a listing starts over at the
// next list_changed (or start), an initialize stops the server.
void internal_failed(mcp_actor* self, uint64_t id, const std::string& method,
                     const std::string& reason) {
  auto& st = self->state;
  auto i = st.internal.find(id);
  if (i == st.internal.end())
    return; // answered, or failed already
  auto what = i->second;
  st.internal.erase(i);
  log_limited(server_log_limit(), spdlog::level::warn,
              "mcp server {}: {} failed: {}", st.cfg.name, method, reason);
  if (what.initialize)
    stop_link(self, std::chrono::milliseconds{500});
  else
    st.lists[static_cast<size_t>(what.list)] = listing{};
}

void request_internal(mcp_actor* self, internal_request what,
                      const std::string& method, const json& params) {
  auto& st = self->state;
  auto id = st.next_id++;
  st.internal.emplace(id, what);
  send_text(
      self, mcp::request_text(std::to_string(id), method, params),
      [id, method](mcp_actor* self, mcp::send_outcome out) {
        internal_failed(self, id, method,
                        out.ok ? "its exchange ended without an answer"
                               : out.reason);
      },
      st.cfg.init_timeout);
  // A stdio child's channel has no timeout of its own: a listing the
  // server never answers must not keep its list from being asked again.
  // (The initialize has its own timer, which stops the server.)
  if (!what.initialize)
    self->delayed_send(self, st.cfg.init_timeout,
                       actor_thunk{[id, method](caf::local_actor* a) {
                         internal_failed(static_cast<mcp_actor*>(a), id, method,
                                         "no answer within init_timeout_s");
                       }});
}

// Asks for a page of list `k` (the first: a new listing, unless one runs,
// which is then done again once it ends).
void list(mcp_actor* self, list_kind k, const std::string& cursor = {}) {
  auto& l = self->state.lists[static_cast<size_t>(k)];
  if (cursor.empty()) {
    if (l.busy) {
      l.again = true;
      return;
    }
    l = listing{};
    l.busy = true;
  }
  json params = json::object();
  if (!cursor.empty())
    params["cursor"] = cursor;
  internal_request what;
  what.list = k;
  request_internal(self, what, method_of(k).method, params);
}

// The server is gone (or never started): every call it had fails, and it
// is started again after a backoff.
void on_gone(mcp_actor* self, const std::string& how) {
  auto& st = self->state;
  st.ready = false;
  st.link.reset();
  ++st.gen; // what the old channel still says is stale
  if (!st.ever_ready_this_gen)
    ++st.failed_starts;
  else
    st.failed_starts = 1;
  st.ever_ready_this_gen = false;
  st.internal.clear();
  st.lists = {};
  st.view->update([&](mcp_server_view::snapshot& s) {
    s.state = mcp_server_view::state_kind::down;
    s.pid = -1;
    s.last_exit = how;
  });
  log_limited(server_log_limit(), spdlog::level::warn,
              "mcp server {}: {}; starting it again", st.cfg.name, how);
  // Calls written to it fail (retried only where safe); those waiting wait
  // for the next start, at most init_timeout_s (mcp_source.cpp's arm).
  auto why = st.cfg.transport == mcp_transport::stdio ? "server exited"
                                                      : "server session ended";
  for (auto id : st.calls.ids())
    if (auto* p = st.calls.find(id); p && p->written)
      fail_call(self, id, outcome_kind::transient, mcp::internal_error,
                "server " + st.cfg.name + " " + how, why);
  auto delay = policy::backoff_delay(
      {st.cfg.restart_backoff, st.cfg.restart_backoff_max, 0.0},
      st.failed_starts, 0.0);
  auto gen = st.gen;
  self->delayed_send(self, delay, actor_thunk{[gen](caf::local_actor* a) {
                       auto* self = static_cast<mcp_actor*>(a);
                       if (self->state.gen != gen || self->state.link)
                         return;
                       self->state.view->update([](auto& s) { ++s.restarts; });
                       start_server(self);
                     }});
}

void on_message(mcp_actor* self, const mcp::message& m);

// The channel's handlers, each handing its news to the actor if it is
// still about this start.
mcp::channel::handlers link_handlers(mcp_actor* self) {
  auto gen = self->state.gen;
  weak_self<mcp_actor> me{self};
  mcp::channel::handlers h;
  // The bytes of the server's messages on their way to the actor: above
  // max_unread_bytes the channel stops reading the server.
  auto unread = std::make_shared<std::atomic<size_t>>(0);
  h.backed_up = [unread] { return unread->load() > max_unread_bytes; };
  h.message = [me, gen, unread](std::string_view text) {
    *unread += text.size();
    auto held = std::shared_ptr<void>(
        nullptr, [unread, n = text.size()](void*) { *unread -= n; });
    back_to(me, [gen, held, text = std::string{text}](mcp_actor* self) {
      auto& st = self->state;
      if (st.gen != gen)
        return;
      auto read = mcp::read_message(text);
      if (auto* err = std::get_if<mcp::read_error>(&read)) {
        ++st.view->bad_lines;
        log_limited(server_log_limit(), spdlog::level::warn,
                    "mcp server {}: a message that is no JSON-RPC message: "
                    "{}",
                    st.cfg.name, err->message);
        return;
      }
      on_message(self, std::get<mcp::message>(read));
    });
  };
  h.log_line = [name = self->state.cfg.name](std::string_view line) {
    static log_limit lim{20};
    log_limited(lim, spdlog::level::info, "mcp server {} says: {}", name, line);
  };
  h.dropped = [me, gen] {
    back_to(me, [gen](mcp_actor* self) {
      if (self->state.gen != gen)
        return;
      ++self->state.view->bad_lines;
      log_limited(server_log_limit(), spdlog::level::warn,
                  "mcp server {}: a message over max_message_bytes ({}) "
                  "dropped",
                  self->state.cfg.name, self->state.cfg.max_message_bytes);
    });
  };
  h.gone = [me, gen](std::string how) {
    back_to(me, [gen, how = std::move(how)](mcp_actor* self) {
      if (self->state.gen == gen)
        on_gone(self, how);
    });
  };
  return h;
}

std::shared_ptr<mcp::channel> make_link(mcp_actor* self,
                                        mcp::channel::handlers h) {
  auto& st = self->state;
  if (st.cfg.transport == mcp_transport::http)
    return mcp::http_channel::make(st.io->loop(), st.cfg, std::move(h));
  mcp::child_command cmd{st.cfg.command, st.cfg.args, st.cfg.env, st.cfg.cwd};
  return mcp::stdio_child::spawn(st.io->loop(), cmd, std::move(h),
                                 st.cfg.max_message_bytes);
}

// -- what the server says
// -------------------------------------------------------

void publish(mcp_actor* self, list_kind k) {
  auto& st = self->state;
  auto& l = st.lists[static_cast<size_t>(k)];
  auto items = std::make_shared<const std::vector<json>>(std::move(l.items));
  bool again = l.again;
  l = listing{};
  st.view->update([&](mcp_server_view::snapshot& s) {
    switch (k) {
    case list_kind::tools:
      s.tools = items;
      break;
    case list_kind::resources:
      s.resources = items;
      break;
    case list_kind::templates:
      s.resource_templates = items;
      break;
    case list_kind::prompts:
      s.prompts = items;
      break;
    }
    ++s.tools_version;
  });
  if (again)
    list(self, k);
}

void on_ready(mcp_actor* self, const mcp::message& m) {
  auto& st = self->state;
  auto version = m.result.at("protocolVersion").get<std::string>(); // checked
  st.ready = true;
  st.ever_ready_this_gen = true;
  st.view->update([&](mcp_server_view::snapshot& s) {
    s.state = mcp_server_view::state_kind::ready;
    s.protocol_version = version;
    auto info = m.result.find("serverInfo");
    s.server_info =
        info != m.result.end() && info->is_object() ? *info : json{};
  });
  logger().info("mcp server {}: ready (protocol {})", st.cfg.name, version);
  if (st.io && st.link)
    boost::asio::post(st.io->loop(),
                      [c = st.link, version] { c->negotiated(version); });
  send_text(self,
            mcp::notification_text("notifications/initialized", json::object()),
            nullptr, st.cfg.init_timeout);
  if (st.io && st.link)
    boost::asio::post(st.io->loop(), [c = st.link] { c->listen(); });
  // Its tools always; resources and prompts if it says it has them.
  list(self, list_kind::tools);
  auto caps = m.result.find("capabilities");
  auto has = [&](const char* what) {
    return caps != m.result.end() && caps->is_object() && caps->contains(what);
  };
  if (has("resources")) {
    list(self, list_kind::resources);
    list(self, list_kind::templates);
  }
  if (has("prompts"))
    list(self, list_kind::prompts);
  for (auto id : st.calls.ids()) // the calls that waited for it
    write_call(self, id);
}

void on_internal_answer(mcp_actor* self, internal_request what,
                        const mcp::message& m) {
  auto& st = self->state;
  bool ok = m.what == mcp::message::kind::response && m.result.is_object();
  if (what.initialize) {
    // MCP's rule: the client goes on only with a revision it speaks.
    auto v = ok ? m.result.find("protocolVersion") : m.result.end();
    if (ok && v != m.result.end() && v->is_string() &&
        pmcp::server_version_ok(v->get_ref<const std::string&>()))
      return on_ready(self, m);
    log_limited(
        server_log_limit(), spdlog::level::err,
        "mcp server {}: initialize failed: {}; stopping it", st.cfg.name,
        ok ? "answered with no protocol revision the gateway speaks: " +
                 (v == m.result.end()
                      ? std::string{"none"}
                      : v->dump(-1, ' ', false, json::error_handler_t::replace))
           : m.error.dump(-1, ' ', false, json::error_handler_t::replace));
    return stop_link(self, std::chrono::milliseconds{500});
  }
  auto k = what.list;
  auto& l = st.lists[static_cast<size_t>(k)];
  auto& how = method_of(k);
  if (!ok) {
    log_limited(server_log_limit(), spdlog::level::warn,
                "mcp server {}: {} failed", st.cfg.name, how.method);
    l = listing{};
    return;
  }
  auto items = m.result.find(how.field);
  size_t cut = 0;
  if (items != m.result.end() && items->is_array())
    for (auto& t : *items) {
      auto key = t.is_object() ? t.find(how.key) : t.end();
      if (!t.is_object() || key == t.end() || !key->is_string())
        continue;
      auto bytes =
          t.dump(-1, ' ', false, json::error_handler_t::replace).size();
      if (l.items.size() >= max_server_tools || bytes > max_list_item_bytes ||
          l.bytes + bytes > max_list_bytes) {
        ++cut;
        continue;
      }
      l.bytes += bytes;
      l.items.push_back(t);
    }
  if (cut > 0)
    log_limited(server_log_limit(), spdlog::level::warn,
                "mcp server {}: {} items of its {} not kept (over {} items, "
                "{} bytes each or {} bytes in all)",
                st.cfg.name, cut, how.method, max_server_tools,
                max_list_item_bytes, max_list_bytes);
  auto next = m.result.find("nextCursor");
  if (next != m.result.end() && next->is_string() &&
      !next->get_ref<const std::string&>().empty() &&
      ++l.pages < max_tool_pages)
    return list(self, k, next->get<std::string>());
  publish(self, k);
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
    if (m.method == "notifications/tools/list_changed")
      list(self, list_kind::tools);
    else if (m.method == "notifications/resources/list_changed") {
      list(self, list_kind::resources);
      list(self, list_kind::templates);
    } else if (m.method == "notifications/prompts/list_changed")
      list(self, list_kind::prompts);
    return; // others (logging, resource updates) are not relayed yet
  }
  // A request from the server: ping is answered; sampling, elicitation and
  // roots are not relayed to the client yet.
  if (m.method == "ping")
    return (void)send_text(self, mcp::result_response(m.id, json::object()),
                           nullptr, st.cfg.init_timeout);
  send_text(self,
            mcp::error_response(m.id, mcp::method_not_found,
                                "not supported by the gateway"),
            nullptr, st.cfg.init_timeout);
}

} // namespace

log_limit& server_log_limit() {
  static log_limit lim{20};
  return lim;
}

mcp_state::~mcp_state() {
  if (!io)
    return;
  if (link) {
    // Wait for the server's end (bounded): posted there, then joined.
    std::promise<void> ended;
    auto done = ended.get_future();
    auto grace = as_ms(cfg.stop_grace);
    boost::asio::post(io->loop(), [c = link, grace, &ended] {
      c->replace_gone([&ended](std::string) { ended.set_value(); });
      c->stop(grace);
    });
    done.wait_for(grace + std::chrono::seconds{1});
    link.reset();
    // The loop stops: what is still there is killed (a child's SIGKILL
    // and reaping, in its destructor) with it.
    io.reset();
    return;
  }
  io.reset();
}

void start_server(mcp_actor* self) {
  auto& st = self->state;
  if (!st.io) {
    try {
      st.io = std::make_unique<upstream::io_thread>(
          self->system(), "mcp server " + st.cfg.name);
      st.io->start();
    } catch (const std::exception& e) {
      st.io.reset();
      on_gone(self, std::string{"cannot start its I/O thread: "} + e.what());
      return;
    }
  }
  try {
    // Made on the loop (a child's reads start there), waited for here.
    std::shared_ptr<mcp::channel> link;
    std::exception_ptr failure;
    std::promise<void> made;
    auto h = link_handlers(self);
    boost::asio::post(st.io->loop(), [&] {
      try {
        link = make_link(self, std::move(h));
      } catch (...) {
        failure = std::current_exception();
      }
      made.set_value();
    });
    made.get_future().wait();
    if (failure)
      std::rethrow_exception(failure);
    st.link = std::move(link);
  } catch (const std::exception& e) {
    on_gone(self, std::string{"cannot be started: "} + e.what());
    return;
  }
  auto pid = st.link->pid();
  st.view->update([&](mcp_server_view::snapshot& s) {
    s.state = mcp_server_view::state_kind::starting;
    s.pid = pid;
  });
  json params{{"protocolVersion", pmcp::session_versions().front()},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", "sluice"}, {"version", "0"}}}};
  internal_request init;
  init.initialize = true;
  request_internal(self, init, "initialize", params);
  auto gen = st.gen;
  self->delayed_send(
      self, st.cfg.init_timeout, actor_thunk{[gen](caf::local_actor* a) {
        auto* self = static_cast<mcp_actor*>(a);
        auto& st = self->state;
        if (st.gen != gen || st.ready || !st.link)
          return;
        log_limited(server_log_limit(), spdlog::level::warn,
                    "mcp server {}: no answer to initialize within "
                    "init_timeout_s; stopping it",
                    st.cfg.name);
        stop_link(self, std::chrono::milliseconds{500});
      }});
}

} // namespace sluice::mcp_detail
