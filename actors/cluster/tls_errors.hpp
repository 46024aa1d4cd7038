// CAF 0.17's OpenSSL layer leaves a failed TLS handshake's errors in the OpenSSL error
// queue of its one multiplexer thread and never clears that queue before its next TLS
// call, which OpenSSL requires: the next read on a healthy link that merely would block
// then reports the stranger's error (SSL_get_error checks the queue first), and CAF closes
// that link. A peer that fails its handshake (another CA, an expired certificate,
// garbage) thus broke requests between healthy nodes. boxrt defines SSL_read,
// SSL_write, SSL_accept and SSL_connect in the executable that links it: each clears the
// calling thread's error queue and calls OpenSSL's own (found with dlvsym), so every TLS
// call in the process starts from an empty queue, as OpenSSL's documentation asks.
#pragma once

namespace boxrt::cluster {

/// True when CAF's OpenSSL calls reach the definitions above (the executable exports them
/// because libcaf_openssl refers to them); false when the process resolved them elsewhere
/// first (an embedder that loads boxrt in a shared object), which cluster mode then logs.
bool tls_error_queue_guarded();

} // namespace boxrt::cluster
