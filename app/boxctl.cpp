// boxctl: command-line client of boxd. Prints results; on an error reply it prints the
// server's message and exits non-zero.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "app/boxctl_files.hpp"
#include "app/cli_flags.hpp"
#include "messages/base/json.hpp"
#include "net/ws/client.hpp"

using namespace boxrt;

namespace {

const char* usage =
  "usage: boxctl [--url ws://HOST:PORT] [--token TOKEN] [--instance ID]\n"
  "              [--workspace ID] [--generation N] <command>\n"
  "commands:\n"
  "  health                      backend health (box_health)\n"
  "  status                      this workspace's status (box_status)\n"
  "  exec [--session ID] [--stream|--no-stream] -- CMD\n"
  "                              run CMD; prints stdout/stderr, exits with its code\n"
  "                              (124 on its timeout). One argument is a shell command\n"
  "                              line; several are one command and its arguments, each\n"
  "                              quoted for sh. --stream (the default when stdout is a\n"
  "                              terminal) prints output as it arrives (box_exec_stream)\n"
  "  sessions [--stats]          list this workspace's sessions; --stats: each one's\n"
  "                              CPU time, memory and workspace bytes (box_status)\n"
  "  delete SESSION              delete a session\n"
  "  ls [--session ID] [-l] [-R] [PATH]\n"
  "                              list a folder of the session's workspace\n"
  "  cat [--session ID] PATH     print a file of the session's workspace\n"
  "  rm [--session ID] [-r] PATH remove a file (-r: a folder and what is in it)\n"
  "  cp [--session ID] [-r] SRC DST\n"
  "                              copy between here and the session's workspace, which\n"
  "                              is written :PATH (cp ./a.txt :/workspace/a.txt, or\n"
  "                              cp -r :out ./out). Sessions default to \"boxctl\"\n"
  "  entitlement put FILE.json   push an entitlement snapshot\n"
  "  grant put FILE.json         push a sandbox admission grant\n"
  "  revoke FILE.json            push a sandbox admission revocation\n"
  "  metrics                     boxd's /metrics scrape (Prometheus text format)\n"
  "  cluster                     a cluster node's view: members, links, serving\n"
  "  cluster owner [--instance I] [--workspace W]\n"
  "                              who owns a workspace, by which epoch\n"
  "environment: BOXCTL_URL, BOXCTL_INSTANCE (default for --instance),\n"
  "             LANGBOT_BOX_CONTROL_TOKEN\n"
  "boxd trusts the first instance id it sees (unless server.trusted_instance_uuid is\n"
  "set): every later connection must name the same one, or it is refused with 401.\n";

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

/// `sessions --stats`: box_status's session_stats as a table ("-" where unknown).
int print_stats(const std::string& status_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element data;
  simdjson::dom::array stats;
  if (parser.parse(status_json).get(data) != simdjson::SUCCESS
      || data["session_stats"].get_array().get(stats) != simdjson::SUCCESS)
    return fail("boxctl: this boxd's box_status has no session_stats");
  std::printf("%-24s %-9s %12s %14s %16s\n", "SESSION", "BACKEND", "CPU_SECONDS", "MEMORY_BYTES",
              "WORKSPACE_BYTES");
  for (auto s : stats) {
    std::string_view id, backend;
    if (s["session_id"].get_string().get(id)) {}
    if (s["backend"].get_string().get(backend)) {}
    auto number = [&](const char* key) -> std::string {
      double d = 0;
      int64_t i = 0;
      if (s[key].get_int64().get(i) == simdjson::SUCCESS)
        return std::to_string(i);
      if (s[key].get_double().get(d) == simdjson::SUCCESS) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", d);
        return buf;
      }
      return "-";
    };
    std::printf("%-24.*s %-9.*s %12s %14s %16s\n", static_cast<int>(id.size()), id.data(),
                static_cast<int>(backend.size()), backend.data(), number("cpu_seconds").c_str(),
                number("memory_bytes").c_str(), number("workspace_bytes").c_str());
  }
  return 0;
}

/// `exec --stream`: box_exec_stream's output as it arrives, each stream to its own; the
/// command's exit code (124 on its timeout, 1 when it was ended otherwise).
int exec_streamed(net::rpc_client& client, const std::string& request, const std::string& context) {
  simdjson::dom::parser parser;
  int code = 1;
  auto r = client.call_stream("box_exec_stream", request, context, [&](const std::string& frame) {
    simdjson::dom::element d;
    std::string_view which, text, status, ended;
    if (parser.parse(frame).get(d) != simdjson::SUCCESS || d["stream"].get_string().get(which))
      return;
    if (which == "stdout" || which == "stderr") {
      if (d["data"].get_string().get(text)) {}
      auto* to = which == "stdout" ? stdout : stderr;
      std::fwrite(text.data(), 1, text.size(), to);
      std::fflush(to);
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
    return fail(r.message);
  return code;
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
  std::string workspace = "default";
  int64_t generation = 1;
  size_t i = 0;
  try {
    i = cli::read_flags(args, 0,
                        {{"--url", &opts.url},
                         {"--token", &opts.token},
                         {"--instance", &opts.instance},
                         {"--workspace", &workspace},
                         {"--generation", &generation}});
  } catch (const std::invalid_argument& e) {
    return fail(std::string{"boxctl: "} + e.what() + "\n" + usage);
  }
  if (i < args.size() && (args[i] == "-h" || args[i] == "--help")) {
    std::cout << usage;
    return 0;
  }
  if (i >= args.size())
    return fail(std::string{"boxctl: no command\n"} + usage);
  auto command = args[i++];
  std::vector<std::string> rest{args.begin() + static_cast<long>(i), args.end()};
  std::string context = "{\"instance_uuid\":" + json::quote(opts.instance) + ",\"workspace_uuid\":"
                        + json::quote(workspace) + ",\"placement_generation\":"
                        + std::to_string(generation) + "}";
  try {
    if (command == "cluster") {
      // GET /cluster or /cluster/owner (docs/cluster.md "Observability").
      std::string path = "/cluster";
      if (!rest.empty() && rest[0] == "owner") {
        std::string inst = opts.instance, ws = workspace;
        for (size_t k = 1; k < rest.size(); ++k) {
          if ((rest[k] == "--instance" || rest[k] == "--workspace") && k + 1 < rest.size())
            (rest[k] == "--instance" ? inst : ws) = rest[k + 1], ++k;
          else
            return fail("boxctl: cluster owner takes --instance I --workspace W\n" + std::string{usage});
        }
        auto encode = [](const std::string& v) {
          static constexpr char hex[] = "0123456789ABCDEF";
          std::string out;
          for (unsigned char c : v) {
            if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
              out += static_cast<char>(c);
            else
              out += {'%', hex[c >> 4], hex[c & 15]};
          }
          return out;
        };
        path += "/owner?instance=" + encode(inst) + "&workspace=" + encode(ws);
      } else if (!rest.empty()) {
        return fail("boxctl: unknown cluster command " + rest[0] + "\n" + usage);
      }
      auto res = net::http_get(opts, path);
      if (res.status != 200)
        return fail("boxctl: " + path + " answered " + std::to_string(res.status) + ": " + res.body);
      std::cout << res.body << "\n";
      return 0;
    }
    if (command == "metrics") {
      // Plain HTTP on the same port: no WebSocket, no instance pinned.
      auto res = net::http_get(opts, "/metrics");
      if (res.status != 200)
        return fail("boxctl: /metrics answered " + std::to_string(res.status) + ": " + res.body);
      std::cout << res.body;
      return 0;
    }
    net::rpc_client client;
    client.connect(opts);
    auto show = [&](const net::rpc_response& r) {
      if (r.code != 0)
        return fail(r.message);
      std::cout << r.data_json << "\n";
      return 0;
    };
    if (command == "health")
      return show(client.call("box_health", "{}"));
    if (command == "status")
      return show(client.call("box_status", "{}", context));
    if (command == "sessions" && rest.size() == 1 && rest[0] == "--stats") {
      auto r = client.call("box_status", "{}", context);
      if (r.code != 0)
        return fail(r.message);
      return print_stats(r.data_json);
    }
    if (command == "sessions") {
      if (!rest.empty())
        return fail("boxctl: sessions [--stats]");
      return show(client.call("box_get_sessions", "{}", context));
    }
    if (command == "delete") {
      if (rest.size() != 1)
        return fail("boxctl: delete SESSION");
      return show(client.call("box_delete_session", "{\"session_id\":" + json::quote(rest[0]) + "}",
                              context));
    }
    if (command == "entitlement" || command == "grant") {
      if (rest.size() != 2 || rest[0] != "put")
        return fail("boxctl: " + command + " put FILE.json");
      auto action = command == "grant" ? "box_upsert_sandbox_admission_grant"
                                       : "box_put_workspace_entitlement";
      return show(client.call(action, read_file(rest[1])));
    }
    if (command == "revoke") {
      if (rest.size() != 1)
        return fail("boxctl: revoke FILE.json");
      return show(client.call("box_revoke_sandbox_admission_grant", read_file(rest[0])));
    }
    if (boxctl::is_files_command(command))
      return boxctl::files_command(client, context, command, rest);
    if (command == "exec") {
      std::string session = "boxctl";
      bool stream = ::isatty(STDOUT_FILENO) == 1;
      size_t j = 0;
      for (; j < rest.size(); ++j) {
        if (rest[j] == "--session" && j + 1 < rest.size())
          session = rest[++j];
        else if (rest[j] == "--stream" || rest[j] == "--no-stream")
          stream = rest[j] == "--stream";
        else if (rest[j] == "--") {
          ++j;
          break;
        } else
          break;
      }
      std::vector<std::string> cmd{rest.begin() + static_cast<long>(j), rest.end()};
      if (cmd.empty())
        return fail("boxctl: exec [--session ID] [--stream|--no-stream] -- CMD...");
      const auto request = "{\"session_id\":" + json::quote(session) + ",\"cmd\":" + json::quote(command_line(cmd)) + "}";
      if (stream)
        return exec_streamed(client, request, context);
      auto r = client.call("box_exec", request, context);
      if (r.code != 0)
        return fail(r.message);
      simdjson::dom::parser parser;
      simdjson::dom::element data;
      if (parser.parse(r.data_json).get(data) != simdjson::SUCCESS)
        return fail("boxctl: unreadable reply");
      std::string_view out, err, status;
      // Absent fields stay empty.
      if (data["stdout"].get_string().get(out)) {}
      if (data["stderr"].get_string().get(err)) {}
      if (data["status"].get_string().get(status)) {}
      // As the command wrote it, ending with a newline.
      if (!out.empty())
        std::cout << out << (out.back() == '\n' ? "" : "\n");
      if (!err.empty())
        std::cerr << err << (err.back() == '\n' ? "" : "\n");
      if (status == "timed_out")
        return 124;
      int64_t code = 0;
      if (data["exit_code"].get_int64().get(code)) {}
      return static_cast<int>(code & 0xff);
    }
    return fail("boxctl: unknown command " + command + "\n" + usage);
  } catch (const std::exception& e) {
    return fail(std::string{"boxctl: "} + e.what());
  }
}
