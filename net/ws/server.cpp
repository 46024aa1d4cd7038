// The listener: accepts connections within the descriptor and handshake limits and
// hands each to an HTTP session (net/ws/http_session.cpp); starts and stops the I/O
// threads. The socket helpers every session uses are defined here.
#include "net/ws/server_core.hpp"

#include "backends/linux/egress.hpp"
#include "messages/time.hpp"

namespace boxrt::net {

/// malloc_trim holds the allocator's locks while it runs: at most once a second.
bool trim_due() {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
  auto prev = last_ms.load();
  return now - prev >= 1000 && last_ms.compare_exchange_strong(prev, now);
}

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

void prepare_accept(websocket::stream<beast::tcp_stream>& ws, size_t max_message_bytes,
                    const accept_options& o) {
  beast::get_lowest_layer(ws).expires_never();
  auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
  timeouts.handshake_timeout = close_timeout;
  if (o.idle.count() > 0) {
    timeouts.idle_timeout = o.idle;
    timeouts.keep_alive_pings = true;
  }
  ws.set_option(timeouts);
  websocket::permessage_deflate pmd;
  pmd.server_enable = o.deflate;
  ws.set_option(pmd);
  ws.set_option(websocket::stream_base::decorator([mcp = o.mcp](websocket::response_type& res) {
    res.set(http::field::server, "boxrt");
    if (mcp)
      res.set(http::field::sec_websocket_protocol, "mcp");
  }));
  ws.read_message_max(max_message_bytes);
}

namespace {

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
    auto session = make_http_session(*this, std::move(socket));
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

server::server(caf::actor_system& sys, runtime_actor directory,
               std::shared_ptr<worker_pool> pool, server_options opts,
               std::shared_ptr<process_registry> processes,
               std::shared_ptr<const settings_snapshot> settings,
               std::shared_ptr<trusted_instance> trusted)
  : impl_(std::make_unique<impl>(sys, std::move(directory), std::move(pool), std::move(opts),
                                 std::move(processes), std::move(trusted))) {
  impl_->shared->settings = std::move(settings);
}

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
  if (!d.opts.audit.path.empty()) {
    std::string why;
    d.audit = audit_log::open(d.opts.audit, why);
    if (!d.audit)
      throw std::runtime_error(why);
    spdlog::info("net: audit log {} ({} files of at most {} bytes{})", d.opts.audit.path, d.opts.audit.files,
                 d.opts.audit.max_bytes, d.opts.audit.commands ? ", with command texts" : "");
    // Each connection an egress policy refused (docs/network.md), as its own line.
    egress::service::global().set_observer([log = std::weak_ptr<audit_log>{d.audit}](const egress::denial& x) {
      if (auto a = log.lock())
        a->append(egress_audit_line(x.scope, x.name, x.address, x.port, x.reason, wall_now_us()), {});
    });
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

void server::set_cluster(std::shared_ptr<const cluster_endpoints> cluster) {
  impl_->cluster = std::move(cluster);
}

size_t server::connections() const {
  return impl_->ws_count.load();
}

server_stats server::stats() const {
  server_stats out;
  out.connections = impl_->ws_count.load();
  out.unwritten_replies = static_cast<uint64_t>(std::max<int64_t>(0, impl_->unwritten_replies->load()));
  out.outbound_pauses = impl_->outbound_pauses.load();
  out.inbound_pauses = impl_->inbound_pauses.load();
  out.pending_handshakes = impl_->pending_handshakes.load();
  out.refused_accepts = impl_->refused_accepts.load();
  out.outbound_stall_closes = impl_->outbound_stall_closes.load();
  return out;
}

} // namespace boxrt::net
