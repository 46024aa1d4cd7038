// The action table of /rpc/ws (protocol.md §2): context rules, decoding, one directory
// round trip per action and the reference's reply shapes. Blocking work (upload files,
// box_init's default workspace, the shared-workspace probe) runs on the worker pool and
// comes back to the connection actor as a message (run_blocking, env.jobs).
#include "net/rpc/action_support.hpp"
#include "backends/files/workspace_files.hpp"
#include "messages/base/base64.hpp"
#include "messages/network_policy.hpp"

namespace boxrt::net {

using namespace rpc_detail;

namespace {

// -- tenant actions -------------------------------------------------------------------
//
// Each tenant action is one round trip to the directory whose request and reply types
// are its entry in tenant_routes (actors/actors.hpp). What is particular to the wire is
// here, keyed by the action's atom: how `wire<Atom>::decode` reads the request from the
// data (on a refusal it replies through `done` and returns nothing) and how
// `wire<Atom>::encode` writes the reply in the reference's shape.

/// The reply's own JSON form (messages/codec.hpp).
struct json_reply {
  template <class Reply>
  static std::string encode(const Reply& r) {
    return to_json(r);
  }
};

/// A reply `{"<key>": value}` (box_delete_session, box_stop_managed_process).
template <const char* Key>
struct keyed_reply {
  static std::string encode(const std::string& value) {
    json::writer w;
    w.begin_object();
    w.key(Key).value(value);
    w.end_object();
    return w.take();
  }
};

template <class Atom>
struct wire;

/// box_exec and box_create_session read the same spec; create needs no command.
template <bool Create>
struct exec_wire : json_reply {
  static std::optional<exec_request> decode(connection_env&, const element& data,
                                            const action_context* ctx, done_fn& done) {
    exec_request req;
    req.ctx = *ctx;
    req.facts = extract_payload_facts(data);
    auto spec = decode_box_spec(data, !Create);
    if (spec) {
      req.spec = std::move(spec.value());
    } else if (spec.error().code == ec::key) {
      // The reference reads data["session_id"] before anything else.
      done(failure(spec.error()));
      return std::nullopt;
    } else {
      // Carried, not replied: in admission mode a forged field outranks a decode error.
      req.decode_error = spec.error();
    }
    return req;
  }
};

template <>
struct wire<exec_atom> : exec_wire<false> {};

template <>
struct wire<create_atom> : exec_wire<true> {};

/// box_exec_stream: box_exec's data; the stream's settings are the connection's. The
/// reply is the stream's last data frame (its frames went before it).
template <>
struct wire<xstream_atom> {
  static std::optional<exec_stream_request> decode(connection_env& env, const element& data,
                                                   const action_context* ctx, done_fn& done) {
    auto exec = exec_wire<false>::decode(env, data, ctx, done);
    if (!exec)
      return std::nullopt;
    return exec_stream_request{std::move(*exec), env.stream};
  }

  static std::string encode(const stream_end& x) {
    json::writer w;
    w.begin_object();
    w.key("stream").value("result");
    w.key("session_id").value(x.result.session_id);
    w.key("status").value(to_string(x.result.status));
    // null as box_exec gives it for a timeout, and for a command that never ran.
    w.key("exit_code");
    if (x.result.status == exec_status::timed_out || x.result.exit_code < 0)
      w.null();
    else
      w.value(x.result.exit_code);
    w.key("duration_ms").value(x.result.duration_ms);
    w.key("ended").value(x.ended);
    w.key("stdout_bytes").value(x.stdout_bytes);
    w.key("stderr_bytes").value(x.stderr_bytes);
    w.end_object();
    return w.take();
  }
};

/// data.session_id for get/delete: missing replies KeyError at once; a non-string is
/// carried as a decode error (the fence check still comes first).
struct session_wire {
  static std::optional<session_request> decode(connection_env&, const element& data,
                                               const action_context* ctx, done_fn& done) {
    auto v = lookup(data, "session_id");
    if (!v) {
      done(failure(key_error("session_id")));
      return std::nullopt;
    }
    session_request req;
    req.ctx = *ctx;
    std::string_view s;
    if (v->get_string().get(s) == json_ok)
      req.session_id = std::string{s};
    else
      req.decode_error = {ec::validation, "session_id must be a string"};
    return req;
  }
};

template <>
struct wire<caf::get_atom> : session_wire, json_reply {};

constexpr char deleted_key[] = "deleted";
template <>
struct wire<caf::delete_atom> : session_wire, keyed_reply<deleted_key> {};

/// Actions whose request is the workspace context alone.
struct context_wire {
  static std::optional<action_context> decode(connection_env&, const element&,
                                              const action_context* ctx, done_fn&) {
    return *ctx;
  }
};

/// box_status and box_get_storage_analysis: the one renderer of each (net/rpc/render.hpp).
template <>
struct wire<status_atom> : context_wire {
  static std::string encode(const status_info& x) {
    return status_json(x);
  }
};

template <>
struct wire<storage_atom> : context_wire {
  static std::string encode(const storage_report& x) {
    return storage_json(x);
  }
};

template <>
struct wire<list_atom> : context_wire {
  static std::string encode(const std::vector<session_info>& xs) {
    json::writer w;
    w.begin_object();
    w.key("sessions").begin_array();
    for (const auto& x : xs)
      w.raw(to_json(x));
    w.end_array();
    w.end_object();
    return w.take();
  }
};

/// Skill actions (§2.4): routed through the workspace's supervisor (fence, and the
/// entitlement gate in admission mode) to its skill-store actor. The data travels as
/// JSON text and is decoded on the worker pool; the reply is the action's data JSON. A
/// zip action's uploaded file is looked up here, in this connection's transfer folder,
/// and handed over by path; the store deletes it once read.
template <>
struct wire<skill_atom> {
  static std::optional<skill_request> decode(connection_env& env, const element& data,
                                              const action_context* ctx, done_fn&) {
    skill_request req;
    req.ctx = *ctx;
    req.action = std::string{env.action};
    req.data_json = simdjson::minify(data);
    if (env.action == "box_preview_skill_zip" || env.action == "box_install_skill_zip") {
      auto key_v = lookup(data, "file_key");
      std::string_view key;
      if (!key_v)
        req.decode_error = {ec::validation, "'file_key'"};
      else if (key_v->get_string().get(key) != json_ok || !valid_file_key(key))
        req.decode_error = {ec::validation, "Invalid file transfer key"};
      else if (env.transfer_dir.empty() || !env.transfers || !env.transfers->keys.contains(key))
        req.decode_error = {ec::validation,
                            "Uploaded file " + std::string{key} + " was not found"};
      else {
        req.file_path = env.transfer_dir + "/" + std::string{key};
        env.transfers->keys.erase(env.transfers->keys.find(key)); // consumed
      }
    }
    return req;
  }

  static std::string encode(const std::string& json) {
    return json;
  }
};

/// Managed processes (§2.3, §4.7): refused in admission mode as the reference's Cloud
/// host does (admission.md §4.5; the supervisor checks it before anything else); in
/// standard mode routed to the session's actor, which runs the process inside the
/// session's sandbox. data.session_id first, then the start's spec or the process_id.
template <bool Start>
struct process_wire {
  static std::optional<process_request> decode(connection_env&, const element& data,
                                                const action_context* ctx, done_fn& done) {
    process_request req;
    req.ctx = *ctx;
    auto sid = lookup(data, "session_id");
    if (!sid) {
      done(failure(key_error("session_id")));
      return std::nullopt;
    }
    std::string_view text;
    if (sid->get_string().get(text) == json_ok)
      req.session_id = std::string{text};
    else
      req.decode_error = {ec::validation, "session_id must be a string"};
    if constexpr (Start) {
      auto spec_el = lookup(data, "spec");
      if (!spec_el) {
        done(failure(key_error("spec")));
        return std::nullopt;
      }
      auto spec = decode_process_spec(*spec_el);
      if (spec)
        req.spec = std::move(spec.value());
      else if (!req.decode_error)
        req.decode_error = spec.error();
      req.process_id = req.spec.process_id;
    } else if (auto pid = lookup(data, "process_id"); pid && !pid->is_null()) {
      if (pid->get_string().get(text) == json_ok)
        req.process_id = std::string{text};
      else if (!req.decode_error)
        req.decode_error = {ec::validation, "process_id must be a string"};
    }
    return req;
  }
};

template <>
struct wire<pstart_atom> : process_wire<true>, json_reply {};

template <>
struct wire<pget_atom> : process_wire<false>, json_reply {};

constexpr char stopped_key[] = "stopped";
template <>
struct wire<pstop_atom> : process_wire<false>, keyed_reply<stopped_key> {};

/// The file actions (docs/files.md): data.session_id and data.path first (KeyError when
/// missing), then each action's own fields; a bad value travels as a decode error, so
/// the fence and admission mode's forged-field rules come first. The bounds are the
/// server's. Paths are taken as sent; the backend makes them relative to the workspace.
template <>
struct wire<file_atom> {
  /// A string field, or base64 text when data.path_encoding is "base64" (names that are
  /// not UTF-8).
  static bool read_path(const element& data, std::string_view key, bool b64, std::string& out, box_error& err) {
    auto v = lookup(data, key);
    std::string_view text;
    if (!v || v->get_string().get(text) != json_ok) {
      if (!err)
        err = {ec::validation, std::string{key} + " must be a string"};
      return false;
    }
    if (!b64) {
      out = std::string{text};
      return true;
    }
    auto raw = base64_decode(text);
    if (!raw) {
      if (!err)
        err = {ec::validation, std::string{key} + " is not valid base64"};
      return false;
    }
    out = std::move(*raw);
    return true;
  }
  static void read_int(const element& data, std::string_view key, int64_t& out, box_error& err) {
    auto v = lookup(data, key);
    if (!v || v->is_null())
      return;
    __int128 n = 0;
    if (!read_integer(*v, n) || n < INT64_MIN || n > INT64_MAX) {
      if (!err)
        err = {ec::validation, std::string{key} + " must be an integer"};
      return;
    }
    out = static_cast<int64_t>(n);
  }
  static bool read_bool(const element& data, std::string_view key, bool& out, box_error& err) {
    auto v = lookup(data, key);
    if (!v || v->is_null())
      return false;
    bool b = false;
    if (v->get_bool().get(b) != json_ok) {
      if (!err)
        err = {ec::validation, std::string{key} + " must be a boolean"};
      return false;
    }
    out = b;
    return true;
  }
  static bool read_encoding(const element& data, std::string_view key, std::string& out, box_error& err) {
    auto v = lookup(data, key);
    if (!v || v->is_null())
      return true;
    std::string_view text;
    if (v->get_string().get(text) != json_ok || (text != "utf-8" && text != "base64")) {
      if (!err)
        err = {ec::validation, std::string{key} + " must be \"utf-8\" or \"base64\""};
      return false;
    }
    out = std::string{text};
    return true;
  }

  static std::optional<file_request> decode(connection_env& env, const element& data,
                                            const action_context* ctx, done_fn& done) {
    file_request req;
    req.ctx = *ctx;
    req.facts = extract_payload_facts(data);
    req.limits = env.files;
    auto& op = req.op;
    auto& err = req.decode_error;
    const auto& action = env.action;
    for (std::string_view key : {"session_id", "path"})
      if (!lookup(data, key)) {
        done(failure(key_error(key)));
        return std::nullopt;
      }
    if (action == "box_move_file" && !lookup(data, "to")) {
      done(failure(key_error("to")));
      return std::nullopt;
    }
    if (action == "box_write_file" && !lookup(data, "content")) {
      done(failure(key_error("content")));
      return std::nullopt;
    }
    std::string_view sid;
    if (lookup(data, "session_id")->get_string().get(sid) == json_ok)
      req.session_id = std::string{sid};
    else
      err = {ec::validation, "session_id must be a string"};
    std::string path_encoding = "utf-8";
    read_encoding(data, "path_encoding", path_encoding, err);
    const bool b64 = path_encoding == "base64";
    read_path(data, "path", b64, op.path, err);
    int64_t mode = -1;
    if (action == "box_read_file") {
      op.verb = file_verb::read;
      read_int(data, "offset", op.offset, err);
      read_int(data, "length", op.length, err);
      read_encoding(data, "encoding", op.encoding, err);
    } else if (action == "box_write_file") {
      op.verb = file_verb::write;
      read_encoding(data, "encoding", op.encoding, err);
      std::string_view text;
      // base64 is decoded on the worker pool (files::run), not here.
      if (lookup(data, "content")->get_string().get(text) != json_ok) {
        if (!err)
          err = {ec::validation, "content must be a string"};
      } else {
        op.content = std::string{text};
      }
      const bool ranged = lookup(data, "offset") && !lookup(data, "offset")->is_null();
      read_int(data, "offset", op.offset, err);
      read_bool(data, "append", op.append, err);
      // A write without an offset replaces the file; a ranged one changes only its range.
      op.truncate = !ranged && !op.append;
      read_bool(data, "truncate", op.truncate, err);
      read_bool(data, "make_parents", op.make_parents, err);
      read_int(data, "mode", mode, err);
    } else if (action == "box_list_files") {
      op.verb = file_verb::list;
      int64_t depth = 1;
      read_int(data, "depth", depth, err);
      op.depth = static_cast<int32_t>(std::clamp<int64_t>(depth, -1, 1 << 20));
    } else if (action == "box_stat_file") {
      op.verb = file_verb::stat;
    } else if (action == "box_remove_file") {
      op.verb = file_verb::remove;
      read_bool(data, "recursive", op.recursive, err);
    } else if (action == "box_make_dir") {
      op.verb = file_verb::mkdir;
      read_bool(data, "make_parents", op.make_parents, err);
      read_int(data, "mode", mode, err);
    } else if (action == "box_move_file") {
      op.verb = file_verb::move;
      read_path(data, "to", b64, op.to, err);
      read_bool(data, "overwrite", op.overwrite, err);
      read_bool(data, "make_parents", op.make_parents, err);
    }
    if (mode < -1 || mode > 07777) {
      if (!err)
        err = {ec::validation, "mode must be between 0 and 0o7777"};
    } else {
      op.mode = static_cast<int32_t>(mode);
    }
    // The exact count is the pool's (after base64); this bound keeps what travels small.
    auto raw = op.content.size();
    if (op.encoding == "base64") {
      size_t pads = 0;
      while (pads < 2 && pads < raw && op.content[raw - 1 - pads] == '=')
        ++pads;
      raw = raw / 4 * 3 - std::min(pads, raw / 4 * 3);
    }
    if (op.verb == file_verb::write && static_cast<int64_t>(raw) > req.limits.max_call_bytes && !err)
      err = files::write_too_large(static_cast<int64_t>(raw), req.limits.max_call_bytes);
    return req;
  }

  /// A name as JSON text: UTF-8 as it is; other bytes as U+FFFD, with the exact bytes
  /// beside it in base64 under `<key>_base64`.
  static void name(json::writer& w, std::string_view key, const std::string& value) {
    if (py::valid_utf8(value)) {
      w.key(key).value(value);
      return;
    }
    w.key(key).value(json::sanitize_utf8(value));
    w.key(std::string{key} + "_base64").value(base64_encode(value));
  }
  /// An entry's type, size, mode, mtime and a symlink's target (list and stat alike).
  static void attributes(json::writer& w, const file_entry& e) {
    w.key("type").value(e.type);
    w.key("size").value(e.size);
    w.key("mode").value(static_cast<int64_t>(e.mode));
    w.key("mtime").value(e.mtime);
    if (e.type == "symlink")
      name(w, "target", e.target);
  }
  static void entry(json::writer& w, const file_entry& e) {
    w.begin_object();
    name(w, "path", e.path);
    auto slash = e.path.rfind('/');
    name(w, "name", slash == std::string::npos ? e.path : e.path.substr(slash + 1));
    attributes(w, e);
    w.end_object();
  }

  static std::string encode(const file_result& r) {
    json::writer w;
    w.begin_object();
    name(w, "path", r.path);
    switch (r.verb) {
      case file_verb::read:
        w.key("encoding").value(r.encoding);
        w.key("content").value(r.data);
        w.key("offset").value(r.offset);
        w.key("length").value(r.length);
        w.key("size").value(r.size);
        w.key("eof").value(r.eof);
        break;
      case file_verb::write:
        w.key("written").value(r.written);
        w.key("size").value(r.size);
        break;
      case file_verb::list:
        w.key("entries").begin_array();
        for (const auto& e : r.entries)
          entry(w, e);
        w.end_array();
        w.key("truncated").value(r.truncated);
        break;
      case file_verb::stat:
        if (!r.entries.empty())
          attributes(w, r.entries.front());
        break;
      case file_verb::remove:
        w.key("removed").value(true);
        break;
      case file_verb::mkdir:
        w.key("created").value(true);
        break;
      case file_verb::move:
        name(w, "to", r.to);
        break;
    }
    w.end_object();
    return w.take();
  }
};

/// The entitlement push and the admission grant and revocation (contract §3): host
/// actions whose request names the trusted instance; each goes to its workspace.
template <class Request, auto Decode>
struct admission_wire : json_reply {
  static std::optional<Request> decode(connection_env& env, const element& data,
                                       const action_context*, done_fn& done) {
    auto x = Decode(data);
    if (!x) {
      done(failure(x.error()));
      return std::nullopt;
    }
    if (!is_trusted(env, x->instance_uuid)) {
      done(failure(untrusted_refusal(*x)));
      return std::nullopt;
    }
    return std::move(x.value());
  }
};

template <>
struct wire<entitle_atom>
  : admission_wire<entitlement_snapshot, &decode_entitlement_snapshot> {};

template <>
struct wire<grant_atom> : admission_wire<admission_grant, &decode_admission_grant> {};

template <>
struct wire<revoke_atom> : admission_wire<admission_revocation, &decode_admission_revocation> {};

/// box_set_network_policy and box_get_network_policy (docs/network.md): host actions
/// naming their workspace (`instance_uuid` and `workspace_uuid`, both optional: "" is
/// the workspace of requests without a context). A set carries `policy` (an object, or
/// null to clear it) or `profile` (a box.network_profiles name), never both.
template <>
struct wire<netpol_atom> {
  static std::optional<network_policy_request> decode(connection_env& env, const element& data,
                                                      const action_context*, done_fn& done) {
    network_policy_request req;
    req.set = env.action == "box_set_network_policy";
    auto refuse = [&](std::string text) {
      done(failure({ec::validation, std::move(text)}));
      return std::nullopt;
    };
    for (const char* key : {"instance_uuid", "workspace_uuid"}) {
      auto v = lookup(data, key);
      if (!v || v->is_null())
        continue;
      std::string_view s;
      if (v->get_string().get(s) != simdjson::SUCCESS || s.size() > 256)
        return refuse(std::string{key} + " must be a string of at most 256 characters");
      (std::string_view{key} == "instance_uuid" ? req.instance_uuid : req.workspace_uuid) = std::string{s};
    }
    if (!req.set)
      return req;
    auto policy = lookup(data, "policy");
    auto profile = lookup(data, "profile");
    bool has_policy = policy.has_value(), has_profile = profile && !profile->is_null();
    if (has_policy == has_profile)
      return refuse("box_set_network_policy takes either policy (an object, or null to clear it) or profile");
    if (has_profile) {
      std::string_view s;
      if (profile->get_string().get(s) != simdjson::SUCCESS || s.empty() || s.size() > 128)
        return refuse("profile must be the name of one of box.network_profiles");
      req.profile = std::string{s};
    } else if (!policy->is_null()) {
      auto p = decode_network_policy(*policy, "policy");
      if (!p) {
        done(failure(p.error()));
        return std::nullopt;
      }
      if (!p->profile.empty())
        return refuse("policy.profile is set by boxd: name the profile with profile instead");
      req.policy = encode_network_policy(p.value());
    }
    return req;
  }

  static std::string encode(const network_policy_reply& r) {
    json::writer w;
    w.begin_object();
    w.key("workspace_uuid").value(r.workspace_uuid);
    w.key("policy");
    r.policy.empty() ? w.null() : w.raw(r.policy);
    w.key("effective");
    r.effective.empty() ? w.null() : w.raw(r.effective);
    w.key("source").value(r.source);
    w.end_object();
    return w.take();
  }
};

/// One tenant action's round trip: decode, ask the directory, encode.
template <class Atom>
void routed(connection_env& env, const element& data, const action_context* ctx, done_fn done) {
  using route = tenant_route_of<Atom>;
  std::optional<typename route::request> req = wire<Atom>::decode(env, data, ctx, done);
  if (!req)
    return;
  ask<typename route::reply>(
    env, std::move(done), [](const typename route::reply& r) { return wire<Atom>::encode(r); },
    Atom{}, std::move(*req));
}

/// The length of `s`'s longest prefix that ends on a whole UTF-8 sequence: a character
/// cut at a frame's end waits for the next frame.
size_t whole_utf8_prefix(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(n, 4); ++back) {
    auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80)
      continue;  // a continuation byte: its lead is further back
    size_t want = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return want > back ? n - back : n;
  }
  return n;
}

/// One streamed box_read_file (docs/files.md): ranged reads of one frame each, each a
/// tenant request of its own (so a revocation ends the stream), the next asked for only
/// when the window has room.
struct read_loop {
  connection_env* env = nullptr;
  std::shared_ptr<read_stream> sink;
  file_request base;
  done_fn done;
  std::string_view action;
  std::string encoding;  // the caller's
  int64_t start = 0;
  int64_t next = 0;
  int64_t end = -1;  // -1: to the end of the file
  int64_t chunk = 0;
  // The last read (written by its renderer, read after its reply).
  int64_t consumed = 0;
  int64_t size = 0;
  bool eof = false;
  std::string path;
};

void finish_read(const std::shared_ptr<read_loop>& L, std::string_view ended) {
  json::writer w;
  w.begin_object();
  w.key("stream").value("result");
  wire<file_atom>::name(w, "path", L->path);
  w.key("encoding").value(L->encoding);
  w.key("offset").value(L->start);
  w.key("length").value(L->next - L->start);
  w.key("size").value(L->size);
  w.key("eof").value(L->eof);
  w.key("ended").value(ended);
  w.end_object();
  L->done(success(w.take()));
}

void read_next(std::shared_ptr<read_loop> L) {
  auto req = L->base;
  req.op.offset = L->next;
  req.op.length = L->end < 0 ? L->chunk : std::min(L->chunk, L->end - L->next);
  // Text is cut at a character's end here, so the pool hands over the bytes.
  req.op.encoding = L->encoding == "base64" ? "base64" : "raw";
  const bool more_after = L->end < 0 || L->next + req.op.length < L->end;
  auto render = [L, more_after](const file_result& r) {
    L->size = r.size;
    L->eof = r.eof;
    L->path = r.path;
    std::string text;
    if (L->encoding == "base64") {
      L->consumed = r.length;
    } else {
      std::string_view raw{r.data};
      // (A frame smaller than one character sends it cut, rather than nothing.)
      if (!r.eof && more_after && whole_utf8_prefix(raw) > 0)
        raw = raw.substr(0, whole_utf8_prefix(raw));
      L->consumed = static_cast<int64_t>(raw.size());
      text = json::sanitize_utf8(raw);
    }
    if (L->consumed == 0)
      return std::string{};
    json::writer w;
    w.begin_object();
    w.key("stream").value("data");
    w.key("data").value(L->encoding == "base64" ? std::string_view{r.data} : std::string_view{text});
    w.key("offset").value(L->next);
    w.end_object();
    return w.take();
  };
  auto& env = *L->env;
  env.action = L->action;
  ask<file_result>(env,
                   [L](reply r) {
                     if (r.error)
                       return L->done(std::move(r));
                     if (!r.data_json.empty())
                       L->sink->frame(std::move(r.data_json));
                     L->next += L->consumed;
                     if (L->eof || L->consumed == 0 || (L->end >= 0 && L->next >= L->end))
                       return finish_read(L, L->eof ? "eof" : "length");
                     L->sink->wait_room([L](bool cancelled) {
                       if (cancelled)
                         return finish_read(L, "cancel");
                       read_next(L);
                     });
                   },
                   render, file_atom_v, std::move(req));
}

/// box_read_file: one reply of at most server.max_file_call_bytes, or, for a caller with
/// flow control (the SDK's call_action_generator), the file streamed in frames.
void do_read_file(connection_env& env, const element& data, const action_context* ctx, done_fn done) {
  if (!env.read)
    return routed<file_atom>(env, data, ctx, std::move(done));
  auto req = wire<file_atom>::decode(env, data, ctx, done);
  if (!req)
    return;
  auto L = std::make_shared<read_loop>();
  L->env = &env;
  L->sink = env.read;
  L->action = env.action;
  L->encoding = req->op.encoding;
  L->start = L->next = std::max<int64_t>(req->op.offset, 0);
  // (Saturated: a length near INT64_MAX means "to the end" too.)
  L->end = req->op.length < 0 || req->op.length > INT64_MAX - L->start ? -1 : L->start + req->op.length;
  // One frame's raw bytes: its encoded JSON stays within the stream's frame size.
  const int64_t frame_room = env.stream.max_chunk_bytes * 6;
  L->chunk = std::max<int64_t>(
    1, std::min(req->limits.max_call_bytes,
                L->encoding == "base64" ? frame_room / 4 * 3 : env.stream.max_chunk_bytes));
  L->done = std::move(done);
  // A bad value (a negative offset among them) is the first read's error, after the fence.
  if (req->op.offset < 0 || req->decode_error)
    L->next = req->op.offset;
  L->base = std::move(*req);
  read_next(L);
}

void not_implemented(std::string_view action, done_fn& done) {
  done(failure({ec::box_error, std::string{action} + " is not implemented by this boxd yet"}));
}

// -- the table ------------------------------------------------------------------------

enum class scope : uint8_t { host, tenant };

struct action_def {
  std::string_view name;
  scope kind;
  handler fn; // null: routed, not implemented yet
};

constexpr action_def action_table[] = {
  // Host-control (protocol.md §2.2) and boxrt's entitlement push (contract §3).
  {"__ping", scope::host, do_ping},
  {"__file_chunk", scope::host, do_file_chunk},
  {"box_health", scope::host, do_health},
  {"box_get_backend_info", scope::host, do_backend_info},
  {"box_init", scope::host, do_init},
  {"box_upsert_sandbox_admission_grant", scope::host, routed<grant_atom>},
  {"box_revoke_sandbox_admission_grant", scope::host, routed<revoke_atom>},
  {"box_verify_shared_workspace", scope::host, do_verify},
  {"box_shutdown", scope::host, do_shutdown},
  // boxd's extension: every session of this node (boxctl ps; docs/operations.md).
  {"box_list_all_sessions", scope::host, do_list_all_sessions},
  {"box_put_workspace_entitlement", scope::host, routed<entitle_atom>},
  // boxd's extension: a workspace's egress policy (docs/network.md).
  {"box_set_network_policy", scope::host, routed<netpol_atom>},
  {"box_get_network_policy", scope::host, routed<netpol_atom>},
  // Tenant sandbox actions (§2.3).
  {"box_status", scope::tenant, routed<status_atom>},
  {"box_get_storage_analysis", scope::tenant, routed<storage_atom>},
  {"box_exec", scope::tenant, routed<exec_atom>},
  // Streamed (docs/streaming.md): the connection actor keeps the stream's frames and
  // answers __stream_ack and __cancel_action itself; never dispatched here.
  {"box_exec_stream", scope::tenant, routed<xstream_atom>},
  {"__stream_ack", scope::host, nullptr},
  {"__cancel_action", scope::host, nullptr},
  {"box_create_session", scope::tenant, routed<create_atom>},
  {"box_get_session", scope::tenant, routed<caf::get_atom>},
  {"box_get_sessions", scope::tenant, routed<list_atom>},
  {"box_delete_session", scope::tenant, routed<caf::delete_atom>},
  {"box_start_managed_process", scope::tenant, routed<pstart_atom>},
  {"box_get_managed_process", scope::tenant, routed<pget_atom>},
  {"box_stop_managed_process", scope::tenant, routed<pstop_atom>},
  // The session's workspace (docs/files.md): one route, the action's name picks the verb.
  {"box_read_file", scope::tenant, do_read_file},
  {"box_write_file", scope::tenant, routed<file_atom>},
  {"box_list_files", scope::tenant, routed<file_atom>},
  {"box_stat_file", scope::tenant, routed<file_atom>},
  {"box_remove_file", scope::tenant, routed<file_atom>},
  {"box_make_dir", scope::tenant, routed<file_atom>},
  {"box_move_file", scope::tenant, routed<file_atom>},
  // Tenant skill actions (§2.4): one route, the action's name travels in the request.
  {"box_list_skills", scope::tenant, routed<skill_atom>},
  {"box_get_skill", scope::tenant, routed<skill_atom>},
  {"box_create_skill", scope::tenant, routed<skill_atom>},
  {"box_update_skill", scope::tenant, routed<skill_atom>},
  {"box_delete_skill", scope::tenant, routed<skill_atom>},
  {"box_scan_skill_directory", scope::tenant, routed<skill_atom>},
  {"box_list_skill_files", scope::tenant, routed<skill_atom>},
  {"box_read_skill_file", scope::tenant, routed<skill_atom>},
  {"box_write_skill_file", scope::tenant, routed<skill_atom>},
  {"box_preview_skill_zip", scope::tenant, routed<skill_atom>},
  {"box_install_skill_zip", scope::tenant, routed<skill_atom>},
};

const action_def* find_action(std::string_view name) {
  for (const auto& def : action_table)
    if (def.name == name)
      return &def;
  return nullptr;
}

} // namespace

bool known_action(std::string_view action) {
  return find_action(action) != nullptr;
}

void dispatch(connection_env& env, std::string_view action, const element& data,
              const action_context* context, std::function<void(reply)> done) {
  const auto* def = find_action(action);
  if (def == nullptr)
    return done(failure({ec::value, "Action " + std::string{action} + " not found"}));
  // protocol.md §2.1: a host-control context is optional but must be of the trusted
  // instance, then it is dropped; a tenant action needs one.
  if (context != nullptr) {
    if (!is_trusted(env, context->instance_uuid))
      return done(failure(not_trusted()));
  } else if (def->kind == scope::tenant) {
    return done(failure(
      {ec::permission, "Box tenant action requires a trusted Workspace context"}));
  }
  if (def->fn == nullptr)
    return not_implemented(action, done);
  env.action = def->name;
  def->fn(env, data, def->kind == scope::tenant ? context : nullptr, std::move(done));
}

void run_blocking(connection_env& env, std::function<reply()> job, std::function<void(reply)> done) {
  run_blocking_on(runner(env), std::move(job), std::move(done));
}

} // namespace boxrt::net
