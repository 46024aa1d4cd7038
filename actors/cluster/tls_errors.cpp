#include "actors/cluster/tls_errors.hpp"

#include <dlfcn.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace {

/// OpenSSL's own definition of `name` (the one after this executable's).
template <class Fn>
Fn* openssl_own(const char* name) {
  void* f = ::dlvsym(RTLD_NEXT, name, "OPENSSL_3.0.0");
  if (f == nullptr)
    f = ::dlsym(RTLD_NEXT, name);
  return reinterpret_cast<Fn*>(f);
}

} // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto* own = openssl_own<int(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return own(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto* own = openssl_own<int(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return own(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static auto* own = openssl_own<int(SSL*)>("SSL_accept");
  ERR_clear_error();
  return own(ssl);
}

int SSL_connect(SSL* ssl) {
  static auto* own = openssl_own<int(SSL*)>("SSL_connect");
  ERR_clear_error();
  return own(ssl);
}

} // extern "C"

namespace boxrt::cluster {

bool tls_error_queue_guarded() {
  return ::dlsym(RTLD_DEFAULT, "SSL_read") == reinterpret_cast<void*>(&SSL_read);
}

} // namespace boxrt::cluster
