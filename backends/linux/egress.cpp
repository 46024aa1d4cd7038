#include "backends/linux/egress.hpp"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netinet/in.h>
#include <resolv.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <future>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <boost/asio.hpp>
#include <spdlog/spdlog.h>

#include "backends/linux/egress_parse.hpp"
#include "backends/linux/helper.hpp"
#include "messages/base/metrics.hpp"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

namespace boxrt::egress {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;

namespace {

/// The sandbox's own addresses on its user-mode stack (slirp4netns' defaults).
constexpr const char* sandbox_address = "10.0.2.100";

/// Addresses the filter never connects to, whatever a name resolves to: loopback, this
/// network, link-local, multicast and reserved, the host's own (`refused`).
std::vector<cidr> never_dialed(const refused_destinations& refused) {
  std::vector<cidr> out;
  for (const char* fixed : {"127.0.0.0/8", "0.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "::1/128",
                            "::/128", "fe80::/10", "ff00::/8", "::ffff:0:0/96"})
    out.push_back(*cidr::parse(fixed));
  for (const auto& list : {refused.v4, refused.v6})
    for (const auto& x : list)
      if (auto c = cidr::parse(x))
        out.push_back(*c);
  return out;
}

bool in_any(const std::vector<cidr>& ranges, const asio::ip::address& a) {
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    return std::any_of(ranges.begin(), ranges.end(), [&](const cidr& c) { return c.contains(4, b.data()); });
  }
  auto b = a.to_v6().to_bytes();
  return std::any_of(ranges.begin(), ranges.end(), [&](const cidr& c) { return c.contains(6, b.data()); });
}

std::vector<cidr> parse_all(const std::vector<std::string>& xs) {
  std::vector<cidr> out;
  for (const auto& x : xs)
    if (auto c = cidr::parse(x))
      out.push_back(*c);
  return out;
}

/// A policy as the filter reads it on every connection: its deny_cidrs parsed once,
/// when it is set.
struct compiled_policy {
  network_policy rules;
  std::vector<cidr> deny;

  explicit compiled_policy(network_policy p) : rules(std::move(p)), deny(parse_all(rules.deny_cidrs)) {}
};
using policy_ptr = std::shared_ptr<const compiled_policy>;

/// The nameservers of boxd's own /etc/resolv.conf.
std::vector<std::string> system_resolvers() {
  std::vector<std::string> out;
  std::ifstream in{"/etc/resolv.conf"};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words{line};
    std::string key, value;
    if (words >> key >> value && key == "nameserver")
      out.push_back(value);
  }
  return out;
}

/// A query for `name`'s A records (boxd's own lookups for the filter).
std::string a_query(const std::string& name, uint16_t id) {
  std::string q;
  q += static_cast<char>(id >> 8);
  q += static_cast<char>(id & 0xFF);
  q += std::string{"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 10};  // RD, one question
  size_t start = 0;
  while (start <= name.size()) {
    auto dot = name.find('.', start);
    auto label = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    q += static_cast<char>(label.size());
    q += label;
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  q += std::string{"\x00\x00\x01\x00\x01", 5};  // root, type A, class IN
  return q;
}

/// The A records of an answer (libresolv's parser).
std::vector<asio::ip::address> a_records(const std::string& reply) {
  std::vector<asio::ip::address> out;
  ns_msg msg;
  if (ns_initparse(reinterpret_cast<const unsigned char*>(reply.data()), static_cast<int>(reply.size()), &msg) != 0)
    return out;
  if (ns_msg_getflag(msg, ns_f_rcode) != ns_r_noerror)
    return out;
  for (int i = 0; i < ns_msg_count(msg, ns_s_an); ++i) {
    ns_rr rr;
    if (ns_parserr(&msg, ns_s_an, i, &rr) != 0)
      break;
    if (ns_rr_type(rr) == ns_t_a && ns_rr_class(rr) == ns_c_in && ns_rr_rdlen(rr) == 4) {
      asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), ns_rr_rdata(rr), 4);
      out.emplace_back(asio::ip::address_v4{b});
    }
  }
  return out;
}

uint16_t random_id() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return static_cast<uint16_t>(rng());
}

metrics::counter& connections(std::string_view decision, std::string_view reason) {
  return metrics::boxd().egress_connections.with({decision, reason});
}
metrics::counter& lookups(std::string_view decision, std::string_view reason) {
  return metrics::boxd().egress_lookups.with({decision, reason});
}

} // namespace

// -- the service's state -----------------------------------------------------------------

struct connection;

struct attachment::state : std::enable_shared_from_this<attachment::state> {
  std::string scope;
  unique_fd netns;
  refused_destinations refused;
  std::vector<cidr> never;
  std::string rules_path;
  std::mutex apply_mtx;  // one nft run at a time, with the newest policy
  // The io thread's own from here.
  std::unique_ptr<udp::socket> dns;
  std::unique_ptr<tcp::acceptor> filter;
  std::set<std::shared_ptr<connection>> conns;
  int64_t lookups_waiting = 0;
  bool closed = false;
  std::atomic<bool> detached{false};  // set first when the sandbox goes: no nft run any more
  // Audit lines of refusals: a burst of 100, then 20 a second; the rest only counted.
  double audit_tokens = 100;
  std::chrono::steady_clock::time_point audit_refilled = std::chrono::steady_clock::now();

  bool take_audit_token() {
    auto now = std::chrono::steady_clock::now();
    audit_tokens = std::min(100.0, audit_tokens + std::chrono::duration<double>(now - audit_refilled).count() * 20);
    audit_refilled = now;
    if (audit_tokens < 1)
      return false;
    audit_tokens -= 1;
    return true;
  }
  std::weak_ptr<service::impl> owner;
};

struct service::impl : std::enable_shared_from_this<service::impl> {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  std::thread thread;
  std::once_flag started;

  mutable std::mutex mtx;
  policy_ptr fallback;
  std::map<std::string, policy_ptr> own;
  std::multimap<std::string, std::weak_ptr<attachment::state>> attached;
  network_settings lim;
  std::vector<std::string> resolvers;
  std::function<void(const denial&)> observer;
  /// Filtered connections open across every sandbox (the egress thread's own).
  int64_t open_connections = 0;

  void start() {
    std::call_once(started, [this] {
      thread = std::thread{[this] {
        ::pthread_setname_np(::pthread_self(), "boxd-egress");
        // A handler that throws (out of memory) costs its connection, never boxd.
        while (true) {
          try {
            io.run();
            return;
          } catch (const std::exception& e) {
            spdlog::error("egress: {}", e.what());
          }
        }
      }};
      thread.detach();  // the process's own: it ends with boxd
    });
  }

  policy_ptr effective(const std::string& scope) const {
    std::lock_guard lock{mtx};
    auto i = own.find(scope);
    return i != own.end() ? i->second : fallback;
  }

  network_settings current_limits() const {
    std::lock_guard lock{mtx};
    return lim;
  }

  std::vector<std::string> upstreams() const {
    std::lock_guard lock{mtx};
    return resolvers;
  }

  void report(const denial& d) {
    std::function<void(const denial&)> fn;
    {
      std::lock_guard lock{mtx};
      fn = observer;
    }
    if (fn)
      fn(d);
  }

  box_error apply(attachment::state& s);
  box_error run_nft(attachment::state& s, const std::string& text);
  /// Ends the sandbox's relayed connections the policy now in force no longer allows;
  /// returns once done (on the egress thread).
  void sweep(std::shared_ptr<attachment::state> s);
  void upstream_lookup(std::string query, std::function<void(std::optional<std::string>)> done);
  void serve_dns(std::shared_ptr<attachment::state> s);
  void serve_filter(std::shared_ptr<attachment::state> s);
};

// -- rules -------------------------------------------------------------------------------

std::string rules_for(const refused_destinations& refused, const std::optional<network_policy>& policy) {
  // Replaces whatever the namespace held in one transaction.
  std::string out = "add table inet boxrt\ndelete table inet boxrt\n";
  if (!policy)
    return out + nft_rules(refused);
  auto set_of = [](const std::vector<std::string>& xs, int family) {
    std::string s;
    for (const auto& x : without_covered(xs))
      if (auto c = cidr::parse(x); c && c->family == family)
        s += (s.empty() ? "" : ", ") + c->text();
    return s;
  };
  const std::string own = std::string{"127.0.0.0/8, "} + sandbox_address;
  const std::string filter = std::to_string(filter_port), dns = std::to_string(resolver_port);
  const auto deny4 = set_of(policy->deny_cidrs, 4), allow4 = set_of(policy->allow_cidrs, 4);
  const auto deny6 = set_of(policy->deny_cidrs, 6), allow6 = set_of(policy->allow_cidrs, 6);
  out += "table inet boxrt {\n";
  // Before anything: the host's own addresses, link-local and the stack's gateway, as
  // without a policy (a rebinding answer pointing there is refused here too).
  out += "  chain refuse {\n    type filter hook output priority -200; policy accept;\n";
  out += "    ip daddr { " + own + " } accept\n    ip6 daddr ::1 accept\n";
  if (!refused.v4.empty())
    out += "    ip daddr { " + set_of(refused.v4, 4) + " } reject\n";
  if (!refused.v6.empty())
    out += "    ip6 daddr { " + set_of(refused.v6, 6) + " } reject\n";
  out += "  }\n";
  // Every DNS query to boxd's resolver; every TCP connection but to allow_cidrs to the
  // filter (deny_cidrs too: the filter refuses them and says so).
  out += "  chain steer {\n    type nat hook output priority -100; policy accept;\n";
  out += "    ip daddr { " + own + " } return\n";
  out += "    meta nfproto ipv4 udp dport 53 redirect to :" + dns + "\n";
  if (!deny4.empty())
    out += "    ip daddr { " + deny4 + " } meta l4proto tcp redirect to :" + filter + "\n";
  if (!allow4.empty())
    out += "    ip daddr { " + allow4 + " } return\n";
  out += "    meta nfproto ipv4 meta l4proto tcp redirect to :" + filter + "\n";
  out += "  }\n";
  out += "  chain steer_in {\n    type nat hook input priority 100; policy accept;\n  }\n";
  // What was not steered: the sandbox's own, allow_cidrs by TCP; nothing else.
  out += "  chain decide {\n    type filter hook output priority 0; policy accept;\n";
  out += "    ip daddr { " + own + " } accept\n    ip6 daddr ::1 accept\n    ct status dnat accept\n";
  if (!deny4.empty())
    out += "    ip daddr { " + deny4 + " } reject\n";
  if (!deny6.empty())
    out += "    ip6 daddr { " + deny6 + " } reject\n";
  if (!allow4.empty())
    out += "    ip daddr { " + allow4 + " } meta l4proto tcp accept\n";
  if (!allow6.empty())
    out += "    ip6 daddr { " + allow6 + " } meta l4proto tcp accept\n";
  out += "    meta l4proto tcp reject with tcp reset\n    reject\n  }\n}\n";
  return out;
}

/// Nothing but the sandbox's own addresses: what a sandbox gets when its policy's rules
/// could not be installed.
std::string lockdown_rules() {
  return std::string{"add table inet boxrt\ndelete table inet boxrt\ntable inet boxrt {\n"}
         + "  chain decide {\n    type filter hook output priority -200; policy accept;\n"
         + "    ip daddr { 127.0.0.0/8, " + sandbox_address + " } accept\n    ip6 daddr ::1 accept\n"
         + "    meta l4proto tcp reject with tcp reset\n    reject\n  }\n}\n";
}

box_error service::impl::apply(attachment::state& s) {
  std::lock_guard lock{s.apply_mtx};
  if (s.detached)
    return {};  // its sandbox is going: its namespace with it
  auto p = effective(s.scope);
  auto err = run_nft(s, rules_for(s.refused, p ? std::optional<network_policy>{p->rules} : std::nullopt));
  if (err && p) {
    // Fail closed: a policy that could not be installed leaves nothing open.
    if (auto e = run_nft(s, lockdown_rules()))
      spdlog::error("egress: {}: cannot close the sandbox's network either: {}", s.scope, e.message);
  }
  if (!err)
    sweep(s.shared_from_this());
  return err;
}

box_error service::impl::run_nft(attachment::state& s, const std::string& text) {
  {
    std::ofstream rules{s.rules_path, std::ios::trunc};
    rules << text;
    if (!rules)
      return make_box_error(ec::box_error, "cannot write the sandbox's network rules to " + s.rules_path);
  }
  constexpr int ns_fd = 5;
  auto nft = helper_process::start({"nsenter", "--net=/proc/self/fd/" + std::to_string(ns_fd), "nft", "-f", s.rules_path},
                                   {{s.netns.get(), ns_fd}});
  if (!nft)
    return nft.error();
  if (auto status = (*nft)->wait(5000); status != 0) {
    auto why = (*nft)->error_text();
    return make_box_error(ec::box_error,
                          "cannot install the sandbox's network rules" + (why.empty() ? std::string{} : ": " + why));
  }
  return {};
}

// -- the resolver --------------------------------------------------------------------------

void service::impl::upstream_lookup(std::string query, std::function<void(std::optional<std::string>)> done) {
  struct attempt : std::enable_shared_from_this<attempt> {
    impl* self;
    std::string query;
    std::vector<std::string> servers;
    size_t next = 0;
    udp::socket sock;
    asio::steady_timer timer;
    std::array<char, 4096> buf{};  // EDNS's usual size; a longer answer is SERVFAIL
    std::function<void(std::optional<std::string>)> done;
    int64_t timeout_ms;

    attempt(impl* s, asio::io_context& io) : self(s), sock(io), timer(io) {}

    void finish(std::optional<std::string> reply) {
      if (!done)
        return;
      auto fn = std::move(done);
      done = nullptr;
      boost::system::error_code ignored;
      timer.cancel();
      sock.close(ignored);
      fn(std::move(reply));
    }

    void try_next() {
      boost::system::error_code ec;
      sock.close(ec);
      while (next < servers.size()) {
        auto addr = asio::ip::make_address(servers[next++], ec);
        if (ec)
          continue;
        udp::endpoint to{addr, 53};
        sock.open(to.protocol(), ec);
        if (ec)
          continue;
        sock.connect(to, ec);
        if (ec) {
          sock.close(ec);
          continue;
        }
        auto me = shared_from_this();
        sock.async_send(asio::buffer(query), [me, gen = next](boost::system::error_code e, size_t) {
          if (e && e != asio::error::operation_aborted && me->done && me->next == gen)
            me->try_next();
        });
        receive();
        timer.expires_after(std::chrono::milliseconds{timeout_ms});
        timer.async_wait([me, gen = next](boost::system::error_code e) {
          if (!e && me->next == gen && me->done)
            me->try_next();
        });
        return;
      }
      finish(std::nullopt);
    }

    void receive() {
      auto me = shared_from_this();
      sock.async_receive(asio::buffer(buf), [me](boost::system::error_code e, size_t n) {
        if (e)
          return;  // closed, or refused: the timer moves on
        // The answer to this query: its id, and a reply.
        if (n >= 12 && n < me->buf.size() && buf_id(me->buf.data()) == buf_id(me->query.data())
            && (me->buf[2] & 0x80) != 0) {
          me->finish(std::string{me->buf.data(), n});
          return;
        }
        me->receive();
      });
    }

    static uint16_t buf_id(const char* p) {
      return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
    }
  };
  auto a = std::make_shared<attempt>(this, io);
  a->query = std::move(query);
  a->servers = upstreams();
  a->done = std::move(done);
  a->timeout_ms = current_limits().lookup_timeout_ms;
  a->try_next();
}

void service::impl::serve_dns(std::shared_ptr<attachment::state> s) {
  struct datagram {
    std::array<char, 4096> buf{};
    udp::endpoint from;
  };
  auto d = std::make_shared<datagram>();
  auto me = shared_from_this();
  s->dns->async_receive_from(asio::buffer(d->buf), d->from, [me, s, d](boost::system::error_code e, size_t n) {
    if (e || s->closed)
      return;
    me->serve_dns(s);  // the next one meanwhile
    std::string query{d->buf.data(), n};
    auto answer = [s, from = d->from](std::string reply) {
      if (s->closed)
        return;
      auto out = std::make_shared<std::string>(std::move(reply));
      s->dns->async_send_to(asio::buffer(*out), from, [out](boost::system::error_code, size_t) {});
    };
    auto q = parse_dns_query(query);
    if (!q) {
      lookups("deny", "format").inc();
      if (n >= 12)
        answer(dns_reply(query, 12, 1));
      return;
    }
    auto policy = me->effective(s->scope);
    auto name = normalize_dns_name(q->name);
    if (!policy) {
      // The rules send nothing here without a policy: a sandbox that asks anyway is
      // refused (the stack's own forwarder is its resolver then).
      lookups("deny", "no_policy").inc();
      answer(dns_reply(query, q->end, 5));
      return;
    }
    if (!name || !domain_allowed(policy->rules, *name)) {
      lookups("deny", "domain").inc();
      answer(dns_reply(query, q->end, 3));  // NXDOMAIN
      return;
    }
    if (s->lookups_waiting >= me->current_limits().max_lookups) {
      lookups("deny", "limit").inc();
      answer(dns_reply(query, q->end, 2));
      return;
    }
    ++s->lookups_waiting;
    me->upstream_lookup(query, [s, answer, query, end = q->end](std::optional<std::string> reply) {
      --s->lookups_waiting;
      if (!reply) {
        lookups("error", "upstream").inc();
        answer(dns_reply(query, end, 2));  // SERVFAIL
        return;
      }
      lookups("allow", "domain").inc();
      answer(std::move(*reply));
    });
  });
}

// -- the filter ----------------------------------------------------------------------------

struct connection : std::enable_shared_from_this<connection> {
  std::shared_ptr<service::impl> svc;
  std::shared_ptr<attachment::state> s;
  tcp::socket client;
  tcp::socket upstream;
  asio::steady_timer timer;
  std::string first;
  std::string name;
  asio::ip::address original;
  int port = 0;
  std::vector<asio::ip::address> candidates;
  size_t candidate = 0;
  // The relay's buffers, made when it starts: a connection still waiting for its first
  // bytes costs only what it sent.
  using relay_buffer = std::array<char, 32768>;
  std::unique_ptr<relay_buffer> up_buf, down_buf;
  int open_directions = 2;
  bool done = false;
  bool relaying = false;  // allowed, and connected to `name`

  connection(std::shared_ptr<service::impl> v, std::shared_ptr<attachment::state> st, tcp::socket c)
    : svc(std::move(v)), s(std::move(st)), client(std::move(c)), upstream(svc->io), timer(svc->io) {}

  void close() {
    if (done)
      return;
    done = true;
    boost::system::error_code ignored;
    timer.cancel();
    client.close(ignored);
    upstream.close(ignored);
    if (s->conns.erase(shared_from_this()) > 0)
      --svc->open_connections;
  }

  /// Refused: counted, reported, and ended at once (a 403 for HTTP, a reset for the rest).
  void deny(std::string_view reason, bool http = false) {
    connections("deny", reason).inc();
    if (s->take_audit_token())
      svc->report({s->scope, name, original.to_string(), port, std::string{reason}});
    else
      metrics::boxd().egress_audit_suppressed.inc();
    if (http) {
      auto body = "boxrt: " + name + " is not allowed by this sandbox's network policy\n";
      auto text = std::make_shared<std::string>("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                                "Content-Length: "
                                                + std::to_string(body.size()) + "\r\n\r\n" + body);
      auto me = shared_from_this();
      asio::async_write(client, asio::buffer(*text), [me, text](boost::system::error_code, size_t) {
        boost::system::error_code ignored;
        me->client.shutdown(tcp::socket::shutdown_both, ignored);
        me->close();
      });
      return;
    }
    boost::system::error_code ignored;
    client.set_option(asio::socket_base::linger{true, 0}, ignored);  // a reset, not a FIN
    close();
  }

  void start() {
    sockaddr_in dst{};
    socklen_t len = sizeof dst;
    if (::getsockopt(client.native_handle(), SOL_IP, SO_ORIGINAL_DST, &dst, &len) != 0) {
      deny("direct");
      return;
    }
    asio::ip::address_v4::bytes_type b;
    std::memcpy(b.data(), &dst.sin_addr, 4);
    original = asio::ip::address_v4{b};
    port = ntohs(dst.sin_port);
    auto policy = svc->effective(s->scope);
    if (!policy || (original.is_loopback() && port == filter_port)) {
      deny("direct");  // to the filter's own port, or with no policy in force
      return;
    }
    if (in_any(policy->deny, original)) {
      deny("deny_cidr");
      return;
    }
    if (!std::binary_search(policy->rules.allow_ports.begin(), policy->rules.allow_ports.end(), port)) {
      deny("port");
      return;
    }
    auto me = shared_from_this();
    timer.expires_after(std::chrono::milliseconds{svc->current_limits().header_timeout_ms});
    timer.async_wait([me](boost::system::error_code e) {
      if (!e && me->name.empty() && !me->done)
        me->deny("no_name");
    });
    read_first();
  }

  void read_first() {
    auto me = shared_from_this();
    auto room = std::make_shared<std::array<char, 4096>>();
    client.async_read_some(asio::buffer(*room), [me, room](boost::system::error_code e, size_t n) {
      if (me->done)
        return;
      if (e) {
        me->close();
        return;
      }
      auto before = me->first.size();
      me->first.append(room->data(), n);
      // An HTTP head is read again only once its end may have come (never the whole
      // buffer per byte received).
      if (before != 0 && static_cast<uint8_t>(me->first[0]) != 22 && me->first.size() < max_peek_bytes
          && me->first.find("\r\n\r\n", before >= 3 ? before - 3 : 0) == std::string::npos) {
        me->read_first();
        return;
      }
      auto seen = peek_name(me->first);
      if (seen.status == peek_status::need_more && me->first.size() < max_peek_bytes) {
        me->read_first();
        return;
      }
      me->timer.cancel();
      if (seen.status != peek_status::name) {
        me->deny("no_name", !seen.tls && seen.status == peek_status::no_name);
        return;
      }
      auto normal = normalize_dns_name(seen.name);
      me->name = normal ? *normal : seen.name;
      auto policy = me->svc->effective(me->s->scope);
      if (!normal || !policy || !domain_allowed(policy->rules, *normal)) {
        me->deny("domain", !seen.tls);
        return;
      }
      me->resolve(!seen.tls);
    });
  }

  void resolve(bool http) {
    auto me = shared_from_this();
    svc->upstream_lookup(a_query(name, random_id()), [me, http](std::optional<std::string> reply) {
      if (me->done)
        return;
      auto all = reply ? a_records(*reply) : std::vector<asio::ip::address>{};
      if (all.empty()) {
        me->deny("resolve", http);
        return;
      }
      auto policy = me->svc->effective(me->s->scope);
      for (auto& a : all)
        if (!in_any(me->s->never, a) && !(policy && in_any(policy->deny, a)))
          me->candidates.push_back(a);
      if (me->candidates.empty()) {
        me->original = all.front();
        me->deny("address", http);  // loopback, link-local, boxd's host: rebinding
        return;
      }
      me->connect_next();
    });
  }

  void connect_next() {
    if (candidate >= candidates.size()) {
      connections("error", "connect").inc();
      boost::system::error_code ignored;
      client.set_option(asio::socket_base::linger{true, 0}, ignored);
      close();
      return;
    }
    auto me = shared_from_this();
    tcp::endpoint to{candidates[candidate++], static_cast<unsigned short>(port)};
    boost::system::error_code ignored;
    upstream.close(ignored);
    timer.expires_after(std::chrono::milliseconds{svc->current_limits().connect_timeout_ms});
    timer.async_wait([me, gen = candidate](boost::system::error_code e) {
      if (!e && !me->done && me->candidate == gen) {
        boost::system::error_code ignored;
        me->upstream.cancel(ignored);
      }
    });
    upstream.async_connect(to, [me](boost::system::error_code e) {
      if (me->done)
        return;
      me->timer.cancel();
      if (e) {
        me->connect_next();
        return;
      }
      connections("allow", "domain").inc();
      me->relaying = true;
      auto head = std::make_shared<std::string>(std::move(me->first));
      asio::async_write(me->upstream, asio::buffer(*head), [me, head](boost::system::error_code e, size_t) {
        if (e || me->done) {
          me->close();
          return;
        }
        me->up_buf = std::make_unique<relay_buffer>();
        me->down_buf = std::make_unique<relay_buffer>();
        me->pump(me->client, me->upstream, *me->up_buf);
        me->pump(me->upstream, me->client, *me->down_buf);
      });
    });
  }

  /// Copies `from` to `to` until `from` ends, then half-closes `to`.
  void pump(tcp::socket& from, tcp::socket& to, relay_buffer& buf) {
    auto me = shared_from_this();
    from.async_read_some(asio::buffer(buf), [me, &from, &to, &buf](boost::system::error_code e, size_t n) {
      if (me->done)
        return;
      if (e) {
        if (e != asio::error::eof) {
          me->close();
          return;
        }
        boost::system::error_code ignored;
        to.shutdown(tcp::socket::shutdown_send, ignored);
        if (--me->open_directions == 0)
          me->close();
        return;
      }
      asio::async_write(to, asio::buffer(buf.data(), n), [me, &from, &to, &buf](boost::system::error_code e, size_t) {
        if (me->done)
          return;
        if (e) {
          me->close();
          return;
        }
        me->pump(from, to, buf);
      });
    });
  }
};

void service::impl::sweep(std::shared_ptr<attachment::state> s) {
  auto swept = std::make_shared<std::promise<void>>();
  auto done = swept->get_future();
  asio::post(io, [this, s, swept] {
    auto policy = effective(s->scope);
    if (policy) {
      auto conns = s->conns;
      for (auto& c : conns) {
        if (!c->relaying)
          continue;  // not decided yet: it will be, under the policy now in force
        boost::system::error_code ec;
        auto peer = c->upstream.remote_endpoint(ec);
        const auto& ports = policy->rules.allow_ports;
        bool still = domain_allowed(policy->rules, c->name) && std::binary_search(ports.begin(), ports.end(), c->port)
                     && !(!ec && in_any(policy->deny, peer.address()));
        if (!still) {
          connections("deny", "policy_change").inc();
          c->client.set_option(asio::socket_base::linger{true, 0}, ec);
          c->close();
        }
      }
    }
    swept->set_value();
  });
  // Bounded: the egress thread takes it up after the handler it runs.
  done.wait_for(std::chrono::seconds{5});
}

void service::impl::serve_filter(std::shared_ptr<attachment::state> s) {
  auto me = shared_from_this();
  s->filter->async_accept([me, s](boost::system::error_code e, tcp::socket sock) {
    if (s->closed)
      return;
    if (e) {
      if (e == asio::error::operation_aborted)
        return;
      // Out of descriptors or memory: the next try after a moment, never a busy loop.
      auto t = std::make_shared<asio::steady_timer>(me->io, std::chrono::milliseconds{100});
      t->async_wait([me, s, t](boost::system::error_code) {
        if (!s->closed)
          me->serve_filter(s);
      });
      return;
    }
    auto c = std::make_shared<connection>(me, s, std::move(sock));
    me->serve_filter(s);
    // Each open connection holds up to two of boxd's descriptors: the whole is capped so
    // that no tenant's sandboxes together can take the ones boxd serves everyone with.
    const auto lim = me->current_limits();
    if (me->open_connections >= lim.max_connections_total) {
      c->deny("limit_total");
      return;
    }
    if (static_cast<int64_t>(s->conns.size()) >= lim.max_connections) {
      c->deny("limit");
      return;
    }
    s->conns.insert(c);
    ++me->open_connections;
    c->start();
  });
}

// -- service -------------------------------------------------------------------------------

service::service() : impl_(std::make_shared<impl>()) {}

service& service::global() {
  static service* one = new service;  // never destroyed: its thread runs until exit
  return *one;
}

void service::configure(const network_settings& settings) {
  std::optional<network_policy> default_policy;
  if (!settings.default_policy.empty())
    if (auto p = parse_network_policy(settings.default_policy, "box.network_policy"))
      default_policy = std::move(p.value());
  std::vector<std::shared_ptr<attachment::state>> follow;
  {
    std::lock_guard lock{impl_->mtx};
    bool changed = (impl_->fallback == nullptr) != !default_policy
                   || (impl_->fallback && default_policy && !(impl_->fallback->rules == *default_policy));
    impl_->fallback = default_policy ? std::make_shared<const compiled_policy>(std::move(*default_policy)) : nullptr;
    // Read once here, not per lookup: boxd's own /etc/resolv.conf when none are named.
    impl_->resolvers = settings.resolvers.empty() ? system_resolvers() : settings.resolvers;
    impl_->lim = settings;
    // Running sandboxes that follow the default take the new one.
    if (changed)
      for (auto& [scope, weak] : impl_->attached)
        if (auto s = weak.lock(); s && !impl_->own.contains(scope))
          follow.push_back(std::move(s));
  }
  for (auto& s : follow)
    if (auto e = impl_->apply(*s))
      spdlog::error("egress: {}: {}", s->scope, e.message);
}

void service::set_observer(std::function<void(const denial&)> fn) {
  std::lock_guard lock{impl_->mtx};
  impl_->observer = std::move(fn);
}


box_error service::set_policy(const std::string& scope, std::optional<network_policy> p) {
  std::vector<std::shared_ptr<attachment::state>> live;
  {
    std::lock_guard lock{impl_->mtx};
    if (p)
      impl_->own[scope] = std::make_shared<const compiled_policy>(std::move(*p));
    else
      impl_->own.erase(scope);
    auto [from, to] = impl_->attached.equal_range(scope);
    for (auto i = from; i != to; ++i)
      if (auto s = i->second.lock())
        live.push_back(std::move(s));
  }
  box_error first;
  for (auto& s : live)
    if (auto e = impl_->apply(*s); e && !first)
      first = e;
  return first;
}

result<std::unique_ptr<attachment>> service::attach(const std::string& scope, int netns,
                                                    const refused_destinations& refused,
                                                    const std::string& scratch_dir) {
  // Both sockets are made in the sandbox's namespace by a thread that enters it and
  // ends: they stay there, served from boxd's.
  int dns_fd = -1, filter_fd = -1;
  std::string failure;
  std::thread maker{[&] {
    if (::setns(netns, CLONE_NEWNET) != 0) {
      failure = std::string{"cannot enter the sandbox's network namespace: "} + std::strerror(errno);
      return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    dns_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    a.sin_port = htons(resolver_port);
    if (dns_fd < 0 || ::bind(dns_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      failure = std::string{"cannot make the sandbox's resolver socket: "} + std::strerror(errno);
      return;
    }
    filter_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    a.sin_port = htons(filter_port);
    if (filter_fd < 0 || ::bind(filter_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
        || ::listen(filter_fd, 128) != 0)
      failure = std::string{"cannot make the sandbox's egress filter socket: "} + std::strerror(errno);
  }};
  maker.join();
  unique_fd dns_owned{dns_fd}, filter_owned{filter_fd};
  if (!failure.empty())
    return make_box_error(ec::box_error, failure);

  auto s = std::make_shared<attachment::state>();
  s->scope = scope;
  s->netns.reset(::fcntl(netns, F_DUPFD_CLOEXEC, 3));
  s->refused = refused;
  s->never = never_dialed(refused);
  s->rules_path = scratch_dir + "/network.nft";
  s->owner = impl_;
  if (!s->netns)
    return make_box_error(ec::box_error, std::string{"cannot keep the sandbox's network namespace: "} + std::strerror(errno));
  {
    std::lock_guard lock{impl_->mtx};
    impl_->attached.emplace(scope, s);
  }
  impl_->start();
  auto out = std::make_unique<attachment>(s);
  // The rules before the first command: default-deny when a policy is in force.
  if (auto e = impl_->apply(*s))
    return e;
  auto svc = impl_;
  auto dns_raw = dns_owned.release(), filter_raw = filter_owned.release();
  asio::post(svc->io, [svc, s, dns_raw, filter_raw] {
    boost::system::error_code ec;
    s->dns = std::make_unique<udp::socket>(svc->io);
    s->dns->assign(udp::v4(), dns_raw, ec);
    s->filter = std::make_unique<tcp::acceptor>(svc->io);
    s->filter->assign(tcp::v4(), filter_raw, ec);
    if (s->closed) {
      s->dns->close(ec);
      s->filter->close(ec);
      return;
    }
    svc->serve_dns(s);
    svc->serve_filter(s);
  });
  return out;
}

attachment::~attachment() {
  state_->detached = true;
  auto svc = state_->owner.lock();
  if (!svc)
    return;
  {
    std::lock_guard lock{svc->mtx};
    auto [from, to] = svc->attached.equal_range(state_->scope);
    for (auto i = from; i != to; ++i)
      if (i->second.lock() == state_) {
        svc->attached.erase(i);
        break;
      }
  }
  // The sockets keep the namespace alive: they close with the sandbox.
  asio::post(svc->io, [s = state_] {
    s->closed = true;
    boost::system::error_code ec;
    if (s->dns)
      s->dns->close(ec);
    if (s->filter)
      s->filter->close(ec);
    auto conns = s->conns;
    for (auto& c : conns)
      c->close();
  });
}

}  // namespace boxrt::egress
