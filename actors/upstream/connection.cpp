#include "sluice/actors/upstream/connection.hpp"

#include <cerrno>
#include <fstream>
#include <stdexcept>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>

#include "sluice/runtime/policy/source/http_settings.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice::upstream {

namespace net = boost::asio;
namespace ssl = net::ssl;
using error_code = boost::system::error_code;

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& what) {
  throw field_error(field, what);
}

// A file we cannot open is named as such (OpenSSL's own text for it is
// "system lib").
// Only a regular file: opening a FIFO would block the start or a reload
// until something writes to it.
void require_readable(const std::string& field, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    refuse(field, "'" + path + "' is not a regular file");
  std::ifstream in{path, std::ios::binary};
  if (!in)
    refuse(field, "cannot read '" + path + "'");
}

} // namespace

std::shared_ptr<ssl::context> make_tls_context(const http_tls_config& cfg) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  auto native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds |
                   ssl::context::no_compression);
  // An encrypted key file would make OpenSSL ask for its passphrase on the
  // terminal, blocking the start: answer with none, so it is refused.
  ctx->set_password_callback([](std::size_t, ssl::context::password_purpose) {
    return std::string{};
  });
  error_code ec;
  ctx->set_verify_mode(cfg.verify ? ssl::verify_peer : ssl::verify_none);
  if (!cfg.ca_file.empty()) {
    require_readable("ca_file", cfg.ca_file);
    ctx->load_verify_file(cfg.ca_file, ec);
    if (ec)
      refuse("ca_file", "no CA certificate in '" + cfg.ca_file + "' (" +
                            ec.message() + ")");
  } else if (cfg.verify) {
    ctx->set_default_verify_paths(ec);
    if (ec)
      refuse("ca_file", "the system CA store cannot be loaded (" +
                            ec.message() + "); name a CA file");
  }
  if (cfg.client_cert.empty() != cfg.client_key.empty())
    refuse(cfg.client_cert.empty() ? "client_cert" : "client_key",
           "client_cert and client_key go together");
  if (!cfg.client_cert.empty()) {
    require_readable("client_cert", cfg.client_cert);
    ctx->use_certificate_chain_file(cfg.client_cert, ec);
    if (ec)
      refuse("client_cert", "no certificate in '" + cfg.client_cert + "' (" +
                                ec.message() + ")");
    require_readable("client_key", cfg.client_key);
    ctx->use_private_key_file(cfg.client_key, ssl::context::pem, ec);
    if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) ==
                  X509_R_KEY_VALUES_MISMATCH)
      refuse("client_key", "'" + cfg.client_key +
                               "' does not match the certificate of "
                               "client_cert");
    if (ec)
      refuse("client_key", "no usable (unencrypted PEM) private key in '" +
                               cfg.client_key + "' (" + ec.message() + ")");
    if (SSL_CTX_check_private_key(native) != 1)
      refuse("client_key", "'" + cfg.client_key +
                               "' does not match the certificate of "
                               "client_cert");
  }
  ERR_clear_error();
  return ctx;
}

connection::connection(net::io_context& ioc, ssl::context* tls) {
  if (tls)
    tls_.emplace(ioc, *tls);
  else
    tcp_.emplace(ioc);
}

bool connection::expect_peer(const std::string& name, bool verify) {
  auto ssl = tls_->native_handle();
  error_code ec;
  net::ip::make_address(name, ec);
  bool is_address = !ec;
  // SNI carries host names only (RFC 6066 §3).
  if (!is_address && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1)
    return false;
  verify_ = verify;
  if (!verify)
    return true;
  // OpenSSL checks the name as part of verifying the chain (RFC 6125
  // matching, a wildcard only as the whole leftmost label), so a mismatch
  // is a verify result with its own reason ("hostname mismatch"), like an
  // unknown CA or an expired certificate.
  auto param = SSL_get0_param(ssl);
  if (is_address)
    return X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) == 1;
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size()) == 1;
}

const char* connection::reuse_problem() {
  auto& sock = tcp().socket();
  if (!sock.is_open())
    return "closed";
  if (tls_) {
    auto ssl = tls_->native_handle();
    if (SSL_has_pending(ssl) == 1 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0)
      return "bytes pending from the upstream";
  }
  char byte;
  auto n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0)
    return "bytes pending from the upstream";
  if (n == 0)
    return "closed by the upstream";
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return nullptr;
  return "socket error";
}

std::string connection::verify_failure() {
  if (!tls_ || !verify_)
    return {};
  auto result = SSL_get_verify_result(tls_->native_handle());
  if (result == X509_V_OK)
    return {};
  return X509_verify_cert_error_string(result);
}

void connection::close() noexcept {
  error_code ignored;
  tcp().socket().close(ignored);
}

bool is_end_of_stream(const error_code& ec) noexcept {
  return ec == net::error::eof || ec == ssl::error::stream_truncated;
}

bool is_tls_error(const error_code& ec) noexcept {
  return ec.category() == net::error::get_ssl_category() ||
         ec.category() == ssl::error::get_stream_category();
}

} // namespace sluice::upstream
