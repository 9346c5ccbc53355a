// MCP 2026-07-28 on /mcp: which requests are sessionless, and the checks
// of their `_meta` and headers (a table of cases).

#include "sluice/runtime/policy/mcp/request_envelope.hpp"

#include <string>

#include <catch2/catch.hpp>

using namespace sluice::policy::mcp;

namespace {

// A well-formed 2026-07-28 tools/call of "echo".
request_envelope good_call() {
  request_envelope e;
  e.version_header = "2026-07-28";
  e.method_header = "tools/call";
  e.name_header = "echo";
  e.request = true;
  e.method = "tools/call";
  e.meta_version = "2026-07-28";
  e.meta_capabilities = true;
  e.acted_on = "echo";
  return e;
}

} // namespace

TEST_CASE("mcp request_envelope: which requests are sessionless") {
  auto e = good_call();
  CHECK(is_stateless_request(e));
  // The revision named by _meta alone, or by the header alone.
  e.version_header.reset();
  CHECK(is_stateless_request(e));
  e = good_call();
  e.meta_version.reset();
  CHECK(is_stateless_request(e));
  // server/discover, whatever it carries.
  request_envelope d;
  d.method = "server/discover";
  CHECK(is_stateless_request(d));
  // A session header does not move a request of the new era to the old
  // path, which checks less (2026-07-28 ignores the header).
  e = good_call();
  e.session_header = true;
  CHECK(is_stateless_request(e));
  // initialize, and a request that says nothing of the new revision, are
  // the session era's.
  e = good_call();
  e.method = "initialize";
  CHECK_FALSE(is_stateless_request(e));
  request_envelope old;
  old.method = "tools/list";
  old.request = true;
  CHECK_FALSE(is_stateless_request(old));
  old.version_header = "2025-11-25";
  CHECK_FALSE(is_stateless_request(old));
  // A _meta revision that is no string still marks the new era (and is
  // refused there).
  old.meta_version_bad = true;
  CHECK(is_stateless_request(old));
}

TEST_CASE("mcp request_envelope: a well-formed request goes on with its "
          "revision") {
  auto v = check_envelope(good_call());
  CHECK(v.ok());
  CHECK(v.version == "2026-07-28");
  // Methods without a name need no Mcp-Name.
  auto e = good_call();
  e.method = "tools/list";
  e.method_header = "tools/list";
  e.name_header.reset();
  e.acted_on.reset();
  CHECK(check_envelope(e).ok());
  // resources/read: the URI.
  e = good_call();
  e.method = "resources/read";
  e.method_header = "resources/read";
  e.name_header = e.acted_on = std::string_view{"file:///a b"};
  CHECK(check_envelope(e).ok());
  // A notification has no Mcp-Method and need not say its capabilities.
  request_envelope n;
  n.version_header = n.meta_version = std::string_view{"2026-07-28"};
  n.method = "notifications/cancelled";
  CHECK(check_envelope(n).ok());
}

TEST_CASE("mcp request_envelope: each refusal, its code and what it names") {
  struct row {
    const char* what;
    void (*edit)(request_envelope&);
    int code;
    const char* says;
  };
  const row rows[] = {
      {"no revision in _meta",
       [](request_envelope& e) { e.meta_version.reset(); }, -32602,
       "io.modelcontextprotocol/protocolVersion"},
      {"a revision that is no string",
       [](request_envelope& e) {
         e.meta_version.reset();
         e.meta_version_bad = true;
       },
       -32602, "must be a string"},
      {"a revision not served",
       [](request_envelope& e) {
         e.meta_version = e.version_header = std::string_view{"2027-01-01"};
       },
       unsupported_protocol_version, "'2027-01-01'"},
      {"a session revision without a session",
       [](request_envelope& e) {
         e.meta_version = e.version_header = std::string_view{"2025-11-25"};
       },
       unsupported_protocol_version, "begin with initialize"},
      {"no client capabilities",
       [](request_envelope& e) { e.meta_capabilities = false; }, -32602,
       "io.modelcontextprotocol/clientCapabilities"},
      {"no MCP-Protocol-Version header",
       [](request_envelope& e) { e.version_header.reset(); }, header_mismatch,
       "MCP-Protocol-Version (none)"},
      {"a header other than _meta",
       [](request_envelope& e) { e.version_header = "2025-11-25"; },
       header_mismatch, "differs from _meta's '2026-07-28'"},
      {"no Mcp-Method", [](request_envelope& e) { e.method_header.reset(); },
       header_mismatch, "Mcp-Method (none)"},
      {"Mcp-Method says another method",
       [](request_envelope& e) { e.method_header = "tools/list"; },
       header_mismatch, "differs from the method 'tools/call'"},
      {"no Mcp-Name", [](request_envelope& e) { e.name_header.reset(); },
       header_mismatch, "Mcp-Name (none"},
      // The attack the rule is for: a proxy allows "echo" by the header,
      // the body calls another tool.
      {"Mcp-Name says another tool",
       [](request_envelope& e) { e.name_header = "delete_everything"; },
       header_mismatch, "differs from params.name"},
  };
  for (auto& r : rows) {
    CAPTURE(r.what);
    auto e = good_call();
    r.edit(e);
    auto v = check_envelope(e);
    CHECK_FALSE(v.ok());
    CHECK(v.code == r.code);
    CHECK_THAT(v.message, Catch::Contains(r.says));
  }
}

TEST_CASE("mcp request_envelope: the data each refusal carries") {
  auto e = good_call();
  e.meta_version = "2027-01-01";
  auto v = check_envelope(e);
  REQUIRE(v.code == unsupported_protocol_version);
  CHECK(v.supported == std::vector<std::string_view>{"2026-07-28"});
  CHECK(v.requested == "2027-01-01");
  e = good_call();
  e.meta_capabilities = false;
  CHECK(check_envelope(e).missing ==
        "io.modelcontextprotocol/clientCapabilities");
  e = good_call();
  e.name_header = "x";
  CHECK(check_envelope(e).header == "Mcp-Name");
  e = good_call();
  e.method_header = "x";
  CHECK(check_envelope(e).header == "Mcp-Method");
}

TEST_CASE("mcp request_envelope: hostile text is quoted cut and printable") {
  std::string hostile = "2026\r\n\x01'\xff" + std::string(10000, 'x');
  auto e = good_call();
  e.meta_version = hostile;
  auto v = check_envelope(e);
  CHECK(v.code == unsupported_protocol_version);
  CHECK(v.message.size() < 300);
  CHECK(v.requested.size() < 100);
  for (unsigned char c : v.message + v.requested)
    CHECK((c >= 0x20 && c < 0x7f));
  e = good_call();
  e.name_header = hostile;
  v = check_envelope(e);
  CHECK(v.code == header_mismatch);
  CHECK(v.message.size() < 300);
}

TEST_CASE("mcp request_envelope: a body with no name leaves the refusal to "
          "the method") {
  auto e = good_call();
  e.acted_on.reset();
  e.name_header.reset();
  CHECK(check_envelope(e).ok());
  CHECK(name_field_of("tools/call") == std::string{"name"});
  CHECK(name_field_of("prompts/get") == std::string{"name"});
  CHECK(name_field_of("resources/read") == std::string{"uri"});
  CHECK(name_field_of("tools/list") == nullptr);
}

TEST_CASE("mcp request_envelope: a routing header that came twice is "
          "refused in either era") {
  for (std::string_view h :
       {"Mcp-Name", "Mcp-Method", "MCP-Protocol-Version", "Mcp-Session-Id"}) {
    CAPTURE(h);
    auto e = good_call();
    e.repeated_header = h;
    auto v = check_envelope(e);
    CHECK(v.code == header_mismatch);
    CHECK(v.header == std::string{h});
    CHECK_THAT(v.message, Catch::Contains("more than once"));
    CHECK(check_routing_headers(e, false).code == header_mismatch);
  }
}

TEST_CASE("mcp request_envelope: the session era holds only the routing "
          "headers that came to the body") {
  request_envelope e;
  e.request = true;
  e.method = "tools/call";
  e.acted_on = "echo";
  CHECK(check_routing_headers(e, false).ok()); // none came: nothing to hold
  CHECK(check_routing_headers(e, true).code == header_mismatch);
  e.name_header = "echo";
  e.method_header = "tools/call";
  CHECK(check_routing_headers(e, false).ok());
  e.name_header = "delete_everything";
  CHECK(check_routing_headers(e, false).header == "Mcp-Name");
  e.name_header = "echo";
  e.method_header = "tools/list";
  CHECK(check_routing_headers(e, false).header == "Mcp-Method");
  // A name header whose base64 did not decode is no match.
  e.method_header = "tools/call";
  e.name_header.reset();
  e.name_header_bad = true;
  auto v = check_routing_headers(e, false);
  CHECK(v.header == "Mcp-Name");
  CHECK_THAT(v.message, Catch::Contains("badly encoded"));
}
