// The remote transport (continued): a served side that goes, unusable
// certificate files, large streamed answers.

#include "remote_transport_shared.hpp"

using namespace remote_transport_test_support;

TEST_CASE_METHOD(fixture,
                 "remote: a served side that goes is reported in the link's "
                 "health, and healthy again once it is back",
                 "[remote]") {
  auto health = std::make_shared<remote_link_health>();
  auto port = server->port();
  auto node = spawn_remote_source(*sys, node_config(port), health);
  REQUIRE(serves(node));
  CHECK_FALSE(health->problem());
  server.reset();
  CHECK(eventually([&] { return health->problem().has_value(); }, 5s));
  INFO("why: " << health->problem().value_or(""));
  CHECK(ask(node, "x").find("not connected") != std::string::npos);
  server =
      std::make_unique<remote_source_server>(*sys, source, port, server_tls());
  CHECK(serves(node));
  CHECK_FALSE(health->problem());
  stop(node);
}

TEST_CASE("remote: certificate files that are missing or unusable are "
          "refused naming their field",
          "[remote]") {
  remote_source_config c;
  c.port = 7300;
  c.tls = node_tls();
  CHECK_NOTHROW(validate(c));
  auto refused = [](remote_source_config c) -> std::string {
    try {
      validate(c);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return {};
  };
  auto& pki = test_pki::get();
  auto bad = c;
  bad.tls.ca_file.clear();
  CHECK_THAT(refused(bad), Catch::StartsWith("tls.ca_file"));
  bad = c;
  bad.tls.cert_file = pki.file("not_a_cert.pem");
  CHECK_THAT(refused(bad), Catch::StartsWith("tls.cert_file"));
  bad = c;
  bad.tls.key_file = pki.file("server.key"); // not client.pem's key
  CHECK_THAT(refused(bad), Catch::StartsWith("tls.key_file"));
}

TEST_CASE("remote: a streamed answer crosses in pieces of at most 1 MiB, "
          "and a body past 64 MiB fails its own attempt only",
          "[remote]") {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system sys{cfg};
  // Streams one 3 MiB chunk for a streamed call; answers a 65 MiB body to
  // "huge", a short one otherwise.
  auto source = caf::actor_cast<source_actor>(
      sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
        return {[self](attempt_atom, const call_request& req) {
          source_reply r;
          r.kind = policy::outcome_kind::ok;
          r.status = 200;
          if (req.stream_to) {
            self->send(req.stream_to, stream_chunk_atom_v, req.stream_tag,
                       std::string(3 << 20, 's'));
          } else if (req.payload == "huge") {
            r.body.assign((size_t{65} << 20), 'h');
          } else {
            r.body = "small";
          }
          return r;
        }};
      }));
  auto server =
      std::make_unique<remote_source_server>(sys, source, 0, server_tls());
  remote_source_config c;
  c.port = server->port();
  c.tls = node_tls();
  auto node = spawn_remote_source(sys, c);
  auto pieces = std::make_shared<std::atomic<int>>(0);
  auto bytes = std::make_shared<std::atomic<size_t>>(0);
  auto largest = std::make_shared<std::atomic<size_t>>(0);
  auto collector = sys.spawn([=](caf::event_based_actor*) -> caf::behavior {
    return {[=](stream_chunk_atom, uint64_t, const std::string& b) {
      ++*pieces;
      *bytes += b.size();
      if (b.size() > largest->load())
        largest->store(b.size());
    }};
  });
  caf::scoped_actor self{sys};
  auto ask = [&](call_request req) {
    source_reply out;
    out.kind = policy::outcome_kind::permanent;
    self->request(node, 10s, attempt_atom_v, std::move(req))
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) {});
    return out;
  };
  call_request plain;
  plain.payload = "x";
  REQUIRE(eventually([&] { return ask(plain).body == "small"; }, 10s));
  call_request streamed;
  streamed.stream = true;
  streamed.stream_to = collector;
  streamed.stream_tag = 42;
  auto r = ask(streamed);
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(eventually([&] { return bytes->load() == size_t{3} << 20; }, 5s));
  CHECK(pieces->load() == 3);
  CHECK(largest->load() == size_t{1} << 20);
  call_request huge;
  huge.payload = "huge";
  auto h = ask(huge);
  CHECK(h.kind == policy::outcome_kind::transient);
  CHECK(h.body.find("past 64 MiB") != std::string::npos);
  // The link held: the next attempt on it is served.
  CHECK(ask(plain).body == "small");
  caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
  server.reset();
  caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
}
