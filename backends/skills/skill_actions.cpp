#include "backends/skills/skill_actions.hpp"

#include <unistd.h>

#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include <simdjson.h>

#include "backends/state/transfer_store.hpp"
#include "messages/base/pytext.hpp"
#include "messages/base/json.hpp"

namespace boxrt {

namespace {

namespace dom = simdjson::dom;

box_error wrap(const box_error& e) {
  // Cloud refusals and entitlement errors keep their class; the rest is a validation
  // failure, as the reference's `except Exception -> BoxValidationError` gives.
  if (e.code == ec::admission || e.code == ec::entitlement_unavailable)
    return e;
  return box_error{ec::validation, e.message};
}

/// "<key> must be a string" (built in two steps: GCC 12 warns falsely on `+` here).
box_error must_be_string(std::string_view key) {
  std::string text{key};
  text += " must be a string";
  return box_error{ec::validation, std::move(text)};
}

/// A string field: nullopt when missing or null; an error when another type.
result<std::optional<std::string>> opt_string(dom::object obj, std::string_view key) {
  dom::element v;
  if (obj.at_key(key).get(v) != simdjson::SUCCESS || v.is_null())
    return std::optional<std::string>{};
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS)
    return must_be_string(key);
  return std::optional<std::string>{std::string{s}};
}

/// A required string field (KeyError when missing, as `data[key]` gives).
result<std::string> req_string(dom::object obj, std::string_view key) {
  dom::element v;
  if (obj.at_key(key).get(v) != simdjson::SUCCESS)
    return box_error{ec::key, "'" + std::string{key} + "'"};
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS)
    return must_be_string(key);
  return std::string{s};
}

/// req_string for the actions whose failures are wrapped as BoxValidationError.
result<std::string> wrapped_field(dom::object obj, std::string_view key) {
  auto r = req_string(obj, key);
  if (!r)
    return wrap(r.error());
  return r;
}

/// A store reply of a wrapped action, its failure wrapped.
result<std::string> wrapped(result<std::string> r) {
  if (!r)
    return wrap(r.error());
  return r;
}

skills::text_field text_of(dom::object obj, std::string_view key) {
  dom::element v;
  if (obj.at_key(key).get(v) != simdjson::SUCCESS)
    return std::nullopt;
  if (v.is_null())
    return std::optional<std::optional<std::string>>{std::optional<std::string>{}};
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS)
    return std::optional<std::optional<std::string>>{std::string{s}};
  // Python would str() other scalars; keep their JSON text.
  return std::optional<std::optional<std::string>>{simdjson::minify(v)};
}

result<skills::create_request> create_req(dom::object data) {
  dom::element skill_el;
  if (data.at_key("skill").get(skill_el) != simdjson::SUCCESS)
    return box_error{ec::key, "'skill'"};
  dom::object skill;
  if (skill_el.get_object().get(skill) != simdjson::SUCCESS)
    return box_error{ec::validation, "skill must be an object"};
  skills::create_request r;
  auto name = opt_string(skill, "name");
  if (!name)
    return name.error();
  r.name = name->value_or("");
  r.display_name = text_of(skill, "display_name");
  r.description = text_of(skill, "description");
  r.instructions = text_of(skill, "instructions");
  auto root = opt_string(skill, "package_root");
  if (!root)
    return root.error();
  r.package_root = root->value_or("");
  return r;
}

std::string skill_reply(const std::optional<skills::skill>& s) {
  json::writer w;
  w.begin_object();
  w.key("skill");
  if (s)
    w.raw(skills::to_json(*s));
  else
    w.null();
  w.end_object();
  return w.take();
}

/// Removes the uploaded file when the job ends, whatever happened.
struct upload_guard {
  explicit upload_guard(std::string p) : path(std::move(p)) {}
  ~upload_guard() {
    if (!path.empty())
      remove_transfer_file(path);
  }
  std::string path;
};

/// A store result of a wrapped action as the reply JSON, its failure wrapped.
template <class T>
result<std::string> wrapped_json(result<T> r) {
  if (!r)
    return wrap(r.error());
  if constexpr (std::is_same_v<T, skills::skill>)
    return skill_reply(r.value());
  else
    return skills::to_json(r.value());
}

using action_fn = result<std::string> (*)(skills::store&, const skill_job&, dom::object);

result<std::string> list_skills(skills::store& store, const skill_job&, dom::object) {
  auto xs = store.list();
  if (!xs)
    return box_error{ec::value, xs.error().message};
  return skills::to_json(xs.value());
}

result<std::string> get_skill(skills::store& store, const skill_job&, dom::object data) {
  auto name = req_string(data, "name");
  if (!name)
    return name.error();
  auto s = store.get(*name);
  if (!s)
    return box_error{ec::value, s.error().message};
  return skill_reply(s.value());
}

result<std::string> create_skill(skills::store& store, const skill_job& job, dom::object data) {
  auto req = create_req(data);
  if (!req)
    return wrap(req.error());
  if (job.admission) {
    if (!py::strip(req->package_root).empty())
      return box_error{ec::admission, "Cloud skill package_root is runtime-owned"};
    req->package_root.clear();
  }
  return wrapped_json(store.create(*req));
}

result<std::string> update_skill(skills::store& store, const skill_job& job, dom::object data) {
  auto name = wrapped_field(data, "name");
  if (!name)
    return name.error();
  auto req = create_req(data);
  if (!req)
    return wrap(req.error());
  if (job.admission)
    req->package_root.clear(); // dropped silently in Cloud
  return wrapped_json(store.update(*name, *req));
}

result<std::string> delete_skill(skills::store& store, const skill_job&, dom::object data) {
  auto name = wrapped_field(data, "name");
  if (!name)
    return name.error();
  auto gone = store.remove(*name);
  if (!gone)
    return wrap(gone.error());
  json::writer w;
  w.begin_object();
  w.key("deleted").value(gone.value());
  w.end_object();
  return w.take();
}

result<std::string> scan_directory(skills::store& store, const skill_job& job, dom::object data) {
  if (job.admission)
    return box_error{ec::admission, "Scanning arbitrary host skill directories is disabled in Cloud"};
  auto path = wrapped_field(data, "path");
  if (!path)
    return path.error();
  return wrapped_json(store.scan_directory(*path));
}

result<std::string> list_files(skills::store& store, const skill_job&, dom::object data) {
  auto name = wrapped_field(data, "name");
  if (!name)
    return name.error();
  auto path = opt_string(data, "path");
  if (!path)
    return wrap(path.error());
  bool hidden = false;
  dom::element v;
  if (data.at_key("include_hidden").get(v) == simdjson::SUCCESS && !v.is_null()) {
    if (!v.is_bool())
      return box_error{ec::validation, "include_hidden must be a boolean"};
    hidden = v.get_bool().value();
  }
  int64_t max_entries = 200;
  if (data.at_key("max_entries").get(v) == simdjson::SUCCESS) {
    if (v.is_bool() || v.get_int64().get(max_entries) != simdjson::SUCCESS)
      return box_error{ec::validation, "max_entries must be a positive integer"};
  }
  return wrapped(store.list_files(*name, path->value_or("."), hidden, max_entries));
}

/// The `name` and `path` a file action needs, both required strings (wrapped).
result<std::pair<std::string, std::string>> name_and_path(dom::object data) {
  auto name = wrapped_field(data, "name");
  if (!name)
    return name.error();
  auto path = wrapped_field(data, "path");
  if (!path)
    return path.error();
  return std::pair{std::move(*name), std::move(*path)};
}

result<std::string> read_file(skills::store& store, const skill_job&, dom::object data) {
  auto target = name_and_path(data);
  if (!target)
    return target.error();
  return wrapped(store.read_file(target->first, target->second));
}

result<std::string> write_file(skills::store& store, const skill_job&, dom::object data) {
  auto target = name_and_path(data);
  if (!target)
    return target.error();
  auto content = opt_string(data, "content");
  if (!content)
    return wrap(content.error());
  return wrapped(store.write_file(target->first, target->second, content->value_or("")));
}

/// box_preview_skill_zip and box_install_skill_zip: the uploaded archive.
result<std::string> skill_zip(skills::store& store, const skill_job& job, dom::object data) {
  auto filename = opt_string(data, "filename");
  auto subdir = opt_string(data, "source_subdir");
  auto suffix = opt_string(data, "target_suffix");
  auto one = opt_string(data, "source_path");
  for (auto* r : {&filename, &subdir, &suffix, &one})
    if (!*r)
      return wrap(r->error());
  if (job.file_path.empty())
    return box_error{ec::validation, "Uploaded file is not available"};
  if (job.action == "box_preview_skill_zip")
    return wrapped_json(store.preview_zip(job.file_path, filename->value_or("skill.zip"),
                                          subdir->value_or(""), suffix->value_or("upload")));
  std::vector<std::string> paths;
  dom::element v;
  if (data.at_key("source_paths").get(v) == simdjson::SUCCESS && !v.is_null()) {
    dom::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS)
      return box_error{ec::validation, "source_paths must be a list of strings"};
    for (auto item : arr) {
      std::string_view s;
      if (item.get_string().get(s) != simdjson::SUCCESS)
        return box_error{ec::validation, "source_paths must be a list of strings"};
      paths.emplace_back(s);
    }
  }
  return wrapped_json(store.install_zip(job.file_path, filename->value_or("skill.zip"),
                                        subdir->value_or(""), suffix->value_or("upload"), paths,
                                        one->value_or("")));
}

/// The skill actions of §2.4 by name.
constexpr std::pair<std::string_view, action_fn> actions[] = {
  {"box_list_skills", list_skills},
  {"box_get_skill", get_skill},
  {"box_create_skill", create_skill},
  {"box_update_skill", update_skill},
  {"box_delete_skill", delete_skill},
  {"box_scan_skill_directory", scan_directory},
  {"box_list_skill_files", list_files},
  {"box_read_skill_file", read_file},
  {"box_write_skill_file", write_file},
  {"box_preview_skill_zip", skill_zip},
  {"box_install_skill_zip", skill_zip},
};

result<std::string> run(skills::store& store, const skill_job& job, dom::object data) {
  for (auto& [name, fn] : actions)
    if (name == job.action)
      return fn(store, job, data);
  return box_error{ec::value, "Action " + job.action + " not found"};
}

} // namespace

result<std::string> run_skill_action(skills::store& store, const skill_job& job) {
  upload_guard upload{job.file_path};
  dom::parser parser;
  dom::element root;
  dom::object data;
  if (parser.parse(job.data_json).get(root) != simdjson::SUCCESS
      || root.get_object().get(data) != simdjson::SUCCESS)
    return box_error{ec::envelope, "data must be an object"};
  return run(store, job, data);
}

} // namespace boxrt
