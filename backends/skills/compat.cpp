// What the store reproduces of Python: str and os.path behaviour, PyYAML's scalar
// resolution and str() of its values.
#include "backends/skills/store_detail.hpp"

namespace boxrt::skills::detail {

box_error invalid(std::string text) {
  return make_box_error(ec::validation, std::move(text));
}

box_error os_error(int err, const std::string& path) {
  return invalid(beneath::os_error_text(err, path));
}

bool is_alnum(char32_t cp) {
  static const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp == bad_code_point || utf8 == locale_t{})
    return false;
  return ::iswalnum_l(static_cast<wint_t>(cp), utf8) != 0;
}

std::string_view strip_chars(std::string_view s, std::string_view chars) {
  while (!s.empty() && chars.find(s.front()) != std::string_view::npos)
    s.remove_prefix(1);
  while (!s.empty() && chars.find(s.back()) != std::string_view::npos)
    s.remove_suffix(1);
  return s;
}

std::string universal_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n')
        ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    size_t next = i;
    const char32_t cp = decode_utf8(s, next);
    const bool boundary = cp == '\n' || cp == '\v' || cp == '\f' || cp == 0x1C || cp == 0x1D
                          || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    i = next;
    if (boundary) {
      lines.push_back(s.substr(start, i - start));
      start = i;
    }
  }
  if (start < s.size())
    lines.push_back(s.substr(start));
  return lines;
}

std::string safe_target_chars(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t cp = decode_utf8(s, i);
    if (cp == '-' || cp == '_' || is_alnum(cp))
      out.append(s.substr(begin, i - begin));
    else
      out += '-';
  }
  return out;
}

std::string cwd() {
  std::error_code err;
  auto p = fs::current_path(err);
  return err ? std::string{"/"} : p.string();
}

std::string abspath(std::string_view p) {
  if (p.starts_with("/"))
    return normpath(p);
  return normpath(cwd() + "/" + std::string{p});
}

std::string join(const std::string& a, std::string_view b) {
  if (b.starts_with("/"))
    return std::string{b};
  if (a.empty() || a.ends_with("/"))
    return a + std::string{b};
  return a + "/" + std::string{b};
}

std::string dirname(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == std::string::npos)
    return "";
  auto head = p.substr(0, slash + 1);
  auto stripped = strip_chars(head, "/");
  return stripped.empty() && !head.empty() ? std::string(head.size(), '/')
                                           : head.substr(0, head.find_last_not_of('/') + 1);
}

std::string basename(std::string_view p) {
  auto slash = p.rfind('/');
  return std::string{slash == std::string_view::npos ? p : p.substr(slash + 1)};
}

std::string join_realpath(std::string path, std::string_view rest,
                          std::map<std::string, std::optional<std::string>>& seen,
                          bool& ok) {
  if (rest.starts_with("/")) {
    rest.remove_prefix(1);
    path = "/";
  }
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto name = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (name.empty() || name == ".")
      continue;
    if (name == "..") {
      if (!path.empty()) {
        auto last = basename(path);
        path = dirname(path);
        if (last == "..")
          path = join(join(path, ".."), "..");
      } else {
        path = "..";
      }
      continue;
    }
    auto newpath = join(path, name);
    struct stat st{};
    if (::lstat(newpath.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      path = newpath;
      continue;
    }
    if (auto it = seen.find(newpath); it != seen.end()) {
      if (it->second) {
        path = *it->second;
        continue;
      }
      ok = false;
      return join(newpath, rest);
    }
    seen[newpath] = std::nullopt;
    std::string target(PATH_MAX, '\0');
    auto n = ::readlink(newpath.c_str(), target.data(), target.size());
    target.resize(n < 0 ? 0 : static_cast<size_t>(n));
    path = join_realpath(path, target, seen, ok);
    if (!ok)
      return join(path, rest);
    seen[newpath] = path;
  }
  return path;
}

std::string realpath_py(std::string_view p) {
  std::map<std::string, std::optional<std::string>> seen;
  bool ok = true;
  return abspath(join_realpath("", abspath(p), seen, ok));
}

bool within(const std::string& root, const std::string& p) {
  return p == root || p.starts_with(root == "/" ? root : root + "/");
}


int64_t epoch_us(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + (ts.tv_nsec + 500) / 1000;
}

plain_kind classify_plain(const std::string& v) {
  static const std::set<std::string> nulls{"", "~", "null", "Null", "NULL"};
  static const std::set<std::string> trues{"yes", "Yes", "YES", "true", "True",
                                           "TRUE", "on", "On", "ON", "y", "Y"};
  static const std::set<std::string> falses{"no", "No", "NO", "false", "False",
                                            "FALSE", "off", "Off", "OFF", "n", "N"};
  if (nulls.contains(v))
    return plain_kind::null;
  if (trues.contains(v))
    return plain_kind::true_;
  if (falses.contains(v))
    return plain_kind::false_;
  std::string_view d = v;
  if (d.starts_with("-") || d.starts_with("+"))
    d.remove_prefix(1);
  if (!d.empty() && std::all_of(d.begin(), d.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '_';
      }) && d.front() != '_')
    return plain_kind::integer;
  if (!d.empty() && ((d.front() >= '0' && d.front() <= '9') || d.front() == '.'))
    return plain_kind::number;
  return plain_kind::string;
}

std::optional<std::string> python_str(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull())
    return std::nullopt;
  if (!node.IsScalar())
    return std::nullopt; // lists and mappings are not usable as text fields
  const std::string& v = node.Scalar();
  if (node.Tag() == "?") {
    switch (classify_plain(v)) {
      case plain_kind::null:
      case plain_kind::false_:
        return std::nullopt;
      case plain_kind::true_:
        return "True";
      case plain_kind::integer: {
        std::string digits;
        bool negative = v.starts_with("-");
        for (char c : v)
          if (c >= '0' && c <= '9')
            digits += c;
        auto nz = digits.find_first_not_of('0');
        if (nz == std::string::npos)
          return std::nullopt; // 0
        return (negative ? "-" : "") + digits.substr(nz);
      }
      case plain_kind::number:
      case plain_kind::string:
        break;
    }
  }
  if (v.empty())
    return std::nullopt;
  return v;
}

} // namespace boxrt::skills::detail
