// boxbench: WebSocket Action-RPC load generator. Drives any server that speaks the
// protocol (boxd, or LangBot's Python runtime) with N connections, each keeping one
// request in flight, and prints round trips per second and p50/p99 latency.
//
// usage: boxbench [--url ws://HOST:PORT] [--token T] [--instance ID] [--workspace W]
//                 [--action ping|exec] [--connections N] [--seconds S] [--cmd CMD]
#include <utility>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "messages/json.hpp"
#include "net/client.hpp"

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  std::string url = "ws://127.0.0.1:5410";
  std::string token;
  std::string instance = "boxbench";
  std::string workspace = "bench";
  std::string action = "ping";
  std::string cmd = "true";
  size_t connections = 1;
  double seconds = 3.0;
};

struct stats {
  std::vector<double> latencies_us;
  size_t errors = 0;
};

class bench_conn : public std::enable_shared_from_this<bench_conn> {
 public:
  bench_conn(asio::io_context& io, const options& opts, size_t index, stats& st,
             clock_type::time_point stop_at)
    : ws_(io), opts_(opts), index_(index), stats_(st), stop_at_(stop_at) {
  }

  void start(const tcp::resolver::results_type& endpoints, const std::string& host,
             const std::string& path) {
    beast::error_code ec;
    asio::connect(ws_.next_layer(), endpoints, ec);
    if (ec)
      throw std::runtime_error("connect: " + ec.message());
    ws_.set_option(websocket::stream_base::decorator([this](websocket::request_type& req) {
      if (!opts_.token.empty())
        req.set("X-LangBot-Box-Control-Token", opts_.token);
      req.set("X-LangBot-Instance-Id", opts_.instance);
    }));
    ws_.handshake(host, path, ec);
    if (ec)
      throw std::runtime_error("handshake: " + ec.message());
    ws_.text(true);
    std::string ctx = "{\"instance_uuid\":" + boxrt::json::quote(opts_.instance)
                      + ",\"workspace_uuid\":" + boxrt::json::quote(opts_.workspace) + ",\"placement_generation\":1}";
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
      if (text.find("\"code\":0") == std::string::npos)
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
  int64_t seq_ = 0;
  clock_type::time_point sent_at_;
};

} // namespace

int main(int argc, char** argv) {
  options opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "boxbench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--url")
      opts.url = next();
    else if (a == "--token")
      opts.token = next();
    else if (a == "--instance")
      opts.instance = next();
    else if (a == "--workspace")
      opts.workspace = next();
    else if (a == "--action")
      opts.action = next();
    else if (a == "--cmd")
      opts.cmd = next();
    else if (a == "--connections")
      opts.connections = std::stoul(next());
    else if (a == "--seconds")
      opts.seconds = std::stod(next());
    else {
      std::fprintf(stderr, "boxbench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::string host, port, path;
  if (!boxrt::net::parse_ws_url(opts.url, host, port, path)) {
    std::fprintf(stderr, "boxbench: invalid URL %s\n", opts.url.c_str());
    return 2;
  }
  asio::io_context io;
  tcp::resolver resolver{io};
  auto endpoints = resolver.resolve(host, port);
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
  auto t0 = clock_type::now();
  // Bounded: a server that stops answering cannot hang the benchmark.
  io.run_for(std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::duration<double>(opts.seconds + 5.0)));
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto& lat = st.latencies_us;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) { return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, size_t(p * lat.size()))]; };
  std::printf("%-6s %4zu conn: %9.0f round trips/s  p50 %7.1f us  p99 %8.1f us  (%zu samples, %zu errors)\n",
              opts.action.c_str(), opts.connections, lat.size() / secs, pct(0.50), pct(0.99), lat.size(),
              st.errors);
  return 0;
}
