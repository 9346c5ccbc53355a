// The operations endpoints of a connection: an operator's breaker action,
// GET /status and GET /events. Member functions of `connection`: each waits
// on an actor and answers on the session's strand and stream.

#include "sluice/runtime/node/connection.hpp"

#include <thread>

#include "sluice/actors/log.hpp"
#include "sluice/runtime/node/client_socket.hpp"
#include "sluice/runtime/node/dashboard_assets.hpp"
#include "sluice/runtime/node/operator_action.hpp"
#include "sluice/runtime/node/request_reading.hpp"
#include "sluice/runtime/node/status_report.hpp"

namespace sluice::node {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

log_limit admin_log;

} // namespace

// -- GET /dashboard -----------------------------------------------------------

void connection::serve_dashboard(const std::string& name) {
  // /dashboard/ is sent to /dashboard: a browser keeps the admin key it
  // was asked for on a page's directory, and the page reads /status and
  // /events from "/".
  auto target = request_.target();
  if (name.empty() &&
      request_path({target.data(), target.size()}) == "/dashboard/") {
    auto res = make_response(308, "", keep_, version_);
    res.set(http::field::location, "/dashboard");
    return write(std::move(res));
  }
  auto* asset = find_dashboard_asset(name);
  if (!asset)
    return refuse(errc::not_found,
                  "no dashboard file " + echo_text(name) +
                      " (the page is GET /dashboard)",
                  keep_);
  auto res = make_response(200, std::string{asset->body}, keep_, version_);
  auto view = [](std::string_view v) {
    return beast::string_view{v.data(), v.size()};
  };
  res.set(http::field::content_type, view(asset->content_type));
  res.set(http::field::cache_control, "no-cache");
  res.set("Content-Security-Policy", view(dashboard_csp));
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  write(std::move(res));
}

// -- POST /admin/breakers/SOURCE/ACTION ---------------------------------------

// `rest`: the path after "/admin/".
void connection::admin_action(const std::string& rest) {
  if (rest == "reload")
    return admin_reload();
  auto parsed = parse_operator_action(rest);
  if (parsed.error)
    return refuse(*parsed.error, parsed.why, keep_);
  std::optional<source_handle> target;
  for (auto& s : front_.rt.sources())
    if (s.name == parsed.source)
      target = s;
  if (!target)
    return refuse(errc::not_found, "no source " + echo_text(parsed.source),
                  keep_);
  log_limited(admin_log, spdlog::level::warn,
              "operator action from {}: {} the breaker of source {}",
              client_addr_, parsed.action_name, parsed.source);
  keep_pending();
  std::weak_ptr<connection> weak = shared_from_this();
  // Should the spawn throw (no memory), the connection is no longer kept.
  pending_guard guard{this};
  ask_breaker(
      front_, target->breaker.actor, parsed.action,
      [weak, gate = front_.gate, name = parsed.source,
       action_name = parsed.action_name](std::optional<breaker_status> st) {
        post_to(gate, weak, [st, name, action_name](connection& c) {
          c.forget_pending();
          if (!st)
            return c.refuse(errc::overloaded,
                            "the breaker of " + name + " did not answer",
                            c.keep_);
          c.write(make_response(
              200,
              json_text({{"source", name},
                         {"action", action_name},
                         {"state", std::string{policy::to_string(st->state)}},
                         {"generation", st->generation},
                         {"isolated", st->isolated}}),
              c.keep_, c.version_));
        });
      });
  guard.armed = false;
}

// -- POST /admin/reload ------------------------------------------------------

void connection::admin_reload() {
  auto* reloader = front_.reloader.load(std::memory_order_acquire);
  if (reloader == nullptr)
    return refuse(errc::not_found,
                  "config reload is not served by this front (sluice-node "
                  "serves it)",
                  keep_);
  std::unique_lock<std::mutex> reload_guard{front_.reload_mx};
  if (front_.reloads_closed) {
    reload_guard.unlock();
    return refuse(errc::shutting_down, "the node is stopping", keep_);
  }
  if (front_.reloading.load(std::memory_order_acquire)) {
    reload_guard.unlock();
    return refuse(errc::overloaded, "a config reload is in progress", keep_);
  }
  // The last reload's thread has ended (or is ending): reaped here.
  if (front_.reload_thread.joinable())
    front_.reload_thread.join();
  front_.reloading.store(true, std::memory_order_release);
  log_limited(admin_log, spdlog::level::warn,
              "operator action from {}: config reload", client_addr_);
  keep_pending();
  std::weak_ptr<connection> weak = shared_from_this();
  // A reload reads a file and spawns the new sources: never on an event
  // loop. The front's shutdown joins the thread.
  auto work = [reloader, weak, gate = front_.gate, &front = front_] {
    std::optional<reload_outcome> out;
    std::vector<std::string> draining;
    try {
      out = reloader->reload("POST /admin/reload");
      draining = front.rt.draining_sources();
    } catch (...) { // reload catches its own; memory may still run out
    }
    try {
      post_to(gate, weak, [out, draining](connection& c) {
        c.forget_pending();
        if (!out)
          return c.refuse(errc::overloaded, "the config reload failed",
                          c.keep_);
        if (!out->ok) {
          auto body = error_body(errc::config_rejected,
                                 "config reload refused; the node runs on "
                                 "generation " +
                                     std::to_string(out->generation) + ": " +
                                     out->error);
          body["error"]["generation"] = out->generation;
          return c.write(error_response_from(errc::config_rejected, body,
                                             c.keep_, c.version_));
        }
        c.write(make_response(200, json_text(reload_json(*out, draining)),
                              c.keep_, c.version_));
      });
    } catch (...) { // no memory for the post: the client's read times out
    }
    front.reloading.store(false, std::memory_order_release);
  };
  try {
    front_.reload_thread = std::thread{std::move(work)};
  } catch (const std::exception& e) { // no thread to be had
    front_.reloading.store(false, std::memory_order_release);
    forget_pending();
    refuse(errc::overloaded,
           std::string{"cannot start the config reload: "} + e.what(), keep_);
  }
}

// -- GET /status --------------------------------------------------------------

void connection::start_status() {
  keep_pending(); // until answered, or until the front stops
  std::weak_ptr<connection> weak = shared_from_this();
  auto ledger = front_.shared_spend;
  auto limits = ledger ? shared_limits_of(front_) : std::vector<shared_limit>{};
  collect_scopes(front_, [weak, gate = front_.gate, ledger,
                          limits = std::move(limits)](json scopes) mutable {
    auto answer = [weak, gate](json scopes,
                               std::shared_ptr<const shared_counts> shared) {
      post_to(gate, weak, [scopes = std::move(scopes), shared](connection& c) {
        c.forget_pending();
        c.write(make_response(
            200, json_text(status_json(c.front_, scopes, shared.get())),
            c.keep_, c.version_));
      });
    };
    if (!ledger || limits.empty())
      return answer(std::move(scopes), nullptr);
    // With Redis: its counts of every limit, asked on its thread.
    auto names = std::make_shared<std::vector<shared_limit>>(std::move(limits));
    ledger->read(
        *names,
        [answer, names, scopes = std::move(scopes)](
            std::optional<std::vector<shared_limits::counts>> counts) mutable {
          std::shared_ptr<shared_counts> shared;
          if (counts && counts->size() == names->size()) {
            shared = std::make_shared<shared_counts>();
            for (size_t i = 0; i < names->size(); ++i)
              (*shared)[(*names)[i].name] = (*counts)[i];
          }
          answer(std::move(scopes), std::move(shared));
        });
  });
}

// -- GET /events --------------------------------------------------------------

void connection::start_events() {
  // Subscribe before the header goes out, so a client that has seen the
  // header misses nothing published after it; events queue meanwhile.
  std::weak_ptr<connection> weak = shared_from_this();
  auto push = [weak, gate = front_.gate](const std::string& frame) {
    post_to(gate, weak, [frame](connection& c) {
      if (c.sse_)
        c.sse_->push(frame);
    });
  };
  if (!front_.events.subscribe(id_, std::move(push)))
    return refuse(errc::overloaded,
                  "too many /events subscribers (node.max_event_subscribers "
                  "= " +
                      std::to_string(front_.events.max_subscribers()) + ")",
                  false);
  subscribed_ = true;
  keep_ = false; // the stream ends when the client leaves
  beast::error_code ignored;
  stream_.socket().set_option(
      net::socket_base::send_buffer_size(event_send_buffer_bytes), ignored);
  route_.clear();
  sse_.emplace(stream_, event_stream_budget,
               [this](sse_stream::end e) { on_stream_end(e); });
  sse_->start(shared_from_this(), false, version_, rec_.request_id);
  log_access(200);
  sse_->push(breaker_snapshot_frame(front_));
  watch_event_client();
}

void connection::watch_event_client() {
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](beast::error_code ec) {
        self->guarded("watching an /events client", [&] {
          if (!self->sse_ || self->sse_->ended())
            return;
          if (ec)
            return self->sse_->drop();
          auto& socket = self->stream_.socket();
          switch (peek_client(socket)) {
          case client_state::closed:
            return self->sse_->drop();
          case client_state::has_data: {
            // Ignore what the client sends (it is there: this won't block).
            char sink[512];
            beast::error_code ignored;
            socket.read_some(net::buffer(sink), ignored);
            break;
          }
          case client_state::quiet:
            break;
          }
          self->watch_event_client();
        });
      });
}

} // namespace sluice::node
