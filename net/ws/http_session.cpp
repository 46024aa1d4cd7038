// The HTTP side of a connection until it upgrades: /healthz and /readyz, and both
// WebSocket handshakes (RPC and relay) with their checks.
#include "net/rpc/render.hpp"
#include "messages/base/metrics.hpp"
#include "messages/base/pytext.hpp"
#include "net/ws/server_core.hpp"

namespace boxrt::net {

namespace {

class http_session final : public session_base {
 public:
  http_session(server_core& srv, tcp::socket&& socket)
    : srv_(srv), peer_(peer_of(socket)), stream_(std::move(socket)),
      executor_(stream_.get_executor()), timer_(stream_.get_executor()) {
    srv_.pending_handshakes += 1;
  }

  /// Closes the connection unless it has upgraded meanwhile (on its own strand: the
  /// upgrade moves the stream away there).
  void evict() override {
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

  /// Where answers from actors are posted (io_gate::post).
  auto io_executor() { return stream_.get_executor(); }

  void run() override {
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
    relay_request target;
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
    } else if (path == "/metrics") {
      if (answer_unless_get(req))
        handle_metrics(req);
    } else if (path == "/cluster" || path == "/cluster/owner") {
      if (answer_unless_get(req))
        handle_cluster(req, path == "/cluster/owner");
    } else if (path == "/healthz" || path == "/readyz") {
      if (!answer_unless_get(req))
        return;
      ask_health(path == "/healthz" ? probe::live : probe::ready, req.version(),
                 req.keep_alive());
    } else if (auto target = relay_target(path)) {
      if (!answer_unless_get(req))
        return;
      handle_relay(std::move(req), std::move(target->first), std::move(target->second));
    } else {
      write(make_response(http::status::not_found, req.version(), req.keep_alive(),
                          "text/plain", "Not Found"));
    }
  }

  /// With a control token configured, an operator endpoint (/metrics, /cluster) must
  /// carry it (Authorization: Bearer, or the control-token header); false after
  /// answering 401.
  bool control_authorized(const http::request<http::string_body>& req) {
    const auto& token = srv_.opts.control_token;
    if (token.empty())
      return true;
    bool ok = false;
    if (auto i = req.find(http::field::authorization); i != req.end()) {
      auto v = sv(i->value());
      constexpr std::string_view bearer = "Bearer ";
      ok = v.size() > bearer.size() && v.substr(0, bearer.size()) == bearer
           && constant_time_equal(v.substr(bearer.size()), token);
    }
    if (auto i = req.find(token_header); !ok && i != req.end())
      ok = constant_time_equal(sv(i->value()), token);
    if (!ok) {
      auto res = make_response(http::status::unauthorized, req.version(), req.keep_alive(),
                               "text/plain", "Unauthorized");
      res.set(http::field::www_authenticate, "Bearer");
      write(std::move(res));
    }
    return ok;
  }

  /// GET /cluster (local state) and GET /cluster/owner?instance=I&workspace=W (asks
  /// etcd on the worker pool): docs/cluster.md "Observability".
  void handle_cluster(const http::request<http::string_body>& req, bool owner) {
    if (!control_authorized(req))
      return;
    auto json = [&](http::status status, std::string body) {
      write(make_response(status, req.version(), req.keep_alive(), "application/json", std::move(body)));
    };
    auto cluster = srv_.cluster;
    if (!cluster) {
      json(http::status::not_found, R"({"error": "this boxd is not a cluster node"})");
      return;
    }
    if (!owner) {
      json(http::status::ok, cluster->status());
      return;
    }
    auto target = sv(req.target());
    std::optional<std::string> instance, workspace;
    if (auto q = target.find('?'); q != std::string_view::npos) {
      auto query = target.substr(q + 1);
      while (!query.empty()) {
        auto amp = query.find('&');
        auto part = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        auto eq = part.find('=');
        if (eq == std::string_view::npos)
          continue;
        auto value = percent_decode(part.substr(eq + 1));
        if (part.substr(0, eq) == "instance")
          instance = value;
        else if (part.substr(0, eq) == "workspace")
          workspace = value;
      }
    }
    if (!instance || !workspace || instance->empty() || workspace->empty()) {
      json(http::status::bad_request, R"({"error": "both instance and workspace are required"})");
      return;
    }
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    off_io<result<std::string>>(
      [cluster, instance = *instance, workspace = *workspace] { return cluster->owner(instance, workspace); },
      owner_wait, box_error{ec::runtime_unavailable, "etcd did not answer in time"},
      [](http_session& s, result<std::string> answer) { s.on_cluster_owner(std::move(answer)); });
  }

  void on_cluster_owner(result<std::string> answer) {
    if (answer)
      write(make_response(http::status::ok, version_, keep_alive_, "application/json", std::move(*answer)));
    else {
      json::writer w;
      w.begin_object().key("error").value(answer.error().message).end_object();
      write(make_response(http::status::service_unavailable, version_, keep_alive_, "application/json", w.take()));
    }
  }

  /// GET /metrics: the Prometheus exposition, behind the control token when one is set.
  void handle_metrics(const http::request<http::string_body>& req) {
    if (!control_authorized(req))
      return;
    metrics::scrape_values v;
    v.connections = static_cast<int64_t>(srv_.ws_count.load());
    v.pending_handshakes = static_cast<int64_t>(srv_.pending_handshakes.load());
    if (srv_.pool) {
      v.pool_threads = static_cast<int64_t>(srv_.pool->threads());
      v.pool_idle_threads = static_cast<int64_t>(srv_.pool->idle());
      v.pool_queue_depth = static_cast<int64_t>(srv_.pool->queued());
    }
    write(make_response(http::status::ok, req.version(), req.keep_alive(),
                        std::string{metrics::content_type}, metrics::render(v)));
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
    // The instance is checked here when the pin is held here (or there is no cluster);
    // a cluster's pin is read on the worker pool, never on this I/O thread.
    if (srv_.pins->settled()) {
      rpc_checked(std::move(req), std::move(instance), srv_.pins->check(instance) == verdict::admit);
      return;
    }
    auto held = std::make_shared<http::request<http::string_body>>(std::move(req));
    off_io<bool>([pins = srv_.pins, instance] { return pins->settle(instance) == verdict::admit; },
           pin_wait, false, [held, instance](http_session& s, bool admitted) mutable {
             s.rpc_checked(std::move(*held), std::move(instance), admitted);
           });
  }

  using verdict = trusted_instance::verdict;

  void refuse_rpc(unsigned version, std::string_view instance) {
    spdlog::warn("net: {}: RPC handshake refused: instance {} is not the pinned instance", peer_, instance);
    write(make_response(http::status::unauthorized, version, false, "text/plain", "Unauthorized"));
  }

  void rpc_checked(http::request<http::string_body> req, std::string instance, bool admitted) {
    if (!admitted) {
      refuse_rpc(req.version(), instance);
      return;
    }
    if (!reserve_upgrade(req, "RPC connection"))
      return;
    // Pinned only by a handshake that upgrades (first come, first served); a cluster's
    // pin is written on the worker pool.
    if (srv_.pins->settled()) {
      rpc_pinned(std::move(req), std::move(instance), srv_.pins->pin(instance));
      return;
    }
    auto held = std::make_shared<http::request<http::string_body>>(std::move(req));
    off_io<bool>([pins = srv_.pins, instance] { return pins->pin(instance); }, pin_wait, false,
           [held, instance](http_session& s, bool pinned) mutable {
             s.rpc_pinned(std::move(*held), std::move(instance), pinned);
           });
  }

  void rpc_pinned(http::request<http::string_body> req, std::string instance, bool pinned) {
    if (!pinned) {
      srv_.release_connection();
      refuse_rpc(req.version(), instance);
      return;
    }
    handed_off_ = true;
    start_rpc_socket(srv_, std::move(stream_), std::move(req), peer_, std::move(instance));
  }

  /// Waits for an answer off this I/O thread: the first of resume() and `wait` passing
  /// wins, and `late` runs in the second case. The timer is what keeps this session
  /// alive (inside the io_context) meanwhile.
  void suspend(std::chrono::steady_clock::duration wait, std::function<void(http_session&)> late) {
    waiting_ = true;
    timer_.expires_after(wait);
    timer_.async_wait([s = self(), late = std::move(late)](beast::error_code ec) {
      if (!ec)
        s->resume(late);
    });
  }

  /// Runs `step` on this strand if the session still waits (see suspend).
  void resume(const std::function<void(http_session&)>& step) {
    if (!waiting_)
      return;
    waiting_ = false;
    timer_.cancel();
    step(*this);
  }

  /// Runs `job` (it may wait for etcd) on the worker pool, then `next` with its value on
  /// this session's strand, or with `late` when it did not finish within `wait`.
  template <class T>
  void off_io(std::function<T()> job, std::chrono::steady_clock::duration wait, T late,
              std::function<void(http_session&, T)> next) {
    if (!srv_.pool) {
      next(*this, job());
      return;
    }
    suspend(wait, [next, late = std::move(late)](http_session& s) { next(s, late); });
    srv_.pool->submit([weak = std::weak_ptr<http_session>{self()}, gate = srv_.gate,
                       job = std::move(job), next = std::move(next)] {
      gate->post(weak, [value = job(), next](http_session& s) mutable {
        s.resume([&](http_session& at) { next(at, std::move(value)); });
      });
    });
  }

  /// Checks 1 to 3 of protocol.md §1.4 (the directory runs 4 to 9), all before the upgrade.
  void handle_relay(http::request<http::string_body> req, std::string session,
                    std::string process, bool pin_read = false) {
    // The pinned instance as held here; a cluster's pin not read yet is read first, on
    // the worker pool (once: nothing pinned anywhere is an answer too).
    if (!pin_read && !srv_.pins->settled()) {
      auto held = std::make_shared<http::request<http::string_body>>(std::move(req));
      off_io<bool>([pins = srv_.pins] { return pins->settle("") != verdict::unknown; }, pin_wait,
             false, [held, session, process](http_session& s, bool) mutable {
               s.handle_relay(std::move(*held), std::move(session), std::move(process), true);
             });
      return;
    }
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
    relay_ = pending_relay{std::move(req), r, std::move(label)};
    suspend(relay_verdict_timeout + std::chrono::seconds{1}, [](http_session& s) {
      s.on_verdict(relay_verdict{503, make_box_error(ec::runtime_unavailable,
                                                     "Box runtime request timed out")});
    });
    auto asker = [](caf::event_based_actor* ask, std::weak_ptr<http_session> weak,
                    std::shared_ptr<io_gate> gate, runtime_actor dir, relay_request r) {
      auto deliver = [weak, gate](relay_verdict v) {
        gate->post(weak, [v = std::move(v)](http_session& s) mutable {
          s.resume([&](http_session& at) { at.on_verdict(std::move(v)); });
        });
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
    if (!relay_)
      return;
    auto pending = std::move(*relay_);
    relay_.reset();
    auto& req = pending.req;
    std::shared_ptr<process_registry::entry> entry;
    if (v.status == 0) {
      // The process may have gone since the directory looked.
      auto& t = pending.target;
      entry = srv_.processes ? srv_.processes->find(t.session_id, t.process_id) : nullptr;
      // A cluster node relays a process of another node through that node's pump.
      bool elsewhere = !entry && srv_.cluster;
      if (!elsewhere && (!entry || !entry->process))
        v = relay_verdict{400, make_box_error(ec::process_not_found,
                                              fmt::format("session {} has no managed process "
                                                          "with process_id={}",
                                                          t.session_id, t.process_id))};
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
    if (!reserve_upgrade(req, "relay for " + pending.label))
      return;
    handed_off_ = true;
    start_relay_socket(srv_, std::move(stream_), std::move(req), peer_, std::move(pending.label),
                       std::move(pending.target), std::move(entry));
  }

  /// Probes and relays take GET only: anything else is answered 405 here. False: answered.
  bool answer_unless_get(const http::request<http::string_body>& req) {
    if (req.method() == http::verb::get)
      return true;
    auto res = make_response(http::status::method_not_allowed, req.version(), req.keep_alive(),
                             "text/plain", "Method Not Allowed");
    res.set(http::field::allow, "GET");
    write(std::move(res));
    return false;
  }

  /// The last checks of every upgrade: a WebSocket upgrade, a server not stopping, and a
  /// free connection slot, which is reserved (the socket releases it). False: answered.
  bool reserve_upgrade(const http::request<http::string_body>& req, const std::string& what) {
    if (!websocket::is_upgrade(req)) {
      write(make_response(http::status::bad_request, req.version(), false, "text/plain",
                          "Expected a WebSocket upgrade"));
      return false;
    }
    if (srv_.stopping) {
      write(make_response(http::status::service_unavailable, req.version(), false,
                          "text/plain", shutdown_close_reason));
      return false;
    }
    if (!srv_.reserve_connection()) {
      spdlog::warn("net: {}: {} refused: {} connections open (the cap)", peer_, what,
                   srv_.opts.max_connections);
      write(make_response(http::status::service_unavailable, req.version(), false,
                          "text/plain",
                          fmt::format("Box runtime connection limit reached (max {} connections)",
                                      srv_.opts.max_connections)));
      return false;
    }
    return true;
  }

  void ask_health(probe kind, unsigned version, bool keep_alive) {
    kind_ = kind;
    version_ = version;
    keep_alive_ = keep_alive;
    suspend(health_timeout + std::chrono::seconds{1}, [](http_session& s) { s.on_health(std::nullopt); });
    // The arguments travel as spawn arguments: CAF 0.17 dereferences an empty argument
    // tuple for a spawn without any (harmless, but UBSan reports it).
    auto asker = [](caf::event_based_actor* ask, std::weak_ptr<http_session> weak,
                    std::shared_ptr<io_gate> gate, runtime_actor dir) {
      auto deliver = [weak, gate](std::optional<health_info> info) {
        gate->post(weak, [info = std::move(info)](http_session& s) mutable {
          s.resume([&](http_session& at) { at.on_health(std::move(info)); });
        });
      };
      ask->request(dir, health_timeout, health_atom_v)
        .then([deliver](health_info& info) { deliver(std::move(info)); },
              [deliver](caf::error&) { deliver(std::nullopt); });
    };
    srv_.sys.spawn(asker, std::weak_ptr<http_session>{self()}, srv_.gate, srv_.directory);
  }

  void on_health(std::optional<health_info> info) {
    auto body = render_probe(kind_ == probe::live, info, srv_.ws_count.load(),
                             srv_.cluster ? srv_.cluster->node_id : std::string{});
    write(make_response(body.ok ? http::status::ok : http::status::service_unavailable, version_,
                        keep_alive_, "application/json", std::move(body.json)));
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
  /// Between suspend() and resume() (or the timeout).
  bool waiting_ = false;
  std::optional<pending_relay> relay_;
  probe kind_ = probe::live;
  unsigned version_ = 11;
  bool keep_alive_ = false;
};

} // namespace

std::shared_ptr<session_base> make_http_session(server_core& srv, tcp::socket&& socket) {
  return std::make_shared<http_session>(srv, std::move(socket));
}

} // namespace boxrt::net
