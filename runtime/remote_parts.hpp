#pragma once

// What both sides of a remote source share (remote_source.cpp, the node's
// connector; remote_server.cpp, the served side). Not for use elsewhere.

#include <stdexcept>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>

#include "sluice/messages/call.hpp"
#include "sluice/runtime/remote_link.hpp"
#include "sluice/runtime/remote_wire.hpp"

namespace sluice::remote_parts {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using remote_wire::frame;
using remote_wire::frame_kind;

inline source_reply transient_reply(const char* why) {
  source_reply r;
  r.kind = policy::outcome_kind::transient;
  r.body = std::string{R"({"error":")"} + why + "\"}";
  return r;
}

// `remote_tls_config`'s files (any settings with the three names).
template <class TlsConfig>
remote::tls_files files_of(const TlsConfig& tls) {
  return {tls.ca_file, tls.cert_file, tls.key_file};
}

// Certificate problems name their field under `tls.` (the config's
// `[sources.NAME.tls]`).
template <class F>
auto with_tls_prefix(F f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string{"tls."} + e.what());
  }
}

} // namespace sluice::remote_parts
