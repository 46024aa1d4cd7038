// Skill names, SKILL.md frontmatter and the JSON of a skill (§11).
#include "backends/skills/store_detail.hpp"

namespace boxrt::skills {

// --- public helpers ----------------------------------------------------------------

result<std::string> scoped_root(std::string_view skills_root, std::string_view ns) {
  if (ns.empty() || ns.find('/') != std::string_view::npos
      || ns.find('\\') != std::string_view::npos || ns == "." || ns == "..")
    return make_box_error(ec::value, "Invalid Box skill namespace");
  return std::string{skills_root} + "/tenants/" + std::string{ns};
}

result<std::string> validate_name(std::string_view raw) {
  auto name = py::strip(raw);
  if (name.empty())
    return invalid("Skill name is required");
  bool any = false;
  for (size_t i = 0; i < name.size();) {
    const char32_t cp = decode_utf8(name, i);
    if (cp == '-' || cp == '_')
      continue;
    if (!is_alnum(cp))
      return invalid("Skill name can only contain letters, numbers, hyphens and underscores");
    any = true;
  }
  if (!any)
    return invalid("Skill name can only contain letters, numbers, hyphens and underscores");
  if (code_points(name) > limits::name_chars)
    return invalid("Skill name cannot exceed 64 characters");
  return std::string{name};
}

result<frontmatter> parse_frontmatter(std::string_view content) {
  frontmatter out;
  out.instructions = std::string{content};
  if (!content.starts_with("---"))
    return out;
  auto lines = split_lines(content);
  if (lines.empty() || py::strip(lines[0]) != "---")
    return out;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (py::strip(lines[i]) != "---")
      continue;
    std::string meta;
    for (size_t k = 1; k < i; ++k)
      meta.append(lines[k]);
    std::string rest;
    for (size_t k = i + 1; k < lines.size(); ++k)
      rest.append(lines[k]);
    out.instructions = rest.substr(std::min(rest.find_first_not_of('\n'), rest.size()));
    YAML::Node doc;
    try {
      doc = YAML::Load(meta);
    } catch (const YAML::Exception& e) {
      return invalid(e.what());
    }
    if (doc.IsMap()) {
      const YAML::Node& m = doc;
      out.name = python_str(m["name"]);
      out.display_name = python_str(m["display_name"]);
      out.description = python_str(m["description"]);
    }
    return out;
  }
  return out;
}

std::string build_skill_md(const std::vector<std::pair<std::string, std::string>>& fields,
                           std::string_view instructions) {
  YAML::Emitter emitter;
  emitter << YAML::BeginMap;
  bool any = false;
  for (const auto& [key, value] : fields) {
    if (py::strip(value).empty())
      continue;
    any = true;
    emitter << YAML::Key << key << YAML::Value;
    // Quote whatever a YAML 1.1 loader would not read back as this very string.
    // Control characters are escaped on one line, so no value can forge a "---" line.
    const bool needs_quotes =
        classify_plain(value) != plain_kind::string || value != py::strip(value)
        || std::any_of(value.begin(), value.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20; });
    if (needs_quotes)
      emitter << YAML::DoubleQuoted;
    emitter << value;
  }
  emitter << YAML::EndMap;
  if (!any)
    return std::string{instructions};
  std::string out = "---\n";
  out += py::strip(emitter.c_str());
  out += "\n---\n\n";
  out += instructions;
  return out;
}

std::string to_json(const skill& s) {
  json::writer w;
  w.begin_object()
    .key("name").value(s.name)
    .key("display_name").value(s.display_name)
    .key("description").value(s.description)
    .key("instructions").value(s.instructions)
    .key("package_root").value(s.package_root)
    .key("entry_file").value(s.entry_file)
    .key("python_project").value(s.python_project)
    .key("created_at").value(s.created_at)
    .key("updated_at").value(s.updated_at);
  if (s.has_source_path)
    w.key("source_path").value(s.source_path);
  w.end_object();
  return w.take();
}

std::string to_json(const std::vector<skill>& skills) {
  json::writer w;
  w.begin_object().key("skills").begin_array();
  for (const auto& s : skills)
    w.raw(to_json(s));
  w.end_array().end_object();
  return w.take();
}

} // namespace boxrt::skills
