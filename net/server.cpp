// The listener and the three kinds of socket session (HTTP, RPC WebSocket, managed-process
// relay WebSocket), in the style of the Beast examples: a strand per session, one
// `fail(ec, what)` path, one write queue per stream. RPC requests go to a connection
// actor (net/connection.*); a relay joins its socket to a managed process's stdio.
#include "net/server.hpp"

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
#include "messages/json.hpp"
#include "net/connection.hpp"
#include "net/handshake.hpp"
#include "messages/base/pytext.hpp"

namespace boxrt::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace {

constexpr const char* token_header = "X-LangBot-Box-Control-Token";
constexpr const char* instance_header = "X-LangBot-Instance-Id";
constexpr const char* workspace_header = "X-LangBot-Workspace-Id";
constexpr const char* generation_header = "X-LangBot-Placement-Generation";

/// How long /healthz and /readyz wait for the directory.
constexpr auto health_timeout = std::chrono::seconds{5};
/// Time limit of an HTTP request read and of the WebSocket closing handshake.
/// Accept errors and refusals are logged at most this often.
constexpr auto accept_log_interval = std::chrono::seconds{5};
/// The longest back-off after an accept error.
constexpr auto max_accept_delay = std::chrono::milliseconds{1000};
constexpr auto close_timeout = std::chrono::seconds{5};
/// stop(): how long sockets get for a clean close before they are cut, and how long
/// the cut sockets get before the I/O threads are stopped regardless.
constexpr auto stop_grace = std::chrono::seconds{5};
constexpr auto stop_force = std::chrono::seconds{2};
/// How long a relay handshake waits for the directory's verdict (checks 4 to 9).
constexpr auto relay_verdict_timeout = std::chrono::seconds{10};
/// A relay pings a silent client after half of this and drops it after all of it
/// (the reference's 30 s heartbeat).
constexpr auto relay_idle_timeout = std::chrono::seconds{60};
/// A waiting relay retries the attach this often.
constexpr auto relay_attach_poll = std::chrono::milliseconds{20};
/// The most a relay reads from stdout at once (one TEXT frame each).
constexpr size_t relay_chunk_bytes = 64 * 1024;
/// Stdout is not read while this much waits in the relay's write queue.
constexpr size_t relay_queue_bytes = size_t{1} << 20;
/// A read buffer that grew past this is given back after the message.
constexpr size_t buffer_keep_bytes = size_t{1} << 20;

/// A connection whose outbound queue once held more than this trims the heap at its end.
constexpr size_t trim_after_bytes = size_t{1} << 20;

/// malloc_trim holds the allocator's locks while it runs: at most once a second.
bool trim_due() {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
  auto prev = last_ms.load();
  return now - prev >= 1000 && last_ms.compare_exchange_strong(prev, now);
}

/// The close reason of a connection whose client stopped reading (README §4.13).
constexpr const char* outbound_full_reason = "outbound queue full";
/// simdjson parses in place when a string has this much spare capacity.
constexpr size_t parse_padding = 64;

/// One path for every socket error: the expected ends of a connection are quiet.
void fail(beast::error_code ec, const char* what, const std::string& peer) {
  if (ec == asio::error::operation_aborted || ec == websocket::error::closed
      || ec == http::error::end_of_stream || ec == asio::error::eof)
    return;
  spdlog::debug("net: {}: {}: {}", peer, what, ec.message());
}

std::string peer_of(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec)
    return "unknown peer";
  if (ep.address().is_v6())
    return fmt::format("[{}]:{}", ep.address().to_string(), ep.port());
  return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

std::string_view sv(beast::string_view v) {
  return {v.data(), v.size()};
}

std::string_view path_of(beast::string_view target) {
  auto t = sv(target);
  return t.substr(0, t.find('?'));
}

/// The relay's 400 body: `{"error": {"code": "<ExceptionClass>", "message": "<text>"}}`.
std::string error_body(const box_error& err) {
  json::writer w;
  w.begin_object();
  w.key("error").begin_object();
  w.key("code").value(wire_class(err.code));
  w.key("message").value(err.message);
  w.end_object();
  w.end_object();
  return w.take();
}

} // namespace

// -- shared server state -----------------------------------------------------------------

/// Guards posting onto the io_context from outside it (actor threads): once closed,
/// nothing posts any more and no session is kept alive from outside the io_context.
struct io_gate {
  std::shared_mutex mtx;
  bool open = true;
};

/// The process-wide trusted-instance slot (protocol.md §1.3 step 3).
struct pin_slot {
  mutable std::mutex mtx;
  std::string value;

  std::string get() const {
    std::lock_guard guard{mtx};
    return value;
  }

  /// True when nothing is pinned yet or `id` is the pinned instance.
  bool admits(std::string_view id) const {
    std::lock_guard guard{mtx};
    return value.empty() || constant_time_equal(value, id);
  }

  /// Pins `id` when the slot is empty; true when `id` is (now) the pinned instance.
  bool pin(std::string_view id) {
    std::lock_guard guard{mtx};
    if (value.empty()) {
      value = std::string{id};
      return true;
    }
    return constant_time_equal(value, id);
  }
};

class session_base : public std::enable_shared_from_this<session_base> {
 public:
  virtual ~session_base() = default;
  /// Server stop: close cleanly (WebSocket: 1001 after answering in-flight requests).
  virtual void shutdown() = 0;
  /// Server stop, after the grace period: cut the socket.
  virtual void force_close() = 0;
};

namespace {
class http_session;
} // namespace

/// Everything the sessions share: server::impl is private to the class, this is not.
struct server_core {
  server_core(caf::actor_system& sys, directory_actor directory, std::shared_ptr<worker_pool> pool,
              server_options opts, std::shared_ptr<process_registry> processes)
    : sys(sys), directory(std::move(directory)), pool(std::move(pool)), opts(std::move(opts)),
      processes(std::move(processes)) {
    if (this->opts.io_threads == 0)
      this->opts.io_threads = 1;
    pins->value = this->opts.trusted_instance;
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
  directory_actor directory;
  std::shared_ptr<worker_pool> pool;
  server_options opts;
  std::shared_ptr<process_registry> processes;
  std::shared_ptr<pin_slot> pins = std::make_shared<pin_slot>();
  std::shared_ptr<shared_state> shared = std::make_shared<shared_state>();
  std::shared_ptr<io_gate> gate = std::make_shared<io_gate>();
  std::string transfer_prefix;
  std::atomic<uint64_t> transfer_seq{1};

  std::atomic<size_t> ws_count{0};
  /// Connections accepted and not upgraded (or closed) yet: HTTP sessions alive.
  std::atomic<size_t> pending_handshakes{0};
  /// HTTP sessions in accept order (expired ones are skipped and pruned).
  std::mutex pending_mtx;
  std::deque<std::weak_ptr<http_session>> pending_order;
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

namespace {

http::response<http::string_body> make_response(http::status status, unsigned version,
                                                bool keep_alive, std::string_view content_type,
                                                std::string body) {
  http::response<http::string_body> res{status, version};
  res.set(http::field::server, "boxrt");
  res.set(http::field::content_type, beast::string_view{content_type.data(), content_type.size()});
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// -- WebSocket session -------------------------------------------------------------------

class ws_session;

/// Inbound flow control between a socket and its actor: messages read but not yet
/// handled by the actor. Past the high mark the socket stops reading until the actor
/// has worked the backlog down to half of it.
struct read_window {
  read_window(size_t max_frames, size_t max_bytes) : max_frames(max_frames), max_bytes(max_bytes) {}

  bool over() const { return frames.load() > max_frames || bytes.load() > max_bytes; }
  bool low() const { return frames.load() <= max_frames / 2 && bytes.load() <= max_bytes / 2; }

  const size_t max_frames;
  const size_t max_bytes;
  std::atomic<size_t> frames{0};
  std::atomic<size_t> bytes{0};
  /// Requests the actor has in flight (see outbound::in_flight).
  std::atomic<size_t> requests{0};
  /// Replies sent by the actor and not yet written (see outbound::unwritten), here and
  /// summed over the server's connections.
  std::atomic<size_t> unwritten{0};
  std::shared_ptr<std::atomic<int64_t>> server_unwritten;

  void add_unwritten(int64_t n) {
    unwritten += static_cast<size_t>(n);
    if (server_unwritten)
      *server_unwritten += n;
  }
  /// Set by the socket when it stops reading; whoever clears it resumes reading.
  std::atomic<bool> paused{false};
};

/// What the connection actor holds: posts onto the session's strand while the server's
/// io_context is alive; a no-op once the socket or the server is gone.
class ws_handle final : public outbound {
 public:
  ws_handle(std::weak_ptr<ws_session> session, std::shared_ptr<io_gate> gate,
            std::shared_ptr<read_window> window)
    : session_(std::move(session)), gate_(std::move(gate)), window_(std::move(window)) {}

  void send(std::string text, bool reply) override;
  void close(uint16_t code, std::string reason) override;
  void consumed(size_t bytes) override;
  void in_flight(size_t n) override { window_->requests = n; }
  size_t unwritten() const override { return window_->unwritten.load(); }

 private:
  std::weak_ptr<ws_session> session_;
  std::shared_ptr<io_gate> gate_;
  std::shared_ptr<read_window> window_;
};

/// The write side both WebSocket sessions share (the RPC socket and the stdio relay):
/// one write queue, one write outstanding at a time, and a close that waits for every
/// message queued before it. `Derived` provides ws_, peer_, accepted_, closing_,
/// finished_, self(), finish(why) and the hooks after_enqueue(), after_write() (a write
/// completed), reply_done() (a reply left the queue, written or dropped) and
/// close_requested() (a close was asked for), plus the log labels write_what and
/// close_what.
template <class Derived>
class ws_outbox {
 protected:
  /// One message waiting to be written; a `reply` holds an in-flight slot until then.
  struct queued {
    std::string text;
    bool reply = false;
  };

  void enqueue(std::string text, bool reply = false) {
    auto& d = derived();
    if (d.closing_ || d.finished_ || close_) {
      if (reply)
        d.reply_done();
      return;
    }
    queued_bytes_ += text.size();
    peak_bytes_ = std::max(peak_bytes_, queued_bytes_);
    const bool small = text.size() <= small_message_bytes;
    if (Derived::small_first && small && overtaken_ < max_overtaking) {
      // Ahead of every large message not started yet (one message is one frame
      // sequence, RFC 6455 §5.4: a message being written cannot be interrupted).
      const size_t at = (writing_ ? 1 : 0) + waiting_small_;
      if (at < queue_.size())
        ++overtaken_;
      queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(at), {std::move(text), reply});
      ++waiting_small_;
    } else {
      queue_.push_back({std::move(text), reply});
    }
    d.after_enqueue();
    if (!writing_)
      do_write();
  }

  void do_write() {
    auto& d = derived();
    if (waiting_small_ > 0)
      --waiting_small_; // the front is the first of them
    else
      overtaken_ = 0;   // a large message goes: the small ones start counting again
    writing_ = true;
    d.ws_.text(true);
    d.ws_.async_write(asio::buffer(queue_.front().text),
                      [s = d.self()](beast::error_code ec, size_t) { s->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    auto& d = derived();
    writing_ = false;
    if (ec) {
      fail(ec, Derived::write_what, d.peer_);
      drop_queued();
      beast::get_lowest_layer(d.ws_).close();
      d.finish(ec.message());
      return;
    }
    queued_bytes_ -= queue_.front().text.size();
    if (queue_.front().reply)
      d.reply_done();
    queue_.pop_front();
    if (!queue_.empty())
      do_write();
    else if (close_)
      maybe_close();
    d.after_write();
  }

  /// Drops every message not being written now (all of them when none is).
  void drop_queued() {
    auto& d = derived();
    const size_t keep = writing_ ? 1 : 0;
    while (queue_.size() > keep) {
      queued_bytes_ -= queue_.back().text.size();
      if (queue_.back().reply)
        d.reply_done();
      queue_.pop_back();
    }
    waiting_small_ = 0;
    overtaken_ = 0;
    if (queue_.empty())
      std::deque<queued>{}.swap(queue_);
  }

  /// Closes after every message queued so far.
  void request_close(uint16_t code, std::string reason) {
    auto& d = derived();
    if (d.closing_ || d.finished_ || close_)
      return;
    close_ = websocket::close_reason{static_cast<websocket::close_code>(code), reason};
    d.close_requested();
    maybe_close();
  }

  void maybe_close() {
    auto& d = derived();
    if (!d.accepted_ || writing_ || !queue_.empty() || d.closing_ || d.finished_)
      return;
    d.closing_ = true;
    d.ws_.async_close(*close_, [s = d.self()](beast::error_code ec) {
      if (ec)
        fail(ec, Derived::close_what, s->peer_);
      s->finish("closed by server");
    });
  }

  /// Messages this size or smaller may overtake larger ones not started yet (when
  /// Derived::small_first), at most max_overtaking times per large message, so a stream
  /// of small replies cannot starve a large one.
  static constexpr size_t small_message_bytes = 64 * 1024;
  static constexpr size_t max_overtaking = 1024;

  /// Front to back: the message being written (when writing_), the small messages that
  /// went ahead (waiting_small_ of them), then the rest in arrival order.
  std::deque<queued> queue_;
  size_t waiting_small_ = 0;
  size_t overtaken_ = 0;
  /// Bytes waiting in queue_, and the most there ever were.
  size_t queued_bytes_ = 0;
  size_t peak_bytes_ = 0;
  std::optional<websocket::close_reason> close_;
  bool writing_ = false;

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }
};

class ws_session final : public session_base, private ws_outbox<ws_session> {
  friend class ws_outbox<ws_session>;
  static constexpr const char* write_what = "write";
  static constexpr const char* close_what = "close";
  /// Replies are matched by seq_id: a small one need not wait behind large ones.
  static constexpr bool small_first = true;

 public:
  ws_session(server_core& srv, beast::tcp_stream&& stream, http::request<http::string_body> req,
             std::string peer, std::string instance)
    : srv_(srv), ws_(std::move(stream)), req_(std::move(req)), peer_(std::move(peer)),
      instance_(std::move(instance)), paused_(ws_.get_executor()), stall_(ws_.get_executor()) {}

  ~ws_session() override {
    finish("session destroyed");
    srv_.remove(this);
    // glibc keeps freed large blocks in its arenas; after a connection that held many
    // megabytes of replies, give them back to the system.
    const bool large = peak_bytes_ > trim_after_bytes;
    std::deque<queued>{}.swap(queue_);
    buffer_ = {};
    if (large && trim_due())
      ::malloc_trim(0);
  }

  std::shared_ptr<ws_session> self() {
    return std::static_pointer_cast<ws_session>(shared_from_this());
  }

  /// Registers, spawns the connection actor and accepts the upgrade.
  void run() {
    srv_.add(shared_from_this());
    asio::dispatch(ws_.get_executor(), [s = self()] { s->on_run(); });
  }

  void shutdown() override {
    asio::post(ws_.get_executor(), [s = self()] {
      // Through the actor, so that in-flight requests are answered before the 1001.
      if (s->actor_ && !s->finished_)
        caf::anon_send(s->actor_, shutdown_atom_v);
      else
        s->request_close(1001, shutdown_close_reason);
    });
  }

  void force_close() override {
    asio::post(ws_.get_executor(), [s = self()] {
      beast::get_lowest_layer(s->ws_).close();
      s->paused_.cancel();
      s->finish("server stopped");
    });
  }

  void post_send(std::string text, bool reply) {
    asio::post(ws_.get_executor(), [s = self(), text = std::move(text), reply]() mutable {
      s->enqueue(std::move(text), reply);
    });
  }

  void post_close(uint16_t code, std::string reason) {
    asio::post(ws_.get_executor(), [s = self(), code, reason = std::move(reason)]() mutable {
      s->request_close(code, std::move(reason));
    });
  }

  /// The actor worked the backlog down: read again.
  void post_resume() {
    asio::post(ws_.get_executor(), [s = self()] {
      s->paused_.cancel();
      s->in_paused_ = false;
      s->maybe_read();
    });
  }

 private:
  void on_run() {
    if (srv_.stopping) {
      beast::get_lowest_layer(ws_).close();
      finish("server stopping");
      return;
    }
    window_ = std::make_shared<read_window>(std::max<size_t>(2 * srv_.opts.max_inflight, 8),
                                            srv_.opts.max_message_bytes);
    window_->server_unwritten = srv_.unwritten_replies;
    handle_ = std::make_shared<ws_handle>(self(), srv_.gate, window_);
    connection_args args;
    args.directory = srv_.directory;
    args.pool = srv_.pool;
    args.shared = srv_.shared;
    args.out = handle_;
    args.max_message_bytes = srv_.opts.max_message_bytes;
    args.max_inflight = srv_.opts.max_inflight;
    args.transfer_dir = srv_.next_transfer_dir();
    args.peer = peer_;
    actor_ = spawn_connection(srv_.sys, std::move(args));
    // An actor that fails takes its socket with it.
    actor_->attach_functor([h = handle_] { h->close(1011, "Box runtime connection failed"); });

    beast::get_lowest_layer(ws_).expires_never();
    auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
    timeouts.handshake_timeout = close_timeout;
    ws_.set_option(timeouts);
    // Beast compresses inside its write, on this I/O thread: a 12 MiB reply would hold
    // up every connection of the thread, so the offer is declined unless configured.
    websocket::permessage_deflate pmd;
    pmd.server_enable = srv_.opts.compression;
    ws_.set_option(pmd);
    ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "boxrt"); }));
    ws_.read_message_max(srv_.opts.max_message_bytes);
    ws_.async_accept(req_, [s = self()](beast::error_code ec) { s->on_accept(ec); });
  }

  void on_accept(beast::error_code ec) {
    req_ = {};
    if (ec) {
      fail(ec, "accept", peer_);
      finish("upgrade failed");
      return;
    }
    accepted_ = true;
    spdlog::info("net: {}: RPC connection open (instance {})", peer_, instance_);
    maybe_read();
    if (close_)
      maybe_close();
  }

  /// Reads the next message unless a read is pending or reading is paused (the actor's
  /// backlog, see read_window, or the outbound caps).
  void maybe_read() {
    if (reading_ || !accepted_ || closing_ || finished_ || in_paused_ || out_paused_)
      return;
    reading_ = true;
    ws_.async_read(buffer_, [s = self()](beast::error_code ec, size_t n) { s->on_read(ec, n); });
  }

  void on_read(beast::error_code ec, size_t n) {
    reading_ = false;
    if (ec) {
      if (ec == websocket::error::message_too_big)
        spdlog::warn("net: {}: a message exceeds {} bytes; closing the connection", peer_,
                     srv_.opts.max_message_bytes);
      else
        fail(ec, "read", peer_);
      finish(ec == websocket::error::closed ? "closed by peer" : ec.message());
      return;
    }
    if (!ws_.got_text()) {
      // As the reference: any non-TEXT message tears the connection down.
      spdlog::warn("net: {}: unexpected BINARY message; closing the connection", peer_);
      buffer_.consume(buffer_.size());
      request_close(static_cast<uint16_t>(websocket::close_code::unknown_data),
                    "Unexpected message type: BINARY");
      return;
    }
    auto data = buffer_.cdata();
    std::string text;
    text.reserve(data.size() + parse_padding);
    text.assign(static_cast<const char*>(data.data()), data.size());
    buffer_.consume(buffer_.size());
    if (buffer_.capacity() > buffer_keep_bytes)
      buffer_.shrink_to_fit();
    // Nothing waits in the actor and nothing is in flight (read in this order, see
    // outbound::in_flight): the actor would answer a bare heartbeat with success, so
    // the socket answers it without the hand-off.
    if (window_->frames.load() == 0 && window_->requests.load() == 0
        && window_->unwritten.load() < srv_.opts.max_inflight) {
      if (auto pong = heartbeat_.reply_to(text); !pong.empty()) {
        enqueue(std::move(pong));
        maybe_read();
        return;
      }
    }
    window_->frames += 1;
    window_->bytes += text.size();
    caf::anon_send(actor_, frame_atom_v, std::move(text));
    if (closing_)
      return;
    if (window_->over()) {
      window_->paused = true;
      // The actor may have drained the backlog meanwhile; one of us clears the flag.
      if (!window_->low() || !window_->paused.exchange(false)) {
        // Nothing else may be pending while paused: this wait keeps the session alive
        // inside the io_context until post_resume() or the close cancels it.
        spdlog::debug("net: {}: {} messages wait for the actor; reading paused", peer_,
                      window_->frames.load());
        in_paused_ = true;
        paused_.expires_at(asio::steady_timer::time_point::max());
        paused_.async_wait([s = self()](beast::error_code) {});
        return;
      }
    }
    maybe_read();
  }

  // -- outbound caps (server.max_outbound_bytes / _frames / outbound_stall_ms) ----------

  bool out_over() const {
    return queued_bytes_ > srv_.opts.max_outbound_bytes
           || queue_.size() > srv_.opts.max_outbound_frames;
  }
  bool out_low() const {
    return queued_bytes_ <= srv_.opts.max_outbound_bytes / 2
           && queue_.size() <= srv_.opts.max_outbound_frames / 2;
  }

  /// Past a cap: stop reading, so the client's own requests stop adding replies, and
  /// give the client outbound_stall_ms to read before the connection goes.
  void after_enqueue() {
    if (out_paused_ || !out_over())
      return;
    out_paused_ = true;
    srv_.outbound_pauses += 1;
    // Once per connection at warning level: a slow reader pauses again and again.
    spdlog::log(pauses_++ == 0 ? spdlog::level::warn : spdlog::level::debug,
                "net: {}: {} replies ({} bytes) wait for the client to read; reading paused",
                peer_, queue_.size(), queued_bytes_);
    arm_stall();
  }

  void after_write() {
    if (!out_paused_ || stalled_)
      return;
    if (out_low()) {
      out_paused_ = false;
      stall_.cancel();
      maybe_read();
    } else {
      arm_stall(); // the client reads: it gets the whole stall time again
    }
  }

  void reply_done() { window_->add_unwritten(-1); }

  void arm_stall() {
    stall_.expires_after(std::chrono::milliseconds{srv_.opts.outbound_stall_ms});
    stall_.async_wait([s = self(), gen = ++stall_gen_](beast::error_code ec) {
      if (!ec && gen == s->stall_gen_)
        s->on_stall();
    });
  }

  /// No write completed for outbound_stall_ms while past a cap: what waits is dropped,
  /// the message being written may finish, then the connection closes with 1008.
  void on_stall() {
    if (!out_paused_ || stalled_ || closing_ || finished_)
      return;
    stalled_ = true;
    srv_.outbound_stall_closes += 1;
    spdlog::warn("net: {}: the client read nothing for {} ms with {} replies ({} bytes) "
                 "waiting; closing the connection",
                 peer_, srv_.opts.outbound_stall_ms, queue_.size(), queued_bytes_);
    drop_queued();
    if (!close_)
      close_ = websocket::close_reason{websocket::close_code::policy_error, outbound_full_reason};
    maybe_close();
    // A client that reads nothing at all does not take the close either.
    stall_.expires_after(close_timeout);
    stall_.async_wait([s = self(), gen = ++stall_gen_](beast::error_code ec) {
      if (!ec && gen == s->stall_gen_ && !s->finished_) {
        beast::get_lowest_layer(s->ws_).close();
        s->finish("outbound queue full");
      }
    });
  }

  void close_requested() {}


  /// The socket is done: the actor quits (pending replies are dropped), the slot frees.
  void finish(std::string_view why) {
    if (finished_)
      return;
    finished_ = true;
    paused_.cancel();
    ++stall_gen_;
    stall_.cancel();
    if (counted_) {
      counted_ = false;
      srv_.release_connection();
    }
    if (actor_) {
      caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
      if (accepted_)
        spdlog::info("net: {}: RPC connection closed ({})", peer_, why);
    }
  }

  server_core& srv_;
  websocket::stream<beast::tcp_stream> ws_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  std::string peer_;
  std::string instance_;
  caf::actor actor_;
  std::shared_ptr<ws_handle> handle_;
  std::shared_ptr<read_window> window_;
  heartbeat heartbeat_;
  /// Pending while reading is paused (see read_window).
  asio::steady_timer paused_;
  /// The outbound stall time, then the close's own deadline.
  asio::steady_timer stall_;
  uint64_t stall_gen_ = 0;
  uint64_t pauses_ = 0;
  bool reading_ = false;
  /// Reading paused for the actor's backlog / for the outbound caps.
  bool in_paused_ = false;
  bool out_paused_ = false;
  /// The stall time ran out: the connection is closing with 1008.
  bool stalled_ = false;
  bool accepted_ = false;
  bool closing_ = false;
  bool finished_ = false;
  /// The connection slot reserved by the HTTP session is ours to release.
  bool counted_ = true;
};

void ws_handle::send(std::string text, bool reply) {
  // Counted before the post, so the actor's next capacity check sees the slot taken.
  if (reply)
    window_->add_unwritten(1);
  std::shared_lock lock{gate_->mtx};
  if (gate_->open)
    if (auto s = session_.lock()) {
      s->post_send(std::move(text), reply);
      return;
    }
  if (reply)
    window_->add_unwritten(-1);
}

void ws_handle::consumed(size_t bytes) {
  window_->frames -= 1;
  window_->bytes -= bytes;
  if (!window_->paused.load() || !window_->low() || !window_->paused.exchange(false))
    return;
  std::shared_lock lock{gate_->mtx};
  if (!gate_->open)
    return;
  if (auto s = session_.lock())
    s->post_resume();
}

void ws_handle::close(uint16_t code, std::string reason) {
  std::shared_lock lock{gate_->mtx};
  if (!gate_->open)
    return;
  if (auto s = session_.lock())
    s->post_close(code, std::move(reason));
}

// -- relay session -----------------------------------------------------------------------

/// Close reasons of the relay (protocol.md §1.4, plus the bounded attach wait).
constexpr const char* relay_exited_reason = "managed process exited";
constexpr const char* relay_stdio_reason = "managed process stdio unavailable";
constexpr const char* relay_stdin_reason = "managed process stdin closed";
constexpr const char* relay_busy_reason = "managed process is attached to another relay";
constexpr const char* relay_stale_reason = "Stale Box placement generation";

/// The stdio relay of one managed process whose handshake passed (protocol.md §1.4):
/// one attacher at a time (a later one polls for the process until
/// relay_attach_wait_ms runs out, then closes with 1013), stdout chunks out as TEXT
/// frames, TEXT frames in as stdin lines written on the worker pool one at a time.
/// Whatever ends the relay lets go of the process; the process keeps running. The
/// fence: advancing a generation retires the workspace's sessions, which marks their
/// processes stale (checked before each forwarded chunk, either way) and then kills
/// them; the relay closes with the stale reason.
class relay_session final : public session_base, private ws_outbox<relay_session> {
  friend class ws_outbox<relay_session>;
  static constexpr const char* write_what = "relay write";
  /// Stdout chunks are one stream: they keep their order.
  static constexpr bool small_first = false;
  static constexpr const char* close_what = "relay close";

 public:
  relay_session(server_core& srv, beast::tcp_stream&& stream, http::request<http::string_body> req,
                std::string peer, std::string label,
                std::shared_ptr<process_registry::entry> entry)
    : srv_(srv), ws_(std::move(stream)), req_(std::move(req)), peer_(std::move(peer)),
      label_(std::move(label)), entry_(std::move(entry)), timer_(ws_.get_executor()) {}

  ~relay_session() override {
    finish("session destroyed");
    srv_.remove(this);
  }

  std::shared_ptr<relay_session> self() {
    return std::static_pointer_cast<relay_session>(shared_from_this());
  }

  /// Registers and accepts the upgrade.
  void run() {
    srv_.add(shared_from_this());
    asio::dispatch(ws_.get_executor(), [s = self()] { s->on_run(); });
  }

  void shutdown() override {
    asio::post(ws_.get_executor(), [s = self()] { s->request_close(1001, shutdown_close_reason); });
  }

  void force_close() override {
    asio::post(ws_.get_executor(), [s = self()] {
      beast::get_lowest_layer(s->ws_).close();
      s->finish("server stopped");
    });
  }

 private:
  void on_run() {
    if (srv_.stopping) {
      beast::get_lowest_layer(ws_).close();
      finish("server stopping");
      return;
    }
    beast::get_lowest_layer(ws_).expires_never();
    auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
    timeouts.handshake_timeout = close_timeout;
    timeouts.idle_timeout = relay_idle_timeout;
    timeouts.keep_alive_pings = true;
    ws_.set_option(timeouts);
    websocket::permessage_deflate pmd;
    pmd.server_enable = true;
    ws_.set_option(pmd);
    // The reference offers `mcp`; a client that asks for no subprotocol gets none.
    bool mcp = offers_mcp(sv(req_[http::field::sec_websocket_protocol]));
    ws_.set_option(websocket::stream_base::decorator([mcp](websocket::response_type& res) {
      res.set(http::field::server, "boxrt");
      if (mcp)
        res.set(http::field::sec_websocket_protocol, "mcp");
    }));
    ws_.read_message_max(srv_.opts.max_message_bytes);
    ws_.async_accept(req_, [s = self()](beast::error_code ec) { s->on_accept(ec); });
  }

  void on_accept(beast::error_code ec) {
    req_ = {};
    if (ec) {
      fail(ec, "relay accept", peer_);
      finish("upgrade failed");
      return;
    }
    accepted_ = true;
    spdlog::info("net: {}: relay open for {}", peer_, label_);
    attach_deadline_ = std::chrono::steady_clock::now()
                       + std::chrono::milliseconds{srv_.opts.relay_attach_wait_ms};
    // Reading from the start notices a client that leaves while it waits; its frames
    // queue for stdin until the relay is attached.
    do_read();
    if (close_)
      maybe_close();
    else
      try_attach();
  }

  /// One attacher at a time: take the process, or poll until the bounded wait runs out.
  void try_attach() {
    if (close_ || finished_)
      return;
    bool expected = false;
    if (entry_->attached.compare_exchange_strong(expected, true)) {
      attached_ = true;
      start_relay();
      return;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= attach_deadline_) {
      spdlog::info("net: {}: relay for {} gave up after {} ms: another relay holds the process",
                   peer_, label_, srv_.opts.relay_attach_wait_ms);
      request_close(static_cast<uint16_t>(websocket::close_code::try_again_later),
                    relay_busy_reason);
      return;
    }
    if (!waited_) {
      waited_ = true;
      spdlog::info("net: {}: relay for {} waits: another relay holds the process", peer_, label_);
    }
    timer_.expires_after(std::min<std::chrono::steady_clock::duration>(relay_attach_poll,
                                                                        attach_deadline_ - now));
    timer_.async_wait([s = self()](beast::error_code ec) {
      if (!ec)
        s->try_attach();
    });
  }

  void start_relay() {
    spdlog::info("net: {}: relay attached to {}", peer_, label_);
    int fd = entry_->process ? entry_->process->stdout_fd() : -1;
    int copy = fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      request_close(1000, relay_stdio_reason);
      return;
    }
    stdout_.emplace(ws_.get_executor(), copy);
    chunk_.resize(relay_chunk_bytes);
    read_stdout();
    pump_stdin();
  }

  // stdout -> WS

  void read_stdout() {
    if (!stdout_ || reading_stdout_ || close_ || finished_ || queued_bytes_ > relay_queue_bytes)
      return;
    reading_stdout_ = true;
    stdout_->async_read_some(asio::buffer(chunk_), [s = self()](beast::error_code ec, size_t n) {
      s->on_stdout(ec, n);
    });
  }

  void on_stdout(beast::error_code ec, size_t n) {
    reading_stdout_ = false;
    if (close_ || finished_)
      return;
    if (entry_->stale.load()) {
      request_close(1000, relay_stale_reason);
      return;
    }
    // Chunks are not aligned to lines or characters: a sequence cut at the end of a
    // chunk becomes U+FFFD, as the reference's per-chunk decode does.
    if (n > 0)
      enqueue(json::sanitize_utf8({chunk_.data(), n}));
    if (ec) {
      if (ec != asio::error::eof)
        spdlog::warn("net: {}: relay for {}: stdout: {}", peer_, label_, ec.message());
      request_close(1000, entry_->stale.load() ? relay_stale_reason : relay_exited_reason);
      return;
    }
    read_stdout();
  }

  // WS -> stdin

  void do_read() {
    ws_.async_read(in_, [s = self()](beast::error_code ec, size_t) { s->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      if (ec == websocket::error::message_too_big)
        spdlog::warn("net: {}: relay for {}: a message exceeds {} bytes; closing", peer_, label_,
                     srv_.opts.max_message_bytes);
      else
        fail(ec, "relay read", peer_);
      finish(ec == websocket::error::closed ? "closed by peer" : ec.message());
      return;
    }
    if (entry_->stale.load()) {
      in_.consume(in_.size());
      request_close(1000, relay_stale_reason);
      return;
    }
    if (ws_.got_text() && !close_) {
      auto data = in_.cdata();
      std::string line;
      line.reserve(data.size() + 1);
      line.assign(static_cast<const char*>(data.data()), data.size());
      line += '\n';
      stdin_bytes_ += line.size();
      stdin_.push_back(std::move(line));
    }
    // BINARY frames are ignored, as the reference does.
    in_.consume(in_.size());
    if (in_.capacity() > buffer_keep_bytes)
      in_.shrink_to_fit();
    if (closing_)
      return;
    pump_stdin();
    // A process that does not read its stdin stops the socket from being read.
    if (stdin_bytes_ > srv_.opts.max_message_bytes) {
      read_paused_ = true;
      return;
    }
    do_read();
  }

  /// Writes the next queued line on the worker pool: write_stdin blocks until the
  /// process has taken it. One write at a time keeps the lines in arrival order.
  void pump_stdin() {
    if (!attached_ || !stdout_ || close_ || finished_ || stdin_busy_ || stdin_.empty())
      return;
    stdin_busy_ = true;
    auto data = std::move(stdin_.front());
    stdin_.pop_front();
    auto n = data.size();
    srv_.pool->submit([weak = std::weak_ptr<relay_session>{self()}, gate = srv_.gate,
                       process = entry_->process, data = std::move(data), n] {
      bool ok = process->write_stdin(data);
      std::shared_lock lock{gate->mtx};
      if (!gate->open)
        return;
      if (auto s = weak.lock())
        asio::post(s->ws_.get_executor(), [s, ok, n] { s->on_stdin_written(ok, n); });
    });
  }

  void on_stdin_written(bool ok, size_t n) {
    stdin_busy_ = false;
    stdin_bytes_ -= n;
    if (close_ || finished_)
      return;
    if (!ok) {
      request_close(1000, relay_stdin_reason);
      return;
    }
    pump_stdin();
    if (read_paused_ && stdin_bytes_ <= srv_.opts.max_message_bytes) {
      read_paused_ = false;
      do_read();
    }
  }

  // write queue and close (ws_outbox): after a write, stdout may be read again; a close
  // lets go of the process at once, before the queued frames are out.

  void after_write() { read_stdout(); }
  void after_enqueue() {}
  void reply_done() {}
  void close_requested() { detach(); }

  /// Stops waiting and reading stdout, and frees the process for the next attacher.
  void detach() {
    timer_.cancel();
    if (stdout_) {
      beast::error_code ec;
      stdout_->close(ec);
    }
    if (attached_) {
      attached_ = false;
      entry_->attached.store(false);
      spdlog::info("net: {}: relay detached from {}", peer_, label_);
    }
  }

  void finish(std::string_view why) {
    if (finished_)
      return;
    finished_ = true;
    detach();
    if (counted_) {
      counted_ = false;
      srv_.release_connection();
    }
    if (accepted_)
      spdlog::info("net: {}: relay for {} closed ({})", peer_, label_, why);
  }

  server_core& srv_;
  websocket::stream<beast::tcp_stream> ws_;
  http::request<http::string_body> req_;
  std::string peer_;
  std::string label_;  // "session <id> process <pid>" for the log
  std::shared_ptr<process_registry::entry> entry_;
  /// The attach poll.
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point attach_deadline_;
  /// A duplicate of the process's stdout (the process object keeps its own).
  std::optional<asio::posix::stream_descriptor> stdout_;
  std::vector<char> chunk_;
  beast::flat_buffer in_;
  std::deque<std::string> stdin_;
  size_t stdin_bytes_ = 0;
  bool attached_ = false;
  bool waited_ = false;
  bool reading_stdout_ = false;
  bool read_paused_ = false;
  bool stdin_busy_ = false;
  bool accepted_ = false;
  bool closing_ = false;
  bool finished_ = false;
  /// The connection slot reserved by the HTTP session is ours to release.
  bool counted_ = true;
};

// -- HTTP session ------------------------------------------------------------------------

class http_session final : public session_base {
 public:
  http_session(server_core& srv, tcp::socket&& socket)
    : srv_(srv), peer_(peer_of(socket)), stream_(std::move(socket)),
      executor_(stream_.get_executor()), timer_(stream_.get_executor()) {
    srv_.pending_handshakes += 1;
  }

  /// Closes the connection unless it has upgraded meanwhile (on its own strand: the
  /// upgrade moves the stream away there).
  void evict() {
    asio::post(executor_, [s = self()] {
      if (s->handed_off_)
        return;
      spdlog::debug("net: {}: closed: the oldest connection without a finished handshake",
                    s->peer_);
      s->waiting_ = false;
      s->timer_.cancel();
      s->stream_.close();
    });
  }

  ~http_session() override {
    srv_.pending_handshakes -= 1;
    srv_.remove(this);
  }

  std::shared_ptr<http_session> self() {
    return std::static_pointer_cast<http_session>(shared_from_this());
  }

  void run() {
    srv_.add(shared_from_this());
    asio::dispatch(stream_.get_executor(), [s = self()] { s->do_read(); });
  }

  void shutdown() override { force_close(); }

  void force_close() override {
    asio::post(stream_.get_executor(), [s = self()] {
      s->waiting_ = false;
      s->timer_.cancel();
      s->stream_.close();
    });
  }

 private:
  enum class probe { live, ready };

  /// A relay handshake waiting for the directory's verdict.
  struct pending_relay {
    http::request<http::string_body> req;
    std::string session;
    std::string process;
    std::string label;
  };

  void do_read() {
    if (srv_.stopping) {
      stream_.close();
      return;
    }
    parser_.emplace();
    parser_->body_limit(64 * 1024);
    // A whole request (a handshake, a probe) within the deadline: a slow or idle
    // client cannot hold a pending slot for long.
    stream_.expires_after(std::chrono::milliseconds{srv_.opts.handshake_timeout_ms});
    http::async_read(stream_, buffer_, *parser_,
                     [s = self()](beast::error_code ec, size_t) { s->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream) {
      do_close();
      return;
    }
    if (ec) {
      fail(ec, "http read", peer_);
      return;
    }
    handle(parser_->release());
  }

  void handle(http::request<http::string_body> req) {
    auto path = path_of(req.target());
    if (path == "/rpc/ws") {
      handle_rpc(std::move(req));
    } else if (path == "/healthz" || path == "/readyz") {
      if (req.method() != http::verb::get) {
        auto res = make_response(http::status::method_not_allowed, req.version(),
                                 req.keep_alive(), "text/plain", "Method Not Allowed");
        res.set(http::field::allow, "GET");
        write(std::move(res));
        return;
      }
      ask_health(path == "/healthz" ? probe::live : probe::ready, req.version(),
                 req.keep_alive());
    } else if (auto target = relay_target(path)) {
      if (req.method() != http::verb::get) {
        auto res = make_response(http::status::method_not_allowed, req.version(),
                                 req.keep_alive(), "text/plain", "Method Not Allowed");
        res.set(http::field::allow, "GET");
        write(std::move(res));
        return;
      }
      handle_relay(std::move(req), std::move(target->first), std::move(target->second));
    } else {
      write(make_response(http::status::not_found, req.version(), req.keep_alive(),
                          "text/plain", "Not Found"));
    }
  }

  /// The checks of protocol.md §1.3, all before the upgrade.
  void handle_rpc(http::request<http::string_body> req) {
    auto unauthorized = [&] {
      write(make_response(http::status::unauthorized, req.version(), false, "text/plain",
                          "Unauthorized"));
    };
    const auto& token = srv_.opts.control_token;
    if (!token.empty()) {
      auto i = req.find(token_header);
      if (i == req.end() || !constant_time_equal(sv(i->value()), token)) {
        spdlog::warn("net: {}: RPC handshake refused: missing or wrong control token", peer_);
        unauthorized();
        return;
      }
    }
    auto instance = std::string{py::strip(sv(req[instance_header]))};
    if (!valid_instance_id(instance)) {
      spdlog::warn("net: {}: RPC handshake refused: missing or malformed instance id", peer_);
      unauthorized();
      return;
    }
    if (!srv_.pins->admits(instance)) {
      spdlog::warn("net: {}: RPC handshake refused: instance {} is not the pinned instance",
                   peer_, instance);
      unauthorized();
      return;
    }
    if (!websocket::is_upgrade(req)) {
      write(make_response(http::status::bad_request, req.version(), false, "text/plain",
                          "Expected a WebSocket upgrade"));
      return;
    }
    if (srv_.stopping) {
      write(make_response(http::status::service_unavailable, req.version(), false,
                          "text/plain", shutdown_close_reason));
      return;
    }
    if (!srv_.reserve_connection()) {
      spdlog::warn("net: {}: RPC connection refused: {} connections open (the cap)", peer_,
                   srv_.opts.max_connections);
      write(make_response(http::status::service_unavailable, req.version(), false,
                          "text/plain",
                          fmt::format("Box runtime connection limit reached (max {} connections)",
                                      srv_.opts.max_connections)));
      return;
    }
    // Pinned only by a handshake that upgrades (first come, first served).
    if (!srv_.pins->pin(instance)) {
      srv_.release_connection();
      spdlog::warn("net: {}: RPC handshake refused: instance {} is not the pinned instance",
                   peer_, instance);
      unauthorized();
      return;
    }
    handed_off_ = true;
    std::make_shared<ws_session>(srv_, std::move(stream_), std::move(req), peer_,
                                 std::move(instance))
      ->run();
  }

  /// Checks 1 to 3 of protocol.md §1.4 (the directory runs 4 to 9), all before the upgrade.
  void handle_relay(http::request<http::string_body> req, std::string session,
                    std::string process) {
    auto label = fmt::format("session {} process {}", session, process);
    auto unauthorized = [&](std::string_view why) {
      spdlog::warn("net: {}: relay handshake for {} refused: {}", peer_, label, why);
      write(make_response(http::status::unauthorized, req.version(), false, "text/plain",
                          "Unauthorized"));
    };
    relay_headers h;
    if (auto i = req.find(token_header); i != req.end())
      h.token = sv(i->value());
    h.instance = sv(req[instance_header]);
    h.workspace = sv(req[workspace_header]);
    h.generation = sv(req[generation_header]);
    relay_request r;
    if (auto why = check_relay_headers(h, srv_.opts.control_token, srv_.pins->get(),
                                       std::move(session), std::move(process), r)) {
      unauthorized(*why);
      return;
    }
    ask_relay(std::move(req), std::move(r), std::move(label));
  }

  /// Asks the directory for checks 4 to 9 without blocking this I/O thread.
  void ask_relay(http::request<http::string_body> req, relay_request r, std::string label) {
    relay_ = pending_relay{std::move(req), r.session_id, r.process_id, std::move(label)};
    waiting_ = true;
    // The timer is what keeps this session alive (inside the io_context) meanwhile.
    timer_.expires_after(relay_verdict_timeout + std::chrono::seconds{1});
    timer_.async_wait([s = self()](beast::error_code ec) {
      if (!ec)
        s->on_verdict(relay_verdict{503, make_box_error(ec::runtime_unavailable,
                                                        "Box runtime request timed out")});
    });
    auto asker = [](caf::event_based_actor* ask, std::weak_ptr<http_session> weak,
                    std::shared_ptr<io_gate> gate, directory_actor dir, relay_request r) {
      auto deliver = [weak, gate](relay_verdict v) {
        std::shared_lock lock{gate->mtx};
        if (!gate->open)
          return;
        if (auto s = weak.lock())
          asio::post(s->stream_.get_executor(),
                     [s, v = std::move(v)]() mutable { s->on_verdict(std::move(v)); });
      };
      ask->request(dir, relay_verdict_timeout, relay_atom_v, std::move(r))
        .then([deliver](relay_verdict& v) { deliver(std::move(v)); },
              [deliver](caf::error& err) {
                relay_verdict v;
                v.error = from_caf_error(err);
                v.status = v.error.code == ec::runtime_unavailable ? 503 : 400;
                deliver(std::move(v));
              });
    };
    srv_.sys.spawn(asker, std::weak_ptr<http_session>{self()}, srv_.gate, srv_.directory,
                   std::move(r));
  }

  void on_verdict(relay_verdict v) {
    if (!waiting_ || !relay_)
      return;
    waiting_ = false;
    timer_.cancel();
    auto pending = std::move(*relay_);
    relay_.reset();
    auto& req = pending.req;
    std::shared_ptr<process_registry::entry> entry;
    if (v.status == 0) {
      // The process may have gone since the directory looked.
      entry = srv_.processes ? srv_.processes->find(pending.session, pending.process) : nullptr;
      if (!entry || !entry->process)
        v = relay_verdict{400, make_box_error(ec::process_not_found,
                                              fmt::format("session {} has no managed process "
                                                          "with process_id={}",
                                                          pending.session, pending.process))};
    }
    if (v.status == 401) {
      spdlog::warn("net: {}: relay handshake for {} refused: stale generation or foreign session",
                   peer_, pending.label);
      write(make_response(http::status::unauthorized, req.version(), false, "text/plain",
                          "Unauthorized"));
      return;
    }
    if (v.status != 0) {
      spdlog::info("net: {}: relay handshake for {} refused: {}", peer_, pending.label,
                   v.error.to_wire());
      write(make_response(static_cast<http::status>(v.status), req.version(), false,
                          "application/json", error_body(v.error)));
      return;
    }
    if (!websocket::is_upgrade(req)) {
      write(make_response(http::status::bad_request, req.version(), false, "text/plain",
                          "Expected a WebSocket upgrade"));
      return;
    }
    if (srv_.stopping) {
      write(make_response(http::status::service_unavailable, req.version(), false,
                          "text/plain", shutdown_close_reason));
      return;
    }
    if (!srv_.reserve_connection()) {
      spdlog::warn("net: {}: relay for {} refused: {} connections open (the cap)", peer_,
                   pending.label, srv_.opts.max_connections);
      write(make_response(http::status::service_unavailable, req.version(), false,
                          "text/plain",
                          fmt::format("Box runtime connection limit reached (max {} connections)",
                                      srv_.opts.max_connections)));
      return;
    }
    handed_off_ = true;
    std::make_shared<relay_session>(srv_, std::move(stream_), std::move(req), peer_,
                                    std::move(pending.label), std::move(entry))
      ->run();
  }

  void ask_health(probe kind, unsigned version, bool keep_alive) {
    kind_ = kind;
    version_ = version;
    keep_alive_ = keep_alive;
    waiting_ = true;
    // The timer is what keeps this session alive (inside the io_context) meanwhile.
    timer_.expires_after(health_timeout + std::chrono::seconds{1});
    timer_.async_wait([s = self()](beast::error_code ec) {
      if (!ec)
        s->on_health(std::nullopt);
    });
    // The arguments travel as spawn arguments: CAF 0.17 dereferences an empty argument
    // tuple for a spawn without any (harmless, but UBSan reports it).
    auto asker = [](caf::event_based_actor* ask, std::weak_ptr<http_session> weak,
                    std::shared_ptr<io_gate> gate, directory_actor dir) {
      auto deliver = [weak, gate](std::optional<health_info> info) {
        std::shared_lock lock{gate->mtx};
        if (!gate->open)
          return;
        if (auto s = weak.lock())
          asio::post(s->stream_.get_executor(),
                     [s, info = std::move(info)]() mutable { s->on_health(std::move(info)); });
      };
      ask->request(dir, health_timeout, health_atom_v)
        .then([deliver](health_info& info) { deliver(std::move(info)); },
              [deliver](caf::error&) { deliver(std::nullopt); });
    };
    srv_.sys.spawn(asker, std::weak_ptr<http_session>{self()}, srv_.gate, srv_.directory);
  }

  void on_health(std::optional<health_info> info) {
    if (!waiting_)
      return;
    waiting_ = false;
    timer_.cancel();
    auto resources = [&](json::writer& w) {
      w.key("resources").begin_object();
      w.key("sessions").value(info ? info->sessions : int64_t{0});
      w.key("connections").value(static_cast<uint64_t>(srv_.ws_count.load()));
      w.end_object();
    };
    json::writer w;
    http::status status = http::status::ok;
    w.begin_object();
    if (kind_ == probe::live) {
      // Liveness means the actor core answers; no host paths or error texts here.
      w.key("live").value(info.has_value());
      if (!info)
        status = http::status::service_unavailable;
    } else {
      // Nothing is ready before the directory's first probe has finished.
      const auto& st = info ? info->settings : instance_settings{};
      bool ready = st.probed && st.ready;
      bool admission = st.admission_mode || st.config.admission_mode();
      w.key("ready").value(ready);
      w.key("mode").value(admission ? "grant_enforced" : "standard");
      w.key("backend").begin_object();
      w.key("name").value(st.backend_name);
      w.key("available").value(st.probed && st.backend_available);
      w.end_object();
      w.key("checks").begin_object();
      if (st.checks.empty())
        w.key("backend_available").value(st.probed && st.backend_available);
      for (const auto& [name, ok] : st.checks)
        w.key(name).value(st.probed && ok);
      w.end_object();
      if (!ready)
        status = http::status::service_unavailable;
    }
    resources(w);
    w.end_object();
    write(make_response(status, version_, keep_alive_, "application/json", w.take()));
  }

  void write(http::response<http::string_body> res) {
    // The answer may follow a wait (health, relay verdict): it gets its own deadline.
    stream_.expires_after(std::chrono::milliseconds{srv_.opts.handshake_timeout_ms});
    auto sp = std::make_shared<http::response<http::string_body>>(std::move(res));
    http::async_write(stream_, *sp, [s = self(), sp](beast::error_code ec, size_t) {
      if (ec) {
        fail(ec, "http write", s->peer_);
        return;
      }
      if (!sp->keep_alive())
        s->do_close();
      else
        s->do_read();
    });
  }

  void do_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  server_core& srv_;
  std::string peer_;
  beast::tcp_stream stream_;
  /// The strand, kept: the stream's own is gone once the stream is handed off.
  beast::tcp_stream::executor_type executor_;
  /// The stream went to a WebSocket or relay session.
  bool handed_off_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  asio::steady_timer timer_;
  bool waiting_ = false;
  std::optional<pending_relay> relay_;
  probe kind_ = probe::live;
  unsigned version_ = 11;
  bool keep_alive_ = false;
};

/// `ioc.run()`, except that after each handler the thread polls for up to `spin` more
/// before it blocks again (see server_options::io_spin_us).
void run_io(asio::io_context& ioc, std::chrono::microseconds spin) {
  if (spin.count() == 0) {
    ioc.run();
    return;
  }
  using clock = std::chrono::steady_clock;
  while (ioc.run_one() > 0) {
    auto until = clock::now() + spin;
    while (!ioc.stopped() && clock::now() < until) {
      if (ioc.poll() > 0)
        until = clock::now() + spin;
      else
        std::this_thread::yield(); // the CPU goes to runnable work (actors, pool) first
    }
  }
}

} // namespace

// -- listener ------------------------------------------------------------------------------

void server_core::do_accept() {
  acceptor->async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

template <class... Args>
void server_core::accept_warning(fmt::format_string<Args...> text, Args&&... args) {
  auto now = std::chrono::steady_clock::now();
  if (now - last_accept_log < accept_log_interval) {
    ++accept_logs_suppressed;
    return;
  }
  last_accept_log = now;
  auto line = fmt::format(text, std::forward<Args>(args)...);
  if (accept_logs_suppressed > 0)
    spdlog::warn("net: {} ({} more like this since the last report)", line,
                 accept_logs_suppressed);
  else
    spdlog::warn("net: {}", line);
  accept_logs_suppressed = 0;
}

void server_core::close_oldest_pending() {
  std::lock_guard lock{pending_mtx};
  while (!pending_order.empty()) {
    auto oldest = pending_order.front().lock();
    pending_order.pop_front();
    if (oldest) {
      oldest->evict();
      return;
    }
  }
}

void server_core::on_accept(beast::error_code ec, tcp::socket socket) {
  if (stopping || !acceptor->is_open())
    return;
  if (ec) {
    // Out of descriptors and the like: back off, longer each time, instead of spinning.
    accept_delay = std::min(std::max(accept_delay * 2, std::chrono::milliseconds{50}),
                            max_accept_delay);
    accept_warning("accept failed: {}; retrying in {} ms", ec.message(), accept_delay.count());
    accept_backoff->expires_after(accept_delay);
    accept_backoff->async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && !stopping)
        do_accept();
    });
    return;
  }
  accept_delay = std::chrono::milliseconds{0};
  // Descriptors are handed out lowest first, so the new one's number is about how many
  // are open: the last reserved_fds stay for sandboxes, pipes and files.
  const auto fd = static_cast<size_t>(socket.native_handle());
  if (fd_limit > 0 && fd + opts.reserved_fds >= fd_limit) {
    refused_accepts += 1;
    accept_warning("connection refused: descriptor {} of {} (the last {} are reserved for "
                   "sandboxes)",
                   fd, fd_limit, opts.reserved_fds);
    beast::error_code ignored;
    socket.close(ignored);
  } else {
    if (pending_handshakes.load() >= opts.max_pending_handshakes) {
      // The oldest pending connection goes, not the new one: a flood of idle sockets
      // then cannot lock out a client that finishes its handshake in time.
      refused_accepts += 1;
      accept_warning("closed the oldest of {} connections that have not finished their "
                     "handshake (server.max_pending_handshakes)",
                     pending_handshakes.load());
      close_oldest_pending();
    }
    auto session = std::make_shared<http_session>(*this, std::move(socket));
    {
      std::lock_guard lock{pending_mtx};
      if (pending_order.size() > 2 * opts.max_pending_handshakes + 64)
        std::erase_if(pending_order, [](const auto& w) { return w.expired(); });
      pending_order.push_back(session);
    }
    session->run();
  }
  do_accept();
}

// -- server --------------------------------------------------------------------------------

struct server::impl : server_core {
  using server_core::server_core;
};

server::server(caf::actor_system& sys, directory_actor directory,
               std::shared_ptr<worker_pool> pool, server_options opts,
               std::shared_ptr<process_registry> processes)
  : impl_(std::make_unique<impl>(sys, std::move(directory), std::move(pool), std::move(opts),
                                 std::move(processes))) {}

server::~server() {
  stop();
}

uint16_t server::start() {
  auto& d = *impl_;
  std::lock_guard guard{d.state_mtx};
  if (d.stopped)
    throw std::runtime_error("the Box runtime server was stopped and cannot start again");
  if (d.started)
    return d.port;
  if (auto why = validate(d.opts); !why.empty())
    throw std::runtime_error(why);
  if (!d.opts.transfer_dir.empty()) {
    std::error_code err;
    std::filesystem::create_directories(d.opts.transfer_dir, err);
    if (!err)
      std::filesystem::permissions(d.opts.transfer_dir, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, err);
    if (err)
      throw std::runtime_error("cannot create the transfer directory " + d.opts.transfer_dir
                               + ": " + err.message());
  }
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    d.fd_limit = static_cast<size_t>(lim.rlim_cur);
  auto host = d.opts.host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto where = fmt::format("{}:{}", d.opts.host, d.opts.port);
  beast::error_code ec;
  tcp::endpoint endpoint;
  auto addr = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint{addr, d.opts.port};
  } else {
    tcp::resolver resolver{d.ioc};
    auto results = resolver.resolve(host, std::to_string(d.opts.port), ec);
    if (ec || results.empty())
      throw std::runtime_error("cannot resolve listen address " + where + ": "
                               + (ec ? ec.message() : std::string{"no address"}));
    endpoint = results.begin()->endpoint();
  }
  d.acceptor.emplace(asio::make_strand(d.ioc));
  auto check = [&](const char* what) {
    if (ec) {
      d.acceptor.reset();
      throw std::runtime_error(fmt::format("cannot listen on {}: {}: {}", where, what, ec.message()));
    }
  };
  d.acceptor->open(endpoint.protocol(), ec);
  check("open");
  d.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  check("set_option");
  d.acceptor->bind(endpoint, ec);
  check("bind");
  d.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  check("listen");
  d.port = d.acceptor->local_endpoint().port();
  d.accept_backoff.emplace(d.acceptor->get_executor());
  d.do_accept();
  for (size_t i = 0; i < d.opts.io_threads; ++i)
    d.threads.emplace_back([&d] { run_io(d.ioc, std::chrono::microseconds{d.opts.io_spin_us}); });
  d.started = true;
  spdlog::info("net: listening on {} (port {})", d.opts.host, d.port);
  return d.port;
}

void server::stop() {
  auto& d = *impl_;
  std::lock_guard guard{d.state_mtx};
  if (d.stopped)
    return;
  d.stopped = true;
  if (!d.started)
    return;
  d.stopping = true;
  asio::post(d.acceptor->get_executor(), [&d] {
    beast::error_code ec;
    d.acceptor->close(ec);
    d.accept_backoff->cancel();
  });
  for (auto& s : d.live_sessions())
    s->shutdown();
  if (!d.wait_sessions_gone(stop_grace)) {
    spdlog::warn("net: stop: cutting connections that did not close in time");
    for (auto& s : d.live_sessions())
      s->force_close();
    d.wait_sessions_gone(stop_force);
  }
  d.ioc.stop();
  for (auto& t : d.threads)
    t.join();
  d.threads.clear();
  {
    std::unique_lock lock{d.gate->mtx};
    d.gate->open = false;
  }
  spdlog::info("net: stopped");
}

size_t server::connections() const {
  return impl_->ws_count.load();
}

server_stats server::stats() const {
  server_stats out;
  out.connections = impl_->ws_count.load();
  out.unwritten_replies = static_cast<uint64_t>(std::max<int64_t>(0, impl_->unwritten_replies->load()));
  out.outbound_pauses = impl_->outbound_pauses.load();
  out.pending_handshakes = impl_->pending_handshakes.load();
  out.refused_accepts = impl_->refused_accepts.load();
  out.outbound_stall_closes = impl_->outbound_stall_closes.load();
  return out;
}

} // namespace boxrt::net
