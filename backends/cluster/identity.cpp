#include "backends/cluster/identity.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

namespace boxrt::cluster {

namespace {

template <class T, void (*Free)(T*)>
struct freer {
  void operator()(T* p) const { Free(p); }
};
using bio_ptr = std::unique_ptr<BIO, freer<BIO, BIO_free_all>>;
using x509_ptr = std::unique_ptr<X509, freer<X509, X509_free>>;
using store_ptr = std::unique_ptr<X509_STORE, freer<X509_STORE, X509_STORE_free>>;
using store_ctx_ptr = std::unique_ptr<X509_STORE_CTX, freer<X509_STORE_CTX, X509_STORE_CTX_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, freer<EVP_PKEY, EVP_PKEY_free>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, freer<EVP_MD_CTX, EVP_MD_CTX_free>>;

void free_chain(STACK_OF(X509)* s) { sk_X509_pop_free(s, X509_free); }
using chain_ptr = std::unique_ptr<STACK_OF(X509), freer<STACK_OF(X509), free_chain>>;

std::string hex(const unsigned char* data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 15]);
  }
  return out;
}

bool unhex(const std::string& text, std::vector<unsigned char>& out) {
  if (text.size() % 2 != 0)
    return false;
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  out.clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = value(text[i]), lo = value(text[i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out.push_back(static_cast<unsigned char>(hi * 16 + lo));
  }
  return true;
}

std::string openssl_error(const char* what) {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  char buf[256] = {0};
  if (code != 0)
    ERR_error_string_n(code, buf, sizeof buf);
  return std::string{what} + (code != 0 ? std::string{": "} + buf : std::string{});
}

/// The certificate names `id`: a DNS name of its subjectAltName, or else its CN.
bool names(X509* cert, const std::string& id) {
  return X509_check_host(cert, id.data(), id.size(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, nullptr) == 1;
}

} // namespace

std::string hello_text(const std::string& gate_id, const std::string& nonce, const std::string& id,
                       const std::string& address) {
  return "boxrt-cluster-hello\n" + gate_id + "\n" + nonce + "\n" + id + "\n" + address;
}

std::string make_nonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    return {};
  return hex(bytes, sizeof bytes);
}

std::string read_pem(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, {}};
}

result<std::string> sign_hello(const std::string& key_file, const std::string& text) {
  ERR_clear_error();
  std::unique_ptr<FILE, int (*)(FILE*)> f{std::fopen(key_file.c_str(), "r"), &std::fclose};
  if (!f)
    return box_error{ec::runtime_unavailable, "cannot read the cluster key " + key_file};
  pkey_ptr key{PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr)};
  if (!key)
    return box_error{ec::runtime_unavailable, openssl_error(("cannot load the cluster key " + key_file).c_str())};
  md_ctx_ptr md{EVP_MD_CTX_new()};
  size_t size = 0;
  if (!md || EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1
      || EVP_DigestSign(md.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(text.data()), text.size())
           != 1)
    return box_error{ec::runtime_unavailable, openssl_error("cannot sign the hello")};
  std::vector<unsigned char> sig(size);
  if (EVP_DigestSign(md.get(), sig.data(), &size, reinterpret_cast<const unsigned char*>(text.data()), text.size())
      != 1)
    return box_error{ec::runtime_unavailable, openssl_error("cannot sign the hello")};
  return hex(sig.data(), size);
}

std::string check_hello(const std::string& ca_file, const std::string& certificate_pem, const std::string& id,
                        const std::string& text, const std::string& signature_hex) {
  ERR_clear_error();
  if (certificate_pem.empty() || certificate_pem.size() > 64 * 1024)
    return "its hello carries no certificate (or one over 64 KiB)";
  bio_ptr bio{BIO_new_mem_buf(certificate_pem.data(), static_cast<int>(certificate_pem.size()))};
  x509_ptr leaf{bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr};
  if (!leaf)
    return openssl_error("its hello's certificate cannot be read");
  chain_ptr chain{sk_X509_new_null()};
  while (X509* more = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))
    sk_X509_push(chain.get(), more);
  ERR_clear_error(); // the end of the PEM text
  store_ptr store{X509_STORE_new()};
  if (!store || X509_STORE_load_file(store.get(), ca_file.c_str()) != 1)
    return openssl_error(("the cluster's CA " + ca_file + " cannot be loaded").c_str());
  store_ctx_ptr ctx{X509_STORE_CTX_new()};
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), chain.get()) != 1)
    return openssl_error("its certificate cannot be checked");
  if (X509_verify_cert(ctx.get()) != 1)
    return std::string{"its certificate is not valid for the cluster's CA: "}
           + X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  if (!names(leaf.get(), id))
    return "its certificate is not node " + id + "'s (neither its CN nor a DNS name is " + id + ")";
  std::vector<unsigned char> sig;
  if (!unhex(signature_hex, sig) || sig.empty())
    return "its hello's signature is not hex";
  md_ctx_ptr md{EVP_MD_CTX_new()};
  EVP_PKEY* key = X509_get0_pubkey(leaf.get());
  if (!md || key == nullptr || EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, key) != 1
      || EVP_DigestVerify(md.get(), sig.data(), sig.size(), reinterpret_cast<const unsigned char*>(text.data()),
                          text.size())
           != 1) {
    ERR_clear_error();
    return "its hello is not signed by its certificate's key";
  }
  return {};
}

} // namespace boxrt::cluster
