// MCP revisions: what `initialize` answers and the MCP-Protocol-Version
// header check of later requests.

#include "sluice/runtime/policy/mcp/protocol_version.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace sluice::policy::mcp;
using kind = header_verdict::kind;

TEST_CASE("mcp protocol_version: the supported revisions, newest first") {
  CHECK(supported_versions() == std::vector<std::string_view>{
                                    "2026-07-28", "2025-11-25", "2025-06-18"});
  CHECK(session_versions() ==
        std::vector<std::string_view>{"2025-11-25", "2025-06-18"});
  CHECK(stateless_versions() == std::vector<std::string_view>{"2026-07-28"});
  CHECK(is_stateless("2026-07-28"));
  CHECK_FALSE(is_stateless("2025-11-25"));
  CHECK_FALSE(is_stateless("2026-07-28 "));
  CHECK(is_supported("2026-07-28"));
  CHECK(is_supported("2025-11-25"));
  CHECK(is_supported("2025-06-18"));
  CHECK_FALSE(is_supported("2025-03-26"));
  CHECK_FALSE(is_supported("2024-11-05"));
  CHECK_FALSE(is_supported(""));
  CHECK_FALSE(is_supported("2025-06-18 "));
}

TEST_CASE("mcp protocol_version: the revisions a tool server may answer "
          "the gateway's initialize with") {
  for (auto v : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"})
    CHECK(server_version_ok(v));
  // Sessionless (an initialize answered with it is wrong), unknown, or a
  // header's injection: the start ends.
  for (auto v : {"2026-07-28", "", "2025-06-18\r\nX: y", "2024-10-07", "1"})
    CHECK_FALSE(server_version_ok(v));
}

TEST_CASE("mcp protocol_version: negotiate answers the requested revision "
          "if supported with sessions, else the newest such") {
  CHECK(negotiate("2025-11-25") == "2025-11-25");
  CHECK(negotiate("2025-06-18") == "2025-06-18");
  CHECK(negotiate("2025-03-26") == "2025-11-25");
  CHECK(negotiate("2024-11-05") == "2025-11-25");
  CHECK(negotiate("2026-07-28") == "2025-11-25");
  CHECK(negotiate("") == "2025-11-25");
  CHECK(negotiate("2025-06-18\r\n") == "2025-11-25");
  CHECK(negotiate(std::string(100000, '2')) == "2025-11-25");
}

TEST_CASE("mcp protocol_version: an absent header is ok") {
  CHECK(header_check(std::nullopt, std::nullopt).ok());
  CHECK(header_check(std::nullopt, "2025-06-18").ok());
  auto v = header_check(std::nullopt, "2025-11-25");
  CHECK(v.what == kind::ok);
  CHECK(v.error.empty());
}

TEST_CASE("mcp protocol_version: a supported header matching the session, "
          "or with no session known, is ok") {
  CHECK(header_check("2025-11-25", std::nullopt).ok());
  CHECK(header_check("2025-06-18", std::nullopt).ok());
  CHECK(header_check("2025-11-25", "2025-11-25").ok());
  CHECK(header_check("2025-06-18", "2025-06-18").ok());
}

TEST_CASE("mcp protocol_version: a revision the gateway does not speak is "
          "refused, naming it and the supported ones") {
  for (auto header :
       {"2025-03-26", "2024-11-05", "", "2025-11-25 ", "latest"}) {
    CAPTURE(header);
    auto v = header_check(header, std::nullopt);
    CHECK_FALSE(v.ok());
    CHECK(v.what == kind::unsupported);
    CHECK_THAT(v.error, Catch::Contains("unsupported MCP-Protocol-Version '" +
                                        std::string{header} + "'"));
    CHECK_THAT(v.error, Catch::Contains("2025-11-25, 2025-06-18"));
  }
  // A sessionless revision has no place in a session's request.
  auto v = header_check("2026-07-28", std::nullopt);
  CHECK(v.what == kind::unsupported);
  CHECK_THAT(v.error, Catch::Contains("(supported: 2025-11-25, 2025-06-18)"));
  CHECK(header_check("2026-07-28", "2025-11-25").what == kind::unsupported);
  // Unsupported is said before a mismatch.
  CHECK(header_check("2025-03-26", "2025-06-18").what == kind::unsupported);
}

TEST_CASE("mcp protocol_version: a header other than the session's "
          "negotiated revision is refused") {
  auto v = header_check("2025-11-25", "2025-06-18");
  CHECK(v.what == kind::mismatch);
  CHECK_FALSE(v.ok());
  CHECK(v.error == "MCP-Protocol-Version '2025-11-25' differs from the "
                   "session's negotiated '2025-06-18'");
  CHECK(header_check("2025-06-18", "2025-11-25").what == kind::mismatch);
}

TEST_CASE("mcp protocol_version: a hostile header is quoted cut and "
          "printable") {
  std::string hostile = "2025\r\n\x01'\xff";
  hostile += std::string(10000, 'x');
  auto v = header_check(hostile, std::nullopt);
  CHECK(v.what == kind::unsupported);
  CHECK_THAT(v.error, Catch::Contains("'2025?????xxx"));
  CHECK_THAT(v.error, Catch::Contains("...'"));
  CHECK(v.error.size() < max_quoted_header_bytes + 100);
  for (unsigned char c : v.error)
    CHECK((c >= 0x20 && c < 0x7f));
}

TEST_CASE("mcp protocol_version: the session revisions have sessions, "
          "2026-07-28 and unknown ones not") {
  for (auto v : session_versions())
    CHECK(has_sessions(v));
  CHECK_FALSE(has_sessions("2026-07-28"));
  CHECK_FALSE(has_sessions(""));
  CHECK_FALSE(has_sessions("2025-11-25x"));
}
