// The stdio relay of a managed process: one WebSocket joined to the process's stdin
// and stdout (protocol.md §1.4).
#include "net/ws/ws_outbox.hpp"

namespace boxrt::net {

namespace {

/// Close reasons of the relay (protocol.md §1.4). The bounded attach wait's reason is
/// the session's refusal text (ec::busy).
constexpr const char* relay_exited_reason = "managed process exited";
constexpr const char* relay_stdio_reason = "managed process stdio unavailable";
constexpr const char* relay_stdin_reason = "managed process stdin closed";
constexpr const char* relay_stale_reason = stale_generation_text;

/// The stdio relay of one managed process whose handshake passed (protocol.md §1.4):
/// one attacher at a time, stdout chunks out as TEXT frames, TEXT frames in as stdin
/// lines written on the worker pool one at a time. The session actor owns the
/// attachment: the relay's holder actor asks it to attach and lives as long as the
/// relay, the session grants the process to one holder at a time and hands it to the
/// next waiting one when the holder ends (a later relay waits at most
/// relay_attach_wait_ms, then closes with 1013). Whatever ends the relay ends its holder
/// and so lets go of the process; the process keeps running. The fence: advancing a
/// generation retires the workspace's sessions, which marks their processes stale
/// (checked before each forwarded chunk, either way) and then kills them; the relay
/// closes with the stale reason.
class relay_session final : public session_base, private ws_outbox<relay_session> {
  friend class ws_outbox<relay_session>;
  static constexpr const char* write_what = "relay write";
  /// Stdout chunks are one stream: they keep their order.
  static constexpr bool small_first = false;
  static constexpr const char* close_what = "relay close";

 public:
  relay_session(server_core& srv, beast::tcp_stream&& stream, http::request<http::string_body> req,
                std::string peer, std::string label, relay_request target,
                std::shared_ptr<process_registry::entry> entry)
    : srv_(srv), ws_(std::move(stream)), req_(std::move(req)), peer_(std::move(peer)),
      label_(std::move(label)), target_(std::move(target)), entry_(std::move(entry)) {}

  ~relay_session() override {
    finish("session destroyed");
    srv_.remove(this);
  }

  std::shared_ptr<relay_session> self() {
    return std::static_pointer_cast<relay_session>(shared_from_this());
  }

  /// Where answers from actors and pool jobs are posted (io_gate::post).
  auto io_executor() { return ws_.get_executor(); }

  /// Registers and accepts the upgrade.
  void run() override {
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
    // The reference offers `mcp`; a client that asks for no subprotocol gets none.
    prepare_accept(ws_, srv_.opts.max_message_bytes,
                   {.deflate = true,
                    .idle = relay_idle_timeout,
                    .mcp = offers_mcp(sv(req_[http::field::sec_websocket_protocol]))});
    ws_.async_accept(req_, [s = self()](beast::error_code ec) { s->on_accept(ec); });
  }

  void on_accept(beast::error_code ec) {
    if (!upgraded(ec, "relay accept"))
      return;
    spdlog::info("net: {}: relay open for {}", peer_, label_);
    // Reading from the start notices a client that leaves while it waits; its frames
    // queue for stdin until the relay is attached.
    do_read();
    if (close_)
      maybe_close();
    else
      attach();
  }

  /// Spawns the holder actor, which asks the session for the process and then lives
  /// until the relay ends it (detach).
  void attach() {
    target_.attach_wait_ms = srv_.opts.relay_attach_wait_ms;
    auto timeout = std::chrono::milliseconds{target_.attach_wait_ms} + relay_verdict_timeout;
    auto holder = [](caf::event_based_actor* self, std::weak_ptr<relay_session> weak,
                     std::shared_ptr<io_gate> gate, directory_actor dir, relay_request r,
                     caf::duration timeout) -> caf::behavior {
      auto deliver = [weak, gate](box_error err) {
        gate->post(weak, [err = std::move(err)](relay_session& s) mutable { s.on_attach(std::move(err)); });
      };
      self->request(dir, timeout, attach_atom_v, std::move(r))
        .then([deliver](bool) { deliver({}); },
              [deliver](caf::error& err) { deliver(from_caf_error(err)); });
      // Nothing else arrives: the actor waits for the exit that detach sends.
      return {[](stop_atom) {}};
    };
    holder_ = srv_.sys.spawn(holder, std::weak_ptr<relay_session>{self()}, srv_.gate,
                             srv_.directory, target_, caf::duration{timeout});
  }

  void on_attach(box_error err) {
    if (close_ || finished_)
      return;
    if (!err) {
      attached_ = true;
      // The grant is for the process of this id now: one started again since the
      // handshake is not the one this relay was opened for.
      if (!srv_.processes
          || srv_.processes->find(target_.session_id, target_.process_id) != entry_) {
        request_close(1000, relay_exited_reason);
        return;
      }
      start_relay();
    } else if (err.code == ec::busy) {
      spdlog::info("net: {}: relay for {} gave up after {} ms: another relay holds the process",
                   peer_, label_, srv_.opts.relay_attach_wait_ms);
      request_close(static_cast<uint16_t>(websocket::close_code::try_again_later), err.message);
    } else {
      spdlog::info("net: {}: relay for {} cannot attach: {}", peer_, label_, err.to_wire());
      request_close(1000, err.code == ec::permission ? relay_stale_reason : relay_exited_reason);
    }
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
      gate->post(weak, [ok, n](relay_session& s) { s.on_stdin_written(ok, n); });
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

  /// Stops reading stdout and ends the holder: the session frees the process for the
  /// next attacher (or forgets this relay's wait).
  void detach() {
    if (stdout_) {
      beast::error_code ec;
      stdout_->close(ec);
    }
    if (holder_) {
      caf::anon_send_exit(holder_, caf::exit_reason::user_shutdown);
      holder_ = nullptr;
    }
    if (attached_) {
      attached_ = false;
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
  /// Who is asked for the attachment (physical session, process) and how long to wait.
  relay_request target_;
  std::shared_ptr<process_registry::entry> entry_;
  /// The actor that stands for this relay towards the session; null once detached.
  caf::actor holder_;
  /// A duplicate of the process's stdout (the process object keeps its own).
  std::optional<asio::posix::stream_descriptor> stdout_;
  std::vector<char> chunk_;
  beast::flat_buffer in_;
  std::deque<std::string> stdin_;
  size_t stdin_bytes_ = 0;
  bool attached_ = false;
  bool reading_stdout_ = false;
  bool read_paused_ = false;
  bool stdin_busy_ = false;
  bool accepted_ = false;
  bool closing_ = false;
  bool finished_ = false;
  /// The connection slot reserved by the HTTP session is ours to release.
  bool counted_ = true;
};

} // namespace

void start_relay_socket(server_core& srv, beast::tcp_stream&& stream,
                        http::request<http::string_body> req, std::string peer,
                        std::string label, relay_request target,
                        std::shared_ptr<process_registry::entry> entry) {
  std::make_shared<relay_session>(srv, std::move(stream), std::move(req), std::move(peer),
                                  std::move(label), std::move(target), std::move(entry))
    ->run();
}

} // namespace boxrt::net
