// A node's identity on its links: a hello names the dialing node, and proves it holds
// the private key of a certificate of the cluster's CA whose name is that node id. The
// TLS handshake alone proves only "some certificate of the CA": without this, any holder
// of one (a retired node's, one made for another use) could name a registered member in
// its hello and be linked as that member.
#pragma once

#include <string>

#include "messages/error.hpp"

namespace boxrt::cluster {

/// What a hello's signature covers: the gate's node id and fresh nonce, and the dialer's
/// node id and address, so a signature answers one challenge of one gate only.
std::string hello_text(const std::string& gate_id, const std::string& nonce, const std::string& id,
                       const std::string& address);

/// A fresh challenge: 32 random bytes as hex.
std::string make_nonce();

/// Signs `text` with the PEM private key in `key_file` (SHA-256); the signature as hex.
result<std::string> sign_hello(const std::string& key_file, const std::string& text);

/// "" when `certificate_pem` (leaf first, then any intermediates) chains to the CA in
/// `ca_file` and is valid now, names `id` (its subject's common name or a DNS name of its
/// subjectAltName), and its key made `signature_hex` over `text`; else why not.
std::string check_hello(const std::string& ca_file, const std::string& certificate_pem, const std::string& id,
                        const std::string& text, const std::string& signature_hex);

/// The PEM text of a file (a node's own certificate), or "" when it cannot be read.
std::string read_pem(const std::string& path);

} // namespace boxrt::cluster
