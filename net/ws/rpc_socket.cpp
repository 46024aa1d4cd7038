// The RPC WebSocket of one connection: reads frames within a flow-control window and
// hands them to the connection actor (net/rpc/connection.*), writes its replies
// through the shared outbox, answers heartbeats on the socket's own strand.
#include "net/ws/ws_outbox.hpp"

namespace boxrt::net {

namespace {

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
  void send_frame(std::string text, uint64_t written_token, bool reply) override;
  void close(uint16_t code, std::string reason) override;
  void consumed(size_t bytes) override;
  void in_flight(size_t n) override { window_->requests = n; }
  size_t unwritten() const override { return window_->unwritten.load(); }

 private:
  std::weak_ptr<ws_session> session_;
  std::shared_ptr<io_gate> gate_;
  std::shared_ptr<read_window> window_;
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
    : ws_outbox(srv, std::move(stream), std::move(req), std::move(peer)),
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
  void run() override {
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

  void post_send(std::string text, bool reply, bool in_order = false, uint64_t written = 0) {
    asio::post(ws_.get_executor(), [s = self(), text = std::move(text), reply, in_order, written]() mutable {
      s->enqueue(std::move(text), reply, in_order, written);
    });
  }

  /// A stream frame sent with a token is written: its actor may send the next one.
  void on_written(uint64_t token) {
    if (actor_)
      caf::anon_send(actor_, written_atom_v, token);
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
    if (closed_for_stop())
      return;
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
    args.stream = stream_settings(srv_.opts);
    args.files.max_call_bytes = static_cast<int64_t>(srv_.opts.max_file_call_bytes);
    args.files.max_list_entries = static_cast<int64_t>(srv_.opts.max_list_entries);
    args.transfer_dir = srv_.next_transfer_dir();
    args.peer = peer_;
    args.audit = srv_.audit;
    actor_ = spawn_connection(srv_.sys, std::move(args));
    // An actor that fails takes its socket with it.
    actor_->attach_functor([h = handle_] { h->close(1011, "Box runtime connection failed"); });

    // Beast compresses inside its write, on this I/O thread: a 12 MiB reply would hold
    // up every connection of the thread, so the offer is declined unless configured.
    // No idle timeout: the client's own heartbeat (box_health) is not required.
    accept_upgrade({.deflate = srv_.opts.compression}, "accept");
  }

  void on_upgraded() {
    spdlog::info("net: {}: RPC connection open (instance {})", peer_, instance_);
    maybe_read();
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
        srv_.inbound_pauses += 1;
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

  beast::flat_buffer buffer_;
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

void ws_handle::send_frame(std::string text, uint64_t written_token, bool reply) {
  if (reply)
    window_->add_unwritten(1);
  std::shared_lock lock{gate_->mtx};
  if (gate_->open)
    if (auto s = session_.lock()) {
      s->post_send(std::move(text), reply, true, written_token);
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

} // namespace

void start_rpc_socket(server_core& srv, beast::tcp_stream&& stream,
                      http::request<http::string_body> req, std::string peer,
                      std::string instance) {
  std::make_shared<ws_session>(srv, std::move(stream), std::move(req), std::move(peer),
                               std::move(instance))
    ->run();
}

} // namespace boxrt::net
