// The OpenAI-compatible endpoints of a connection: a governed call (its
// session, rate, model and route checks, then the bridge from the call's
// actor-thread callbacks to the connection's strand) and /v1/models.
// Member functions of `connection`: the bridge lives on the session's
// state (the stream, the pending call, the stream writer).

#include "sluice/runtime/node/connection.hpp"

#include "sluice/runtime/node/call_setup.hpp"
#include "sluice/runtime/node/client_socket.hpp"
#include "sluice/runtime/node/model_list.hpp"
#include "sluice/runtime/node/request_reading.hpp"

namespace sluice::node {

namespace beast = boost::beast;
using tcp = boost::asio::ip::tcp;

// GET /v1/models (`id` empty) or /v1/models/ID.
void connection::list_models(const std::string& id) {
  // A listing is a request: it spends the key's rate like a call.
  if (key_)
    if (auto wait = key_->take(front_.now()))
      return refuse(rate_refusal(*wait), keep_);
  if (id.empty()) {
    // The list from the cache (built once per routes version and filter).
    // NOTE: the version is read before the models: a list built across a
    // reload is filed under the older version, and the next request, which
    // reads the newer one, builds it again.
    auto& rt = front_.rt;
    auto version = rt.routes_version();
    auto list = front_.model_lists.get(
        version, model_filter_of(key_), [&rt, key = key_, &f = front_] {
          return json_text(
              *models_answer(rt.models(), key, "", f.started_unix));
        });
    return write(make_response(200, *list, keep_, version_));
  }
  auto body = models_answer(front_.rt.models(), key_, id, front_.started_unix);
  if (!body)
    return refuse(model_refusal(id), keep_);
  write(make_response(200, json_text(*body), keep_, version_));
}

// -- governed calls -----------------------------------------------------------

void connection::start_call(const std::string& path) {
  call_options opts;
  auto session =
      session_for(request_.base(), key_ ? &key_->name() : nullptr, id_);
  if (!session.error.empty())
    return refuse(errc::bad_request, session.error, keep_);
  if (key_) {
    if (!session.name.empty()) {
      opts.session = std::move(session.name);
      opts.session_group = key_->tier(); // capped each and together
    } else {
      opts.session_tier = key_->tier(); // the key is the session
    }
    auto wait = key_->take(front_.now());
    spend_.key_limits(key_, front_.now()); // its headers, refused or not
    if (wait)
      return refuse(rate_refusal(*wait), keep_);
  } else {
    opts.session = std::move(session.name);
  }
  std::function<bool(const std::string&)> may_use;
  if (key_)
    may_use = [k = key_](const std::string& m) { return k->may_use(m); };
  auto plan = plan_call(
      request_.body(), key_ ? &key_->name() : nullptr, may_use,
      [&](const std::string& m) { return front_.rt.find_route(path, m).miss; },
      path);
  rec_.model = echo_text(plan.model);
  if (plan.error)
    return refuse(plan, keep_);
  if (auto no = spend_.open(
          key_, *front_.spend(), path, plan.model, plan.stream, request_.body(),
          front_.now(), std::chrono::system_clock::now(), front_.shared_spend))
    return refuse(*no, keep_);
  if (spend_.shared_limits().empty())
    return send_call(path, std::move(opts), std::move(plan.model), plan.stream);
  reserve_shared(path, std::move(opts), std::move(plan.model), plan.stream);
}

namespace {

// Redis's answer to a call's reservation, on its way to the connection:
// given back should the connection be gone when it arrives.
struct shared_grant {
  std::shared_ptr<shared_spend> ledger;
  std::vector<shared_limit> limits;
  shared_limits::outcome outcome;
  bool taken = false;

  shared_grant(std::shared_ptr<shared_spend> l, std::vector<shared_limit> ls)
      : ledger(std::move(l))
      , limits(std::move(ls)) {}
  shared_grant(const shared_grant&) = delete;
  shared_grant& operator=(const shared_grant&) = delete;
  ~shared_grant() {
    if (taken || !outcome.ok)
      return;
    try {
      for (auto& l : limits)
        l.amount = 0;
      ledger->settle(outcome.reservation, std::move(limits));
    } catch (...) { // no memory: it lapses within one TTL
    }
  }
};

} // namespace

// The call's limits are counted in Redis: the reservation is asked on the
// ledger's thread, and the call goes on (or is refused) on the answer.
void connection::reserve_shared(const std::string& path, call_options opts,
                                std::string model, bool stream) {
  keep_pending();
  auto grant = std::make_shared<shared_grant>(front_.shared_spend,
                                              spend_.shared_limits());
  std::weak_ptr<connection> weak = shared_from_this();
  pending_guard guard{this}; // should the job not be queued (no memory)
  front_.shared_spend->reserve(
      spend_.shared_limits(),
      [grant, weak, gate = front_.gate, path, opts = std::move(opts),
       model = std::move(model), stream](shared_limits::outcome o) mutable {
        grant->outcome = std::move(o);
        post_to(gate, weak,
                [grant, path, opts = std::move(opts), model = std::move(model),
                 stream](connection& c) mutable {
                  c.forget_pending();
                  auto no =
                      c.spend_.on_shared(grant->outcome, c.front_.now(),
                                         std::chrono::system_clock::now());
                  grant->taken = true; // the call's now (settled by it)
                  if (no)
                    return c.refuse(*no, c.keep_);
                  c.send_call(path, std::move(opts), std::move(model), stream);
                });
      });
  guard.armed = false;
}

// The call goes to the runtime: its answer comes back on the strand.
void connection::send_call(const std::string& path, call_options opts,
                           std::string model, bool stream) {
  call_request call{path, std::move(request_.body())};
  call.model = std::move(model);
  call.stream = stream;
  call.tokens = spend_.tokens();
  call.headers = forwarded_headers(request_.base(), rec_.request_id);
  run_call(std::move(call), std::move(opts));
}

// Any governed call (an OpenAI route's, a tool call): to the runtime, its
// pieces and result back on the strand.
void connection::run_call(call_request call, call_options opts) {
  opts.connection = tier_;
  ++front_.in_flight;
  pending_ = true;
  route_ = call.route;
  started_ = front_.now();
  try {
    keep_pending();
    std::weak_ptr<connection> weak = shared_from_this();
    // From the call's actor: a piece of the answer, or the result, to the
    // connection (at once when the actor runs on the connection's loop and
    // no earlier piece waits in a post).
    // A cancelled result is always posted: it may come from the governor's
    // end while this connection's own code runs (its `call_.cancel()`,
    // should the scheduler release the governor at once, as when closed).
    auto pending = std::make_shared<std::atomic<uint32_t>>(0);
    auto to_strand = [gate = front_.gate, weak, pending](auto fn,
                                                         bool at_once_ok) {
      if (at_once_ok)
        run_or_post(gate, weak, pending, std::move(fn));
      else
        post_to(gate, weak, std::move(fn));
    };
    if (call.stream)
      opts.on_chunk = [to_strand](std::string bytes) {
        to_strand([bytes = std::move(bytes)](
                      connection& c) mutable { c.on_chunk(std::move(bytes)); },
                  true);
      };
    call_ = front_.rt.call(
        std::move(call),
        [to_strand](call_result r) {
          bool at_once_ok = r.status != call_status::cancelled;
          to_strand([r = std::move(r)](
                        connection& c) mutable { c.on_result(std::move(r)); },
                    at_once_ok);
        },
        opts);
  } catch (const std::exception& e) {
    --front_.in_flight;
    pending_ = false;
    forget_pending();
    return refuse(errc::bad_request, e.what(), keep_);
  }
  watch_client();
}

// While the call runs, notice the client going away (its socket reads EOF
// or fails). That cancels the call.
void connection::watch_client() {
  stream_.expires_never();
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      bind_memory(watch_memory_, [self = shared_from_this(),
                                  seq = watch_seq_](beast::error_code ec) {
        self->guarded("watching a client", [&] {
          if (ec || !self->pending_ || seq != self->watch_seq_)
            return; // stale: that call is over
          switch (peek_client(self->stream_.socket())) {
          case client_state::closed:
            self->call_.cancel(); // the governor ends; permits come back
            self->closed_ = true;
            return;
          case client_state::quiet:
            return self->watch_client(); // a stale wakeup: keep watching
          case client_state::has_data:
            return; // the client sent more (pipelining): read it later
          }
        });
      }));
}

void connection::on_result(call_result r) {
  if (!pending_)
    return; // cut off by the shutdown meanwhile: already answered
  pending_ = false;
  ++watch_seq_; // the disconnect watch is stale now
  --front_.in_flight;
  forget_pending();
  if (!streaming_) {
    // Stop watching for a disconnect (nothing else is pending).
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  auto elapsed = front_.now() - started_;
  if (r.status != call_status::ok && r.status != call_status::cancelled)
    publish_verdict(r, elapsed);
  front_.metrics.record(route_, r, elapsed);
  rec_.source = r.source;
  rec_.attempts = static_cast<uint32_t>(r.attempts.size());
  rec_.upstream = r.upstream_time();
  for (size_t i = 0; i < r.attempts.size(); ++i) {
    auto& a = r.attempts[i];
    rec_.hedged += a.hedge ? 1 : 0;
    if (a.won)
      rec_.won_attempt = static_cast<uint32_t>(i + 1);
  }
  rec_.error = access_error(r);
  if (mcp_call_) {
    if (mcp_call_->ticket != 0)
      front_.mcp.forget(mcp_call_->ticket);
    mcp_call_->ticket = 0;
    front_.metrics.record_mcp(mcp_call_->server, mcp_call_->method,
                              mcp_call_->tool, mcp_outcome(r));
  }
  spend_.close(r, front_.now(), std::chrono::system_clock::now());
  if (auto& used = spend_.usage()) {
    rec_.usage = *used;
    if (spend_.priced())
      rec_.cost = spend_.cost();
    front_.metrics.record_usage(key_ ? key_->name() : "", rec_.model, r.source,
                                *used, rec_.cost);
  }
  if (closed_ || r.status == call_status::cancelled) {
    mcp_call_.reset();
    log_access(client_closed_status);
    return close();
  }
  if (mcp_call_) {
    // A tool call: its JSON-RPC answer, alone or as the stream's last event.
    auto answer = mcp_answer(r);
    if (r.status != call_status::ok)
      rec_.rpc_error = r.status == call_status::tool_busy ? -32016 : -32603;
    mcp_call_.reset();
    if (!streaming_)
      return write(make_response(200, std::move(answer), keep_, version_),
                   then::at_once);
    sse_->push("event: message\ndata: " + answer + "\n\n");
    return sse_->finish();
  }
  if (!streaming_) {
    auto res = render(r, keep_, version_);
    for (auto& [name, value] : spend_.headers())
      res.set(name, value);
    return write(std::move(res), then::at_once);
  }
  // The stream is under way: end it, with an error event if it broke.
  if (auto rest = spend_.flush(); !rest.empty())
    sse_->push(std::move(rest));
  if (!r.ok())
    sse_->push(stream_error_frame(r));
  sse_->finish();
}

// `event: verdict` on /events: how a call that got no answer ended, with
// what the dashboard lists (the key by name, never the session id).
void connection::publish_verdict(const call_result& r, duration elapsed) {
  auto ms = [](duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  json v{{"route", route_},
         {"status", std::string{to_string(r.status)}},
         {"model", rec_.model.empty() ? json(nullptr) : json(rec_.model)},
         {"key", key_ ? json(key_->name()) : json(nullptr)},
         {"attempts", r.attempts.size()},
         {"elapsed_ms", ms(elapsed)},
         {"stalled_ms", ms(r.stalled)},
         {"productive_ms", ms(r.productive)},
         {"at_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count()}};
  if (!r.reason.empty())
    v["reason"] = r.reason;
  if (r.busy_tier)
    v["tier"] = std::string{to_string(*r.busy_tier)};
  front_.events.publish("event: verdict\ndata: " + json_text(v) + "\n\n");
}

// A piece of the answer: the first one sends the response header. From
// here on the call cannot be retried; the governor knows.
void connection::on_chunk(std::string bytes) {
  if (closed_ || !pending_)
    return;
  if (!streaming_) {
    streaming_ = true;
    sse_.emplace(stream_, answer_stream_budget,
                 [this](sse_stream::end e) { on_stream_end(e); });
    sse_->start(shared_from_this(), keep_, version_, rec_.request_id,
                cors_origin_, &spend_.headers());
  }
  if (mcp_call_) { // a progress notification, as an SSE event
    if (!bytes.empty())
      sse_->push("event: message\ndata: " + bytes + "\n\n");
    return;
  }
  spend_.on_piece(bytes);
  if (!bytes.empty())
    sse_->push(std::move(bytes));
}

} // namespace sluice::node
