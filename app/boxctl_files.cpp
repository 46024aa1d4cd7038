// boxctl's file commands (docs/files.md): ls, cat, rm and cp between this machine and a
// session's workspace, over the file actions. Files move in ranged calls of at most
// 1 MiB (server.max_file_call_bytes' default), base64 on the wire; an upload goes to a
// temporary name beside its target and is moved over it at the end, so a failed copy
// never leaves a partial file under the target's name.
#include "app/boxctl_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <stdexcept>

#include <simdjson.h>

#include "messages/base/base64.hpp"
#include "messages/base/json.hpp"
#include "app/boxctl_table.hpp"

namespace boxrt::boxctl {

namespace {

namespace fs = std::filesystem;

constexpr int64_t call_bytes = 1 << 20;

struct files_client {
  files_client(net::rpc_client& c, const std::string& ctx) : client{c}, context{ctx} {}
  net::rpc_client& client;
  const std::string& context;
  std::string session = "boxctl";
  simdjson::dom::parser parser;
  /// What a cp moved (its --json summary).
  int64_t files = 0;
  int64_t bytes = 0;

  /// The action's data as JSON, or throws with the server's message.
  simdjson::dom::element call(const std::string& action, const std::string& fields) {
    auto r = client.call(action, "{\"session_id\":" + json::quote(session) + "," + fields + "}", context);
    if (r.code != 0)
      throw std::runtime_error(r.message);
    last_ = std::move(r.data_json);
    simdjson::dom::element d;
    if (parser.parse(last_).get(d) != simdjson::SUCCESS)
      throw std::runtime_error("boxctl: unreadable reply to " + action);
    return d;
  }

  /// Reads the sandbox file `path` in ranged calls, handing each piece to `sink`.
  void download(const std::string& path, const std::function<void(std::string_view)>& sink) {
    int64_t offset = 0;
    while (true) {
      auto d = call("box_read_file", "\"path\":" + json::quote(path) + ",\"offset\":" + std::to_string(offset)
                                        + ",\"length\":" + std::to_string(call_bytes) + ",\"encoding\":\"base64\"");
      std::string_view text;
      bool eof = true;
      if (d["content"].get_string().get(text) || d["eof"].get_bool().get(eof))
        throw std::runtime_error("boxctl: unreadable reply to box_read_file");
      auto raw = base64_decode(text);
      if (!raw)
        throw std::runtime_error("boxctl: unreadable content from box_read_file");
      sink(*raw);
      offset += static_cast<int64_t>(raw->size());
      bytes += static_cast<int64_t>(raw->size());
      if (eof || raw->empty()) {
        ++files;
        return;
      }
    }
  }

  /// Reads the sandbox file `path` into `out` (an open descriptor).
  void download(const std::string& path, int out) {
    download(path, [out](std::string_view raw) {
      for (size_t done = 0; done < raw.size();) {
        auto n = ::write(out, raw.data() + done, raw.size() - done);
        if (n < 0)
          throw std::runtime_error(std::string{"boxctl: write: "} + std::strerror(errno));
        done += static_cast<size_t>(n);
      }
    });
  }

  /// Writes the local file `local` to the sandbox path `path`: under a temporary name,
  /// then moved over `path`.
  void upload(const std::string& local, const std::string& path) {
    int fd = ::open(local.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw std::runtime_error("boxctl: cannot read " + local + ": " + std::strerror(errno));
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } close_it{fd};
    const auto part = path + ".boxctl-part-" + std::to_string(::getpid());
    try {
      std::string buf(static_cast<size_t>(call_bytes), '\0');
      int64_t offset = 0;
      bool first = true;
      while (true) {
        auto n = ::read(fd, buf.data(), buf.size());
        if (n < 0)
          throw std::runtime_error("boxctl: cannot read " + local + ": " + std::strerror(errno));
        if (n == 0 && !first)
          break;
        call("box_write_file", "\"path\":" + json::quote(part) + ",\"offset\":" + std::to_string(offset)
                                 + ",\"truncate\":" + (first ? "true" : "false") + ",\"make_parents\":true"
                                 + ",\"encoding\":\"base64\",\"content\":"
                                 + json::quote(base64_encode(std::string_view{buf.data(), static_cast<size_t>(n)})));
        first = false;
        offset += n;
        bytes += n;
        if (n == 0)
          break;
      }
      ++files;
      call("box_move_file", "\"path\":" + json::quote(part) + ",\"to\":" + json::quote(path) + ",\"overwrite\":true");
    } catch (...) {
      try {
        call("box_remove_file", "\"path\":" + json::quote(part));
      } catch (...) {
      }
      throw;
    }
  }

  /// Writes `data` to `path` in ranged calls; the path as the sandbox shows it.
  std::string upload_bytes(const std::string& path, std::string_view data) {
    std::string shown;
    size_t offset = 0;
    do {
      auto n = std::min(data.size() - offset, static_cast<size_t>(call_bytes));
      // The first call writes a whole new file (through a temporary name and a rename,
      // so a link planted at the name is replaced, never followed); the rest append.
      auto where = offset == 0 ? std::string{} : ",\"offset\":" + std::to_string(offset);
      auto d = call("box_write_file", "\"path\":" + json::quote(path) + where
                                        + ",\"mode\":384,\"encoding\":\"base64\",\"content\":"
                                        + json::quote(base64_encode(data.substr(offset, n))));
      std::string_view p;
      if (d["path"].get_string().get(p) == simdjson::SUCCESS)
        shown = std::string{p};
      offset += n;
    } while (offset < data.size());
    return shown;
  }

  std::string type_of(const std::string& path) {
    auto d = call("box_stat_file", "\"path\":" + json::quote(path));
    std::string_view type;
    if (d["type"].get_string().get(type))
      throw std::runtime_error("boxctl: unreadable reply to box_stat_file");
    return std::string{type};
  }

  /// The entries of the sandbox folder `path` (one level): name and type.
  std::vector<std::pair<std::string, std::string>> entries(const std::string& path) {
    auto d = call("box_list_files", "\"path\":" + json::quote(path));
    std::vector<std::pair<std::string, std::string>> out;
    simdjson::dom::array list;
    if (d["entries"].get_array().get(list))
      throw std::runtime_error("boxctl: unreadable reply to box_list_files");
    bool truncated = false;
    if (d["truncated"].get_bool().get(truncated)) {}
    if (truncated)
      throw std::runtime_error("boxctl: " + path + " holds more entries than one listing gives");
    for (auto e : list) {
      std::string_view name, type;
      if (e["name"].get_string().get(name) || e["type"].get_string().get(type))
        continue;
      out.emplace_back(std::string{name}, std::string{type});
    }
    return out;
  }

  void download_tree(const std::string& path, const std::string& local) {
    fs::create_directories(local);
    for (auto& [name, type] : entries(path)) {
      auto from = path + "/" + name, to = local + "/" + name;
      if (type == "dir")
        download_tree(from, to);
      else if (type == "file")
        download_file(from, to);
      else
        std::cerr << "boxctl: skipped " << from << " (" << type << ")\n";
    }
  }

  void download_file(const std::string& path, const std::string& local) {
    const auto part = local + ".boxctl-part";
    int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::runtime_error("boxctl: cannot write " + part + ": " + std::strerror(errno));
    try {
      download(path, fd);
    } catch (...) {
      ::close(fd);
      ::unlink(part.c_str());
      throw;
    }
    ::close(fd);
    if (::rename(part.c_str(), local.c_str()) != 0)
      throw std::runtime_error("boxctl: cannot write " + local + ": " + std::strerror(errno));
  }

  void upload_tree(const std::string& local, const std::string& path) {
    call("box_make_dir", "\"path\":" + json::quote(path) + ",\"make_parents\":true");
    for (auto& e : fs::directory_iterator{local}) {
      auto to = path + "/" + e.path().filename().string();
      if (e.is_symlink())
        std::cerr << "boxctl: skipped " << e.path().string() << " (symlink)\n";
      else if (e.is_directory())
        upload_tree(e.path().string(), to);
      else if (e.is_regular_file())
        upload(e.path().string(), to);
    }
  }

 private:
  std::string last_;
};

/// A sandbox path is written ":PATH".
bool remote(const std::string& arg) { return !arg.empty() && arg.front() == ':'; }

} // namespace

int files_command(net::rpc_client& client, const std::string& context, const std::string& command,
                  const std::vector<std::string>& args, const files_flags& flags) {
  files_client fc{client, context};
  fc.session = flags.session;
  const bool recursive = flags.recursive, long_form = flags.long_form;
  auto strip = [](const std::string& a) { return a.size() > 1 && a.front() == ':' ? a.substr(1) : a; };
  try {
    if (command == "ls") {
      if (args.size() > 1)
        throw std::runtime_error("boxctl: ls [--session ID] [-l] [-R] [PATH]");
      auto path = args.empty() ? std::string{"."} : strip(args[0]);
      auto d = fc.call("box_list_files", "\"path\":" + json::quote(path) + ",\"depth\":" + (recursive ? "16" : "1"));
      if (flags.json) {
        std::cout << simdjson::minify(d) << "\n";
        return 0;
      }
      simdjson::dom::array list;
      if (d["entries"].get_array().get(list))
        throw std::runtime_error("boxctl: unreadable reply to box_list_files");
      for (auto e : list) {
        std::string_view p, type, target;
        int64_t size = 0, mode = 0;
        if (e["path"].get_string().get(p) || e["type"].get_string().get(type)) {}
        if (e["size"].get_int64().get(size) || e["mode"].get_int64().get(mode)) {}
        if (e["target"].get_string().get(target)) {}
        if (long_form)
          std::printf("%-7.*s %04llo %10s ", static_cast<int>(type.size()), type.data(),
                      static_cast<unsigned long long>(mode), human_bytes(size).c_str());
        std::printf("%.*s%s%.*s\n", static_cast<int>(p.size()), p.data(), target.empty() ? "" : " -> ",
                    static_cast<int>(target.size()), target.data());
      }
      bool truncated = false;
      if (d["truncated"].get_bool().get(truncated)) {}
      if (truncated)
        std::fprintf(stderr, "boxctl: the listing was cut at server.max_list_entries\n");
      return 0;
    }
    if (command == "cat") {
      if (args.size() != 1)
        throw std::runtime_error("boxctl: cat [--session ID] PATH");
      std::fflush(stdout);
      if (flags.json) {
        // The bytes as base64 in one object (a file of any content survives JSON).
        std::string content;
        fc.download(strip(args[0]), [&content](std::string_view raw) { content += raw; });
        std::cout << "{\"path\":" << json::quote(strip(args[0])) << ",\"encoding\":\"base64\",\"content\":"
                  << json::quote(base64_encode(content)) << "}\n";
        return 0;
      }
      fc.download(strip(args[0]), STDOUT_FILENO);
      return 0;
    }
    if (command == "rm") {
      if (args.size() != 1)
        throw std::runtime_error("boxctl: rm [--session ID] [-r] PATH");
      auto d = fc.call("box_remove_file", "\"path\":" + json::quote(strip(args[0])) + ",\"recursive\":" + (recursive ? "true" : "false"));
      if (flags.json)
        std::cout << simdjson::minify(d) << "\n";
      return 0;
    }
    if (command == "cp") {
      auto summary = [&](const std::string& from, const std::string& to) {
        if (flags.json)
          std::cout << "{\"from\":" << json::quote(from) << ",\"to\":" << json::quote(to)
                    << ",\"files\":" << fc.files << ",\"bytes\":" << fc.bytes << "}\n";
      };
      if (args.size() != 2 || remote(args[0]) == remote(args[1]))
        throw std::runtime_error("boxctl: cp [--session ID] [-r] SRC DST (one of them :PATH in the sandbox)");
      if (remote(args[1])) {
        auto local = args[0], path = strip(args[1]);
        struct stat st{};
        if (::stat(local.c_str(), &st) != 0)
          throw std::runtime_error("boxctl: cannot read " + local + ": " + std::strerror(errno));
        if (S_ISDIR(st.st_mode)) {
          if (!recursive)
            throw std::runtime_error("boxctl: " + local + " is a directory (use -r)");
          fc.upload_tree(local, path);
        } else {
          fc.upload(local, path);
        }
        summary(local, path);
        return 0;
      }
      auto path = strip(args[0]), local = args[1];
      auto type = fc.type_of(path);
      if (type == "dir") {
        if (!recursive)
          throw std::runtime_error("boxctl: " + path + " is a directory (use -r)");
        fc.download_tree(path, local);
      } else {
        std::error_code ec;
        if (fs::is_directory(local, ec))
          local += "/" + fs::path{path}.filename().string();
        fc.download_file(path, local);
      }
      summary(path, local);
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cerr << "boxctl: unknown command " << command << "\n";
  return 1;
}

std::string put_file(net::rpc_client& client, const std::string& context, const std::string& session,
                     const std::string& path, std::string_view data) {
  files_client fc{client, context};
  fc.session = session;
  auto upload = [&] {
    try {
      return fc.upload_bytes(path, data);
    } catch (const std::runtime_error& e) {
      // Nothing half-written stays behind (a failure past the first call).
      if (std::string_view{e.what()}.rfind("BoxSessionNotFoundError", 0) != 0)
        remove_file(client, context, session, path);
      throw;
    }
  };
  try {
    return upload();
  } catch (const std::runtime_error& e) {
    if (std::string_view{e.what()}.rfind("BoxSessionNotFoundError", 0) != 0)
      throw;
  }
  // The session does not exist yet: made as box_exec would make it.
  auto r = client.call("box_create_session", "{\"session_id\":" + json::quote(session) + "}", context);
  if (r.code != 0)
    throw std::runtime_error(r.message);
  return upload();
}

void remove_file(net::rpc_client& client, const std::string& context, const std::string& session,
                 const std::string& path) {
  files_client fc{client, context};
  fc.session = session;
  try {
    fc.call("box_remove_file", "\"path\":" + json::quote(path));
  } catch (const std::exception&) {
  }
}

bool is_files_command(const std::string& command) {
  return command == "ls" || command == "cat" || command == "rm" || command == "cp";
}

} // namespace boxrt::boxctl
