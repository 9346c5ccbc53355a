#pragma once

// One client connection of the HTTP front: reads requests one at a time,
// routes each (health, status, metrics, events, or a governed call), and
// writes its answer. A strand serialises everything on it; results from
// actor threads are posted to that strand.
//
// The session (reading, framing, writes, close, the failure path, the
// shutdown cut-off) is connection.cpp. What needs no socket is decided by
// pure units: who is asking (`request_access`), which endpoint
// (`endpoint`), a call's session and headers (`call_setup`), an operator's
// action (`operator_action`), the models list (`model_list`). The handlers
// that wait on actors share the session's state, so they stay members,
// each group in a file of its own: connection_calls.cpp (governed calls,
// /v1/models) and connection_ops.cpp (/admin/, /status, /events).

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/actors/wire/handler_memory.hpp"
#include "sluice/runtime/node/call_spend.hpp"
#include "sluice/runtime/node/front_state.hpp"
#include "sluice/runtime/node/refusal.hpp"
#include "sluice/runtime/node/responses.hpp"
#include "sluice/runtime/node/sse_stream.hpp"

namespace sluice::mcp {
struct message;
} // namespace sluice::mcp

namespace sluice::policy::mcp {
struct request_envelope;
} // namespace sluice::policy::mcp

namespace sluice::node {

/// Longest wait for a request (header and body) on an idle connection.
constexpr auto read_timeout = std::chrono::seconds{60};
/// "nginx's 499", logged when the client went away before its answer.
constexpr unsigned client_closed_status = 499;
/// Longest write of one unary response.
constexpr auto write_timeout = std::chrono::seconds{30};
/// Largest request header (431 beyond): a header flood costs this much.
constexpr uint32_t max_header_bytes = 8 * 1024;
/// Largest read buffer of a connection (the header must fit in it; body
/// bytes move on into the body as they are parsed).
constexpr size_t read_buffer_bytes = 64 * 1024;
/// After a refusal on the header: the most body bytes dropped, and the
/// longest wait for the client to stop sending, before the socket closes.
constexpr size_t linger_bytes = 1 << 20;
constexpr auto linger_time = std::chrono::seconds{2};

/// At `admin`'s listener's cap, from any thread: closes the connection
/// that has waited longest for a request (on its loop), so a new one can
/// be served. False when none is idle (the new one is refused).
bool shed_idle(front_state& front, bool admin);

class connection : public std::enable_shared_from_this<connection> {
public:
  /// `admin`: accepted on `node.admin_listen` (serves operations only).
  connection(boost::asio::ip::tcp::socket&& socket, front_state& front,
             bool admin = false);
  ~connection();

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  void start();

  /// At shutdown, from any thread: a call still in flight is answered
  /// 503 `shutting_down` (a stream ends with an error event), then the
  /// connection closes.
  void cut_off();

  /// At shutdown on shared loops, from any thread: closes the socket on the
  /// connection's loop; its handlers end (aborted) and the connection goes.
  void shut();

  /// From any thread (`shed_idle`): closes the connection on its loop if it
  /// is still waiting for a request; else sheds the next oldest idle one.
  void shed();

private:
  using request_parser =
      boost::beast::http::request_parser<boost::beast::http::string_body,
                                         block_allocator<char>>;

  // -- reading (connection.cpp) -----------------------------------------
  void do_read();
  /// Between requests, nothing of the next one read: the connection is
  /// idle (sheddable) until its first bytes come.
  void wait_for_request();
  void read_header();
  /// Feeds the parser what the buffer holds, up to the end of the header
  /// (`header_only`) or of the message; false on an error (in `ec`).
  /// `need_more` is no error: the rest is read.
  bool parse_buffered(bool header_only, boost::system::error_code& ec);
  /// Enters or leaves its listener's idle order.
  void set_idle(bool idle);
  /// How long a request (or the wait for one) may take on this listener.
  std::chrono::steady_clock::duration request_timeout() const;
  void on_header(boost::system::error_code ec);
  void read_body();
  void on_body(boost::system::error_code ec);
  void on_read_error(boost::system::error_code ec);
  void begin_request();
  /// On the header: applies `decide_access` (sets `key_`); false when the
  /// request was refused.
  bool check_access();
  /// Sends the request to its endpoint (`choose_endpoint`).
  void handle();

  // -- answers (connection.cpp) ------------------------------------------
  // Every refusal is counted, logged and answered here, once.
  void refuse(const refusal& r, bool keep_alive);
  void refuse(errc code, const std::string& why, bool keep_alive) {
    refuse(refused(code, why), keep_alive);
  }
  /// GET /dashboard (`name` empty) and its files.
  void serve_dashboard(const std::string& name);
  /// Publishes how a call without an answer ended on /events.
  void publish_verdict(const call_result& r, duration elapsed);
  /// Names this connection in `front_.connections` by `key_`.
  void list_key();
  /// 429: `key_`'s request rate is spent for `wait`.
  refusal rate_refusal(std::chrono::duration<double> wait) const;
  /// What follows a response's write when the socket took it all at
  /// once: `posted` runs it as a handler (the caller may still hold the
  /// request being answered, which the next read replaces, and a pipelined
  /// request answered at once must not recurse); `at_once` runs it inside
  /// `write`, for an answer that comes from a call's result (the caller
  /// holds nothing of the request and the next answer comes from another
  /// call, so no recursion).
  enum class then { posted, at_once };
  void write(response res, then next = then::posted);
  void after_write(boost::system::error_code ec, bool keep);
  void close();
  /// Closes after a refusal sent before the body was read: drops what the
  /// client still sends (up to `linger_bytes`, for `linger_time`), so the
  /// close is no reset that could lose the answer.
  void linger_close();
  void drain(size_t dropped);
  /// Writes this request's access-log line (once per request).
  void log_access(unsigned status);
  /// A chunked answer (a call's stream or /events) is over.
  void on_stream_end(sse_stream::end e);
  /// While an actor works for this connection, the front keeps it alive.
  void keep_pending();
  void forget_pending();
  /// Forgets the pending connection when dropped armed: an actor's or a
  /// thread's answer that could not be asked for (no memory) leaves it
  /// kept no longer.
  struct pending_guard {
    connection* c;
    bool armed = true;
    ~pending_guard() {
      if (armed)
        c->forget_pending();
    }
  };

  // -- calls and models (connection_calls.cpp) ---------------------------
  void start_call(const std::string& path);
  void reserve_shared(const std::string& path, call_options opts,
                      std::string model, bool stream);
  void send_call(const std::string& path, call_options opts, std::string model,
                 bool stream);
  void run_call(call_request call, call_options opts);
  void list_models(const std::string& id);
  void watch_client();
  void on_result(call_result r);
  void on_chunk(std::string bytes);

  // -- MCP (connection_mcp.cpp) -------------------------------------------
  /// /mcp: one JSON-RPC message per POST (MCP's Streamable HTTP).
  void serve_mcp();
  /// A JSON answer to an MCP request (`Mcp-Session-Id` set if given).
  void mcp_reply(unsigned status, std::string body,
                 const std::string& session = {});
  void start_tool_call(const std::string& id, nlohmann::json params,
                       const std::string& session, bool sse_ok);
  /// `prompts/get` and `resources/read`: to the server that offers it.
  void start_read(const std::string& id, const std::string& method,
                  nlohmann::json params, const std::string& session,
                  bool sse_ok);
  /// Whether the key may read server `server`'s resources.
  bool may_read_server(const std::string& server) const;
  /// Sends `method` with `params` to `server` as a governed call.
  void send_upstream(const std::string& id, const std::string& method,
                     nlohmann::json params, const std::string& server,
                     const std::string& session, bool sse_ok);
  /// A sessionless (2026-07-28) request, checked by its `_meta` and
  /// headers (connection_mcp_stateless.cpp).
  void serve_mcp_stateless(mcp::message& m,
                           const policy::mcp::request_envelope& e);
  /// The gateway's answer to a list method (none: not one).
  std::optional<nlohmann::json> mcp_list(const std::string& method);
  /// `tools/call`, `prompts/get` and `resources/read`, sent on to their
  /// server; false for any other method.
  bool mcp_forward(mcp::message& m, const std::string& session, bool stateless);
  /// How an MCP call that ended with `r` counts on /metrics.
  static std::string mcp_outcome(const call_result& r);
  /// The JSON-RPC answer to the tool call that ended with `r`.
  std::string mcp_answer(const call_result& r) const;

  // -- operations (connection_ops.cpp) -----------------------------------
  void admin_action(const std::string& rest);
  /// POST /admin/reload: the config file again, on a thread of its own.
  void admin_reload();
  void start_status();
  void start_events();
  void watch_event_client();

  // -- failure path (connection.cpp) -------------------------------------

  /// Runs `fn` and, should it throw, logs it and closes this connection
  /// (cancelling its call): no exception leaves a handler.
  template <class F>
  void guarded(const char* where, F&& fn) noexcept;

  /// From any thread: runs `fn(connection&)` on the connection's strand,
  /// unless the front has stopped its I/O or the connection is gone. Holds
  /// no executor: callbacks kept by actors may outlive the io_context.
  template <class F>
  static void post_to(const std::shared_ptr<post_gate>& gate,
                      const std::weak_ptr<connection>& weak, F fn) {
    hand_to(gate, weak, std::move(fn), nullptr);
  }

  /// Posts of one sender still to run (`run_or_post`).
  using posts_pending = std::shared_ptr<std::atomic<uint32_t>>;

  /// As `post_to`, but on the connection's own loop `fn` runs at once (no
  /// post, no round of the loop) -- unless an earlier post of the same
  /// sender (`pending`) has not run yet: its pieces stay in order. Only
  /// for a sender that holds no lock and is not this connection's own
  /// code: a call's governor handing it a piece of its answer (`fn` may
  /// close the connection, publish events, ...). A governor moves between
  /// loops (a timer wakes it anywhere), so some pieces are posted.
  template <class F>
  static void run_or_post(const std::shared_ptr<post_gate>& gate,
                          const std::weak_ptr<connection>& weak,
                          const posts_pending& pending, F fn) {
    hand_to(gate, weak, std::move(fn), &pending);
  }

  template <class F>
  static void hand_to(const std::shared_ptr<post_gate>& gate,
                      const std::weak_ptr<connection>& weak, F fn,
                      const posts_pending* pending);

  /// The one failure path: counts, logs, cancels the call, closes.
  void fail(const char* where, const char* what) noexcept;

  // -- member variables --------------------------------------------------
  /// The state of the wait for a request and of the disconnect watch,
  /// reused from one request to the next. First: they outlive the stream.
  handler_memory read_memory_;
  handler_memory watch_memory_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_{read_buffer_bytes};
  std::optional<request_parser> parser_;
  boost::beast::http::request<boost::beast::http::string_body, http_fields>
      request_;
  front_state& front_;
  tier_handle tier_;
  uint64_t id_;
  std::string client_addr_;
  call_handle call_;
  std::string route_;
  time_point started_;
  /// A call is in flight (its result not yet handled).
  bool pending_ = false;
  /// The client is gone or dropped: nothing more is written.
  bool closed_ = false;
  /// Refused on its header: its body was never read.
  bool body_unread_ = false;
  /// The request being answered: keep-alive and HTTP version.
  bool keep_ = true;
  unsigned version_ = 11;
  /// Guards the disconnect watch of one call against later ones.
  uint64_t watch_seq_ = 0;
  /// A chunked answer (streamed call, or /events) is under way.
  std::optional<sse_stream> sse_;
  /// The call's tokens and budgets: its reservation, usage and headers.
  call_spend spend_;
  bool streaming_ = false;
  bool subscribed_ = false;
  /// Cut off by shutdown: its last answer counts in `cutoffs_pending`.
  bool cut_off_ = false;
  /// Accepted on the admin listener.
  bool admin_ = false;
  /// Waiting for a request, nothing of it read (in its listener's idle
  /// order, or just taken out of it to be shed).
  bool idle_ = false;
  /// The key set the request was checked against (a reload may swap the
  /// front's while it runs), and in it the request's client key (null:
  /// anonymous).
  std::shared_ptr<const client_keys> keys_;
  client_key* key_ = nullptr;
  /// The web origin whose page may read this request's answer (CORS);
  /// empty: none.
  std::string cors_origin_;
  /// The key `front_.connections` names this connection by.
  std::string listed_key_;
  /// The tool call in flight: its JSON-RPC id (JSON text), method, server,
  /// tool (or prompt, or resource URI) and session, and its ticket in
  /// `front_.mcp` (0: none).
  struct mcp_call_state {
    std::string id;
    std::string method;
    std::string server;
    std::string tool;
    std::string session;
    uint64_t ticket = 0;
    /// A sessionless (2026-07-28) request: its result says `resultType`.
    bool stateless = false;
  };
  std::optional<mcp_call_state> mcp_call_;
  /// The MCP request being started is sessionless (2026-07-28).
  bool mcp_stateless_ = false;
  /// The request being answered, for its access-log line and headers.
  access_record rec_;
  time_point request_started_;
  bool logged_ = true;
};

// -- member function templates ------------------------------------------------

template <class F>
void connection::guarded(const char* where, F&& fn) noexcept {
  // The actors it wakes on this loop (its call's governor) run as it ends.
  loop_turn turn;
  try {
    fn();
  } catch (const std::exception& e) {
    fail(where, e.what());
  } catch (...) {
    fail(where, "unknown exception");
  }
}

template <class F>
void connection::hand_to(const std::shared_ptr<post_gate>& gate,
                         const std::weak_ptr<connection>& weak, F fn,
                         const posts_pending* pending) {
  std::shared_ptr<connection> c;
  {
    std::lock_guard<std::mutex> guard{gate->mx};
    if (!gate->open)
      return;
    c = weak.lock();
    if (!c)
      return;
    auto exec = c->stream_.get_executor();
    bool here = false;
    if (c->front_.shared_loops) {
      auto* loop = this_thread_loop();
      here =
          loop != nullptr &&
          &exec.context() == static_cast<boost::asio::execution_context*>(loop);
      if (!here)
        ++c->front_.counters.cross_loop_posts;
    }
    if (!here || pending == nullptr || **pending != 0) {
      posts_pending count;
      if (pending != nullptr) {
        count = *pending;
        ++*count; // before the post: the sender's next piece sees it
      }
      boost::asio::post(exec, [c = std::move(c), fn = std::move(fn),
                               count = std::move(count)]() mutable {
        // The jobs it wakes run once the count is down: the governor's
        // next piece then comes at once, not posted.
        loop_turn turn;
        c->guarded("a posted result", [&] { fn(*c); });
        if (count)
          --*count;
      });
      return;
    }
  }
  // On the connection's own loop (the call's actor runs there): at once,
  // without a post and a round of the loop. The gate was open: a shutdown
  // that closes it now waits on this loop (`close_on_loops`) until this
  // handler ends, as for a posted one that had started.
  c->guarded("a result", [&] { fn(*c); });
}

} // namespace sluice::node
