#include "sluice/runtime/node/start_rules.hpp"

#include <cerrno>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>

#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/http_front.hpp"

namespace sluice {

namespace node {

namespace {

int line_of(const node_settings& s, const std::string& key) {
  auto i = s.key_lines.find(key);
  return i == s.key_lines.end() ? 0 : i->second;
}

// 0.0.0.0 or ::, which a bind spreads over every address.
bool all_addresses(const std::string& host) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(host, ec);
  return !ec && a.is_unspecified();
}

} // namespace

std::optional<bool> loopback_host(const std::string& host) {
  if (host == "localhost")
    return true;
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(host, ec);
  if (ec)
    return std::nullopt;
  return a.is_loopback();
}

void check_open_to_anyone(bool loopback, const node_settings& s,
                          const auth_settings& auth) {
  if (!loopback && auth.keys.empty() && !auth.allow_anonymous)
    throw config_error("auth",
                       "node.listen " + s.listen_host +
                           " is not a loopback address and no client keys "
                           "are configured: anyone who reaches it could spend "
                           "the upstreams' keys. Add [auth.keys.NAME] tables, "
                           "or write auth.allow_anonymous = true",
                       line_of(s, "listen"));
}

void check_listeners_apart(const node_settings& s) {
  if (!s.admin_listen)
    return;
  auto& a = *s.admin_listen;
  if (a.port == 0 || a.port != s.listen_port)
    return;
  if (a.host == s.listen_host || all_addresses(a.host) ||
      all_addresses(s.listen_host))
    throw config_error("node.admin_listen",
                       to_string(a) + " takes the port of node.listen " +
                           to_string(host_port{s.listen_host, s.listen_port}) +
                           ": give the operations listener a port of its own",
                       line_of(s, "admin_listen"));
}

void check_access_log(const node_settings& s) {
  auto& path = s.access_log;
  if (path == "stdout" || path == "off")
    return;
  auto refuse = [&](const std::string& why) {
    throw config_error("node.access_log", "'" + path + "' " + why,
                       line_of(s, "access_log"));
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      refuse("is a directory");
    // Opening a FIFO for writing blocks until it has a reader.
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
      refuse("is not a regular file (a FIFO or socket would block the "
             "node; \"stdout\" writes to the standard output)");
    if (::access(path.c_str(), W_OK) != 0)
      refuse(std::string{"cannot be written: "} + std::strerror(errno));
    return;
  }
  if (errno != ENOENT)
    refuse(std::string{"cannot be used: "} + std::strerror(errno));
  // Not there yet: the start creates the file, never its directory (a typo
  // in the path would grow a tree somewhere).
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0)
    refuse("is in '" + dir + "', which does not exist (" +
           std::strerror(errno) + "); the node creates the file, not its "
           "directory");
  if (!S_ISDIR(st.st_mode))
    refuse("is in '" + dir + "', which is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    refuse("cannot be created in '" + dir + "': " + std::strerror(errno));
}

} // namespace node

void check_front_settings(const node_settings& s) {
  if (auto loopback = node::loopback_host(s.listen_host))
    node::check_open_to_anyone(*loopback, s, s.auth);
  node::check_listeners_apart(s);
  node::check_access_log(s);
}

} // namespace sluice
