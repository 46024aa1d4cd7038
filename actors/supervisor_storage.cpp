// The supervisor's two reports about a workspace: box_status (with its session
// capacity) and box_get_storage_analysis (its host folders, and inside each of its
// sandboxes /workspace, /root/.cache and /tmp).
#include "actors/supervisor_detail.hpp"

#include <fcntl.h>

#include <charconv>
#include <tuple>
#include <filesystem>

#include "backends/linux/beneath.hpp"
#include "backends/linux/usage.hpp"

namespace boxrt::supervisor_detail {

namespace {

/// What a sandbox's storage probe reports for one key.
struct probe_value {
  bool exists = false;
  int64_t size_bytes = 0;
  int64_t file_count = 0;
};

constexpr const char* sandbox_keys[] = {"session_workspaces", "session_caches", "session_temp"};
constexpr const char* sandbox_paths[] = {"/workspace", "/root/.cache", "/tmp"};

/// langbot-plugin's probe, run in the session while it is idle: one line per key,
/// "<key>\t<exists>\t<KiB>\t<files>". Each measuring command is cut off after 2 s, so
/// a tree the tenant made slow to walk costs an error count, never the session (the
/// probe's own timeout, 15 s, would end it).
constexpr const char* probe_command = R"(for item in 'session_workspaces|/workspace' 'session_caches|/root/.cache' 'session_temp|/tmp'; do
  key=${item%%|*}
  path=${item#*|}
  if [ -e "$path" ]; then
    set -- $(timeout -s KILL 2 du -sk "$path" 2>/dev/null)
    kb=${1:-0}
    files=$(timeout -s KILL 2 find "$path" -type f 2>/dev/null | wc -l)
    printf '%s\t1\t%s\t%s\n' "$key" "$kb" "$files"
  else
    printf '%s\t0\t0\t0\n' "$key"
  fi
done)";

/// Parses the probe's output as the reference does: unknown or malformed lines are
/// skipped (the sandbox writes them, so nothing in them is trusted further).
std::map<std::string, probe_value> parse_probe(std::string_view out) {
  std::map<std::string, probe_value> report;
  while (!out.empty()) {
    auto nl = out.find('\n');
    auto line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view{} : out.substr(nl + 1);
    std::vector<std::string_view> fields;
    while (fields.size() < 5) {
      auto tab = line.find('\t');
      fields.push_back(line.substr(0, tab));
      if (tab == std::string_view::npos)
        break;
      line = line.substr(tab + 1);
    }
    if (fields.size() != 4)
      continue;
    bool known = false;
    for (auto k : sandbox_keys)
      known = known || fields[0] == k;
    // At most 12 digits, nothing else: sums over sessions cannot overflow.
    auto number = [](std::string_view s, int64_t& v) {
      uint64_t n = 0;
      auto [end, errc] = std::from_chars(s.data(), s.data() + s.size(), n);
      if (s.empty() || s.size() > 12 || errc != std::errc{} || end != s.data() + s.size())
        return false;
      v = static_cast<int64_t>(n);
      return true;
    };
    int64_t kb = 0, files = 0;
    if (!known || !number(fields[2], kb) || !number(fields[3], files))
      continue;
    report[std::string{fields[0]}] = probe_value{fields[1] == "1", kb * 1024, files};
  }
  return report;
}

/// The workspace's host folders (the reference's `runtime_host` entries), when the
/// managed workspace root is usable. Blocking: worker pool.
std::vector<storage_entry> host_entries(const box_config& config, const std::string& ns) {
  std::vector<storage_entry> out;
  if (!check_managed_workspace_root(config).empty())
    return out;
  const auto workspace = tenant_workspace_path(config, ns);
  auto root = beneath::open_trusted(std::filesystem::path{workspace}.parent_path().string(), O_PATH | O_DIRECTORY);
  struct item {
    const char* key;
    const char* sub;
    const char* kind;
    const char* parent;
  };
  for (auto [key, sub, kind, parent] : {item{"workspace", "", "root", ""}, item{"mcp", "/.mcp", "detail", "workspace"},
                                        item{"inbox", "/inbox", "detail", "workspace"},
                                        item{"outbox", "/outbox", "detail", "workspace"}}) {
    storage_entry e;
    e.key = key;
    e.path = workspace + sub;
    e.kind = kind;
    e.parent_key = parent;
    e.scope = "runtime_host";
    if (root) {
      auto usage = measure_tree(root.get(), ns + sub);
      e.exists = usage.exists;
      e.size_bytes = usage.size_bytes;
      e.file_count = usage.file_count;
      e.error_count = usage.error_count;
    } else if (errno != ENOENT) {
      e.error_count = 1;
    }
    out.push_back(std::move(e));
  }
  return out;
}

/// One session's part of the analysis.
struct session_probe {
  bool ok = false;
  bool host_mounted = false;
  bool has_processes = false;
  std::map<std::string, probe_value> report;
};

/// The reference's aggregation of the sessions' probes into `sandbox_sessions` entries.
void add_sandbox_entries(std::vector<storage_entry>& out, const std::vector<session_probe>& probes) {
  if (probes.empty())
    return;
  probe_value totals[3];
  probe_value managed;
  int64_t errors = 0, included = 0, managed_sessions = 0;
  for (const auto& p : probes) {
    if (!p.ok) {
      ++errors;
      continue;
    }
    ++included;
    auto value = [&](const char* key) {
      auto i = p.report.find(key);
      return i == p.report.end() ? probe_value{} : i->second;
    };
    for (size_t k = 0; k < 3; ++k) {
      if (k == 0 && p.host_mounted)
        continue;
      auto v = value(sandbox_keys[k]);
      totals[k].exists = totals[k].exists || v.exists;
      totals[k].size_bytes += v.size_bytes;
      totals[k].file_count += v.file_count;
    }
    if (p.has_processes && !p.host_mounted) {
      ++managed_sessions;
      auto v = value("session_workspaces");
      managed.exists = managed.exists || v.exists;
      managed.size_bytes += v.size_bytes;
      managed.file_count += v.file_count;
    }
  }
  auto entry = [&](std::string key, std::string path, const char* kind, const char* parent, const probe_value& v) {
    storage_entry e;
    e.key = std::move(key);
    e.path = std::move(path);
    e.kind = kind;
    e.parent_key = parent;
    e.scope = "sandbox_sessions";
    e.exists = v.exists;
    e.size_bytes = v.size_bytes;
    e.file_count = v.file_count;
    e.error_count = errors;
    out.push_back(std::move(e));
  };
  for (size_t k = 0; k < 3; ++k)
    entry(sandbox_keys[k], std::string{sandbox_paths[k]} + " (" + std::to_string(included) + " sandbox sessions)",
          "root", "", totals[k]);
  if (managed_sessions > 0)
    entry("managed_process_workspaces",
          "/workspace (" + std::to_string(managed_sessions) + " managed-process sessions)", "detail",
          "session_workspaces", managed);
}

} // namespace

caf::result<status_info> workspace_status(self_ptr self, const action_context& ctx) {
  if (auto err = tenant_gate(self, ctx, nullptr, {}, false))
    return refused(self, err);
  auto& st = self->state;
  const auto& s = *st.args.settings;
  status_info out;
  out.backend_name = s.backend_name;
  out.backend_available = s.backend_available;
  out.session_ttl_sec = s.config.limits.session_ttl_sec;
  out.limits = s.config.limits;
  for (auto& [id, e] : st.sessions)
    if (e.actor && e.generation == ctx.placement_generation)
      ++out.active_sessions;
  // The cap that applies to this workspace: the grant's in admission mode (none: 0),
  // boxd's per-workspace cap otherwise; never above the instance's.
  const int64_t max = s.config.limits.max_sessions;
  if (admission_mode(self)) {
    const auto& grant = st.admission->grant();
    out.capacity_limit = grant ? std::min(max, grant->max_sessions) : 0;
  } else {
    out.capacity_limit = std::min(max, s.config.limits.max_sessions_per_workspace);
  }
  out.capacity_used = static_cast<int64_t>(st.sessions.size());
  // Each session of this placement reads its usage on the worker pool; the answers
  // (or their failures, which leave -1) are gathered, then the instance's slots asked.
  struct gather {
    status_info out;
    size_t waiting = 0;
    caf::typed_response_promise<status_info> rp;
  };
  auto g = std::make_shared<gather>();
  g->out = std::move(out);
  g->rp = self->make_response_promise<status_info>();
  self->state.status_waits += 1;
  auto finish = [self, g, max] {
    auto& sessions = g->out.sessions;
    std::sort(sessions.begin(), sessions.end(),
              [](const session_stats& a, const session_stats& b) { return a.session_id < b.session_id; });
    auto done = [self] {
      self->state.status_waits -= 1;
      report_idle(self);
    };
    self->request(self->state.args.directory, control_timeout, slot_atom_v, caf::get_atom_v)
      .then(
        [g, max, done](int64_t all) {
          auto& o = g->out;
          o.capacity_remaining = std::max<int64_t>(0, std::min(o.capacity_limit - o.capacity_used, max - all));
          g->rp.deliver(std::move(o));
          done();
        },
        [g, done](caf::error& err) {
          g->rp.deliver(std::move(err));
          done();
        });
  };
  for (auto& [id, e] : st.sessions)
    if (e.actor && e.generation == ctx.placement_generation) {
      ++g->waiting;
      auto logical = e.logical_id;
      self->request(e.actor, control_timeout, stats_atom_v)
        .then(
          [g, finish](session_stats& s) {
            g->out.sessions.push_back(std::move(s));
            if (--g->waiting == 0)
              finish();
          },
          [g, finish, logical](caf::error&) {
            session_stats s;
            s.session_id = logical;
            g->out.sessions.push_back(std::move(s));
            if (--g->waiting == 0)
              finish();
          });
    }
  if (g->waiting == 0)
    finish();
  return g->rp;
}

caf::result<std::vector<ps_entry>> list_sessions(self_ptr self) {
  auto& st = self->state;
  struct gather {
    std::vector<ps_entry> out;
    size_t waiting = 0;
    caf::typed_response_promise<std::vector<ps_entry>> rp;
  };
  auto g = std::make_shared<gather>();
  g->rp = self->make_response_promise<std::vector<ps_entry>>();
  // No eviction while the answers gather (as box_status).
  st.status_waits += 1;
  auto one_done = [self, g] {
    if (--g->waiting > 0)
      return;
    std::sort(g->out.begin(), g->out.end(), [](const ps_entry& a, const ps_entry& b) {
      return std::tie(a.generation, a.stats.session_id) < std::tie(b.generation, b.stats.session_id);
    });
    g->rp.deliver(std::move(g->out));
    self->state.status_waits -= 1;
    report_idle(self);
  };
  ++g->waiting;  // this loop's own count: nothing is delivered before it ends
  for (auto& [id, e] : st.sessions) {
    if (!e.actor)
      continue;
    auto i = g->out.size();
    ps_entry x;
    x.instance_uuid = st.admission->instance_uuid();
    x.workspace_uuid = st.admission->workspace_uuid();
    x.generation = e.generation;
    x.stats.session_id = e.logical_id;
    if (e.compat)
      x.memory_mb = e.compat->memory_mb;
    g->out.push_back(std::move(x));
    g->waiting += 2;
    self->request(e.actor, control_timeout, stats_atom_v)
      .then(
        [g, i, one_done](session_stats& s) {
          s.session_id = g->out[i].stats.session_id;  // the logical id, as the tenant knows it
          g->out[i].stats = std::move(s);
          one_done();
        },
        [one_done](caf::error&) { one_done(); });
    self->request(e.actor, control_timeout, caf::get_atom_v)
      .then(
        [g, i, one_done](session_info& info) {
          g->out[i].created_at = info.created_at;
          g->out[i].last_used_at = info.last_used_at;
          if (g->out[i].stats.backend_name.empty())
            g->out[i].stats.backend_name = info.backend_name;
          one_done();
        },
        [one_done](caf::error&) { one_done(); });
  }
  one_done();
  return g->rp;
}

caf::result<storage_report> storage_analysis(self_ptr self, const action_context& ctx) {
  if (auto err = tenant_gate(self, ctx, nullptr, {}, false))
    return refused(self, err);
  auto& st = self->state;
  std::vector<session_actor> targets;
  for (auto& [id, e] : st.sessions)
    if (e.actor && e.generation == ctx.placement_generation)
      targets.push_back(e.actor);
  // One analysis per placement at a time: requests that arrive meanwhile share it.
  const auto gen = ctx.placement_generation;
  auto rp = self->make_response_promise<storage_report>();
  auto& waiting = st.storage_waiters[gen];
  waiting.push_back(rp);
  if (waiting.size() > 1)
    return rp;
  auto answer = [self, gen](const storage_report& report) {
    if (auto promises = take(self->state.storage_waiters, gen))
      for (auto& p : *promises)
        p.deliver(report);
    report_idle(self);
  };
  on_pool(
    self, [config = config(self), ns = st.admission->box_ns()] { return host_entries(config, ns); },
    [self, answer, targets](std::optional<std::vector<storage_entry>> host) mutable {
      auto report = std::make_shared<storage_report>();
      if (host)
        report->directories = std::move(*host);
      report->active_sessions = static_cast<int64_t>(targets.size());
      if (targets.empty()) {
        answer(*report);
        return;
      }
      auto probes = std::make_shared<std::vector<session_probe>>(targets.size());
      auto remaining = std::make_shared<size_t>(targets.size());
      auto finish = [answer, report, probes, remaining]() mutable {
        if (--*remaining > 0)
          return;
        add_sandbox_entries(report->directories, *probes);
        answer(*report);
      };
      box_spec probe;
      probe.cmd = probe_command;
      probe.workdir = "/";
      probe.timeout_sec = 15;
      for (size_t i = 0; i < targets.size(); ++i) {
        auto target = targets[i];
        self->request(target, control_timeout, caf::get_atom_v)
          .then(
            [self, target, probe, probes, report, finish, i](session_info& info) mutable {
              (*probes)[i].host_mounted = !info.host_path.empty();
              (*probes)[i].has_processes = !info.managed_processes.empty();
              report->managed_processes += static_cast<int64_t>(info.managed_processes.size());
              self->request(target, control_timeout, probe_atom_v, probe)
                .then(
                  [probes, finish, i](exec_result& r) mutable {
                    if (r.status == exec_status::completed && r.exit_code == 0) {
                      (*probes)[i].ok = true;
                      (*probes)[i].report = parse_probe(r.stdout_text);
                    }
                    finish();
                  },
                  [finish](caf::error&) mutable { finish(); });
            },
            [finish](caf::error&) mutable { finish(); });
      }
    });
  return rp;
}

} // namespace boxrt::supervisor_detail
