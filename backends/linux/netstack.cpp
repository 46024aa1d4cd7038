#include "backends/linux/netstack.hpp"

#include "backends/linux/egress.hpp"
#include "messages/network_policy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <cstdio>

namespace boxrt {

namespace {

/// How long the stack may take to configure the namespace.
constexpr int ready_timeout_ms = 5000;

bool is_loopback(const std::string& host) {
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  return host == "::1" || host == "localhost";
}

void add_unique(std::vector<std::string>& list, std::string item) {
  if (std::find(list.begin(), list.end(), item) == list.end())
    list.push_back(std::move(item));
}

} // namespace

refused_destinations destinations_to_refuse(const std::string& listen_host) {
  refused_destinations out;
  // The stack's gateway to the host; link-local and cloud metadata (Alibaba's sits
  // outside 169.254.0.0/16, AWS's IPv6 one in fd00:ec2::/32).
  out.v4 = {"10.0.2.2", "169.254.0.0/16", "100.100.100.200"};
  out.v6 = {"fe80::/10", "fd00:ec2::254"};
  // Default gateways: when boxd runs in a container, the host behind it.
  {
    std::ifstream routes{"/proc/net/route"};
    std::string line;
    std::getline(routes, line); // header
    while (std::getline(routes, line)) {
      char iface[64] = {};
      unsigned dest = 0, gateway = 0, flags = 0;
      if (std::sscanf(line.c_str(), "%63s %x %x %x", iface, &dest, &gateway, &flags) == 4 && dest == 0
          && gateway != 0) {
        in_addr a{};
        a.s_addr = gateway; // already in network order, as the kernel prints it
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &a, text, sizeof text);
        add_unique(out.v4, text);
      }
    }
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (auto* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr)
        continue;
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ifa_addr->sa_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
        ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        // Loopback inside the sandbox is the sandbox's own; the host's is out of reach
        // (the stack's host loopback is disabled and 10.0.2.2 refused).
        if (!is_loopback(text))
          add_unique(out.v4, text);
      } else if (a->ifa_addr->sa_family == AF_INET6) {
        auto* in = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
        if (IN6_IS_ADDR_LOOPBACK(&in->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&in->sin6_addr))
          continue;
        ::inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
        add_unique(out.v6, text);
      }
    }
    ::freeifaddrs(list);
  }
  if (!listen_host.empty() && !is_loopback(listen_host) && listen_host != "0.0.0.0" && listen_host != "::") {
    in_addr a4{};
    in6_addr a6{};
    if (::inet_pton(AF_INET, listen_host.c_str(), &a4) == 1)
      add_unique(out.v4, listen_host);
    else if (::inet_pton(AF_INET6, listen_host.c_str(), &a6) == 1)
      add_unique(out.v6, listen_host);
  }
  return out;
}

std::string nft_rules(const refused_destinations& refused) {
  auto set = [](const std::vector<std::string>& xs) {
    std::string out;
    // nftables refuses overlapping intervals (a host address inside 169.254.0.0/16).
    for (auto& x : without_covered(xs))
      out += (out.empty() ? "" : ", ") + x;
    return out;
  };
  std::string rules = "table inet boxrt {\n  chain output {\n    type filter hook output priority 0; policy accept;\n";
  if (!refused.v4.empty())
    rules += "    ip daddr { " + set(refused.v4) + " } reject\n";
  if (!refused.v6.empty())
    rules += "    ip6 daddr { " + set(refused.v6) + " } reject\n";
  rules += "  }\n}\n";
  return rules;
}

netstack::~netstack() = default;

result<std::unique_ptr<netstack>> netstack::attach(int netns, const refused_destinations& refused,
                                                   const std::string& scratch_dir, const std::string& scope) {
  // Both tools find the namespace as their descriptor 5 (/proc/self/fd/5 in their own
  // process), handed over at start.
  constexpr int ns_fd = 5;
  const auto ns = "/proc/self/fd/" + std::to_string(ns_fd);
  // The rules (and boxd's resolver and filter sockets) before any packet can leave.
  auto egress = egress::service::global().attach(scope, netns, refused, scratch_dir);
  if (!egress)
    return egress.error();
  int exit_pipe[2], ready_pipe[2];
  if (::pipe2(exit_pipe, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot start the network stack: "} + std::strerror(errno));
  unique_fd exit_r{exit_pipe[0]}, exit_w{exit_pipe[1]};
  if (::pipe2(ready_pipe, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot start the network stack: "} + std::strerror(errno));
  unique_fd ready_r{ready_pipe[0]}, ready_w{ready_pipe[1]};
  auto helper = helper_process::start({"slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                                       "--enable-sandbox", "--enable-seccomp", "--exit-fd=3", "--ready-fd=4",
                                       "--netns-type=path", ns, "tap0"},
                                      {{exit_r.get(), 3}, {ready_w.get(), 4}, {netns, ns_fd}});
  if (!helper)
    return helper.error();
  exit_r.reset();
  ready_w.reset();
  pollfd p{ready_r.get(), POLLIN, 0};
  int rc;
  while ((rc = ::poll(&p, 1, ready_timeout_ms)) < 0 && errno == EINTR) {
  }
  char c = 0;
  if (rc <= 0 || ::read(ready_r.get(), &c, 1) != 1) {
    auto why = (*helper)->error_text();
    return make_box_error(ec::box_error, "the network stack did not start" + (why.empty() ? std::string{} : ": " + why));
  }
  std::unique_ptr<netstack> out{new netstack};
  out->egress_ = std::move(egress.value());
  out->helper_ = std::move(helper.value());
  out->exit_fd_ = std::move(exit_w);
  return out;
}

} // namespace boxrt
