// The pipe protocol between the bwrap backend and `boxrt-init`, the small process of
// ours that keeps a warm sandbox alive and runs each exec inside it. Plain C++, shared
// by both sides; no allocation tricks, no dependencies.
//
// Framing: every message is a 4-byte little-endian length, then that many bytes of
// fields. A field is a 4-byte little-endian length and its bytes. Numbers travel as
// decimal text.
//
// Every request starts with its kind. On init's stdin and stdout (one exec at a time):
//
//   init -> host, once at start:  "ready"
//   host -> init, per exec:       "exec", workdir, cmd, max_output_bytes, env count,
//                                 KEY=VALUE...
//   init -> host, per exec:       "result", exit code, stdout kept, stdout total,
//                                 stderr kept, stderr total, duration ms, error
//
// A streamed exec (box_exec_stream) is the same request with the kind "stream": init
// then keeps nothing and sends the output as it comes, before the result,
//   init -> host, any number:     "out", stream (1 stdout, 2 stderr), bytes
// one frame at a time and only while the host reads them: while a frame waits, init
// reads no more of the command's pipes (the command blocks on its writes), and still
// serves the control channel. A "kill" with an empty name signals the running exec's
// process group.
// A non-empty `error` means the command did not start (workdir or fork failure); its
// text is the stderr the caller sees, with exit code 1 as `sh -c 'mkdir -p ...'` gives.
//
// Managed processes go over a second channel, a socket of their own (`control_fd`), which
// init serves even while an exec runs:
//
//   host -> init:  "spawn", id, name, command, cwd, arg count, args..., env count, KEY=VALUE...
//   host -> init:  "kill", id, name, signal
//   init -> host:  "reply", id, pid (0 for kill), error ("" = done)
// A spawned process takes `<name>.in`, `<name>.out` and `<name>.err` of the io folder as
// its stdin, stdout and stderr (the host holds the other ends open first, so no open
// blocks); init replies once the child has opened them, and writes its exit code
// (128+signal when killed) to `<name>.exit` when it ends.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/base/unique_fd.hpp"

namespace boxrt::init_protocol {

/// Where init finds its channels to the host when it starts, each one stream socket
/// (requests in, replies out on the same descriptor: one host descriptor per channel):
/// the exec channel at `channel_fd`, which init moves to its stdin and stdout, and the
/// control channel at `control_fd`. Not its stdio, which the driver gives pid 1 (init's
/// reaper, which closes every descriptor): descriptors above 2 go to init alone.
inline constexpr int channel_fd = 8;
inline constexpr int control_fd = 9;

/// Where init finds the seccomp program (raw BPF, as bwrap's --seccomp takes it) when
/// it is started with `--seccomp-fd` (nsjail, which cannot apply a BPF program itself):
/// init then installs it (and, as on bwrap, becomes the reaper of its pid namespace and
/// runs as its child).
inline constexpr int seccomp_fd = 10;
inline constexpr const char* seccomp_flag = "--seccomp-fd";

/// Upper bound of one frame; larger lengths mean a broken peer.
inline constexpr uint32_t max_frame_bytes = 64u << 20;

struct exec_request {
  std::string workdir;
  std::string cmd;
  int64_t max_output_bytes = 1048576;
  std::vector<std::string> env;
  /// Kind "stream": output goes as "out" frames, nothing is kept.
  bool stream = false;
};

/// Output of a streamed exec as it comes (kind "out"); `stream` 1 is stdout, 2 stderr.
struct output_frame {
  int64_t stream = 1;
  std::string bytes;
};

/// The largest output frame init sends.
inline constexpr size_t max_output_chunk = 64 * 1024;

/// Starts a managed process (request kind "spawn").
struct spawn_request {
  int64_t id = 0;
  std::string name;
  std::string command;
  std::string cwd;
  std::vector<std::string> args;
  std::vector<std::string> env;
};

/// Signals the process group of a managed process (request kind "kill").
struct kill_request {
  int64_t id = 0;
  std::string name;
  int64_t signal = 15;
};

/// Answers a spawn or a kill.
struct control_reply {
  int64_t id = 0;
  int64_t pid = 0;
  std::string error;
};

struct exec_reply {
  int64_t exit_code = 0;
  std::string stdout_kept;
  uint64_t stdout_total = 0;
  std::string stderr_kept;
  uint64_t stderr_total = 0;
  int64_t duration_ms = 0;
  std::string error;
};

/// The write loop every frame goes through (messages/base/unique_fd.hpp).
using boxrt::write_all;

inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

inline uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

/// Builds the payload of one frame field by field.
class writer {
 public:
  writer& field(std::string_view s) {
    put_u32(body_, static_cast<uint32_t>(s.size()));
    body_.append(s);
    return *this;
  }
  writer& number(int64_t v) { return field(std::to_string(v)); }

  /// The whole frame: length prefix and payload.
  std::string frame() const {
    std::string out;
    put_u32(out, static_cast<uint32_t>(body_.size()));
    out += body_;
    return out;
  }

 private:
  std::string body_;
};

/// Reads the fields of one payload; every accessor fails soft (nullopt) on bad input.
class reader {
 public:
  explicit reader(std::string_view payload) : rest_(payload) {}

  std::optional<std::string_view> field() {
    if (rest_.size() < 4)
      return std::nullopt;
    auto n = get_u32(rest_.data());
    if (rest_.size() - 4 < n)
      return std::nullopt;
    auto out = rest_.substr(4, n);
    rest_.remove_prefix(4 + n);
    return out;
  }

  std::optional<int64_t> number() {
    auto f = field();
    if (!f || f->empty() || f->size() > 20)
      return std::nullopt;
    int64_t v = 0;
    bool neg = false;
    size_t i = 0;
    if ((*f)[0] == '-') {
      neg = true;
      i = 1;
    }
    if (i == f->size())
      return std::nullopt;
    // Accumulated as a negative number, whose range holds every int64 value.
    constexpr int64_t lowest = INT64_MIN;
    for (; i < f->size(); ++i) {
      char c = (*f)[i];
      if (c < '0' || c > '9')
        return std::nullopt;
      int digit = c - '0';
      if (v < (lowest + digit) / 10)
        return std::nullopt;
      v = v * 10 - digit;
    }
    if (!neg && v == lowest)
      return std::nullopt;
    return neg ? v : -v;
  }

  bool done() const { return rest_.empty(); }

  // Chained reading into a message: each step after a failure does nothing, and ok()
  // says whether every step succeeded and nothing is left over.

  /// The kind field, which must be `kind`.
  reader& tag(std::string_view kind) {
    good_ = good_ && field() == std::optional<std::string_view>{kind};
    return *this;
  }
  reader& into(std::string& out) {
    auto f = good_ ? field() : std::nullopt;
    good_ = good_ && f;
    if (f)
      out = *f;
    return *this;
  }
  template <class Integer>
  reader& into(Integer& out) {
    auto n = good_ ? number() : std::nullopt;
    good_ = good_ && n;
    if (n)
      out = static_cast<Integer>(*n);
    return *this;
  }
  /// A count (0 to 4096) and that many fields.
  reader& into(std::vector<std::string>& out) {
    int64_t n = -1;
    into(n);
    good_ = good_ && n >= 0 && n <= 4096;
    for (int64_t i = 0; good_ && i < n; ++i)
      into(out.emplace_back());
    return *this;
  }
  bool ok() const { return good_ && done(); }

 private:
  std::string_view rest_;
  bool good_ = true;
};

/// Writes a list as its count and its fields (what reader::into reads back).
inline writer& put_list(writer& w, const std::vector<std::string>& xs) {
  w.number(static_cast<int64_t>(xs.size()));
  for (auto& x : xs)
    w.field(x);
  return w;
}

/// The message `r` when the chained reads of `rd` all succeeded, else nullopt.
template <class Message>
std::optional<Message> read_if(const reader& rd, Message&& r) {
  return rd.ok() ? std::optional<Message>{std::move(r)} : std::nullopt;
}

/// The kind of a request payload ("exec", "spawn", "kill"); "" when malformed.
inline std::string_view request_kind(std::string_view payload) {
  reader rd{payload};
  auto kind = rd.field();
  return kind ? *kind : std::string_view{};
}

inline std::string encode(const exec_request& r) {
  writer w;
  w.field(r.stream ? "stream" : "exec").field(r.workdir).field(r.cmd).number(r.max_output_bytes);
  return put_list(w, r.env).frame();
}

inline std::optional<exec_request> decode_request(std::string_view payload) {
  exec_request r;
  r.stream = request_kind(payload) == "stream";
  reader rd{payload};
  rd.tag(r.stream ? "stream" : "exec").into(r.workdir).into(r.cmd).into(r.max_output_bytes).into(r.env);
  return read_if(rd, std::move(r));
}

inline std::string encode(const exec_reply& r) {
  writer w;
  w.field("result").number(r.exit_code).field(r.stdout_kept).number(static_cast<int64_t>(r.stdout_total));
  w.field(r.stderr_kept).number(static_cast<int64_t>(r.stderr_total)).number(r.duration_ms).field(r.error);
  return w.frame();
}

inline std::optional<exec_reply> decode_reply(std::string_view payload) {
  reader rd{payload};
  exec_reply r;
  rd.tag("result").into(r.exit_code).into(r.stdout_kept).into(r.stdout_total).into(r.stderr_kept);
  rd.into(r.stderr_total).into(r.duration_ms).into(r.error);
  return read_if(rd, std::move(r));
}

inline std::string encode(const output_frame& r) {
  return writer{}.field("out").number(r.stream).field(r.bytes).frame();
}

inline std::optional<output_frame> decode_output(std::string_view payload) {
  reader rd{payload};
  output_frame r;
  rd.tag("out").into(r.stream).into(r.bytes);
  if (r.stream != 1 && r.stream != 2)
    return std::nullopt;
  return read_if(rd, std::move(r));
}

inline std::string encode(const spawn_request& r) {
  writer w;
  w.field("spawn").number(r.id).field(r.name).field(r.command).field(r.cwd);
  put_list(w, r.args);
  return put_list(w, r.env).frame();
}

inline std::optional<spawn_request> decode_spawn(std::string_view payload) {
  reader rd{payload};
  spawn_request r;
  rd.tag("spawn").into(r.id).into(r.name).into(r.command).into(r.cwd).into(r.args).into(r.env);
  return read_if(rd, std::move(r));
}

inline std::string encode(const kill_request& r) {
  return writer{}.field("kill").number(r.id).field(r.name).number(r.signal).frame();
}

inline std::optional<kill_request> decode_kill(std::string_view payload) {
  reader rd{payload};
  kill_request r;
  rd.tag("kill").into(r.id).into(r.name).into(r.signal);
  return read_if(rd, std::move(r));
}

inline std::string encode(const control_reply& r) {
  return writer{}.field("reply").number(r.id).number(r.pid).field(r.error).frame();
}

inline std::optional<control_reply> decode_control_reply(std::string_view payload) {
  reader rd{payload};
  control_reply r;
  rd.tag("reply").into(r.id).into(r.pid).into(r.error);
  return read_if(rd, std::move(r));
}

inline std::string ready_frame() {
  return writer{}.field("ready").frame();
}

} // namespace boxrt::init_protocol
