// A source in a process of its own, for sluice-node's `type = "remote"`.
// Copy this program and put your own logic in `tool_stub`.
//
// The source is an actor that answers `(attempt_atom, call_request) ->
// source_reply` (messages/source.hpp). This one stubs a tool server: each
// attempt takes `--latency-ms`, and fails `transient` with probability
// `--fail-rate`; a streamed call gets its answer as server-sent events. It
// keeps each attempt until its time is up and monitors the attempt's requester:
// when the node cancels the call (the client went, the attempt timed out), the
// requester terminates and the attempt is freed at once -- printed as "attempt
// N freed: its requester went".
//
//   build/examples/remote_source --port 7300 --latency-ms 200
//     --ca-file nodes-ca.pem --cert-file tool.pem --key-file tool.key
//     (one command)
//   # in the node's config:
//   #   [sources.tool]
//   #   type = "remote"
//   #   address = "127.0.0.1:7300"
//   #   [sources.tool.tls]
//   #   ca_file = "tools-ca.pem"      # signs tool.pem
//   #   cert_file = "node.pem"        # signed by nodes-ca.pem
//   #   key_file = "node.key"
//
// The connection is mutual TLS: only a node with a certificate by
// `--ca-file` gets an attempt served, and the node checks this server's
// certificate (runtime/remote_source.hpp).

#include <csignal>
#include <cstdio>
#include <random>
#include <string>
#include <unordered_map>

#include <CLI/CLI.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/messages/source.hpp"
#include "sluice/runtime/remote_source.hpp"

namespace {

using finish_atom = caf::atom_constant<caf::atom("finish")>;

struct stub_settings {
  int latency_ms = 50;
  double fail_rate = 0.0;
  uint64_t seed = 1;
};

struct tool_stub_state {
  struct attempt {
    caf::typed_response_promise<sluice::source_reply> promise;
    caf::actor_addr requester;
    size_t bytes = 0;
    /// A streamed call: where the chunks go (the node, across the wire)
    /// and the attempt's tag there.
    caf::actor stream_to;
    uint64_t stream_tag = 0;
  };
  std::unordered_map<uint64_t, attempt> attempts;
  uint64_t next = 1;
  std::mt19937_64 rng;

  static inline const char* name = "example.tool_stub";
};

// Untyped inside, so it can also hear its own timers; the node sees a
// `source_actor` (see main).
caf::behavior tool_stub(caf::stateful_actor<tool_stub_state>* self,
                        stub_settings cfg) {
  self->state.rng.seed(cfg.seed);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& attempts = self->state.attempts;
    for (auto i = attempts.begin(); i != attempts.end(); ++i)
      if (i->second.requester == dm.source) {
        std::printf("attempt %llu freed: its requester went\n",
                    static_cast<unsigned long long>(i->first));
        std::fflush(stdout);
        attempts.erase(i);
        return;
      }
  });
  return {
      [self, cfg](sluice::attempt_atom, const sluice::call_request& req)
          -> caf::result<sluice::source_reply> {
        auto& st = self->state;
        auto id = st.next++;
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        if (requester)
          self->monitor(requester);
        auto rp = self->make_response_promise<sluice::source_reply>();
        st.attempts.emplace(
            id, tool_stub_state::attempt{rp, requester, req.payload.size(),
                                         req.stream_to, req.stream_tag});
        self->delayed_send(self, std::chrono::milliseconds{cfg.latency_ms},
                           finish_atom::value, id);
        return rp;
      },
      [self, cfg](finish_atom, uint64_t id) {
        auto& st = self->state;
        auto i = st.attempts.find(id);
        if (i == st.attempts.end())
          return; // freed before its time was up
        sluice::source_reply reply;
        std::uniform_real_distribution<double> coin{0.0, 1.0};
        if (coin(st.rng) < cfg.fail_rate) {
          reply.kind = sluice::policy::outcome_kind::transient;
          reply.status = 503;
          reply.body = R"({"error":"tool stub failed, as configured"})";
        } else {
          reply.kind = sluice::policy::outcome_kind::ok;
          reply.status = 200;
          reply.body = R"({"tool":"stub","attempt":)" + std::to_string(id) +
                       R"(,"payload_bytes":)" +
                       std::to_string(i->second.bytes) + "}";
          if (auto& to = i->second.stream_to) {
            // Streamed: the answer goes as server-sent events to
            // `stream_to` (the node's connector), then an empty reply ends
            // the attempt.
            auto tag = i->second.stream_tag;
            self->send(to, sluice::stream_chunk_atom_v, tag,
                       "data: " + reply.body + "\n\n");
            self->send(to, sluice::stream_chunk_atom_v, tag,
                       std::string{"data: [DONE]\n\n"});
            reply.body.clear();
          }
        }
        if (i->second.requester)
          self->demonitor(i->second.requester);
        i->second.promise.deliver(std::move(reply));
        st.attempts.erase(i);
      },
  };
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"A remote source for sluice-node (type = \"remote\"): a tool "
               "server stub served over mutual TLS."};
  std::string host = "127.0.0.1";
  uint16_t port = 7300;
  stub_settings cfg;
  app.add_option("--host", host, "address to listen on (default: loopback)");
  app.add_option("--port", port, "port to listen on; 0: any free one")
      ->capture_default_str();
  app.add_option("--latency-ms", cfg.latency_ms, "time each attempt takes")
      ->check(CLI::Range(0, 3600000))
      ->capture_default_str();
  app.add_option("--fail-rate", cfg.fail_rate,
                 "share of attempts that fail transient")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--seed", cfg.seed, "seed of the failures");
  sluice::remote_tls_config tls;
  app.add_option("--ca-file", tls.ca_file,
                 "PEM CA whose certificates nodes must present")
      ->required();
  app.add_option("--cert-file", tls.cert_file,
                 "PEM certificate (chain) of this server")
      ->required();
  app.add_option("--key-file", tls.key_file,
                 "PEM (unencrypted) private key of --cert-file")
      ->required();
  CLI11_PARSE(app, argc, argv);
  // SIGINT/SIGTERM end it; blocked before any thread starts, so that only
  // sigwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  caf::actor_system_config caf_cfg;
  sluice::add_error_category(caf_cfg);
  caf::actor_system sys{caf_cfg};
  try {
    auto stub =
        caf::actor_cast<sluice::source_actor>(sys.spawn(tool_stub, cfg));
    sluice::remote_source_server server{sys, stub, port, tls, host};
    std::printf("remote source serving on %s:%u\n", host.c_str(),
                static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    caf::anon_send_exit(stub, caf::exit_reason::user_shutdown);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remote_source: %s\n", e.what());
    return 1;
  }
}
