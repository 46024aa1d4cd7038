// Internal to net/ws/: what the listener (server.cpp) and the three kinds of socket
// session (http_session.cpp, rpc_socket.cpp, relay_socket.cpp) share: the server's
// state, its limits and the socket helpers. Boost.Beast stays inside net/ws/.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>  // before Boost 1.74 asio: awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>

#include "actors/caf_support.hpp"
#include "actors/process_registry.hpp"
#include "messages/base/json.hpp"
#include "net/rpc/connection.hpp"
#include "net/ws/handshake.hpp"
#include "actors/trusted_instance.hpp"
#include "net/ws/server.hpp"

namespace boxrt::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

inline constexpr const char* token_header = "X-LangBot-Box-Control-Token";
inline constexpr const char* instance_header = "X-LangBot-Instance-Id";
inline constexpr const char* workspace_header = "X-LangBot-Workspace-Id";
inline constexpr const char* generation_header = "X-LangBot-Placement-Generation";

/// How long /healthz and /readyz wait for the directory.
inline constexpr auto health_timeout = std::chrono::seconds{5};
/// Time limit of an HTTP request read and of the WebSocket closing handshake.
/// Accept errors and refusals are logged at most this often.
inline constexpr auto accept_log_interval = std::chrono::seconds{5};
/// The longest back-off after an accept error.
inline constexpr auto max_accept_delay = std::chrono::milliseconds{1000};
inline constexpr auto close_timeout = std::chrono::seconds{5};
/// stop(): how long sockets get for a clean close before they are cut, and how long
/// the cut sockets get before the I/O threads are stopped regardless.
inline constexpr auto stop_grace = std::chrono::seconds{5};
inline constexpr auto stop_force = std::chrono::seconds{2};
/// How long a handshake waits for a read or write of a cluster's pin (etcd's calls are
/// bounded by its own timeout, 2 s; a pin that cannot be read refuses).
inline constexpr auto pin_wait = std::chrono::seconds{10};
/// How long GET /cluster/owner waits for etcd's answer.
inline constexpr auto owner_wait = std::chrono::seconds{10};
/// How long a relay handshake waits for the directory's verdict (checks 4 to 9).
inline constexpr auto relay_verdict_timeout = std::chrono::seconds{10};
/// A relay pings a silent client after half of this and drops it after all of it
/// (the reference's 30 s heartbeat).
inline constexpr auto relay_idle_timeout = std::chrono::seconds{60};
/// The most a relay reads from stdout at once (one TEXT frame each).
inline constexpr size_t relay_chunk_bytes = 64 * 1024;
/// Stdout is not read while this much waits in the relay's write queue.
inline constexpr size_t relay_queue_bytes = size_t{1} << 20;
/// A read buffer that grew past this is given back after the message.
inline constexpr size_t buffer_keep_bytes = size_t{1} << 20;

/// A connection whose outbound queue once held more than this trims the heap at its end.
inline constexpr size_t trim_after_bytes = size_t{1} << 20;

/// The close reason of a connection whose client stopped reading (README §4.13).
inline constexpr const char* outbound_full_reason = "outbound queue full";
/// simdjson parses in place when a string has this much spare capacity.
inline constexpr size_t parse_padding = 64;

/// One path for every socket error: the expected ends of a connection are quiet.
void fail(beast::error_code ec, const char* what, const std::string& peer);
/// "<address>:<port>" of the socket's peer ("[v6]:port"), or "unknown peer".
std::string peer_of(const tcp::socket& socket);
std::string_view sv(beast::string_view v);
/// The target without its query.
std::string_view path_of(beast::string_view target);
/// The relay's 400 body: `{"error": {"code": "<ExceptionClass>", "message": "<text>"}}`.
std::string error_body(const box_error& err);
/// malloc_trim holds the allocator's locks while it runs: true at most once a second.
bool trim_due();
http::response<http::string_body> make_response(http::status status, unsigned version,
                                                bool keep_alive, std::string_view content_type,
                                                std::string body);

// -- shared server state -----------------------------------------------------------------

/// Guards posting onto the io_context from outside it (actor threads): once closed,
/// nothing posts any more and no session is kept alive from outside the io_context.
struct io_gate {
  std::shared_mutex mtx;
  bool open = true;

  /// Runs `fn(session)` on the session's I/O executor (`io_executor()`), called from any
  /// thread (an actor, a pool job): nothing happens once the server stopped or the
  /// session is gone. The read lock keeps the io_context alive while the post happens.
  template <class Session, class Fn>
  void post(const std::weak_ptr<Session>& weak, Fn fn) {
    std::shared_lock lock{mtx};
    if (!open)
      return;
    if (auto s = weak.lock())
      asio::post(s->io_executor(), [s, fn = std::move(fn)]() mutable { fn(*s); });
  }
};

/// One socket of the server: an HTTP connection before its upgrade, an RPC socket or a
/// relay. The server keeps each in its registry until it ends.
class session_base : public std::enable_shared_from_this<session_base> {
 public:
  virtual ~session_base() = default;
  /// Registers with the server and starts on the session's strand.
  virtual void run() = 0;
  /// A connection that has not finished its handshake closes (the oldest goes first
  /// when server.max_pending_handshakes is reached); a no-op once upgraded.
  virtual void evict() {}
  /// Server stop: close cleanly (WebSocket: 1001 after answering in-flight requests).
  virtual void shutdown() = 0;
  /// Server stop, after the grace period: cut the socket.
  virtual void force_close() = 0;
};

/// Everything the sessions share: server::impl is private to the class, this is not.
struct server_core {
  server_core(caf::actor_system& sys, runtime_actor directory, std::shared_ptr<worker_pool> pool,
              server_options opts, std::shared_ptr<process_registry> processes,
              std::shared_ptr<trusted_instance> trusted)
    : sys(sys), directory(std::move(directory)), pool(std::move(pool)), opts(std::move(opts)),
      processes(std::move(processes)),
      pins(trusted ? std::move(trusted) : std::make_shared<trusted_instance>(this->opts.trusted_instance)) {
    if (this->opts.io_threads == 0)
      this->opts.io_threads = 1;
    shared->trusted_instance = [pins = pins] { return pins->get(); };
    shared->transfer_root = this->opts.transfer_dir;
    std::random_device rd;
    transfer_prefix = fmt::format("conn-{:08x}{:08x}", rd(), rd());
  }

  void add(const std::shared_ptr<session_base>& s) {
    std::lock_guard guard{reg_mtx};
    sessions.emplace(s.get(), s);
  }

  void remove(session_base* s) {
    std::lock_guard guard{reg_mtx};
    sessions.erase(s);
    if (sessions.empty())
      reg_cv.notify_all();
  }

  std::vector<std::shared_ptr<session_base>> live_sessions() {
    std::vector<std::shared_ptr<session_base>> out;
    std::lock_guard guard{reg_mtx};
    for (auto& [ptr, weak] : sessions)
      if (auto s = weak.lock())
        out.push_back(std::move(s));
    return out;
  }

  bool wait_sessions_gone(std::chrono::steady_clock::duration limit) {
    std::unique_lock lock{reg_mtx};
    return reg_cv.wait_for(lock, limit, [this] { return sessions.empty(); });
  }

  /// Reserves one WebSocket connection slot; false when the cap is reached.
  bool reserve_connection() {
    auto n = ws_count.fetch_add(1) + 1;
    if (n > opts.max_connections) {
      ws_count.fetch_sub(1);
      return false;
    }
    return true;
  }

  void release_connection() { ws_count.fetch_sub(1); }

  std::string next_transfer_dir() {
    if (opts.transfer_dir.empty())
      return {};
    auto name = fmt::format("{}-{}", transfer_prefix, transfer_seq.fetch_add(1));
    return (std::filesystem::path{opts.transfer_dir} / name).string();
  }

  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  void close_oldest_pending();
  /// A warning about accepting, at most one per accept_log_interval (the rest counted).
  template <class... Args>
  void accept_warning(fmt::format_string<Args...> text, Args&&... args);

  caf::actor_system& sys;
  runtime_actor directory;
  std::shared_ptr<worker_pool> pool;
  server_options opts;
  std::shared_ptr<process_registry> processes;
  /// The trusted instance, shared with the directory (one object per boxd).
  std::shared_ptr<trusted_instance> pins;
  /// A cluster node's GET /cluster endpoints (null: not a cluster node).
  std::shared_ptr<const cluster_endpoints> cluster;
  std::shared_ptr<shared_state> shared = std::make_shared<shared_state>();
  /// server.audit_log, opened by start(); null when off.
  std::shared_ptr<audit_log> audit;
  std::shared_ptr<io_gate> gate = std::make_shared<io_gate>();
  std::string transfer_prefix;
  std::atomic<uint64_t> transfer_seq{1};

  std::atomic<size_t> ws_count{0};
  /// Connections accepted and not upgraded (or closed) yet: HTTP sessions alive.
  std::atomic<size_t> pending_handshakes{0};
  /// HTTP sessions in accept order (expired ones are skipped and pruned).
  std::mutex pending_mtx;
  std::deque<std::weak_ptr<session_base>> pending_order;
  std::atomic<uint64_t> refused_accepts{0};
  /// RLIMIT_NOFILE's soft limit when the server started (0 = unknown).
  size_t fd_limit = 0;
  /// Accept strand only: the current back-off after an accept error, and log limits.
  std::chrono::milliseconds accept_delay{0};
  std::chrono::steady_clock::time_point last_accept_log{};
  uint64_t accept_logs_suppressed = 0;
  std::shared_ptr<std::atomic<int64_t>> unwritten_replies =
    std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<uint64_t> outbound_pauses{0};
  std::atomic<uint64_t> inbound_pauses{0};
  std::atomic<uint64_t> outbound_stall_closes{0};
  std::atomic<bool> stopping{false};
  std::mutex state_mtx;  // start/stop
  bool started = false;
  bool stopped = false;
  uint16_t port = 0;

  std::mutex reg_mtx;
  std::condition_variable reg_cv;
  std::unordered_map<session_base*, std::weak_ptr<session_base>> sessions;

  // Declared last: destroying the io_context destroys pending handlers and with them
  // sessions, which still use the members above.
  asio::io_context ioc{1};
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_backoff;
  std::vector<std::thread> threads;
};

/// What differs between the upgrades of this server (RPC, relay).
struct accept_options {
  /// The permessage-deflate offer is taken.
  bool deflate = false;
  /// Ping a silent client after half of this and drop it after all of it (0: never).
  std::chrono::seconds idle{0};
  /// Answer with subprotocol `mcp` (the client offered it).
  bool mcp = false;
};

/// Sets what every upgrade sets before its accept: the handshake bounded by
/// close_timeout, `o`'s idle rule, deflate and subprotocol, the Server header, and the
/// message cap.
void prepare_accept(websocket::stream<beast::tcp_stream>& ws, size_t max_message_bytes,
                    const accept_options& o);

// -- the sessions, one file each --------------------------------------------------------

/// A new HTTP connection (http_session.cpp); the caller runs it.
std::shared_ptr<session_base> make_http_session(server_core& srv, tcp::socket&& socket);

/// Upgrades an RPC handshake that passed and runs its socket (rpc_socket.cpp).
void start_rpc_socket(server_core& srv, beast::tcp_stream&& stream,
                      http::request<http::string_body> req, std::string peer,
                      std::string instance);

/// Upgrades a relay handshake that passed and runs its socket (relay_socket.cpp).
void start_relay_socket(server_core& srv, beast::tcp_stream&& stream,
                        http::request<http::string_body> req, std::string peer,
                        std::string label, relay_request target,
                        std::shared_ptr<process_registry::entry> entry);

} // namespace boxrt::net
