// Host-control actions (protocol.md §2.2): ping, health, backend info, box_init,
// grants and revocations, the shared-workspace probe, shutdown.
#include "net/rpc/action_support.hpp"

#include "messages/base/pytext.hpp"
#include "messages/time.hpp"

#include <spdlog/spdlog.h>

#include "actors/admission.hpp"

namespace boxrt::net {

namespace rpc_detail {

void do_ping(connection_env&, const element&, const action_context*, done_fn done) {
  done(success("{}"));
}

void do_health(connection_env& env, const element&, const action_context*, done_fn done) {
  with_settings(env, done, [done](const instance_settings& s) {
    if (!s.config.admission_mode())
      return done(success(backend_info_json(s)));
    if (!instance_ready(s))
      return done(failure({ec::readiness, "managed sandbox isolation is not ready"}));
    json::writer w;
    write_readiness(w, s);
    done(success(w.take()));
  });
}

/// box_list_all_sessions (boxd's extension; boxctl ps): every session of this node
/// across workspaces, with its usage. data.limit: at most this many (default 1000, at
/// most 10000); more gives "truncated": true.
void do_list_all_sessions(connection_env& env, const element& data, const action_context*, done_fn done) {
  int64_t limit = 1000;
  if (auto v = lookup(data, "limit"); v && !v->is_null()) {
    __int128 n = 0;
    if (!read_integer(*v, n) || n < 1 || n > 10000)
      return done(failure({ec::validation, "limit must be an integer between 1 and 10000"}));
    limit = static_cast<int64_t>(n);
  }
  ask<ps_report>(
    env, std::move(done),
    [](const ps_report& r) {
      json::writer w;
      auto number_or_null = [&](int64_t v) {
        if (v < 0)
          w.null();
        else
          w.value(v);
      };
      w.begin_object();
      w.key("sessions").begin_array();
      for (const auto& x : r.sessions) {
        w.begin_object();
        w.key("instance_uuid").value(x.instance_uuid);
        w.key("workspace_uuid").value(x.workspace_uuid);
        w.key("placement_generation").value(x.generation);
        w.key("session_id").value(x.stats.session_id);
        w.key("backend");
        if (x.stats.backend_name.empty())
          w.null();
        else
          w.value(x.stats.backend_name);
        w.key("cpu_seconds");
        if (x.stats.cpu_usec < 0)
          w.null();
        else
          w.value(static_cast<double>(x.stats.cpu_usec) / 1e6);
        w.key("memory_bytes");
        number_or_null(x.stats.memory_bytes);
        w.key("memory_limit_bytes");
        number_or_null(x.memory_mb < 0 ? -1 : x.memory_mb * 1048576);
        w.key("workspace_bytes");
        number_or_null(x.stats.workspace_bytes);
        w.key("created_at");
        if (x.created_at > 0)
          w.value(iso_utc_z(x.created_at));
        else
          w.null();
        w.key("last_used_at");
        if (x.last_used_at > 0)
          w.value(iso_utc_z(x.last_used_at));
        else
          w.null();
        w.end_object();
      }
      w.end_array();
      w.key("workspaces").value(r.workspaces);
      w.key("truncated").value(r.truncated);
      w.end_object();
      return w.take();
    },
    ps_atom_v, limit);
}

/// What this boxd offers beyond the reference, listed by box_get_backend_info:
/// box_exec_stream (docs/streaming.md) everywhere, the file actions (docs/files.md) on
/// the backends that have them (bwrap, nsjail, process; not the scripted test backend).
constexpr std::string_view capabilities[] = {"exec_stream", "files"};
bool offers(const instance_settings& s, std::string_view capability) {
  return capability != "files" || (!s.backend_name.empty() && s.backend_name != "scripted");
}

void do_backend_info(connection_env& env, const element&, const action_context*, done_fn done) {
  with_settings(env, done, [done](const instance_settings& s) {
    json::writer w;
    w.begin_object();
    w.key("name");
    name_or_null(w, s.backend_name);
    if (!s.config.admission_mode()) {
      w.key("available").value(s.probed && s.backend_available);
    } else {
      w.key("available").value(instance_ready(s));
      w.key("readiness");
      write_readiness(w, s);
    }
    // boxd's extensions; the reference's clients never read this.
    w.key("capabilities").begin_array();
    for (auto c : capabilities)
      if (offers(s, c))
        w.value(c);
    w.end_array();
    w.end_object();
    done(success(w.take()));
  });
}

void do_init(connection_env& env, const element& data, const action_context*, done_fn done) {
  // `data` lives only during dispatch(); the config merges over the current one, which
  // comes from the directory, so the request is kept as text meanwhile.
  auto text = simdjson::minify(data);
  auto run = runner(env);
  auto directory = env.directory;
  with_settings(env, done, [run, directory, text, done](const instance_settings& s) {
    std::vector<std::string> ignored;
    auto decoded = decode_text(text, [&s, &ignored](const element& root) {
      ignored = ignored_box_keys(root);
      return decode_box_config(root, s.config);
    });
    if (!decoded)
      return done(failure(decoded.error()));
    // LangBot's BoxConfig carries keys for other runtimes: each is named, none refused.
    for (const auto& key : ignored)
      spdlog::warn("box_init: {} is not a key boxd uses; ignored", key);
    // As the reference: initialized, then admission fails closed; the log says why.
    if (auto why = configuration_error(decoded.value()); !why.empty())
      spdlog::warn("box_init: {}; admission stays required and every tenant action is refused", why);
    auto next = std::make_shared<box_config>(std::move(decoded.value()));
    // Nothing changes unless every check passed: the default workspace is ensured
    // before the directory sees the new config (the reference applies it first).
    run_blocking_on(
      run,
      [next] {
        next->local = resolve_local(next->local);
        if (auto err = ensure_default_workspace(next->local))
          return failure(std::move(err));
        return success("{}");
      },
      [self = run.self, directory, next, done](reply r) {
        if (r.error)
          return done(std::move(r));
        // Bounded: the reply waits for a readiness probe, which may start a sandbox.
        self->request(directory, stop_timeout, init_atom_v, *next)
          .then([done](bool) { done(success(R"({"initialized":true})")); },
                [done](caf::error& err) { done(failure_of(err, "box_init")); });
      });
  });
}

bool valid_probe_name(std::string_view name) {
  constexpr std::string_view prefix = ".langbot-box-volume-probe-";
  if (name.size() != prefix.size() + 32 || name.substr(0, prefix.size()) != prefix)
    return false;
  return std::all_of(name.begin() + prefix.size(), name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

reply verify_probe(const box_config& config, const std::string& name) {
  auto readiness = [](std::string text) { return failure({ec::readiness, std::move(text)}); };
  if (auto err = check_managed_workspace_root(config); !err.empty())
    return readiness(err);
  const auto unreadable = "Box Runtime cannot read the Core shared Workspace probe";
  std::error_code err;
  auto resolved = std::filesystem::canonical(config.local.default_workspace, err);
  if (err)
    return readiness(unreadable);
  int root = ::open(resolved.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return readiness(unreadable);
  // O_NONBLOCK: a FIFO planted under the marker's name must not hang a pool thread; it
  // is refused below as not a regular file.
  int fd = ::openat(root, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  ::close(root);
  if (fd < 0)
    return readiness(unreadable);
  auto result = [&]() -> reply {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      return readiness(unreadable);
    if (!S_ISREG(st.st_mode))
      return readiness("Box shared Workspace probe is not a regular file");
    if (st.st_size <= 0 || st.st_size > 1024)
      return readiness("Box shared Workspace probe has an invalid size");
    std::string content;
    char buf[1024];
    for (;;) {
      auto want = std::min<size_t>(1024 - content.size() + 1, sizeof(buf));
      auto n = ::read(fd, buf, want);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        return readiness(unreadable);
      }
      if (n == 0)
        break;
      content.append(buf, static_cast<size_t>(n));
      if (content.size() > 1024)
        return readiness("Box shared Workspace probe exceeds the size limit");
    }
    if (static_cast<off_t>(content.size()) != st.st_size)
      return readiness("Box shared Workspace probe changed while being verified");
    json::writer w;
    w.begin_object();
    w.key("marker_name").value(name);
    w.key("sha256").value(sha256_hex(content));
    w.key("size").value(static_cast<int64_t>(content.size()));
    w.end_object();
    return success(w.take());
  }();
  ::close(fd);
  return result;
}

void do_verify(connection_env& env, const element& data, const action_context*, done_fn done) {
  // The reference reads str(value or "").strip(): anything but a matching string fails.
  std::string name;
  if (auto v = lookup(data, "marker_name")) {
    std::string_view s;
    if (v->get_string().get(s) == json_ok)
      name = std::string{py::strip(s)};
  }
  if (!valid_probe_name(name))
    return done(failure({ec::readiness, "Invalid Box shared Workspace probe basename"}));
  with_settings(env, done, [run = runner(env), name, done](const instance_settings& s) {
    auto config = s.config;
    run_blocking_on(run, [config, name] { return verify_probe(config, name); }, done);
  });
}

void do_shutdown(connection_env& env, const element&, const action_context*, done_fn done) {
  ask<int64_t>(env, done, [](int64_t) { return std::string{"{}"}; }, shutdown_atom_v);
}

} // namespace rpc_detail

} // namespace boxrt::net
