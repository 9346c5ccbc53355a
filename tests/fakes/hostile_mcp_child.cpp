// A stdio MCP server that misbehaves on request, for the MCP source's
// hostile tests (tests/actors/mcp_stdio_source_test.cpp): newline-delimited
// JSON-RPC on stdin/stdout. It answers initialize and tools/list (tools
// "w", no annotations, and "r", readOnlyHint); a tools/call does what its
// `arguments.mode` says:
//   ok       answers
//   garbage  writes lines that are no message (not JSON, cut JSON, a batch,
//            invalid UTF-8, one over 4096 bytes), then answers
//   twice    answers twice, and answers an id never asked
//   flood    writes 20,000 notifications first
//   stderr   writes 5,000 log lines and one of 100 KiB to stderr first
//   silent   never answers
//   exit     exits with status 3
//   fds      answers with the file descriptors it holds ("0 1 2")
//   closein  closes its stdin, answers, and exits 2 s later
//   changed  sends notifications/tools/list_changed, then answers
//   progress sends a progress notification with the call's token, then
//            answers with that token
// With FAKE_MCP_DEAF_LIST set it never answers its first tools/list; with
// FAKE_MCP_BIG_TOOL it lists a third tool, "big", of 300 KiB.
// Each `notifications/cancelled` it gets is appended to $FAKE_MCP_LOG as
// "cancelled ID".

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

using json = nlohmann::json;

namespace {

void out(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void answer(const json& id, const json& result) {
  out(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump());
}

void log_line(const std::string& line) {
  if (auto* path = std::getenv("FAKE_MCP_LOG")) {
    std::ofstream f{path, std::ios::app};
    f << line << "\n";
  }
}

void call(const json& id, const std::string& mode, const json& token) {
  json ok{{"content", json::array({{{"type", "text"}, {"text", mode}}})}};
  if (mode == "garbage") {
    out("not json at all");
    out("{\"jsonrpc\":\"2.0\",\"id\":");
    out("[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]");
    out("{\"jsonrpc\":\"2.0\",\"method\":\"\xff\xfe\"}");
    out(std::string(10000, 'x'));
  } else if (mode == "flood") {
    json n{{"jsonrpc", "2.0"},
           {"method", "notifications/message"},
           {"params", {{"level", "info"}, {"data", "noise"}}}};
    auto line = n.dump();
    for (int i = 0; i < 20000; ++i)
      out(line);
  } else if (mode == "stderr") {
    for (int i = 0; i < 5000; ++i)
      std::fprintf(stderr, "log line %d\n", i);
    std::fputs(std::string(100 * 1024, 'e').c_str(), stderr);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  } else if (mode == "silent") {
    return;
  } else if (mode == "exit") {
    std::exit(3);
  } else if (mode == "fds") {
    std::string fds;
    if (auto* d = ::opendir("/proc/self/fd")) {
      while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != ".." && std::stoi(n) != ::dirfd(d))
          fds += (fds.empty() ? "" : " ") + n;
      }
      ::closedir(d);
    }
    ok["content"][0]["text"] = fds;
  } else if (mode == "closein") {
    ::close(0);
    answer(id, ok);
    ::sleep(2);
    std::exit(0);
  } else if (mode == "changed") {
    out(json{{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}}
            .dump());
  } else if (mode == "progress") {
    out(json{{"jsonrpc", "2.0"},
             {"method", "notifications/progress"},
             {"params", {{"progressToken", token}, {"progress", 1}}}}
            .dump());
    ok["content"][0]["text"] = token.dump();
  }
  answer(id, ok);
  if (mode == "twice") {
    answer(id, ok);
    answer(99999, ok);
  }
}

} // namespace

int main() {
  bool deaf_list = std::getenv("FAKE_MCP_DEAF_LIST") != nullptr;
  std::string line;
  while (std::getline(std::cin, line)) {
    auto m = json::parse(line, nullptr, false);
    if (!m.is_object())
      continue;
    auto method = m.value("method", std::string{});
    if (!m.contains("id")) {
      if (method == "notifications/cancelled")
        log_line("cancelled " + m["params"].value("requestId", json{}).dump());
      continue;
    }
    auto id = m["id"];
    if (method == "initialize") {
      answer(id, {{"protocolVersion", "2025-06-18"},
                  {"capabilities", {{"tools", json::object()}}},
                  {"serverInfo", {{"name", "hostile-child"}}}});
    } else if (method == "tools/list" && deaf_list) {
      deaf_list = false;
    } else if (method == "tools/list") {
      auto tools =
          json::array({{{"name", "w"}, {"inputSchema", {{"type", "object"}}}},
                       {{"name", "r"},
                        {"inputSchema", {{"type", "object"}}},
                        {"annotations", {{"readOnlyHint", true}}}}});
      if (std::getenv("FAKE_MCP_BIG_TOOL"))
        tools.push_back({{"name", "big"},
                         {"description", std::string(300 * 1024, 'd')},
                         {"inputSchema", {{"type", "object"}}}});
      answer(id, {{"tools", tools}});
    } else if (method == "tools/call") {
      auto args = m["params"].value("arguments", json::object());
      auto meta = m["params"].value("_meta", json::object());
      call(id, args.value("mode", std::string{"ok"}),
           meta.value("progressToken", json{}));
    } else if (method == "ping") {
      answer(id, json::object());
    }
  }
  return 0;
}
