// boxsoak: a long mixed workload against two real boxd processes on loopback, counting
// what is left behind (`make soak`, SOAK_SECONDS). One boxd serves standard mode on real
// bubblewrap sandboxes: execs of every kind over many connections, managed processes
// and their stdio relays, clients that disconnect mid-request, clients that never read.
// The other serves admission mode on bubblewrap: entitlement snapshots that grant and
// revoke, host-pushed grants and revocations, stale and rolled-back revisions; midway it
// is killed with SIGKILL and restarted on its data, and every acknowledged revision must
// still hold.
//
// Before the workload (both boxds up and warmed), after it (every session deleted,
// counts given time to settle) and after both boxds stopped, it counts: descriptors and
// RSS of each boxd, mounts, attached loop devices, cgroups, sandbox processes and files
// under each data folder. It prints a table and exits 1 when a count grew beyond its
// stated bound, when boxd stopped answering, or when acknowledged state was lost.
//
// Run as root with bubblewrap (what `make soak` does). Only 127.0.0.1 is ever contacted.
// SOAK_SECONDS (at least 20) bounds the run; SOAK_ONLY picks parts of the workload.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "messages/tenancy.hpp"
#include "tests/net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"
#include "tests/wire/wire_common.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using boxrt::test::boxd_process;
using boxrt::test::context_json;
using boxrt::test::ws_client;
using boxrt::test::ws_options;
using clock_type = std::chrono::steady_clock;

namespace {

const std::string token = "soak-token-0123456789abcdef0123456789abcdef";
const std::string server_extra = R"(, "control_token": ")" + token + R"(")";

const std::string standard_box = R"({"backend": "bwrap", "local": {"host_root": "box"},
  "limits": {"max_output_bytes": 1048576}})";

/// The admission policy of the wire suite's bwrap scenarios.
const std::string& admission_box = boxrt::test::wire::admission_bwrap_box;

// -- counting -----------------------------------------------------------------------------

size_t count_entries(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.')
        ++n;
    ::closedir(d);
  }
  return n;
}

size_t count_lines(const std::string& path) {
  std::ifstream in{path};
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    ++n;
  return n;
}

size_t count_files(const fs::path& root) {
  size_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it{root, fs::directory_options::skip_permission_denied, ec}, end;
       it != end; it.increment(ec)) {
    if (ec)
      break;
    ++n;
  }
  return n;
}

size_t attached_loops() {
  size_t n = 0;
  if (DIR* d = ::opendir("/sys/block")) {
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("loop", 0) == 0 && ::access(("/sys/block/" + name + "/loop/backing_file").c_str(), F_OK) == 0)
        ++n;
    }
    ::closedir(d);
  }
  return n;
}

size_t cgroup_dirs() {
  size_t n = 0;
  for (const char* root : {"/sys/fs/cgroup"}) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it{root, fs::directory_options::skip_permission_denied, ec}, end;
         it != end; it.increment(ec)) {
      if (ec)
        break;
      if (it->is_directory(ec) && !it->is_symlink(ec))
        ++n;
    }
  }
  return n;
}

std::string read_link(const std::string& path) {
  std::error_code ec;
  auto target = fs::read_symlink(path, ec);
  return ec ? std::string{} : target.string();
}

std::string comm_of(const std::string& pid) {
  std::ifstream in{"/proc/" + pid + "/comm"};
  std::string s;
  std::getline(in, s);
  return s;
}

/// Processes in a pid namespace other than ours (everything inside a sandbox) plus the
/// sandbox launchers themselves. `names` (when set) collects "pid comm" of each.
size_t sandbox_processes(std::vector<std::string>* names = nullptr) {
  auto own = read_link("/proc/self/ns/pid");
  size_t n = 0;
  if (DIR* d = ::opendir("/proc")) {
    while (auto* e = ::readdir(d)) {
      std::string pid = e->d_name;
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos)
        continue;
      auto ns = read_link("/proc/" + pid + "/ns/pid");
      if (ns.empty())
        continue;
      auto comm = comm_of(pid);
      if (ns != own || comm == "bwrap" || comm == "boxrt-init" || comm == "slirp4netns") {
        ++n;
        if (names) {
          std::ifstream cmd{"/proc/" + pid + "/cmdline"};
          std::string args{std::istreambuf_iterator<char>{cmd}, {}};
          for (auto& c : args)
            c = c == '\0' ? ' ' : c;
          std::ifstream st{"/proc/" + pid + "/stat"};
          std::string stat;
          std::getline(st, stat);
          auto close = stat.rfind(')');
          names->push_back(pid + " " + comm + " [" + (close == std::string::npos ? "" : stat.substr(close + 2, 10))
                           + "] " + args.substr(0, 160));
        }
      }
    }
    ::closedir(d);
  }
  return n;
}

/// A "Name:  value" field of /proc/<pid>/status.
size_t status_field(pid_t pid, const std::string& name) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + ":", 0) == 0)
      return std::strtoull(line.c_str() + name.size() + 1, nullptr, 10);
  return 0;
}

size_t rss_kib(pid_t pid) {
  return status_field(pid, "VmRSS");
}

/// Where a process's resident memory is (KiB): the brk heap, anonymous mappings (malloc
/// arenas, thread stacks), file-backed mappings; and the number of mappings.
std::string rss_breakdown(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/smaps"};
  size_t heap = 0, anon = 0, file = 0, maps = 0;
  size_t* bucket = &anon;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Rss:", 0) == 0) {
      *bucket += std::strtoull(line.c_str() + 4, nullptr, 10);
      continue;
    }
    std::istringstream fields{line};
    std::string range, perms, offset, dev, inode, name;
    fields >> range >> perms >> offset >> dev >> inode >> name;
    if (range.find('-') == std::string::npos || perms.size() != 4 || inode.empty())
      continue;  // another field line
    ++maps;
    bucket = name == "[heap]" ? &heap : (name.empty() || name[0] == '[') ? &anon : &file;
  }
  return "heap " + std::to_string(heap) + " KiB, anonymous " + std::to_string(anon) + " KiB, files "
         + std::to_string(file) + " KiB in " + std::to_string(maps) + " mappings";
}

struct counts {
  std::map<std::string, long> v;
};

counts measure(const std::vector<std::pair<std::string, const boxd_process*>>& daemons) {
  counts c;
  c.v["mounts"] = static_cast<long>(count_lines("/proc/self/mountinfo"));
  c.v["loop devices"] = static_cast<long>(attached_loops());
  c.v["cgroups"] = static_cast<long>(cgroup_dirs());
  c.v["sandbox processes"] = static_cast<long>(sandbox_processes());
  for (auto& [name, d] : daemons) {
    if (d->pid() > 0) {
      c.v[name + " descriptors"] = static_cast<long>(count_entries("/proc/" + std::to_string(d->pid()) + "/fd"));
      c.v[name + " RSS KiB"] = static_cast<long>(rss_kib(d->pid()));
      c.v[name + " threads"] = static_cast<long>(status_field(d->pid(), "Threads"));
    }
    c.v[name + " state files"] = static_cast<long>(count_files(d->dir() / "box"));
  }
  return c;
}

// -- the workload ---------------------------------------------------------------------------

struct tally {
  std::mutex mtx;
  std::map<std::string, long> ok;
  std::map<std::string, long> refused;
  std::vector<std::string> failures;  // what must not happen

  void count(const std::string& what, bool good) {
    std::lock_guard lock{mtx};
    (good ? ok : refused)[what]++;
  }
  void fail(const std::string& why) {
    std::lock_guard lock{mtx};
    if (failures.size() < 50)
      failures.push_back(why);
    std::fprintf(stderr, "soak: FAILURE: %s\n", why.c_str());
  }
};

uint16_t port_of(const boxd_process& d) {
  return static_cast<uint16_t>(std::stoi(d.url().substr(d.url().rfind(':') + 1)));
}

ws_options rpc_options() {
  ws_options o;
  o.token = token;
  o.instance = "instance-soak";
  return o;
}

std::string ctx(const std::string& ws, int64_t gen = 1) {
  return context_json(ws, gen, "instance-soak");
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The commands of the exec workers: output, files, children, failures, timeouts.
const std::vector<std::string> commands = {
  "echo hello",
  "head -c 300000 /dev/zero | tr '\\\\0' a",
  "for i in 1 2 3 4 5 6 7 8; do (sleep 0.05 &) ; done; wait",
  "mkdir -p /workspace/d && echo data > /workspace/d/f && cat /workspace/d/f",
  "dd if=/dev/zero of=/tmp/blob bs=1k count=512 2>/dev/null && rm /tmp/blob",
  "exit 3",
  "cat /nonexistent",
  "sleep 0.3",
  "yes | head -c 2000000 >/dev/null",
  "sh -c 'sleep 30 & sleep 30 & echo started'",
};

struct soak {
  tally t;
  std::atomic<bool> stop{false};
  std::atomic<uint16_t> admission_port{0};  // 0 while the admission boxd is restarting
  uint16_t standard_port = 0;
  std::atomic<long> seq{1};
  // Acknowledged entitlement revision per admission workspace (the durable floor).
  std::mutex rev_mtx;
  std::map<std::string, int64_t> acknowledged;

  int64_t next() { return seq++; }

  /// Worker `id` owns workspaces soak-a-<id>-0 and -1, so no other worker deletes a
  /// session under its exec.
  void exec_worker(unsigned id) {
    std::mt19937 rng{1000 + id};
    std::unique_ptr<ws_client> c;
    while (!stop) {
      try {
        if (!c || !c->is_open())
          c = std::make_unique<ws_client>(standard_port, rpc_options());
        auto ws = "soak-a-" + std::to_string(id) + "-" + std::to_string(rng() % 2);
        auto session = "s" + std::to_string(rng() % 2);
        auto roll = rng() % 20;
        if (roll == 0) {
          auto r = c->call(next(), "box_delete_session", R"({"session_id":")" + session + "\"}", ctx(ws));
          t.count("delete session", r.code == 0);
          continue;
        }
        const auto& cmd = commands[rng() % commands.size()];
        int timeout = roll == 1 ? 1 : 20;
        auto data = R"({"session_id":")" + session + R"(","cmd":)" + quoted(roll == 1 ? "sleep 10" : cmd)
                    + R"(,"timeout_sec":)" + std::to_string(timeout) + "}";
        auto r = c->call(next(), "box_exec", data, ctx(ws));
        if (r.code != 0)
          t.fail("box_exec on the standard boxd: " + r.raw.substr(0, 300));
        t.count(roll == 1 ? "exec timed out" : "exec", r.code == 0);
      } catch (const std::exception& e) {
        if (!stop)
          t.fail(std::string{"exec worker: "} + e.what());
        c.reset();
      }
    }
  }

  void managed_worker() {
    std::unique_ptr<ws_client> c;
    int round = 0;
    while (!stop) {
      try {
        if (!c || !c->is_open())
          c = std::make_unique<ws_client>(standard_port, rpc_options());
        auto ws = "soak-m-" + std::to_string(round % 3);
        auto context = ctx(ws);
        auto r = c->call(next(), "box_exec", R"({"session_id":"m","cmd":"true"})", context);
        if (r.code != 0) {
          t.fail("managed: exec: " + r.raw.substr(0, 300));
          continue;
        }
        auto pid = "p" + std::to_string(round % 2);
        r = c->call(next(), "box_start_managed_process",
                    R"({"session_id":"m","spec":{"command":"cat","process_id":")" + pid + "\"}}", context);
        t.count("managed start", r.code == 0);
        if (r.code != 0) {
          t.fail("managed: start: " + r.raw.substr(0, 300));
          continue;
        }
        ws_options o;
        o.token = token;
        o.instance = "instance-soak";
        o.target = "/v1/sessions/" + boxrt::runtime_namespace("instance-soak", ws, 1) + "-m/managed-process/" + pid + "/ws";
        o.extra_headers = {{"X-LangBot-Workspace-Id", ws}, {"X-LangBot-Placement-Generation", "1"},
                           {"Sec-WebSocket-Protocol", "mcp"}};
        {
          ws_client relay{standard_port, o};
          if (!relay.is_open()) {
            t.fail("managed: relay refused with " + std::to_string(relay.http_status()) + " " + relay.http_body());
          } else {
            auto line = "ping-" + std::to_string(round);
            relay.send(line);
            std::string all;
            while (all.find(line) == std::string::npos) {
              auto text = relay.read();
              if (!text)
                break;
              all += *text;
            }
            t.count("relay echo", all.find(line) != std::string::npos);
            if (round % 2 == 0)
              relay.close();  // the other half just drop the socket
          }
        }
        if (round % 3 == 0) {
          r = c->call(next(), "box_stop_managed_process", R"({"session_id":"m","process_id":")" + pid + "\"}", context);
          t.count("managed stop", r.code == 0);
        }
        if (round % 5 == 4) {
          r = c->call(next(), "box_delete_session", R"({"session_id":"m"})", context);
          t.count("delete session", r.code == 0);
        }
        ++round;
      } catch (const std::exception& e) {
        if (!stop)
          t.fail(std::string{"managed worker: "} + e.what());
        c.reset();
      }
    }
  }

  /// Clients that leave mid-request, clients that never read, and malformed frames.
  void rude_worker() {
    int round = 0;
    while (!stop) {
      try {
        auto ws = "soak-r-" + std::to_string(round % 2);
        switch (round % 3) {
          case 0: {
            ws_client c{standard_port, rpc_options()};
            c.request(next(), "box_exec", R"({"session_id":"r","cmd":"sleep 2; echo late"})", ctx(ws));
            // Destroyed here: the socket goes away with the exec still running.
            t.count("disconnect mid-request", true);
            break;
          }
          case 1: {
            auto o = rpc_options();
            o.receive_buffer_bytes = 4096;
            ws_client c{standard_port, o};
            for (int i = 0; i < 24; ++i)
              if (c.try_send(boxrt::test::request_text(
                    next(), "box_exec", R"({"session_id":"r","cmd":"head -c 1000000 /dev/zero | tr '\\0' b"})", ctx(ws))))
                break;
            // Never reads; leaves after a while (boxd must not hold its replies for good).
            for (int i = 0; i < 30 && !stop; ++i)
              std::this_thread::sleep_for(100ms);
            t.count("client that never reads", true);
            break;
          }
          default: {
            ws_client c{standard_port, rpc_options()};
            c.send("{\"seq_id\":1,\"action\":");
            c.send("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[");
            c.send(R"({"seq_id":2,"action":"box_exec","data":{"cmd":"\ud800"},"context":5})");
            auto refused = c.read_reply();
            t.count("malformed request refused", refused.code != 0);
            auto ping = next();
            auto r = c.call(ping, "__ping");
            t.count("malformed frames then ping", r.code == 0 && r.seq_id == std::to_string(ping));
            if (r.code != 0 || r.seq_id != std::to_string(ping))
              t.fail("ping after malformed frames: " + r.raw);
            break;
          }
        }
      } catch (const std::exception& e) {
        if (!stop)
          t.fail(std::string{"rude worker: "} + e.what());
      }
      ++round;
    }
  }

  std::string snapshot(const std::string& ws, int64_t rev, bool eligible) {
    return R"({"instance_uuid":"instance-soak","workspace_uuid":")" + ws + R"(","entitlement_revision":)"
           + std::to_string(rev) + R"(,"status":"active","not_before":1,"expires_at":4000000000,"features":{"managed_sandbox":)"
           + (eligible ? "true" : "false") + R"(},"limits":{"managed_sandbox_sessions":)" + (eligible ? "1" : "0") + "}}";
  }

  /// Entitlement churn on the admission boxd. Each worker owns its workspaces, so the
  /// revisions it sends are its own to track.
  void admission_worker(int id) {
    std::unique_ptr<ws_client> c;
    std::map<std::string, int64_t> rev;
    int round = 0;
    while (!stop) {
      auto port = admission_port.load();
      if (port == 0) {
        c.reset();
        std::this_thread::sleep_for(50ms);
        continue;
      }
      try {
        if (!c || !c->is_open())
          c = std::make_unique<ws_client>(port, rpc_options());
        auto ws = "soak-b-" + std::to_string(id) + "-" + std::to_string(round % 2);
        if (!rev.count(ws)) {
          std::lock_guard lock{rev_mtx};
          rev[ws] = acknowledged[ws];
        }
        auto& r = rev[ws];
        // Each workspace goes through grant, exec, loss, grant, exec, rollback.
        auto step = (round / 2) % 6;
        if (step == 0 || step == 3) {
          // Grant (again): a higher revision that grants the sandbox.
          auto reply = c->call(next(), "box_put_workspace_entitlement", snapshot(ws, r + 1, true));
          if (reply.code == 0) {
            ++r;
            std::lock_guard lock{rev_mtx};
            acknowledged[ws] = r;
          } else {
            t.fail("entitlement grant refused: " + reply.raw.substr(0, 300));
          }
          t.count("entitlement grant", reply.code == 0);
        } else if (step == 1 || step == 4) {
          auto reply = c->call(next(), "box_exec", R"({"session_id":"global","cmd":"echo x > /workspace/x; cat /workspace/x"})", ctx(ws));
          t.count("admitted exec", reply.code == 0);
          if (reply.code != 0)
            t.fail("admitted exec: " + reply.raw.substr(0, 300));
        } else if (step == 2) {
          // Loss of the entitlement: revokes and stops the workspace's sessions.
          auto reply = c->call(next(), "box_put_workspace_entitlement", snapshot(ws, r + 1, false));
          if (reply.code == 0) {
            ++r;
            std::lock_guard lock{rev_mtx};
            acknowledged[ws] = r;
          }
          t.count("entitlement revoked", reply.code == 0);
          auto after = c->call(next(), "box_exec", R"({"session_id":"global","cmd":"true"})", ctx(ws));
          t.count("exec after revocation refused", after.code != 0);
          if (after.code == 0)
            t.fail("an exec ran after its entitlement was revoked");
        } else {
          // A rollback and a replay are refused and change nothing.
          // Below the last acknowledged revision (r may be ahead of it after a lost reply).
          int64_t acked = 0;
          {
            std::lock_guard lock{rev_mtx};
            acked = acknowledged[ws];
          }
          if (acked > 1) {
            auto old = c->call(next(), "box_put_workspace_entitlement", snapshot(ws, acked - 1, true));
            t.count("rollback refused", old.code != 0);
            if (old.code == 0)
              t.fail("revision " + std::to_string(acked - 1) + " of " + ws + " was accepted after "
                     + std::to_string(acked) + " was acknowledged");
          }
        }
        ++round;
      } catch (const std::exception&) {
        // The admission boxd is killed midway: reconnect once it is back. A change sent
        // just before may have been committed without its reply: skip its revision.
        t.count("admission call lost to the restart", false);
        for (auto& [name, value] : rev)
          ++value;
        c.reset();
        std::this_thread::sleep_for(20ms);
      }
    }
  }
};

bool wait_exit(pid_t pid, std::chrono::seconds limit, int& status) {
  auto until = clock_type::now() + limit;
  while (clock_type::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

/// Deletes the sessions the workload may have left, on every workspace it used.
void delete_all(soak& s, uint16_t port, const std::vector<std::string>& workspaces,
                const std::vector<std::string>& sessions) {
  ws_client c{port, rpc_options()};
  for (auto& ws : workspaces)
    for (auto& sid : sessions)
      (void) c.call(s.next(), "box_delete_session", R"({"session_id":")" + sid + "\"}", ctx(ws));
}

void print_table(const counts& base, const counts& before, const counts& after, const counts& stopped,
                 const std::map<std::string, std::pair<long, std::string>>& bounds,
                 std::vector<std::string>& breaches) {
  std::printf("\n%-34s %10s %10s %10s %10s  %s\n", "measure", "no boxd", "before", "after", "stopped", "bound (after vs before)");
  for (auto& [name, b] : bounds) {
    auto get = [&](const counts& c) -> std::string {
      auto it = c.v.find(name);
      return it == c.v.end() ? "-" : std::to_string(it->second);
    };
    auto bv = before.v.count(name) ? before.v.at(name) : 0;
    auto av = after.v.count(name) ? after.v.at(name) : 0;
    bool ok = av <= bv + b.first;
    std::printf("%-34s %10s %10s %10s %10s  %s %s\n", name.c_str(), get(base).c_str(), get(before).c_str(),
                get(after).c_str(), get(stopped).c_str(), b.second.c_str(), ok ? "ok" : "EXCEEDED");
    if (!ok)
      breaches.push_back(name);
  }
  if (after.v.at("sandbox processes") > before.v.at("sandbox processes")
      || stopped.v.at("sandbox processes") > base.v.at("sandbox processes")) {
    std::vector<std::string> names;
    sandbox_processes(&names);
    for (auto& n : names)
      std::printf("left over: %s\n", n.c_str());
  }
  for (const char* host : {"mounts", "loop devices", "cgroups", "sandbox processes"}) {
    if (stopped.v.at(host) > base.v.at(host)) {
      std::printf("%s: %ld after both boxds stopped, %ld before they started\n", host, stopped.v.at(host), base.v.at(host));
      breaches.push_back(std::string{host} + " after stop");
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  long seconds = 120;
  if (const char* env = std::getenv("SOAK_SECONDS"))
    seconds = std::atol(env);
  if (argc > 1)
    seconds = std::atol(argv[1]);
  if (seconds < 20) {
    std::fprintf(stderr, "boxsoak: SOAK_SECONDS must be at least 20\n");
    return 2;
  }
  if (::geteuid() != 0 || ::access("/usr/bin/bwrap", X_OK) != 0) {
    std::fprintf(stderr, "boxsoak: needs root and /usr/bin/bwrap (real sandboxes)\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  auto started = clock_type::now();
  auto base = measure({});
  std::printf("boxsoak: %ld s; standard and admission boxd on bubblewrap\n", seconds);

  auto standard = std::make_unique<boxd_process>(standard_box, server_extra);
  auto admission_dir = boxd_process::fresh_dir();
  auto admission = std::make_unique<boxd_process>(admission_box, server_extra, std::vector<std::string>{}, admission_dir);

  soak s;
  s.standard_port = port_of(*standard);
  s.admission_port = port_of(*admission);

  std::vector<std::string> a_workspaces, b_workspaces;
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 2; ++i)
      a_workspaces.push_back("soak-a-" + std::to_string(w) + "-" + std::to_string(i));
  for (int i = 0; i < 3; ++i)
    a_workspaces.push_back("soak-m-" + std::to_string(i));
  for (int i = 0; i < 2; ++i)
    a_workspaces.push_back("soak-r-" + std::to_string(i));
  for (int w = 0; w < 2; ++w)
    for (int i = 0; i < 2; ++i)
      b_workspaces.push_back("soak-b-" + std::to_string(w) + "-" + std::to_string(i));

  // Warm-up: every workspace once, then its sessions deleted, so pools, threads,
  // quota images and per-workspace state exist before the first count.
  try {
    ws_client a{s.standard_port, rpc_options()};
    for (auto& ws : a_workspaces)
      (void) a.call(s.next(), "box_exec", R"({"session_id":"warm","cmd":"true"})", ctx(ws));
    ws_client b{s.admission_port, rpc_options()};
    for (auto& ws : b_workspaces) {
      (void) b.call(s.next(), "box_put_workspace_entitlement", s.snapshot(ws, 1, true));
      s.acknowledged[ws] = 1;
      (void) b.call(s.next(), "box_exec", R"({"session_id":"global","cmd":"true"})", ctx(ws));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxsoak: warm-up failed: %s\n", e.what());
    return 1;
  }
  delete_all(s, s.standard_port, a_workspaces, {"warm"});
  delete_all(s, s.admission_port, b_workspaces, {"global"});
  auto daemons = [&] {
    return std::vector<std::pair<std::string, const boxd_process*>>{{"standard boxd", standard.get()},
                                                                    {"admission boxd", admission.get()}};
  };
  // A deleted session's sandbox ends after the reply: the first count waits for that.
  auto before = measure(daemons());
  for (auto until = clock_type::now() + 30s; before.v["sandbox processes"] > 0 && clock_type::now() < until;) {
    std::this_thread::sleep_for(200ms);
    before = measure(daemons());
  }

  // SOAK_ONLY=exec,managed,rude,admission runs only the named parts (to find which part
  // a growth comes from); unset runs them all.
  std::string only = std::getenv("SOAK_ONLY") ? std::getenv("SOAK_ONLY") : "";
  auto part = [&](const char* name) { return only.empty() || only.find(name) != std::string::npos; };
  std::vector<std::thread> workers;
  if (part("exec"))
    for (unsigned i = 0; i < 4; ++i)
      workers.emplace_back([&, i] { s.exec_worker(i); });
  if (part("managed"))
    workers.emplace_back([&] { s.managed_worker(); });
  if (part("rude"))
    workers.emplace_back([&] { s.rude_worker(); });
  if (part("admission"))
    for (int i = 0; i < 2; ++i)
      workers.emplace_back([&, i] { s.admission_worker(i); });

  // Midway: kill -9 the admission boxd, restart it on the same data.
  auto workload = std::chrono::seconds{seconds} - std::chrono::seconds{15};
  auto midway = started + workload / 2;
  // Every 30 s a line of the counts that could creep: the trend, not just the ends.
  auto next_report = clock_type::now();
  auto report = [&] {
    if (clock_type::now() < next_report)
      return;
    next_report += 30s;
    auto now = measure(daemons());
    std::printf("boxsoak: t=%4lld s  standard RSS %6ld KiB, %3ld fds  admission RSS %6ld KiB, %3ld fds  "
                "sandbox processes %3ld  mounts %3ld  loops %2ld  cgroups %3ld\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started).count()),
                now.v["standard boxd RSS KiB"], now.v["standard boxd descriptors"], now.v["admission boxd RSS KiB"],
                now.v["admission boxd descriptors"], now.v["sandbox processes"], now.v["mounts"], now.v["loop devices"],
                now.v["cgroups"]);
    std::fflush(stdout);
  };
  while (clock_type::now() < midway) {
    report();
    std::this_thread::sleep_for(100ms);
  }
  std::map<std::string, int64_t> floor_at_kill;
  {
    std::lock_guard lock{s.rev_mtx};
    s.admission_port = 0;
    ::kill(admission->pid(), SIGKILL);
    admission->wait_killed();
    floor_at_kill = s.acknowledged;
  }
  std::printf("boxsoak: killed the admission boxd with SIGKILL at %lld s\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started).count()));
  admission.reset();  // the folder is ours (admission_dir), it stays
  admission = std::make_unique<boxd_process>(admission_box, server_extra, std::vector<std::string>{}, admission_dir);
  // Every revision acknowledged before the kill is still the floor: one below is refused.
  {
    ws_client b{port_of(*admission), rpc_options()};
    for (auto& [ws, rev] : floor_at_kill) {
      if (rev <= 1)
        continue;
      auto r = b.call(s.next(), "box_put_workspace_entitlement", s.snapshot(ws, rev - 1, true));
      s.t.count("rollback refused after restart", r.code != 0);
      if (r.code == 0)
        s.t.fail("revision " + std::to_string(rev) + " of " + ws + " was acknowledged before the kill and lost");
    }
  }
  s.admission_port = port_of(*admission);

  while (clock_type::now() < started + workload) {
    report();
    std::this_thread::sleep_for(100ms);
  }
  s.stop = true;
  for (auto& w : workers)
    w.join();

  // Drain: every session the workload used is deleted, then counts get 30 s to settle.
  try {
    delete_all(s, s.standard_port, a_workspaces, {"s0", "s1", "m", "r"});
    delete_all(s, port_of(*admission), b_workspaces, {"global"});
  } catch (const std::exception& e) {
    s.t.fail(std::string{"final deletes: "} + e.what());
  }
  std::map<std::string, std::pair<long, std::string>> bounds = {
    {"mounts", {0, "+0"}},
    {"loop devices", {0, "+0"}},
    {"cgroups", {0, "+0"}},
    {"sandbox processes", {0, "+0"}},
    {"standard boxd descriptors", {8, "+8"}},
    {"admission boxd descriptors", {8, "+8 (restarted)"}},
    {"standard boxd RSS KiB", {131072, "+128 MiB"}},
    {"admission boxd RSS KiB", {131072, "+128 MiB (restarted)"}},
    {"standard boxd threads", {8, "+8"}},
    {"admission boxd threads", {8, "+8 (restarted)"}},
    {"standard boxd state files", {64, "+64"}},
    {"admission boxd state files", {64, "+64"}},
  };
  counts after;
  auto settle_until = clock_type::now() + 30s;
  for (int pass = 0;; ++pass) {
    // A request still on its way when its client left can start a session after the
    // deletes above (its command is then dropped, the session stays until its TTL).
    if (pass > 0 && pass % 4 == 0) {
      try {
        delete_all(s, s.standard_port, a_workspaces, {"s0", "s1", "m", "r"});
      } catch (const std::exception&) {
      }
    }
    after = measure(daemons());
    bool within = true;
    for (auto& [name, b] : bounds)
      if (after.v[name] > before.v[name] + b.first)
        within = false;
    if (within || clock_type::now() > settle_until)
      break;
    std::this_thread::sleep_for(500ms);
  }

  for (auto& [name, d] : daemons())
    std::printf("boxsoak: %s memory at the end: %s\n", name.c_str(), rss_breakdown(d->pid()).c_str());
  if (after.v["sandbox processes"] > before.v["sandbox processes"]) {
    std::vector<std::string> names;
    sandbox_processes(&names);
    for (auto& n : names)
      std::printf("boxsoak: still running after the workload: %s\n", n.c_str());
  }
  int status = 0;
  for (auto* d : {standard.get(), admission.get()}) {
    ::kill(d->pid(), SIGTERM);
    if (!wait_exit(d->pid(), 30s, status)) {
      s.t.fail("a boxd did not stop within 30 s of SIGTERM");
      ::kill(d->pid(), SIGKILL);
      ::waitpid(d->pid(), &status, 0);
    }
  }
  // A sandbox launcher gets its parent-death signal a moment after boxd exits.
  auto stopped = measure({});
  for (auto until = clock_type::now() + 10s; clock_type::now() < until;) {
    bool back = true;
    for (const char* host : {"mounts", "loop devices", "cgroups", "sandbox processes"})
      back = back && stopped.v[host] <= base.v[host];
    if (back)
      break;
    std::this_thread::sleep_for(200ms);
    stopped = measure({});
  }
  for (auto& [name, d] : daemons())
    stopped.v[name + " state files"] = static_cast<long>(count_files(d->dir() / "box"));

  std::printf("\n%-40s %8s %8s\n", "operation", "ok", "refused");
  for (auto& [name, n] : s.t.ok)
    std::printf("%-40s %8ld %8ld\n", name.c_str(), n, s.t.refused.count(name) ? s.t.refused[name] : 0L);
  for (auto& [name, n] : s.t.refused)
    if (!s.t.ok.count(name))
      std::printf("%-40s %8d %8ld\n", name.c_str(), 0, n);

  std::vector<std::string> breaches;
  print_table(base, before, after, stopped, bounds, breaches);
  std::error_code ec;
  fs::remove_all(admission_dir, ec);
  standard.reset();
  admission.reset();

  auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started).count();
  std::printf("\nboxsoak: %lld s, %zu failures, %zu bounds exceeded\n", static_cast<long long>(elapsed),
              s.t.failures.size(), breaches.size());
  for (auto& f : s.t.failures)
    std::printf("  failure: %s\n", f.c_str());
  return s.t.failures.empty() && breaches.empty() ? 0 : 1;
}
