// The stdio relay of a managed process: one WebSocket joined to the process's stdin
// and stdout (protocol.md §1.4), here or, in a cluster, on the node that owns the
// workspace (through a pump there: actors/cluster/stdio_pump.hpp).
#include "net/ws/ws_outbox.hpp"

#include "actors/cluster/stdio_pump.hpp"

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
///
/// A process of another cluster node (no entry here) is reached through the holder: the
/// owner's session spawns a pump beside the process, which sends stdout chunks within
/// the credit this relay gives back as its WebSocket writes them (so at most
/// relay_queue_bytes travel or wait here) and acknowledges each stdin line once written.
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
    : ws_outbox(srv, std::move(stream), std::move(req), std::move(peer)),
      label_(std::move(label)), target_(std::move(target)), entry_(std::move(entry)),
      remote_(!entry_) {}

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
    if (closed_for_stop())
      return;
    // The reference offers `mcp`; a client that asks for no subprotocol gets none.
    accept_upgrade({.deflate = true,
                    .idle = relay_idle_timeout,
                    .mcp = offers_mcp(sv(req_[http::field::sec_websocket_protocol]))},
                   "relay accept");
  }

  void on_upgraded() {
    spdlog::info("net: {}: relay open for {}", peer_, label_);
    // Reading from the start notices a client that leaves while it waits; its frames
    // queue for stdin until the relay is attached.
    do_read();
    if (!close_)
      attach();
  }

  /// Spawns the holder actor, which asks the session for the process and then lives
  /// until the relay ends it (detach). For a process of another node it also speaks
  /// with the pump there: the attachment counts once both the grant and the pump's
  /// first message are in.
  void attach() {
    target_.attach_wait_ms = srv_.opts.relay_attach_wait_ms;
    target_.pump = remote_;
    key_ = stdio_key();
    auto timeout = std::chrono::milliseconds{target_.attach_wait_ms} + relay_verdict_timeout;
    auto holder = [](stdio_relay_actor::pointer self, std::weak_ptr<relay_session> weak,
                     std::shared_ptr<io_gate> gate, runtime_actor dir, relay_request r,
                     caf::duration timeout, bool remote, uint64_t key) -> stdio_relay_actor::behavior_type {
      struct far_end {
        stdio_pump_actor pump;
        caf::node_id granted_by; // the node of the session that granted the process
        bool granted = false;
        bool told = false;
      };
      auto far = std::make_shared<far_end>();
      auto deliver = [weak, gate](box_error err) {
        gate->post(weak, [err = std::move(err)](relay_session& s) mutable { s.on_attach(std::move(err)); });
      };
      auto ended = [weak, gate](stdio_end why) {
        gate->post(weak, [why](relay_session& s) { s.on_remote_end(why); });
      };
      // Attached once the grant and the pump's first message are both in, the pump from
      // the granting session's node.
      auto tell = [far, deliver, ended] {
        if (!far->granted || !far->pump || far->told)
          return;
        far->told = true;
        if (far->pump.node() == far->granted_by)
          deliver({});
        else
          ended(stdio_end::unavailable);
      };
      self->request(dir, timeout, attach_atom_v, std::move(r))
        .then(
          [self, far, deliver, tell, remote](bool) {
            if (!remote) {
              deliver({});
              return;
            }
            far->granted = true;
            if (auto& from = self->current_sender())
              far->granted_by = from->node();
            // A pump that never comes (its node dropped the link): the relay ends.
            self->delayed_send(self, relay_verdict_timeout, expire_atom_v);
            tell();
          },
          [deliver](caf::error& err) { deliver(from_caf_error(err)); });
      // The pump's node dropped the link, or the pump ended without a word. (Beside the
      // process nothing else arrives: the actor waits for the exit that detach sends.)
      if (remote)
        self->set_down_handler([ended](const caf::down_msg&) { ended(stdio_end::unavailable); });
      auto from_pump = [self, far] { return far->pump && self->current_sender() == far->pump.address(); };
      return {
        [](stop_atom) {},
        [self, far, ended](expire_atom) {
          if (!far->told && self->current_sender() == self->ctrl()) {
            far->told = true;
            ended(stdio_end::unavailable);
          }
        },
        [self, far, tell, remote](pump_atom) {
          if (!remote || far->pump || !self->current_sender())
            return;
          far->pump = caf::actor_cast<stdio_pump_actor>(self->current_sender());
          self->monitor(far->pump);
          tell();
        },
        [weak, gate, from_pump](stdout_atom, std::string& chunk) {
          if (from_pump())
            gate->post(weak, [chunk = std::move(chunk)](relay_session& s) mutable {
              s.on_remote_stdout(std::move(chunk));
            });
        },
        [weak, gate, from_pump](written_atom, uint64_t n, bool ok) {
          if (from_pump())
            gate->post(weak, [n, ok](relay_session& s) { s.on_stdin_written(ok, n); });
        },
        [self, far, ended, from_pump](stdend_atom, int32_t why) {
          if (!from_pump())
            return;
          self->demonitor(far->pump.address());
          ended(static_cast<stdio_end>(why));
        },
        // From the relay (anonymous, with its key): passed on to the pump.
        [self, far, key](credit_atom atom, uint64_t k, uint64_t n) {
          if (k == key && far->pump)
            self->send(far->pump, atom, n);
        },
        [self, far, key](stdin_atom atom, uint64_t k, std::string& line) {
          if (k == key && far->pump)
            self->send(far->pump, atom, std::move(line));
        },
      };
    };
    holder_ = srv_.sys.spawn(holder, std::weak_ptr<relay_session>{self()}, srv_.gate,
                             srv_.directory, target_, caf::duration{timeout}, remote_, key_);
  }

  void on_attach(box_error err) {
    if (close_ || finished_)
      return;
    if (!err) {
      attached_ = true;
      if (remote_) {
        start_remote();
        return;
      }
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

  // stdout -> WS, from another node's pump

  void start_remote() {
    spdlog::info("net: {}: relay attached to {} through a pump beside the process", peer_, label_);
    give_credit();
    pump_stdin();
  }

  void on_remote_stdout(std::string chunk) {
    if (close_ || finished_ || !attached_)
      return;
    credit_out_ -= std::min(credit_out_, chunk.size());
    if (!chunk.empty())
      enqueue(json::sanitize_utf8(chunk));
    give_credit();
  }

  /// Keeps what the pump may send plus what waits here within relay_queue_bytes:
  /// credit is given as the write queue drains, a chunk's worth at a time.
  void give_credit() {
    if (!remote_ || !holder_ || !attached_ || close_ || finished_)
      return;
    auto used = queued_bytes_ + credit_out_;
    if (used >= relay_queue_bytes || relay_queue_bytes - used < std::min(relay_chunk_bytes, relay_queue_bytes))
      return;
    auto more = relay_queue_bytes - used;
    credit_out_ += more;
    caf::anon_send(holder_, credit_atom_v, key_, static_cast<uint64_t>(more));
  }

  void on_remote_end(stdio_end why) {
    if (close_ || finished_)
      return;
    if (why == stdio_end::unavailable)
      spdlog::warn("net: {}: relay for {}: the owner's end of the stdio is gone", peer_, label_);
    request_close(1000, why == stdio_end::stale         ? relay_stale_reason
                        : why == stdio_end::unavailable ? relay_stdio_reason
                                                        : relay_exited_reason);
  }

  // stdout -> WS, here

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
    if (entry_ && entry_->stale.load()) {
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
    if (!attached_ || (!remote_ && !stdout_) || close_ || finished_ || stdin_busy_ || stdin_.empty())
      return;
    stdin_busy_ = true;
    auto data = std::move(stdin_.front());
    stdin_.pop_front();
    auto n = data.size();
    if (remote_) { // the pump acknowledges it with written_atom
      stdin_sent_ = n;
      caf::anon_send(holder_, stdin_atom_v, key_, std::move(data));
      return;
    }
    srv_.pool->submit([weak = std::weak_ptr<relay_session>{self()}, gate = srv_.gate,
                       process = entry_->process, data = std::move(data), n] {
      bool ok = process->write_stdin(data);
      gate->post(weak, [ok, n](relay_session& s) { s.on_stdin_written(ok, n); });
    });
  }

  void on_stdin_written(bool ok, size_t n) {
    if (remote_) // the size this relay sent, not the one the pump reports
      n = std::exchange(stdin_sent_, 0);
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

  void after_write() {
    if (remote_)
      give_credit();
    else
      read_stdout();
  }
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

  std::string label_;  // "session <id> process <pid>" for the log
  /// Who is asked for the attachment (physical session, process) and how long to wait.
  relay_request target_;
  /// Null when the process is on another cluster node (remote_).
  std::shared_ptr<process_registry::entry> entry_;
  bool remote_ = false;
  /// Remote: stdout bytes the pump may still send (credit given, not yet used).
  size_t credit_out_ = 0;
  /// Remote: tags this relay's anonymous messages to its holder.
  uint64_t key_ = 0;
  /// Remote: the size of the stdin line the pump has not acknowledged yet.
  size_t stdin_sent_ = 0;
  /// The actor that stands for this relay towards the session; null once detached.
  stdio_relay_actor holder_;
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
