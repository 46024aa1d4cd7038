// boxbench: WebSocket Action-RPC load generator. Drives any server that speaks the
// protocol (boxd, or LangBot's Python runtime) with N connections, each keeping one
// request in flight, and prints round trips per second and p50/p99 latency.
//
// Every reply is parsed as JSON; a round trip counts as an error unless its `code` is 0.
// Run `boxbench --help` for the options.
#include <utility>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <simdjson.h>

#include "app/cli_flags.hpp"
#include "messages/base/json.hpp"
#include "net/ws/client.hpp"

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

const char* usage =
  "usage: boxbench [--url ws://HOST:PORT] [--token T] [--instance ID] [--workspace W]\n"
  "                [--action ping|exec|shared] [--connections N] [--workspace-per-connection]\n"
  "                [--seconds S] [--cmd CMD] [--load-cmd CMD] [--load-inflight N] [--json]\n"
  "\n"
  "  --action ping     __ping round trips (no workspace)\n"
  "  --action exec     box_exec of --cmd (default true), session bench-<connection>\n"
  "  --action shared   one compressed connection shared by two workspaces, as LangBot\n"
  "                    shares it: B execs --cmd one at a time while A keeps\n"
  "                    --load-inflight execs of --load-cmd (large replies) in flight;\n"
  "                    prints B's latency alone, then under A's load\n"
  "  --connections N   N connections, each with one request in flight (default 1)\n"
  "  --workspace-per-connection\n"
  "                    connection i uses workspace <W>-<i> (default: all share <W>)\n"
  "  --seconds S       measured time after a 0.5 s warm-up (default 3)\n"
  "  --json            one JSON line of results instead of the text line\n";

struct options {
  std::string url = "ws://127.0.0.1:5410";
  std::string token;
  std::string instance = "boxbench";
  std::string workspace = "bench";
  std::string action = "ping";
  std::string cmd = "true";
  std::string load_cmd = "bytes 12582912";
  size_t load_inflight = 3;
  size_t connections = 1;
  bool workspace_per_connection = false;
  bool json = false;
  double seconds = 3.0;
};

/// The reply's seq_id and whether its code is 0, read as JSON (never by text search:
/// servers may write `"code": 0` with a space). seq_id -1 when unreadable.
std::pair<int64_t, bool> read_reply(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element root;
  if (parser.parse(text).get(root) != simdjson::SUCCESS)
    return {-1, false};
  int64_t seq = -1, code = -1;
  if (root["seq_id"].get_int64().get(seq) != simdjson::SUCCESS)
    seq = -1;
  if (root["code"].get_int64().get(code) != simdjson::SUCCESS)
    code = -1;
  return {seq, code == 0};
}

struct stats {
  std::vector<double> latencies_us;
  size_t errors = 0;
};

/// Connects and upgrades with the token and instance headers; throws naming the failure.
void open_ws(websocket::stream<tcp::socket>& ws, const tcp::resolver::results_type& endpoints,
             const std::string& host, const std::string& path, const options& opts,
             bool deflate) {
  beast::error_code ec;
  asio::connect(ws.next_layer(), endpoints, ec);
  if (ec)
    throw std::runtime_error("connect: " + ec.message());
  websocket::permessage_deflate pmd;
  pmd.client_enable = deflate;
  ws.set_option(pmd);
  ws.set_option(websocket::stream_base::decorator([&opts](websocket::request_type& req) {
    if (!opts.token.empty())
      req.set("X-LangBot-Box-Control-Token", opts.token);
    req.set("X-LangBot-Instance-Id", opts.instance);
  }));
  ws.handshake(host, path, ec);
  if (ec)
    throw std::runtime_error("handshake: " + ec.message());
  ws.text(true);
}

class bench_conn : public std::enable_shared_from_this<bench_conn> {
 public:
  bench_conn(asio::io_context& io, const options& opts, size_t index, stats& st,
             clock_type::time_point stop_at)
    : ws_(io), opts_(opts), index_(index), stats_(st), stop_at_(stop_at) {
  }

  void start(const tcp::resolver::results_type& endpoints, const std::string& host,
             const std::string& path) {
    open_ws(ws_, endpoints, host, path, opts_, false);
    auto workspace = opts_.workspace_per_connection ? opts_.workspace + "-" + std::to_string(index_)
                                                    : opts_.workspace;
    std::string ctx = "{\"instance_uuid\":" + boxrt::json::quote(opts_.instance)
                      + ",\"workspace_uuid\":" + boxrt::json::quote(workspace) + ",\"placement_generation\":1}";
    if (opts_.action == "exec")
      body_ = ",\"action\":\"box_exec\",\"data\":{\"session_id\":\"bench-" + std::to_string(index_)
              + "\",\"cmd\":" + boxrt::json::quote(opts_.cmd) + "},\"context\":" + ctx + "}";
    else
      body_ = ",\"action\":\"__ping\",\"data\":{}}";
  }

  void run() { send(); }

 private:
  void send() {
    if (clock_type::now() >= stop_at_)
      return;
    out_ = "{\"seq_id\":" + std::to_string(++seq_) + body_;
    sent_at_ = clock_type::now();
    ws_.async_write(asio::buffer(out_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        ++self->stats_.errors;
        return;
      }
      self->read();
    });
  }

  void read() {
    buf_.clear();
    ws_.async_read(buf_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        ++self->stats_.errors;
        return;
      }
      auto text = beast::buffers_to_string(self->buf_.data());
      if (!read_reply(self->parser_, text).second)
        ++self->stats_.errors;
      self->stats_.latencies_us.push_back(
        std::chrono::duration<double, std::micro>(clock_type::now() - self->sent_at_).count());
      self->send();
    });
  }

  websocket::stream<tcp::socket> ws_;
  const options& opts_;
  size_t index_;
  stats& stats_;
  clock_type::time_point stop_at_;
  std::string body_;
  std::string out_;
  beast::flat_buffer buf_;
  simdjson::dom::parser parser_;
  int64_t seq_ = 0;
  clock_type::time_point sent_at_;
};

/// One compressed connection shared by workspace A (large replies, kept in flight) and
/// workspace B (one small exec at a time, timed).
class shared_conn : public std::enable_shared_from_this<shared_conn> {
 public:
  shared_conn(asio::io_context& io, const options& opts) : ws_(io), opts_(opts) {}

  void start(const tcp::resolver::results_type& endpoints, const std::string& host,
             const std::string& path) {
    // Python's websockets offers permessage-deflate, as LangBot's client does.
    open_ws(ws_, endpoints, host, path, opts_, !std::getenv("BOXBENCH_NO_DEFLATE"));
    ws_.read_message_max(size_t{64} << 20);
    read();
  }

  /// Runs B for `seconds`, with A's load or without; returns B's latencies.
  std::vector<double> measure(asio::io_context& io, double seconds, bool load) {
    b_lat_.clear();
    load_ = load;
    stop_at_ = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                     std::chrono::duration<double>(seconds));
    if (load)
      for (size_t i = a_inflight_; i < opts_.load_inflight; ++i)
        send_a();
    send_b();
    io.restart();
    while (clock_type::now() < stop_at_ + std::chrono::seconds{5}
           && (b_waiting_ || clock_type::now() < stop_at_))
      io.run_for(std::chrono::milliseconds{50});
    load_ = false;
    // Let A's replies drain before the next phase.
    while (a_inflight_ > 0 && clock_type::now() < stop_at_ + std::chrono::seconds{30})
      io.run_for(std::chrono::milliseconds{50});
    return b_lat_;
  }

  size_t errors() const { return errors_; }
  void reset_errors() { errors_ = 0; }

 private:
  std::string request(int64_t seq, const std::string& ws, const std::string& session,
                      const std::string& cmd) {
    return "{\"seq_id\":" + std::to_string(seq) + ",\"action\":\"box_exec\",\"data\":{"
           + "\"session_id\":" + boxrt::json::quote(session) + ",\"cmd\":"
           + boxrt::json::quote(cmd) + "},\"context\":{\"instance_uuid\":"
           + boxrt::json::quote(opts_.instance) + ",\"workspace_uuid\":"
           + boxrt::json::quote(ws) + ",\"placement_generation\":1}}";
  }

  void send_a() {
    ++a_inflight_;
    auto seq = next_seq_++;
    a_seqs_.push_back(seq);
    write(request(seq, opts_.workspace + "-a", "load", opts_.load_cmd));
  }

  void send_b() {
    if (clock_type::now() >= stop_at_)
      return;
    b_seq_ = next_seq_++;
    b_waiting_ = true;
    b_sent_ = clock_type::now();
    write(request(b_seq_, opts_.workspace + "-b", "probe", opts_.cmd));
  }

  void write(std::string text) {
    out_.push_back(std::move(text));
    if (out_.size() == 1)
      write_next();
  }

  void write_next() {
    ws_.async_write(asio::buffer(out_.front()),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec) {
                        ++self->errors_;
                        return;
                      }
                      self->out_.pop_front();
                      if (!self->out_.empty())
                        self->write_next();
                    });
  }

  void read() {
    buf_.clear();
    ws_.async_read(buf_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        ++self->errors_;
        return;
      }
      self->on_reply(beast::buffers_to_string(self->buf_.data()));
      self->read();
    });
  }

  void on_reply(const std::string& text) {
    auto [seq, ok] = read_reply(parser_, text);
    if (!ok)
      ++errors_;
    if (b_waiting_ && seq == b_seq_) {
      b_waiting_ = false;
      b_lat_.push_back(
        std::chrono::duration<double, std::micro>(clock_type::now() - b_sent_).count());
      send_b();
      return;
    }
    auto it = std::find(a_seqs_.begin(), a_seqs_.end(), seq);
    if (it == a_seqs_.end())
      return;
    a_seqs_.erase(it);
    --a_inflight_;
    if (load_ && clock_type::now() < stop_at_)
      send_a();
  }

  websocket::stream<tcp::socket> ws_;
  const options& opts_;
  std::deque<std::string> out_;
  beast::flat_buffer buf_;
  int64_t next_seq_ = 1;
  std::vector<int64_t> a_seqs_;
  size_t a_inflight_ = 0;
  bool load_ = false;
  int64_t b_seq_ = 0;
  bool b_waiting_ = false;
  clock_type::time_point b_sent_;
  clock_type::time_point stop_at_;
  std::vector<double> b_lat_;
  simdjson::dom::parser parser_;
  size_t errors_ = 0;
};

double percentile(std::vector<double>& lat, double p) {
  std::sort(lat.begin(), lat.end());
  return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, size_t(p * lat.size()))];
}

int run_shared(const options& opts, const tcp::resolver::results_type& endpoints,
               const std::string& host, const std::string& path, asio::io_context& io) {
  auto conn = std::make_shared<shared_conn>(io, opts);
  try {
    conn->start(endpoints, host, path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxbench: %s\n", e.what());
    return 1;
  }
  conn->measure(io, 0.5, false);  // warm-up: sessions start
  conn->reset_errors();
  auto alone = conn->measure(io, opts.seconds, false);
  auto loaded = conn->measure(io, opts.seconds, true);
  std::printf("shared 1 conn: B alone        p50 %8.1f us  p99 %9.1f us  (%zu samples)\n",
              percentile(alone, 0.50), percentile(alone, 0.99), alone.size());
  std::printf("shared 1 conn: B beside A's %zu x \"%s\"  p50 %8.1f us  p99 %9.1f us  "
              "(%zu samples, %zu errors)\n",
              opts.load_inflight, opts.load_cmd.c_str(), percentile(loaded, 0.50),
              percentile(loaded, 0.99), loaded.size(), conn->errors());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  std::vector<std::string> args{argv + 1, argv + argc};
  size_t at = 0;
  try {
    at = boxrt::cli::read_flags(args, 0,
                                {{"--url", &opts.url},
                                 {"--token", &opts.token},
                                 {"--instance", &opts.instance},
                                 {"--workspace", &opts.workspace},
                                 {"--action", &opts.action},
                                 {"--cmd", &opts.cmd},
                                 {"--load-cmd", &opts.load_cmd},
                                 {"--load-inflight", &opts.load_inflight},
                                 {"--connections", &opts.connections},
                                 {"--workspace-per-connection", &opts.workspace_per_connection},
                                 {"--json", &opts.json},
                                 {"--seconds", &opts.seconds}});
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "boxbench: %s\n", e.what());
    return 2;
  }
  if (at < args.size()) {
    if (args[at] == "-h" || args[at] == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    std::fprintf(stderr, "boxbench: unknown argument %s\n%s", args[at].c_str(), usage);
    return 2;
  }
  std::string host, port, path;
  if (!boxrt::net::parse_ws_url(opts.url, host, port, path)) {
    std::fprintf(stderr, "boxbench: invalid URL %s\n", opts.url.c_str());
    return 2;
  }
  asio::io_context io;
  tcp::resolver resolver{io};
  auto endpoints = resolver.resolve(host, port);
  if (opts.action == "shared")
    return run_shared(opts, endpoints, host + ":" + port, path, io);
  stats st;
  st.latencies_us.reserve(1 << 20);
  auto stop_at = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                       std::chrono::duration<double>(opts.seconds + 0.5));
  std::vector<std::shared_ptr<bench_conn>> conns;
  try {
    for (size_t i = 0; i < opts.connections; ++i) {
      conns.push_back(std::make_shared<bench_conn>(io, opts, i, st, stop_at));
      conns.back()->start(endpoints, host + ":" + port, path);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxbench: %s\n", e.what());
    return 1;
  }
  // Warm up for half a second (sessions start, caches fill), then measure.
  for (auto& c : conns)
    c->run();
  io.run_for(std::chrono::milliseconds{500});
  st.latencies_us.clear();
  st.errors = 0;
  auto t0 = clock_type::now();
  // Bounded: a server that stops answering cannot hang the benchmark.
  io.run_for(std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::duration<double>(opts.seconds + 5.0)));
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto& lat = st.latencies_us;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) { return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, size_t(p * lat.size()))]; };
  const char* workspaces = opts.action == "ping"             ? "none"
                           : opts.workspace_per_connection ? "per-connection"
                                                           : "shared";
  if (opts.json) {
    boxrt::json::writer w;
    w.begin_object();
    w.key("action").value(opts.action);
    w.key("connections").value(static_cast<int64_t>(opts.connections));
    w.key("workspaces").value(workspaces);
    w.key("seconds").value(secs);
    w.key("round_trips_per_s").value(lat.size() / secs);
    w.key("p50_us").value(pct(0.50));
    w.key("p99_us").value(pct(0.99));
    w.key("samples").value(static_cast<int64_t>(lat.size()));
    w.key("errors").value(static_cast<int64_t>(st.errors));
    w.end_object();
    std::printf("%s\n", w.take().c_str());
    return 0;
  }
  std::printf("%-6s %4zu conn (%s workspace): %9.0f round trips/s  p50 %7.1f us  p99 %8.1f us  (%zu samples, %zu errors)\n",
              opts.action.c_str(), opts.connections, workspaces, lat.size() / secs, pct(0.50), pct(0.99), lat.size(),
              st.errors);
  return 0;
}
