// boxctl: command-line client of boxd, in the manner of docker's: `boxctl [OPTIONS]
// COMMAND [OPTIONS] [ARGS]`, options anywhere before `--`, `--json` on every command,
// tables with human sizes otherwise, `boxctl help COMMAND`. On an error reply it prints
// the server's message (with a hint where one helps) and exits non-zero.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "app/boxctl_files.hpp"
#include "app/boxctl_table.hpp"
#include "messages/base/json.hpp"
#include "messages/base/version.hpp"
#include "net/ws/client.hpp"

using namespace boxrt;

namespace {

/// Standard input for `exec -i`: at most this much (it travels through the file API).
constexpr size_t max_stdin_bytes = size_t{64} << 20;

struct command_def {
  std::string_view name;
  std::string_view synopsis;
  std::string_view summary;
  /// Options it takes besides the global ones.
  std::set<std::string_view> options;
  std::string_view help;
};

const std::vector<command_def>& commands() {
  static const std::vector<command_def> defs = {
    {"health", "health", "boxd's backend and readiness (box_health)", {}, ""},
    {"status", "status", "this workspace's status and sessions (box_status)", {}, ""},
    {"exec", "exec [--session ID] [--timeout SEC] [--workdir DIR] [--network on|off] [-i] [--stream|--no-stream] [--] CMD...",
     "run a command in a session",
     {"--session", "--timeout", "--workdir", "--network", "-i", "--stream", "--no-stream"},
     "Runs CMD in the session (default \"boxctl\") and exits with its code: 124 on its\n"
     "timeout, 1 when it was ended otherwise. One argument is a shell command line;\n"
     "several are one command and its arguments, each quoted for sh. Options go before\n"
     "`--`; what follows it is the command, whatever it looks like.\n"
     "  --timeout SEC   the command's timeout_sec (boxd's default when absent)\n"
     "  --workdir DIR   where it runs (inside the sandbox)\n"
     "  --network on    a session with its own network (standard mode; docs/network.md)\n"
     "  -i              pass this standard input to the command (at most 64 MiB; it is\n"
     "                  written to the session's workspace as a file with the file\n"
     "                  actions, opened as the command's stdin and removed before it runs)\n"
     "  --stream        print output as it arrives (box_exec_stream); the default when\n"
     "                  stdout is a terminal. --no-stream waits for box_exec's reply.\n"
     "In admission (Cloud) mode a workspace has one session, `global`: --session global."},
    {"sessions", "sessions [--stats]", "this workspace's sessions; --stats: each one's CPU, memory, disk",
     {"--stats"}, ""},
    {"ps", "ps [--limit N]", "every session on this boxd, across workspaces, with CPU, memory and disk",
     {"--limit"},
     "Lists the sessions of every workspace on this boxd (box_list_all_sessions, a\n"
     "host-control action: it needs the control token when boxd has one). --limit N\n"
     "(default 1000, at most 10000). On a cluster, each node lists its own."},
    {"delete", "delete SESSION", "delete a session", {}, ""},
    {"ls", "ls [--session ID] [-l] [-R] [PATH]", "list a folder of the session's workspace", {"--session", "-l", "-R"},
     ""},
    {"cat", "cat [--session ID] PATH", "print a file of the session's workspace", {"--session"}, ""},
    {"rm", "rm [--session ID] [-r] PATH", "remove a file (-r: a folder and what is in it)", {"--session", "-R"}, ""},
    {"cp", "cp [--session ID] [-r] SRC DST", "copy between here and the session's workspace (:PATH)",
     {"--session", "-R"},
     "The sandbox side is written :PATH (cp ./a.txt :/workspace/a.txt, cp -r :out ./out).\n"
     "An upload goes to a temporary name and is moved over its target at the end."},
    {"entitlement", "entitlement put FILE.json", "push an entitlement snapshot", {}, ""},
    {"grant", "grant put FILE.json", "push a sandbox admission grant", {}, ""},
    {"revoke", "revoke FILE.json", "push a sandbox admission revocation", {}, ""},
    {"network", "network get | set FILE.json | set --profile NAME | clear", "a workspace's egress policy",
     {"--profile"},
     "The egress policy of --instance/--workspace (docs/network.md), a host-control action:\n"
     "  get                  the workspace's own policy, the one in force and its source\n"
     "  set FILE.json        the policy in FILE.json (- reads stdin), in force in its running\n"
     "                       sandboxes when this returns\n"
     "  set --profile NAME   one of boxd's box.network_profiles\n"
     "  clear                back to boxd's default (box.network_policy)\n"
     "--workspace '' names the workspace of requests without a context (LangBot's\n"
     "standard mode)."},
    {"metrics", "metrics", "boxd's /metrics scrape (Prometheus text format)", {}, ""},
    {"cluster", "cluster [owner]", "a cluster node's view; owner: who owns --instance/--workspace", {}, ""},
    {"version", "version", "boxctl's version, and boxd's from /healthz", {}, ""},
    {"help", "help [COMMAND]", "this text, or a command's", {}, ""},
  };
  return defs;
}

const command_def* find_command(std::string_view name) {
  for (const auto& c : commands())
    if (c.name == name)
      return &c;
  return nullptr;
}

constexpr std::string_view global_help =
  "global options (anywhere before `--`):\n"
  "  --url ws://HOST:PORT   boxd (BOXCTL_URL; default ws://127.0.0.1:5410)\n"
  "  --token TOKEN          the control token (LANGBOT_BOX_CONTROL_TOKEN)\n"
  "  --instance ID          the instance id to present (BOXCTL_INSTANCE; default boxctl)\n"
  "  --workspace ID         the workspace of tenant commands (default \"default\")\n"
  "  --generation N         its placement generation (default 1)\n"
  "  --json                 print JSON instead of text\n"
  "  -h, --help             help; boxctl help COMMAND for one command\n"
  "  --version              boxctl's version\n";

std::string usage() {
  std::string out = "usage: boxctl [OPTIONS] COMMAND [OPTIONS] [ARGS]\n\ncommands:\n";
  for (const auto& c : commands()) {
    std::string line = "  " + std::string{c.name};
    line.resize(15, ' ');
    out += line + std::string{c.summary} + "\n";
  }
  out += "\n" + std::string{global_help};
  out += "\nboxd trusts the first instance id that connects (unless server.trusted_instance_uuid\n"
         "is set): a later connection naming another is refused with 401.\n";
  return out;
}

std::string command_help(const command_def& c) {
  std::string out = "usage: boxctl " + std::string{c.synopsis} + "\n\n" + std::string{c.summary} + "\n";
  if (!c.help.empty())
    out += "\n" + std::string{c.help} + "\n";
  return out + "\n" + std::string{global_help};
}

/// Options with a value; every other option is a switch.
const std::set<std::string_view> valued = {"--url",     "--token",   "--instance", "--workspace", "--generation",
                                           "--session", "--timeout", "--workdir",  "--limit",
                                           "--network", "--profile"};
const std::set<std::string_view> global_options = {"--url",  "--token", "--instance", "--workspace",
                                                   "--generation", "--json", "--help", "--version"};
/// Other spellings.
const std::map<std::string_view, std::string_view> aliases = {{"-h", "--help"}, {"-r", "-R"}, {"--stdin", "-i"}};

struct parsed {
  std::string command;
  std::map<std::string, std::string> options;  // name -> value ("" for a switch)
  std::vector<std::string> args;
  bool dashdash = false;  // args came after `--`
  bool has(std::string_view name) const { return options.contains(std::string{name}); }
  std::string get(std::string_view name, std::string fallback = {}) const {
    auto i = options.find(std::string{name});
    return i == options.end() ? fallback : i->second;
  }
};

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Options anywhere before `--` (global or the command's), `--name=value` too, and
/// combined switches (`-lR`); the first word that is not an option is the command.
parsed parse(const std::vector<std::string>& argv) {
  parsed p;
  std::vector<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < argv.size(); ++i) {
    const auto& a = argv[i];
    if (a == "--") {
      p.dashdash = true;
      p.args.insert(p.args.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      if (p.command.empty())
        p.command = a;
      else
        p.args.push_back(a);
      continue;
    }
    std::vector<std::string> names;
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      names.push_back(a.substr(0, eq));
      if (eq != std::string::npos)
        inline_value = a.substr(eq + 1);
    } else {
      for (size_t k = 1; k < a.size(); ++k)
        names.push_back(std::string{"-"} + a[k]);
    }
    for (auto& name : names) {
      if (auto al = aliases.find(name); al != aliases.end())
        name = std::string{al->second};
      std::string value;
      if (valued.contains(name)) {
        if (names.size() > 1)
          throw usage_error(a + ": " + name + " takes a value");
        if (inline_value) {
          value = *inline_value;
        } else {
          if (i + 1 >= argv.size())
            throw usage_error(name + " needs a value");
          value = argv[++i];
        }
      } else if (inline_value) {
        throw usage_error(name + " takes no value");
      }
      seen.emplace_back(name, value);
    }
  }
  if (p.command == "help" && !p.args.empty() && !find_command(p.args[0]))
    throw usage_error("no command " + p.args[0]);
  const auto* def = find_command(p.command);
  for (auto& [name, value] : seen) {
    bool ok = global_options.contains(name) || (def && def->options.contains(name));
    if (!ok) {
      if (!def)
        throw usage_error("unknown option " + name);
      throw usage_error("unknown option " + name + " for " + p.command
                        + (p.command == "exec" ? " (the command's own options go after --)" : ""));
    }
    p.options[name] = value;
  }
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// `word` as one sh word: bare when only safe characters, else in single quotes.
std::string sh_quote(const std::string& word) {
  static constexpr std::string_view safe =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_";
  if (!word.empty() && word.find_first_not_of(safe) == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

/// The command line of `exec -- ARGS...`: one argument is already a shell command line;
/// several are a command and its arguments, each quoted so sh sees them unchanged.
std::string command_line(const std::vector<std::string>& args) {
  if (args.size() == 1)
    return args[0];
  std::string out;
  for (auto& a : args) {
    if (!out.empty())
      out += ' ';
    out += sh_quote(a);
  }
  return out;
}

int fail(const std::string& text) {
  std::cerr << text << "\n";
  return 1;
}

/// The server's message, and what to do about it where boxctl knows.
int fail_reply(const net::rpc_response& r) {
  std::string text = r.message;
  if (r.message.find("session_id is runtime-owned") != std::string::npos)
    text += "\nboxctl: in admission (Cloud) mode a workspace has one session, global: use --session global";
  return fail(text);
}

std::string context_json(const parsed& p, const net::client_options& opts) {
  return "{\"instance_uuid\":" + json::quote(opts.instance) + ",\"workspace_uuid\":"
         + json::quote(p.get("--workspace", "default")) + ",\"placement_generation\":"
         + p.get("--generation", "1") + "}";
}

using element = simdjson::dom::element;

std::string str(element e, const char* key) {
  std::string_view v;
  if (e[key].get_string().get(v) == simdjson::SUCCESS)
    return std::string{v};
  return {};
}

int64_t num(element e, const char* key, int64_t fallback = -1) {
  int64_t v = 0;
  if (e[key].get_int64().get(v) == simdjson::SUCCESS)
    return v;
  double d = 0;
  if (e[key].get_double().get(d) == simdjson::SUCCESS)
    return static_cast<int64_t>(d);
  return fallback;
}

std::string cpu_text(element e) {
  double d = 0;
  if (e["cpu_seconds"].get_double().get(d) != simdjson::SUCCESS) {
    int64_t i = 0;
    if (e["cpu_seconds"].get_int64().get(i) != simdjson::SUCCESS)
      return "-";
    d = static_cast<double>(i);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fs", d);
  return buf;
}

/// "2026-12-06T03:04:05Z" as "3m ago" and the like.
std::string ago(const std::string& iso) {
  if (iso.empty())
    return "-";
  std::tm tm{};
  if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm))
    return iso;
  auto secs = static_cast<int64_t>(std::time(nullptr) - timegm(&tm));
  if (secs < 0)
    secs = 0;
  if (secs < 60)
    return std::to_string(secs) + "s ago";
  if (secs < 3600)
    return std::to_string(secs / 60) + "m ago";
  if (secs < 86400)
    return std::to_string(secs / 3600) + "h ago";
  return std::to_string(secs / 86400) + "d ago";
}

/// A reply's data as "key: value" lines (nested objects flattened with dots).
void print_fields(element e, const std::string& prefix = {}) {
  simdjson::dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) {
    std::cout << prefix << ": " << simdjson::minify(e) << "\n";
    return;
  }
  for (auto [k, v] : o) {
    auto key = prefix.empty() ? std::string{k} : prefix + "." + std::string{k};
    std::string_view s;
    if (v.is_object())
      print_fields(v, key);
    else if (v.get_string().get(s) == simdjson::SUCCESS)
      std::cout << key << ": " << s << "\n";
    else
      std::cout << key << ": " << simdjson::minify(v) << "\n";
  }
}

/// Prints `data_json` as JSON (--json) or through `human`.
template <class Human>
int show(const parsed& p, const net::rpc_response& r, Human human) {
  if (r.code != 0)
    return fail_reply(r);
  if (p.has("--json")) {
    std::cout << r.data_json << "\n";
    return 0;
  }
  simdjson::dom::parser parser;
  element d;
  if (parser.parse(r.data_json).get(d) != simdjson::SUCCESS)
    return fail("boxctl: unreadable reply");
  return human(d);
}

int fields(element d) {
  print_fields(d);
  return 0;
}

int print_sessions(element d) {
  boxctl::table t{{"SESSION", "BACKEND", "IMAGE", "NETWORK", "CREATED", "LAST USED"}};
  simdjson::dom::array xs;
  if (d["sessions"].get_array().get(xs) == simdjson::SUCCESS)
    for (auto s : xs)
      t.add({str(s, "session_id"), str(s, "backend_name"), str(s, "image"), str(s, "network"),
             ago(str(s, "created_at")), ago(str(s, "last_used_at"))});
  t.print(std::cout);
  return 0;
}

int print_stats(element d) {
  simdjson::dom::array stats;
  if (d["session_stats"].get_array().get(stats) != simdjson::SUCCESS)
    return fail("boxctl: this boxd's box_status has no session_stats");
  boxctl::table t{{"SESSION", "BACKEND", "CPU", "MEMORY", "DISK"}};
  for (auto s : stats)
    t.add({str(s, "session_id"), str(s, "backend"), cpu_text(s), boxctl::human_bytes(num(s, "memory_bytes")),
           boxctl::human_bytes(num(s, "workspace_bytes"))});
  t.print(std::cout);
  return 0;
}

int print_ps(element d) {
  boxctl::table t{{"INSTANCE", "WORKSPACE", "SESSION", "BACKEND", "CPU", "MEMORY", "DISK", "CREATED", "LAST USED"}};
  simdjson::dom::array xs;
  if (d["sessions"].get_array().get(xs) == simdjson::SUCCESS)
    for (auto s : xs) {
      auto mem = boxctl::human_bytes(num(s, "memory_bytes"));
      if (auto limit = num(s, "memory_limit_bytes"); limit >= 0)
        mem += " / " + boxctl::human_bytes(limit);
      t.add({str(s, "instance_uuid"), str(s, "workspace_uuid"), str(s, "session_id"), str(s, "backend"), cpu_text(s),
             mem, boxctl::human_bytes(num(s, "workspace_bytes")), ago(str(s, "created_at")),
             ago(str(s, "last_used_at"))});
    }
  t.print(std::cout);
  bool truncated = false;
  if (d["truncated"].get_bool().get(truncated)) {}
  if (truncated)
    std::cerr << "boxctl: more sessions than --limit; the list is cut\n";
  return 0;
}

/// `exec --stream`: box_exec_stream's output as it arrives, each stream to its own (with
/// --json: each frame as one JSON line); the command's exit code (124 on its timeout, 1
/// when it was ended otherwise).
int exec_streamed(net::rpc_client& client, const std::string& request, const std::string& context, bool as_json) {
  simdjson::dom::parser parser;
  int code = 1;
  auto r = client.call_stream("box_exec_stream", request, context, [&](const std::string& frame) {
    element d;
    std::string_view which, text, status, ended;
    if (parser.parse(frame).get(d) != simdjson::SUCCESS || d["stream"].get_string().get(which))
      return;
    if (as_json && which != "keepalive")
      std::cout << frame << "\n" << std::flush;
    if (which == "stdout" || which == "stderr") {
      if (d["data"].get_string().get(text)) {}
      if (!as_json) {
        auto* to = which == "stdout" ? stdout : stderr;
        std::fwrite(text.data(), 1, text.size(), to);
        std::fflush(to);
      }
    } else if (which == "result") {
      int64_t exit_code = 1;
      if (d["exit_code"].get_int64().get(exit_code)) {}
      if (d["status"].get_string().get(status)) {}
      if (d["ended"].get_string().get(ended)) {}
      code = status == "timed_out" ? 124 : ended == "exit" ? static_cast<int>(exit_code & 0xff) : 1;
      if (ended != "exit" && ended != "timeout")
        std::fprintf(stderr, "boxctl: the command was ended (%.*s)\n", static_cast<int>(ended.size()), ended.data());
    }
  });
  if (r.code != 0)
    return fail_reply(r);
  return code;
}

/// All of standard input, at most max_stdin_bytes.
std::string read_stdin() {
  std::string data;
  char buf[65536];
  while (true) {
    auto n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw std::runtime_error(std::string{"boxctl: cannot read standard input: "} + std::strerror(errno));
    if (n == 0)
      return data;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_stdin_bytes)
      throw std::runtime_error("boxctl: standard input is larger than 64 MiB (exec -i's limit)");
  }
}

int exec_command(net::rpc_client& client, const parsed& p, const std::string& context) {
  if (p.args.empty())
    throw usage_error("exec needs a command (boxctl help exec)");
  const auto session = p.get("--session", "boxctl");
  std::string cmd = command_line(p.args);
  std::string stdin_path;
  std::string network;
  if (p.has("--network")) {
    network = p.get("--network");
    if (network != "on" && network != "off")
      throw usage_error("--network takes on or off, not " + network);
  }
  if (p.has("-i")) {
    auto data = read_stdin();
    // The file actions make a missing session with the defaults: one with another
    // network is made first, by a command that does nothing.
    if (!network.empty()) {
      auto made = client.call("box_exec", "{\"session_id\":" + json::quote(session) + ",\"cmd\":\"true\",\"network\":"
                                            + json::quote(network) + "}",
                              context);
      if (made.code != 0)
        return fail("boxctl: " + made.message);
    }
    // A name nothing in the sandbox can guess ahead.
    std::string name = ".boxctl-stdin-";
    {
      std::ifstream urandom{"/dev/urandom", std::ios::binary};
      unsigned char bytes[16] = {};
      if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes))
        throw std::runtime_error("boxctl: cannot read /dev/urandom");
      static constexpr char hex[] = "0123456789abcdef";
      for (auto b : bytes)
        name += {hex[b >> 4], hex[b & 15]};
    }
    stdin_path = boxctl::put_file(client, context, session, name, data);
    // Opened as stdin, then removed before the command runs (the descriptor stays). A
    // command runs in its workspace unless --workdir moves it: then the path the sandbox
    // shows is used.
    auto at = p.has("--workdir") ? stdin_path : name;
    // Two newlines: a command that ends in a backslash continues onto the first only.
    cmd = "{ rm -f " + sh_quote(at) + "; " + cmd + "\n\n} < " + sh_quote(at);
  }
  std::string request = "{\"session_id\":" + json::quote(session) + ",\"cmd\":" + json::quote(cmd);
  if (p.has("--timeout")) {
    const auto t = p.get("--timeout");
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos)
      throw usage_error("--timeout takes a number of seconds, not " + t);
    request += ",\"timeout_sec\":" + t;
  }
  if (p.has("--workdir"))
    request += ",\"workdir\":" + json::quote(p.get("--workdir"));
  if (!network.empty())
    request += ",\"network\":" + json::quote(network);
  request += "}";
  bool stream = ::isatty(STDOUT_FILENO) == 1;
  if (p.has("--stream"))
    stream = true;
  if (p.has("--no-stream"))
    stream = false;
  if (stream) {
    auto code = exec_streamed(client, request, context, p.has("--json"));
    // The command removes its standard input as it starts; one refused never did.
    if (!stdin_path.empty())
      boxctl::remove_file(client, context, session, stdin_path);
    return code;
  }
  auto r = client.call("box_exec", request, context);
  if (r.code != 0) {
    if (!stdin_path.empty())
      boxctl::remove_file(client, context, session, stdin_path);
    return fail_reply(r);
  }
  simdjson::dom::parser parser;
  element data;
  if (parser.parse(r.data_json).get(data) != simdjson::SUCCESS)
    return fail("boxctl: unreadable reply");
  if (p.has("--json"))
    std::cout << r.data_json << "\n";
  std::string_view out, err, status;
  // Absent fields stay empty.
  if (data["stdout"].get_string().get(out)) {}
  if (data["stderr"].get_string().get(err)) {}
  if (data["status"].get_string().get(status)) {}
  if (!p.has("--json")) {
    // As the command wrote it, ending with a newline.
    if (!out.empty())
      std::cout << out << (out.back() == '\n' ? "" : "\n");
    if (!err.empty())
      std::cerr << err << (err.back() == '\n' ? "" : "\n");
  }
  if (status == "timed_out")
    return 124;
  int64_t code = 0;
  if (data["exit_code"].get_int64().get(code)) {}
  return static_cast<int>(code & 0xff);
}

/// A refused handshake, explained: the contract fixes boxd's answer as a bare 401.
std::string explain_connect(const std::string& what, const net::client_options& opts) {
  if (what.find("HTTP 401") == std::string::npos)
    return "boxctl: " + what;
  return "boxctl: boxd refused the connection (HTTP 401 Unauthorized). Either:\n"
         "  - the control token is missing or wrong: pass --token or set LANGBOT_BOX_CONTROL_TOKEN\n"
         "    (boxd's own is server.control_token or LANGBOT_BOX_CONTROL_TOKEN); or\n"
         "  - the instance id \""
         + opts.instance
         + "\" is not the one boxd trusts: boxd pins the first instance id that\n"
           "    connects (LangBot's, when LangBot connected first), or server.trusted_instance_uuid.\n"
           "    Pass that id with --instance or BOXCTL_INSTANCE; boxd's log names the refused one\n"
           "    (\"RPC handshake refused: instance ... is not the pinned instance\").";
}

int run(const parsed& p, net::client_options& opts) {
  const auto& c = p.command;
  if (c == "help") {
    if (p.args.empty()) {
      std::cout << usage();
      return 0;
    }
    std::cout << command_help(*find_command(p.args[0]));
    return 0;
  }
  if (p.has("--help")) {
    if (auto* def = find_command(c))
      std::cout << command_help(*def);
    else
      std::cout << usage();
    return 0;
  }
  if (c.empty()) {
    if (p.has("--version")) {
      std::cout << "boxctl " << version_line() << "\n";
      return 0;
    }
    std::cerr << usage();
    return 2;
  }
  const auto* def = find_command(c);
  if (!def)
    throw usage_error("unknown command " + c + " (boxctl help lists them)");
  const auto context = context_json(p, opts);
  auto positional = [&](size_t min, size_t max) {
    if (p.args.size() < min || p.args.size() > max)
      throw usage_error("usage: boxctl " + std::string{def->synopsis});
  };
  if (c == "version") {
    positional(0, 0);
    auto res = net::http_get(opts, "/healthz");
    std::string boxd = "unreachable";
    simdjson::dom::parser parser;
    element d;
    if (res.status == 200 && parser.parse(res.body).get(d) == simdjson::SUCCESS)
      boxd = str(d, "version");
    if (p.has("--json")) {
      std::cout << "{\"boxctl\":" << json::quote(version_line()) << ",\"boxd\":" << json::quote(boxd) << "}\n";
    } else {
      std::cout << "boxctl " << version_line() << "\n"
                << "boxd   " << boxd << "\n";
    }
    return 0;
  }
  if (c == "cluster") {
    // GET /cluster or /cluster/owner (docs/cluster.md "Observability").
    std::string path = "/cluster";
    if (!p.args.empty() && p.args[0] == "owner") {
      auto encode = [](const std::string& v) {
        static constexpr char hex[] = "0123456789ABCDEF";
        std::string out;
        for (unsigned char ch : v) {
          if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~')
            out += static_cast<char>(ch);
          else
            out += {'%', hex[ch >> 4], hex[ch & 15]};
        }
        return out;
      };
      path += "/owner?instance=" + encode(opts.instance) + "&workspace=" + encode(p.get("--workspace", "default"));
    }
    positional(0, p.args.empty() || p.args[0] != "owner" ? 0 : 1);
    auto res = net::http_get(opts, path);
    if (res.status != 200)
      return fail("boxctl: " + path + " answered " + std::to_string(res.status) + ": " + res.body);
    std::cout << res.body << "\n";
    return 0;
  }
  if (c == "metrics") {
    positional(0, 0);
    // Plain HTTP on the same port: no WebSocket, no instance pinned.
    auto res = net::http_get(opts, "/metrics");
    if (res.status != 200)
      return fail("boxctl: /metrics answered " + std::to_string(res.status) + ": " + res.body);
    std::cout << res.body;
    return 0;
  }
  net::rpc_client client;
  try {
    client.connect(opts);
  } catch (const std::exception& e) {
    return fail(explain_connect(e.what(), opts));
  }
  if (c == "health") {
    positional(0, 0);
    return show(p, client.call("box_health", "{}"), fields);
  }
  if (c == "status") {
    positional(0, 0);
    return show(p, client.call("box_status", "{}", context), [](element d) {
      simdjson::dom::object o;
      if (d.get_object().get(o) != simdjson::SUCCESS)
        return fail("boxctl: unreadable reply");
      bool stats = false;
      for (auto [k, v] : o) {
        if (k == "session_stats") {
          stats = true;
          continue;
        }
        std::string_view s;
        if (v.is_object())
          print_fields(v, std::string{k});
        else if (v.get_string().get(s) == simdjson::SUCCESS)
          std::cout << k << ": " << s << "\n";
        else
          std::cout << k << ": " << simdjson::minify(v) << "\n";
      }
      if (!stats)
        return 0;
      std::cout << "\n";
      return print_stats(d);
    });
  }
  if (c == "sessions") {
    positional(0, 0);
    if (p.has("--stats"))
      return show(p, client.call("box_status", "{}", context), print_stats);
    return show(p, client.call("box_get_sessions", "{}", context), print_sessions);
  }
  if (c == "ps") {
    positional(0, 0);
    std::string data = "{}";
    if (p.has("--limit")) {
      auto l = p.get("--limit");
      if (l.empty() || l.find_first_not_of("0123456789") != std::string::npos)
        throw usage_error("--limit takes a number, not " + l);
      data = "{\"limit\":" + l + "}";
    }
    return show(p, client.call("box_list_all_sessions", data), print_ps);
  }
  if (c == "delete") {
    positional(1, 1);
    return show(p, client.call("box_delete_session", "{\"session_id\":" + json::quote(p.args[0]) + "}", context),
                [](element d) {
                  std::cout << "deleted " << str(d, "deleted") << "\n";
                  return 0;
                });
  }
  if (c == "entitlement" || c == "grant") {
    positional(2, 2);
    if (p.args[0] != "put")
      throw usage_error("usage: boxctl " + std::string{def->synopsis});
    auto action = c == "grant" ? "box_upsert_sandbox_admission_grant" : "box_put_workspace_entitlement";
    return show(p, client.call(action, read_file(p.args[1])), fields);
  }
  if (c == "network") {
    positional(1, 2);
    const auto& verb = p.args[0];
    auto data = "{\"instance_uuid\":" + json::quote(opts.instance)
                + ",\"workspace_uuid\":" + json::quote(p.get("--workspace", "default"));
    if (verb == "get" && p.args.size() == 1 && !p.has("--profile"))
      return show(p, client.call("box_get_network_policy", data + "}"), fields);
    if (verb == "clear" && p.args.size() == 1 && !p.has("--profile"))
      return show(p, client.call("box_set_network_policy", data + ",\"policy\":null}"), fields);
    if (verb == "set" && p.args.size() == 1 && p.has("--profile"))
      return show(p, client.call("box_set_network_policy", data + ",\"profile\":" + json::quote(p.get("--profile")) + "}"),
                  fields);
    if (verb == "set" && p.args.size() == 2 && !p.has("--profile")) {
      std::string policy;
      if (p.args[1] == "-") {
        std::stringstream buf;
        buf << std::cin.rdbuf();
        policy = buf.str();
      } else {
        policy = read_file(p.args[1]);
      }
      return show(p, client.call("box_set_network_policy", data + ",\"policy\":" + policy + "}"), fields);
    }
    throw usage_error("usage: boxctl " + std::string{def->synopsis});
  }
  if (c == "revoke") {
    positional(1, 1);
    return show(p, client.call("box_revoke_sandbox_admission_grant", read_file(p.args[0])), fields);
  }
  if (boxctl::is_files_command(c)) {
    boxctl::files_flags f;
    f.session = p.get("--session", "boxctl");
    f.recursive = p.has("-R");
    f.long_form = p.has("-l");
    f.json = p.has("--json");
    return boxctl::files_command(client, context, c, p.args, f);
  }
  if (c == "exec")
    return exec_command(client, p, context);
  throw usage_error("unknown command " + c);
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args{argv + 1, argv + argc};
  net::client_options opts;
  if (auto url = std::getenv("BOXCTL_URL"))
    opts.url = url;
  if (auto token = std::getenv("LANGBOT_BOX_CONTROL_TOKEN"))
    opts.token = token;
  if (auto instance = std::getenv("BOXCTL_INSTANCE"); instance && *instance)
    opts.instance = instance;
  try {
    auto p = parse(args);
    if (p.has("--url"))
      opts.url = p.get("--url");
    if (p.has("--token"))
      opts.token = p.get("--token");
    if (p.has("--instance"))
      opts.instance = p.get("--instance");
    if (auto g = p.get("--generation", "1"); g.empty() || g.find_first_not_of("0123456789") != std::string::npos)
      throw usage_error("--generation takes a number, not " + g);
    if (p.has("--version") && p.command.empty()) {
      std::cout << "boxctl " << version_line() << "\n";
      return 0;
    }
    return run(p, opts);
  } catch (const usage_error& e) {
    std::cerr << "boxctl: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    return fail(std::string{"boxctl: "} + e.what());
  }
}
