// Options of the WebSocket server (the `server` section of boxd's config). Plain C++.
#pragma once

#include "net/audit/audit_log.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

#include "messages/models.hpp"

namespace boxrt::net {

struct server_options {
  std::string host = "127.0.0.1";
  uint16_t port = 5410;               // 0 picks a free port
  std::string control_token;          // "" = none (refused for non-loopback hosts)
  std::string trusted_instance;       // pre-pinned instance; "" = first RPC handshake pins
  size_t max_message_bytes = 16777216;
  size_t max_inflight = 128;          // per connection
  size_t max_connections = 1024;
  /// Per connection, what boxd holds for a client that does not read: past either cap
  /// the connection stops reading; if no write completes for outbound_stall_ms while
  /// it is past a cap, it is closed with 1008 "outbound queue full".
  size_t max_outbound_bytes = size_t{64} << 20;
  size_t max_outbound_frames = 4096;
  size_t outbound_stall_ms = 30000;
  /// Connections that have not finished their HTTP request or upgrade: past the cap new
  /// ones are closed at accept; each must send a whole request within the timeout.
  size_t max_pending_handshakes = 256;
  size_t handshake_timeout_ms = 5000;
  /// Descriptors below RLIMIT_NOFILE kept for sandboxes, pipes and files: a connection
  /// that would take one of them is closed at accept.
  size_t reserved_fds = 256;
  /// Negotiate permessage-deflate on /rpc/ws. Off by default: Beast compresses on the
  /// I/O thread, so one large compressed reply delays every connection of that thread.
  bool compression = false;
  size_t io_threads = 1;
  /// After handling something, an I/O thread keeps polling this long before it sleeps
  /// in the kernel: waking a sleeping CPU costs tens of microseconds on a virtual
  /// machine, more than a heartbeat's whole work. 0 = always sleep at once.
  size_t io_spin_us = 50;
  std::string transfer_dir;           // __file_chunk storage root (a private dir per connection)
  /// How long a second relay waits for a managed process that another relay holds
  /// before it is closed with 1013 (protocol.md §1.4: one attacher at a time).
  size_t relay_attach_wait_ms = 30000;
  /// box_exec_stream (docs/streaming.md): a keepalive frame after this long without
  /// output (below the SDK's 15 s wait per frame), the output a streamed command may
  /// write in all, and the grace between the TERM and the KILL that end one.
  size_t stream_keepalive_ms = 5000;
  size_t max_stream_output_bytes = size_t{1} << 30;
  size_t stream_stop_grace_ms = 2000;
  /// File actions (docs/files.md): the bytes one box_read_file returns or one
  /// box_write_file takes, and the entries one box_list_files returns.
  size_t max_file_call_bytes = size_t{1} << 20;
  size_t max_list_entries = 10000;
  /// Host uids sandboxes run as, one per workspace (contract §4.7), inclusive. The
  /// default lies above the ranges Debian gives /etc/subuid and outside systemd's.
  uint32_t sandbox_uid_first = 0x70000000u;
  uint32_t sandbox_uid_last = 0x7000ffffu;
  /// The trusted host's group: it keeps read and write access to tenant trees, which
  /// are closed to everyone else. -1 = boxd's own group.
  int64_t host_gid = -1;
  /// Test-only: lets the scripted backend make admission mode ready. Never in production.
  bool testing = false;
  /// server.log_format: every log line as one JSON object ("json") or text ("text").
  bool log_json = false;
  /// The audit trail (server.audit_log, audit_commands, audit_max_bytes, audit_files).
  audit_options audit;
};

/// box_exec_stream's settings for a connection of this server (the token is set per
/// stream): a data frame's raw bytes are sized so that, every byte escaped as \u00XX,
/// its whole message stays within 1 MiB (the SDK's frame limit) and max_message_bytes.
stream_params stream_settings(const server_options& opts);

/// Validates options that make the server refuse to start (non-loopback host without a
/// token, a token shorter than 32 characters or with whitespace). "" when fine.
std::string validate(const server_options& opts);

} // namespace boxrt::net
