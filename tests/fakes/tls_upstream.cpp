#include "fakes/tls_upstream.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <openssl/ssl.h>

#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace sluice::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

// -- test_pki -----------------------------------------------------------------

namespace {

// Writes the CA's `openssl ca` config and makes every file; one shell
// script, so a failure names its step in the output.
const char* pki_script = R"sh(set -e
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
san="subjectAltName=DNS:localhost,IP:127.0.0.1"
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/CN=Sluice Test CA"
key other_ca.key
openssl req -x509 -new -key other_ca.key -out other_ca.pem -days 30 -subj "/CN=Stranger CA"
for n in server expired stranger; do
  key $n.key
  openssl req -new -key $n.key -out $n.csr -subj "/CN=localhost" -addext "$san"
done
key client.key
openssl req -new -key client.key -out client.csr -subj "/CN=sluice client"
ext() { printf '%s\n' "$san" > san.ext; }
ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile san.ext -out server.pem 2>/dev/null
openssl x509 -req -in stranger.csr -CA other_ca.pem -CAkey other_ca.key -CAcreateserial -days 30 -extfile san.ext -out stranger.pem 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -out client.pem 2>/dev/null
# x509 cannot set a start date in the past: `openssl ca` can.
cat > ca.cnf <<EOF
[ ca ]
default_ca = test_ca
[ test_ca ]
dir = .
database = ./index.txt
new_certs_dir = .
serial = ./ca.serial
certificate = ./ca.pem
private_key = ./ca.key
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[ any ]
commonName = supplied
EOF
: > index.txt
echo 1000 > ca.serial
openssl ca -batch -config ca.cnf -in expired.csr -out expired.pem -notext -startdate 20200101000000Z -enddate 20200201000000Z 2>/dev/null
echo "not a certificate" > not_a_cert.pem
)sh";

} // namespace

test_pki::test_pki() {
  char tmpl[] = "/tmp/sluice-pki-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    throw std::runtime_error("test_pki: mkdtemp failed");
  dir_ = tmpl;
  auto script = dir_ + "/make.sh";
  std::ofstream{script} << pki_script;
  auto cmd = "sh " + script + " " + dir_ + " > " + dir_ + "/make.log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log{dir_ + "/make.log"};
    std::stringstream text;
    text << log.rdbuf();
    throw std::runtime_error("test_pki: openssl failed: " + text.str());
  }
}

test_pki::~test_pki() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

const test_pki& test_pki::get() {
  static test_pki instance;
  return instance;
}

// -- tls_upstream -------------------------------------------------------------

namespace {

std::string keyword(const std::string& target) {
  static const char* known[] = {"ok", "stream", "endless", "slow"};
  std::istringstream in{target};
  std::string seg;
  while (std::getline(in, seg, '/'))
    for (auto k : known)
      if (seg == k)
        return seg;
  return "";
}

std::string chunk(const std::string& data) {
  std::ostringstream out;
  out << std::hex << data.size() << "\r\n" << data << "\r\n";
  return out.str();
}

} // namespace

tls_upstream::tls_upstream(tls_upstream_options options)
    : options_(std::move(options))
    , ctx_(ssl::context::tls_server)
    , acceptor_(ioc_, {net::ip::make_address("127.0.0.1"), 0}) {
  ctx_.use_certificate_chain_file(options_.cert_file);
  ctx_.use_private_key_file(options_.key_file, ssl::context::pem);
  if (!options_.client_ca_file.empty()) {
    ctx_.load_verify_file(options_.client_ca_file);
    ctx_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  accept_thread_ = std::thread{[this] { accept_loop(); }};
}

tls_upstream::~tls_upstream() {
  stop_ = true;
  // Unblock accept() with one last connection, and every blocking step
  // with a shutdown of its socket.
  beast::error_code ec;
  net::io_context ioc;
  tcp::socket s{ioc};
  s.connect({net::ip::make_address("127.0.0.1"), port()}, ec);
  accept_thread_.join();
  std::lock_guard<std::mutex> guard{mx_};
  for (auto& sock : sockets_)
    sock->shutdown(tcp::socket::shutdown_both, ec);
  for (auto& t : threads_)
    t.join();
}

uint16_t tls_upstream::port() const {
  return acceptor_.local_endpoint().port();
}

std::string tls_upstream::url(const std::string& prefix,
                              const std::string& host) const {
  return "https://" + host + ":" + std::to_string(port()) + prefix;
}

std::string tls_upstream::last_server_name() const {
  std::lock_guard<std::mutex> guard{mx_};
  return last_server_name_;
}

void tls_upstream::accept_loop() {
  while (!stop_) {
    beast::error_code ec;
    auto socket = std::make_shared<tcp::socket>(ioc_);
    acceptor_.accept(*socket, ec);
    if (ec || stop_)
      return;
    ++connections;
    std::lock_guard<std::mutex> guard{mx_};
    sockets_.push_back(socket);
    threads_.emplace_back([this, socket] { serve(socket); });
  }
}

void tls_upstream::serve(std::shared_ptr<tcp::socket> socket) {
  if (options_.silent) {
    // Holds the connection, reads and drops the ClientHello, says nothing.
    char buf[512];
    beast::error_code ec;
    while (!ec && !stop_)
      socket->read_some(net::buffer(buf), ec);
    return;
  }
  ssl::stream<tcp::socket&> stream{*socket, ctx_};
  beast::error_code ec;
  stream.handshake(ssl::stream_base::server, ec);
  if (ec) {
    ++handshake_failures;
    return;
  }
  ++handshakes;
  {
    auto sni = SSL_get_servername(stream.native_handle(),
                                  TLSEXT_NAMETYPE_host_name);
    std::lock_guard<std::mutex> guard{mx_};
    last_server_name_ = sni ? sni : "";
  }
  beast::flat_buffer buf;
  for (;;) {
    http::request<http::string_body> req;
    http::read(stream, buf, req, ec);
    if (ec || stop_)
      return;
    ++requests;
    auto what = keyword(std::string{req.target()});
    auto put = [&](const std::string& bytes) {
      net::write(stream, net::buffer(bytes), ec);
      return !ec;
    };
    if (what == "ok") {
      put("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
          "Content-Length: 11\r\n\r\n{\"ok\":true}");
    } else if (what == "stream" || what == "endless") {
      put("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          "Transfer-Encoding: chunked\r\n\r\n");
      bool endless = what == "endless";
      for (int i = 0; (endless || i < 3) && !ec && !stop_; ++i) {
        put(chunk("data: {\"part " + std::to_string(i) + "\"}\n\n"));
        std::this_thread::sleep_for(endless ? 20ms : 100ms);
      }
      if (ec) {
        if (!stop_)
          ++closed_by_client;
        return;
      }
      put(chunk("data: [DONE]\n\n") + "0\r\n\r\n");
    } else if (what == "slow") {
      char byte;
      stream.read_some(net::buffer(&byte, 1), ec); // until the client closes
      if (ec && !stop_)
        ++closed_by_client;
      return;
    } else {
      put("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
    if (ec)
      return;
  }
}

} // namespace sluice::testing
