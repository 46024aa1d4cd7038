// skill_store: names, SKILL.md, CRUD, file access path safety and zip uploads (§11, §12).
// Every archive is built here with libzip; every refusal is checked for its exact text
// and for leaving nothing behind in the store or the temp directory.
#include "backends/skills/skill_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <zip.h>

#include "tests/backends/temp_dir.hpp"

namespace fs = std::filesystem;
using boxrt::skills::create_request;
using boxrt::skills::skill;

namespace {

void put(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path{path}.parent_path());
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << content;
}

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Number of filesystem entries below `dir` (0 if it does not exist).
size_t entries_below(const std::string& dir) {
  std::error_code err;
  if (!fs::exists(dir, err))
    return 0;
  size_t n = 0;
  for (auto it = fs::recursive_directory_iterator{dir}; it != fs::recursive_directory_iterator{};
       ++it)
    ++n;
  return n;
}

void set_mtime(const std::string& path, time_t secs) {
  struct timespec times[2] = {{secs, 0}, {secs, 0}};
  BOOST_REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

struct zip_entry {
  std::string name;
  std::string data;
  bool is_dir = false;
  std::optional<uint32_t> unix_mode = {}; // upper 16 bits of the external attributes
};

/// Writes a zip archive with exactly these members.
void make_zip(const std::string& path, const std::vector<zip_entry>& entries) {
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  BOOST_REQUIRE(za != nullptr);
  for (const auto& e : entries) {
    zip_int64_t idx = -1;
    if (e.is_dir) {
      idx = zip_dir_add(za, e.name.c_str(), ZIP_FL_ENC_UTF_8);
    } else {
      zip_source_t* src = zip_source_buffer(za, e.data.data(), e.data.size(), 0);
      BOOST_REQUIRE(src != nullptr);
      idx = zip_file_add(za, e.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    }
    BOOST_REQUIRE_MESSAGE(idx >= 0, "zip add " << e.name << ": " << zip_strerror(za));
    if (e.unix_mode)
      BOOST_REQUIRE(zip_file_set_external_attributes(za, static_cast<zip_uint64_t>(idx), 0,
                                                     ZIP_OPSYS_UNIX, *e.unix_mode << 16)
                    == 0);
  }
  BOOST_REQUIRE_MESSAGE(zip_close(za) == 0, zip_strerror(za));
}

std::string skill_md(const std::string& name, const std::string& body = "Body") {
  return "---\nname: " + name + "\ndescription: about " + name + "\n---\n\n" + body;
}

struct fixture {
  boxrt::testing::temp_dir dir;
  std::string root = dir.str("skills/tenants/ws-0123456789abcdef01234567");
  std::string tmp = dir.str("tmp");
  boxrt::skills::store store{root, tmp};

  fixture() { fs::create_directories(tmp); }

  skill create(const std::string& name, const std::string& instructions = "Do it") {
    create_request req;
    req.name = name;
    req.instructions = std::optional<std::string>{instructions};
    auto res = store.create(req);
    BOOST_REQUIRE_MESSAGE(res.ok(), (res.ok() ? "" : res.error().message));
    return *res;
  }

  std::string error_of_create(const create_request& req) {
    auto res = store.create(req);
    BOOST_REQUIRE(!res.ok());
    BOOST_TEST((res.error().code == boxrt::ec::validation));
    return res.error().message;
  }

  std::string zip(const std::string& name, const std::vector<zip_entry>& entries) {
    auto path = dir.str(name);
    make_zip(path, entries);
    return path;
  }

  /// Previews and installs `path`, expecting both to fail with `message` and to leave
  /// no trace in the store or the temp directory.
  void refused(const std::string& path, const std::string& message) {
    auto preview = store.preview_zip(path, "skill.zip");
    BOOST_REQUIRE(!preview.ok());
    BOOST_TEST(preview.error().message == message);
    auto install = store.install_zip(path, "skill.zip");
    BOOST_REQUIRE(!install.ok());
    BOOST_TEST(install.error().message == message);
    BOOST_TEST(entries_below(root) == 0u);
    BOOST_TEST(entries_below(tmp) == 0u);
  }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(skill_store_suite)

// --- names and SKILL.md ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(name_validation_follows_the_reference_order) {
  using boxrt::skills::validate_name;
  BOOST_TEST(validate_name("   ").error().message == "Skill name is required");
  const std::string letters =
      "Skill name can only contain letters, numbers, hyphens and underscores";
  BOOST_TEST(validate_name("a b").error().message == letters);
  BOOST_TEST(validate_name("a.b").error().message == letters);
  BOOST_TEST(validate_name("../x").error().message == letters);
  BOOST_TEST(validate_name("-_-").error().message == letters);
  BOOST_TEST(validate_name(std::string(65, 'a') + "!").error().message == letters);
  BOOST_TEST(validate_name(std::string(65, 'a')).error().message
             == "Skill name cannot exceed 64 characters");
  BOOST_TEST(*validate_name("  " + std::string(64, 'a') + " ") == std::string(64, 'a'));
  BOOST_TEST(*validate_name("my-skill_2") == "my-skill_2");
  BOOST_TEST(*validate_name("技能") == "技能");
  BOOST_TEST(*validate_name("Straße-ÄÖ") == "Straße-ÄÖ");
  // 64 CJK characters are 192 bytes but still 64 characters.
  std::string cjk;
  for (int i = 0; i < 64; ++i)
    cjk += "技";
  BOOST_TEST(validate_name(cjk).ok());
  BOOST_TEST(!validate_name(cjk + "技").ok());
}

BOOST_AUTO_TEST_CASE(frontmatter_parsing_matches_python) {
  using boxrt::skills::parse_frontmatter;
  auto plain = parse_frontmatter("no frontmatter\n");
  BOOST_TEST(!plain->name.has_value());
  BOOST_TEST(plain->instructions == "no frontmatter\n");

  auto full = parse_frontmatter("---\nname: demo\ndisplay_name: ' Demo '\nlicense: MIT\n---\n\n\nBody\n");
  BOOST_TEST(*full->name == "demo");
  BOOST_TEST(*full->display_name == " Demo ");
  BOOST_TEST(!full->description.has_value());
  BOOST_TEST(full->instructions == "Body\n");

  auto unclosed = parse_frontmatter("---\nname: demo\nBody");
  BOOST_TEST(!unclosed->name.has_value());
  BOOST_TEST(unclosed->instructions == "---\nname: demo\nBody");

  auto not_first_line = parse_frontmatter("---x\nname: demo\n---\nBody");
  BOOST_TEST(!not_first_line->name.has_value());

  auto list = parse_frontmatter("---\n- a\n- b\n---\nBody");
  BOOST_TEST(list.ok());
  BOOST_TEST(!list->name.has_value());
  BOOST_TEST(list->instructions == "Body");

  auto falsy = parse_frontmatter("---\nname: ~\ndescription: false\ndisplay_name: 0\n---\n");
  BOOST_TEST(!falsy->name.has_value());
  BOOST_TEST(!falsy->description.has_value());
  BOOST_TEST(!falsy->display_name.has_value());
  auto typed = parse_frontmatter("---\nname: yes\ndescription: '0'\ndisplay_name: 007\n---\n");
  BOOST_TEST(*typed->name == "True");
  BOOST_TEST(*typed->description == "0");
  BOOST_TEST(*typed->display_name == "7");

  BOOST_TEST(!parse_frontmatter("---\nname: [unclosed\n---\nBody").ok());
}

BOOST_AUTO_TEST_CASE(skill_md_is_written_in_block_style_and_reads_back) {
  using boxrt::skills::build_skill_md;
  BOOST_TEST(build_skill_md({{"name", "demo"}, {"display_name", "Demo"}, {"description", "d"}},
                            "Do it")
             == "---\nname: demo\ndisplay_name: Demo\ndescription: d\n---\n\nDo it");
  BOOST_TEST(build_skill_md({{"name", "demo"}, {"description", "   "}}, "x")
             == "---\nname: demo\n---\n\nx");
  BOOST_TEST(build_skill_md({{"description", ""}}, "only") == "only");
  // Values a YAML 1.1 loader would turn into other types are quoted, so they read back.
  for (std::string value : {"0", "yes", "null", "1.5", "技能 说明", "a: b", "- x", " pad ",
                            "line1\nline2", "#hash", "it's"}) {
    auto text = build_skill_md({{"name", "n"}, {"description", value}}, "B");
    auto parsed = boxrt::skills::parse_frontmatter(text);
    BOOST_REQUIRE_MESSAGE(parsed.ok(), text);
    BOOST_TEST(*parsed->description == value, text);
    BOOST_TEST(parsed->instructions == "B");
  }
}

// --- CRUD --------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(create_get_list_round_trip, fixture) {
  create_request req;
  req.name = "  demo  ";
  req.display_name = std::optional<std::string>{"Demo"};
  req.description = std::optional<std::string>{"does things"};
  req.instructions = std::optional<std::string>{"Do it"};
  auto created = store.create(req);
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(created->name == "demo");
  BOOST_TEST(created->display_name == "Demo");
  BOOST_TEST(created->description == "does things");
  BOOST_TEST(created->instructions == "Do it");
  BOOST_TEST(created->package_root == root + "/demo");
  BOOST_TEST(created->entry_file == "SKILL.md");
  BOOST_TEST(!created->python_project);
  BOOST_TEST(created->updated_at.ends_with("+00:00"));
  BOOST_TEST(created->created_at.size() >= 25u);
  BOOST_TEST(slurp(root + "/demo/SKILL.md")
             == "---\nname: demo\ndisplay_name: Demo\ndescription: does things\n---\n\nDo it");

  auto got = store.get("demo");
  BOOST_REQUIRE(got.ok() && got->has_value());
  BOOST_TEST((**got).description == "does things");
  BOOST_TEST(!store.get("other")->has_value());
  BOOST_TEST(store.list()->size() == 1u);

  auto json = boxrt::skills::to_json(**got);
  BOOST_TEST(json.starts_with("{\"name\":\"demo\",\"display_name\":\"Demo\""));
  BOOST_TEST(contains(json, "\"python_project\":false"));
  BOOST_TEST(!contains(json, "source_path"));

  BOOST_TEST(error_of_create(req) == "Skill with name \"demo\" already exists");
  create_request blank;
  blank.name = " ";
  BOOST_TEST(error_of_create(blank) == "Skill name is required");
}

BOOST_FIXTURE_TEST_CASE(create_without_fields_falls_back_to_name, fixture) {
  create_request req;
  req.name = "技能";
  auto created = store.create(req);
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(created->display_name == "技能");
  BOOST_TEST(created->description == "");
  BOOST_TEST(slurp(root + "/技能/SKILL.md") == "---\nname: 技能\n---\n\n");
}

BOOST_FIXTURE_TEST_CASE(create_registers_a_package_in_place_and_drops_unknown_keys, fixture) {
  put(root + "/imported/SKILL.md",
      "---\nname: old\ndisplay_name: Old Name\ndescription: kept\nlicense: MIT\n---\nSteps");
  create_request req;
  req.name = "fresh";
  req.package_root = root + "/imported/";
  req.description = std::optional<std::string>{"  "}; // blank: the imported value wins
  auto created = store.create(req);
  BOOST_REQUIRE_MESSAGE(created.ok(), (created.ok() ? "" : created.error().message));
  BOOST_TEST(created->package_root == root + "/imported");
  BOOST_TEST(created->display_name == "Old Name");
  BOOST_TEST(created->description == "kept");
  BOOST_TEST(created->instructions == "Steps");
  const auto text = slurp(root + "/imported/SKILL.md");
  BOOST_TEST(!contains(text, "license"));
  BOOST_TEST(text == "---\nname: fresh\ndisplay_name: Old Name\ndescription: kept\n---\n\nSteps");
}

BOOST_FIXTURE_TEST_CASE(create_refuses_package_roots_it_cannot_use, fixture) {
  create_request req;
  req.name = "x";
  put(dir.str("outside/SKILL.md"), "outside");
  req.package_root = dir.str("outside");
  BOOST_TEST(error_of_create(req) == "package_root must stay within the Workspace skill root");
  fs::create_directories(root);
  req.package_root = root;
  BOOST_TEST(error_of_create(req) == "package_root must stay within the Workspace skill root");
  // A symlink inside the root that leads out is judged by its target.
  fs::create_symlink(dir.str("outside"), root + "/link");
  req.package_root = root + "/link";
  BOOST_TEST(error_of_create(req) == "package_root must stay within the Workspace skill root");
  req.package_root = root + "/missing";
  BOOST_TEST(error_of_create(req) == "Directory does not exist: " + root + "/missing");
  fs::create_directories(root + "/empty");
  req.package_root = root + "/empty";
  BOOST_TEST(error_of_create(req) == "No SKILL.md found in " + root + "/empty");
  BOOST_TEST(slurp(dir.str("outside/SKILL.md")) == "outside");
}

BOOST_FIXTURE_TEST_CASE(update_rewrites_fields_and_refuses_renames_and_moves, fixture) {
  create_request req;
  req.name = "demo";
  req.display_name = std::optional<std::string>{"Demo"};
  req.description = std::optional<std::string>{"first"};
  req.instructions = std::optional<std::string>{"v1"};
  BOOST_REQUIRE(store.create(req).ok());

  create_request change;
  change.description = std::optional<std::string>{"second"};
  auto updated = store.update("demo", change);
  BOOST_REQUIRE(updated.ok());
  BOOST_TEST(updated->description == "second");
  BOOST_TEST(updated->display_name == "Demo"); // missing: kept
  BOOST_TEST(updated->instructions == "v1");

  create_request clear;
  clear.description = std::optional<std::string>{}; // JSON null: dropped
  clear.instructions = std::optional<std::string>{};
  updated = store.update("demo", clear);
  BOOST_REQUIRE(updated.ok());
  BOOST_TEST(updated->description == "");
  BOOST_TEST(updated->instructions == "");

  auto missing = store.update("nope", change);
  BOOST_TEST(missing.error().message == "Skill \"nope\" not found");
  create_request rename;
  rename.name = "other";
  BOOST_TEST(store.update("demo", rename).error().message == "Renaming skills is not supported");
  create_request move;
  move.package_root = dir.str("elsewhere");
  BOOST_TEST(store.update("demo", move).error().message
             == "Updating package_root is not supported; recreate the skill to import a "
                "different package");
  move.package_root = root + "/demo/";
  BOOST_TEST(store.update("demo", move).ok());
}

BOOST_FIXTURE_TEST_CASE(delete_removes_the_top_level_directory, fixture) {
  create("demo");
  auto deleted = store.remove("demo");
  BOOST_REQUIRE(deleted.ok());
  BOOST_TEST(*deleted == "demo");
  BOOST_TEST(!fs::exists(root + "/demo"));
  BOOST_TEST(store.remove("demo").error().message == "Skill \"demo\" not found");

  put(root + "/group/nested/SKILL.md", skill_md("nested"));
  BOOST_TEST(store.remove("nested").ok());
  BOOST_TEST(!fs::exists(root + "/group"));

  // A SKILL.md at the root itself is a package, but not a managed one.
  put(root + "/SKILL.md", skill_md("rooted"));
  BOOST_TEST(store.remove("rooted").error().message
             == "Only managed skills under the Box skills root can be deleted");
  BOOST_TEST(fs::exists(root + "/SKILL.md"));
}

BOOST_FIXTURE_TEST_CASE(list_orders_by_updated_at_and_skips_broken_packages, fixture) {
  create("older");
  create("newest");
  create("middle");
  set_mtime(root + "/older/SKILL.md", 1'700'000'000);
  set_mtime(root + "/newest/SKILL.md", 1'800'000'000);
  set_mtime(root + "/middle/SKILL.md", 1'750'000'000);
  put(root + "/bad-utf8/SKILL.md", std::string{"---\nname: bad\n---\n\xff\xfe"});
  put(root + "/bad-name/SKILL.md", "---\nname: has space\n---\n");
  put(root + "/bad-yaml/SKILL.md", "---\nname: [x\n---\n");
  put(root + "/lower/skill.md", "lower-case entry");
  set_mtime(root + "/lower/skill.md", 1'600'000'000);
  auto all = store.list();
  BOOST_REQUIRE(all.ok());
  std::vector<std::string> names;
  for (const auto& s : *all)
    names.push_back(s.name);
  BOOST_TEST((names == std::vector<std::string>{"newest", "middle", "older", "lower"}));
  BOOST_TEST((*all)[0].updated_at == "2027-01-15T08:00:00+00:00");
  BOOST_TEST((*all)[3].entry_file == "skill.md");
  // scan shows the load error the listing hid.
  BOOST_TEST(store.scan_directory(root + "/bad-utf8").error().message
             == "Skill entry file SKILL.md is not valid UTF-8 text");
}

BOOST_FIXTURE_TEST_CASE(python_project_markers, fixture) {
  for (std::string marker : {"requirements.txt", "pyproject.toml", "setup.py", "setup.cfg"}) {
    auto s = create("p-" + std::to_string(marker.size()) + marker.substr(0, 3));
    BOOST_TEST(!s.python_project);
    put(s.package_root + "/" + marker, "");
    auto again = store.get(s.name);
    BOOST_TEST((**again).python_project, marker);
  }
  auto venv = create("venv");
  fs::create_directories(venv.package_root + "/.venv");
  BOOST_TEST((**store.get("venv")).python_project);
  auto not_dir = create("notdir");
  put(not_dir.package_root + "/.venv", "file, not a directory");
  BOOST_TEST(!(**store.get("notdir")).python_project);
}

BOOST_FIXTURE_TEST_CASE(discovery_and_listing_limits, fixture) {
  fs::create_directories(root + "/many");
  for (int i = 0; i <= 10'000; ++i)
    put(root + "/many/f" + std::to_string(i), "");
  BOOST_TEST(store.list().error().message
             == "Skill discovery exceeded the configured entry limit");
  fs::remove_all(root + "/many");

  for (int i = 0; i <= 1'000; ++i)
    put(root + "/s" + std::to_string(i) + "/SKILL.md", "x");
  BOOST_TEST(store.list().error().message
             == "Skill discovery exceeded the configured package limit");
  fs::remove_all(root);

  const std::string big(1'000'000, 'x');
  for (int i = 0; i < 17; ++i)
    put(root + "/big" + std::to_string(i) + "/SKILL.md", big);
  BOOST_TEST(store.list().error().message == "Skill listing exceeds the configured text limit");
}

BOOST_FIXTURE_TEST_CASE(scan_directory_finds_exactly_one_package, fixture) {
  fs::create_directories(root);
  BOOST_TEST(store.scan_directory(dir.str()).error().message
             == "scan path must stay within the Workspace skill root");
  fs::create_symlink(dir.str(), root + "/escape");
  BOOST_TEST(store.scan_directory(root + "/escape").error().message
             == "scan path must stay within the Workspace skill root");
  BOOST_TEST(store.scan_directory(root + "/missing").error().message
             == "Directory does not exist: " + root + "/missing");
  put(root + "/a/b/c/d/SKILL.md", skill_md("deep")); // depth 3: out of reach
  BOOST_TEST(store.scan_directory(root + "/a").error().message
             == "No SKILL.md found in " + root + "/a or its subdirectories (max depth: 2)");
  put(root + "/two/x/SKILL.md", skill_md("x"));
  put(root + "/two/y/SKILL.md", skill_md("y"));
  BOOST_TEST(store.scan_directory(root + "/two").error().message
             == "Multiple skill directories found in " + root
                    + "/two. Please choose a more specific path: " + root + "/two/x, " + root
                    + "/two/y");
  auto one = store.scan_directory(root + "/two/x");
  BOOST_REQUIRE(one.ok());
  BOOST_TEST(one->name == "x");
  BOOST_TEST(one->description == "about x");
}

BOOST_FIXTURE_TEST_CASE(resolve_package_root_for_mounts, fixture) {
  auto s = create("mounted");
  BOOST_TEST(*store.resolve_package_root("mounted") == s.package_root);
  BOOST_TEST(store.resolve_package_root("ghost").error().message == "Skill \"ghost\" not found");
  BOOST_TEST(store.resolve_package_root("../x").error().message
             == "Skill name can only contain letters, numbers, hyphens and underscores");
}

BOOST_AUTO_TEST_CASE(scoped_root_checks_the_namespace) {
  BOOST_TEST(*boxrt::skills::scoped_root("/s", "ws-1") == "/s/tenants/ws-1");
  for (std::string bad : {"", ".", "..", "a/b", "a\\b"})
    BOOST_TEST(boxrt::skills::scoped_root("/s", bad).error().message
               == "Invalid Box skill namespace");
}

// --- files -------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(file_list_read_write_round_trip, fixture) {
  auto s = create("files");
  put(s.package_root + "/scripts/run.sh", "echo hi\n");
  put(s.package_root + "/.hidden", "h");
  put(s.package_root + "/crlf.txt", "a\r\nb\rc");

  auto listed = store.list_files("files");
  BOOST_REQUIRE(listed.ok());
  BOOST_TEST(*listed
             == "{\"skill\":{\"name\":\"files\"},\"base_path\":\".\",\"entries\":["
                "{\"path\":\"SKILL.md\",\"name\":\"SKILL.md\",\"is_dir\":false,\"size\":"
                    + std::to_string(fs::file_size(s.package_root + "/SKILL.md"))
                    + "},{\"path\":\"crlf.txt\",\"name\":\"crlf.txt\",\"is_dir\":false,"
                      "\"size\":6},{\"path\":\"scripts\",\"name\":\"scripts\",\"is_dir\":true,"
                      "\"size\":null}],\"truncated\":false}");
  auto hidden = store.list_files("files", ".", true, 1);
  BOOST_TEST(contains(*hidden, "\".hidden\""));
  BOOST_TEST(contains(*hidden, "\"truncated\":true"));
  auto sub = store.list_files("files", "./scripts/");
  BOOST_TEST(contains(*sub, "\"base_path\":\"scripts\""));
  BOOST_TEST(contains(*sub, "\"path\":\"scripts/run.sh\""));
  BOOST_TEST(store.list_files("files", ".", false, 0).error().message
             == "max_entries must be a positive integer");
  BOOST_TEST(store.list_files("files", "nope/").error().message
             == "Skill directory not found: nope/");
  BOOST_TEST(store.list_files("ghost").error().message == "Skill \"ghost\" not found");

  auto read = store.read_file("files", "scripts//run.sh");
  BOOST_TEST(*read == "{\"skill\":{\"name\":\"files\"},\"path\":\"scripts/run.sh\","
                      "\"content\":\"echo hi\\n\"}");
  BOOST_TEST(contains(*store.read_file("files", "crlf.txt"), "\"content\":\"a\\nb\\nc\""));

  auto written = store.write_file("files", "new/dir/notes.md", "héllo");
  BOOST_TEST(*written == "{\"skill\":{\"name\":\"files\"},\"path\":\"new/dir/notes.md\","
                         "\"bytes_written\":6}");
  BOOST_TEST(slurp(s.package_root + "/new/dir/notes.md") == "héllo");
  BOOST_REQUIRE(store.write_file("files", "SKILL.md", "---\nname: files\n---\nRewritten").ok());
  BOOST_TEST((**store.get("files")).instructions == "Rewritten");
}

BOOST_FIXTURE_TEST_CASE(file_errors_name_the_relative_path, fixture) {
  auto s = create("files");
  fs::create_directories(s.package_root + "/scripts");
  BOOST_TEST(store.read_file("files", "missing.txt").error().message
             == "Skill file not found: missing.txt");
  // The package root itself has its parent outside the root (as in the reference).
  BOOST_TEST(store.read_file("files", ".").error().message
             == "path must stay within the skill package root");
  BOOST_TEST(store.read_file("files", "scripts").error().message
             == "Skill file not found: scripts");
  put(s.package_root + "/bin.dat", std::string{"\xc3\x28"});
  BOOST_TEST(store.read_file("files", "bin.dat").error().message
             == "Skill file bin.dat is not valid UTF-8 text");
  put(s.package_root + "/big.txt", std::string(1'048'577, 'x'));
  BOOST_TEST(store.read_file("files", "big.txt").error().message
             == "Skill file big.txt exceeds the 1048576-byte limit");
  BOOST_TEST(store.write_file("files", "a/too-big.txt", std::string(1'048'577, 'x'))
                 .error()
                 .message
             == "Skill file a/too-big.txt exceeds the 1048576-byte limit");
  BOOST_TEST(!fs::exists(s.package_root + "/a"));
  BOOST_TEST(store.write_file("files", "ok.txt", std::string(1'048'576, 'x')).ok());

  fs::create_directories(s.package_root + "/wide");
  for (int i = 0; i <= 10'000; ++i)
    put(s.package_root + "/wide/" + std::to_string(i), "");
  BOOST_TEST(store.list_files("files", "wide").error().message
             == "Skill directory exceeds the configured entry limit");
}

BOOST_FIXTURE_TEST_CASE(file_paths_cannot_leave_the_package, fixture) {
  auto s = create("safe");
  put(dir.str("secret/passwd"), "top secret");
  fs::create_symlink(dir.str("secret"), s.package_root + "/link");
  fs::create_symlink(dir.str("secret/created-by-attack"), s.package_root + "/dangling");
  fs::create_symlink(dir.str("secret/passwd"), s.package_root + "/file-link");
  const std::string relative = "path must be relative to the skill package root";
  const std::string within = "path must stay within the skill package root";

  BOOST_TEST(store.read_file("safe", "/etc/passwd").error().message == relative);
  BOOST_TEST(store.write_file("safe", "/tmp/x", "x").error().message == relative);
  BOOST_TEST(store.list_files("safe", "/").error().message == relative);
  for (std::string bad : {"..", "../x", "a/../../x", "..foo"}) {
    BOOST_TEST(store.read_file("safe", bad).error().message == within, bad);
    BOOST_TEST(store.write_file("safe", bad, "x").error().message == within, bad);
    BOOST_TEST(store.list_files("safe", bad).error().message == within, bad);
  }
  BOOST_TEST(store.list_files("safe", "link").error().message == within);
  BOOST_TEST(store.read_file("safe", "link/passwd").error().message == within);
  BOOST_TEST(store.read_file("safe", "file-link").error().message == within);
  BOOST_TEST(store.write_file("safe", "link/passwd", "owned").error().message == within);
  BOOST_TEST(store.write_file("safe", "dangling", "owned").error().message == within);
  BOOST_TEST(store.write_file("safe", "link/new/x", "owned").error().message == within);
  BOOST_TEST(slurp(dir.str("secret/passwd")) == "top secret");
  BOOST_TEST(!fs::exists(dir.str("secret/created-by-attack")));
  BOOST_TEST(!fs::exists(dir.str("secret/new")));

  // Listing the package shows the escaping links without following them.
  auto listed = store.list_files("safe");
  BOOST_TEST(contains(*listed, "{\"path\":\"link\",\"name\":\"link\",\"is_dir\":false"));
  BOOST_TEST(!contains(*listed, "\"size\":10"));
}

// --- zip uploads -------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(zip_upload_refuses_bad_bytes, fixture) {
  put(dir.str("empty.zip"), "");
  refused(dir.str("empty.zip"), "Uploaded file is empty");
  put(dir.str("text.zip"), "this is not a zip archive at all");
  refused(dir.str("text.zip"), "Uploaded file must be a valid .zip archive");
  {
    std::ofstream big{dir.str("huge.zip"), std::ios::binary};
  }
  fs::resize_file(dir.str("huge.zip"), 20'971'521);
  refused(dir.str("huge.zip"), "Uploaded archive exceeds the compressed size limit (20971520 bytes)");
}

BOOST_FIXTURE_TEST_CASE(zip_upload_refuses_unsafe_members, fixture) {
  const zip_entry good{"pkg/SKILL.md", skill_md("good")};
  refused(zip("slip.zip", {good, {"../x", "evil"}}), "Archive contains an unsafe path: ../x");
  refused(zip("slip2.zip", {good, {"pkg/../../x", "evil"}}),
          "Archive contains an unsafe path: pkg/../../x");
  refused(zip("abs.zip", {good, {"/etc/x", "evil"}}), "Archive contains an unsafe path: /etc/x");
  refused(zip("bs.zip", {good, {"..\\x", "evil"}}), "Archive contains an unsafe path: ..\\x");
  refused(zip("drive.zip", {good, {"C:/x", "evil"}}), "Archive contains an unsafe path: C:/x");
  refused(zip("link.zip", {good, {"pkg/link", "/etc/passwd", false, S_IFLNK | 0777}}),
          "Archive contains a symbolic link: pkg/link");
  refused(zip("fifo.zip", {good, {"pkg/fifo", "", false, S_IFIFO | 0644}}),
          "Archive contains a non-regular entry: pkg/fifo");
  refused(zip("dup.zip", {good, {"pkg/a.txt", "1"}, {"pkg\\a.txt", "2"}}),
          "Archive contains a duplicate path: pkg\\a.txt");
  refused(zip("dup2.zip", {good, {"pkg/a", "file"}, {"pkg/a/b", "under a file"}}),
          "Archive contains a duplicate path: pkg/a");
}

BOOST_FIXTURE_TEST_CASE(zip_upload_refuses_directories_with_content, fixture) {
  refused(zip("dircontent.zip", {{"pkg/SKILL.md", skill_md("d")}, {"pkg/sub/", "payload"}}),
          "Archive directory has unexpected content: pkg/sub/");
}

BOOST_FIXTURE_TEST_CASE(oversized_entry_file_is_a_load_error, fixture) {
  put(root + "/huge/SKILL.md", "---\nname: huge\n---\n" + std::string(1'048'576, 'x'));
  BOOST_TEST(store.list()->empty());
  BOOST_TEST(store.scan_directory(root + "/huge").error().message
             == "Skill entry file SKILL.md exceeds the 1048576-byte limit");
}

BOOST_FIXTURE_TEST_CASE(zip_upload_refuses_bombs, fixture) {
  std::vector<zip_entry> many{{"pkg/SKILL.md", skill_md("many")}};
  for (int i = 0; i < 512; ++i)
    many.push_back({"pkg/f" + std::to_string(i), "x"});
  refused(zip("many.zip", many), "Archive contains too many entries (maximum 512)");
  many.pop_back(); // exactly 512 is fine
  auto ok = store.preview_zip(zip("512.zip", many), "skill.zip");
  BOOST_TEST(ok.ok());

  refused(zip("ratio.zip", {{"pkg/SKILL.md", skill_md("r")}, {"pkg/bomb.txt", std::string(2 << 20, '\0')}}),
          "Archive entry exceeds the compression ratio limit: pkg/bomb.txt");
  refused(zip("size.zip", {{"pkg/SKILL.md", skill_md("s")},
                           {"pkg/huge.bin", std::string((16 << 20) + 1, 'a')}}),
          "Archive entry exceeds the uncompressed size limit: pkg/huge.bin");
}

BOOST_FIXTURE_TEST_CASE(zip_preview_plans_targets_and_writes_nothing, fixture) {
  auto single = zip("single.zip", {{"pkg/", "", true}, {"pkg/SKILL.md", skill_md("demo")},
                                   {"pkg/run.sh", "echo", false, S_IFREG | 0755}});
  auto previews = store.preview_zip(single, "My Skill!.zip");
  BOOST_REQUIRE_MESSAGE(previews.ok(), (previews.ok() ? "" : previews.error().message));
  BOOST_REQUIRE(previews->size() == 1u);
  const auto& p = previews->front();
  BOOST_TEST(p.name == "demo");
  BOOST_TEST(p.description == "about demo");
  BOOST_TEST(p.source_path == "");
  BOOST_TEST(p.has_source_path);
  BOOST_TEST(p.package_root == root + "/My-Skill-upload");
  BOOST_TEST(contains(boxrt::skills::to_json(p), "\"source_path\":\"\""));
  BOOST_TEST(store.preview_zip(single, "???.zip", "", "")->front().package_root
             == root + "/uploaded-skill");
  BOOST_TEST(store.preview_zip(single, "dir/My Skill!.zip", "", "")->front().package_root
             == root + "/My-Skill");
  BOOST_TEST(store.preview_zip(single, "x.zip", "", "../../etc")->front().package_root
             == root + "/x-------etc");
  BOOST_TEST(entries_below(root) == 0u);
  BOOST_TEST(entries_below(tmp) == 0u);

  auto multi = zip("multi.zip", {{"a/SKILL.md", skill_md("alpha")}, {"b/SKILL.md", skill_md("beta")},
                                 {"b/nested/SKILL.md", skill_md("hidden-by-b")}});
  auto both = store.preview_zip(multi, "bundle.zip");
  BOOST_REQUIRE(both.ok());
  BOOST_REQUIRE(both->size() == 2u);
  BOOST_TEST((*both)[0].source_path == "a");
  BOOST_TEST((*both)[0].package_root == root + "/bundle-a-upload");
  BOOST_TEST((*both)[1].name == "beta");
  auto sub = store.preview_zip(multi, "bundle.zip", "\\b/");
  BOOST_REQUIRE(sub.ok());
  BOOST_TEST(sub->size() == 1u);
  BOOST_TEST(sub->front().package_root == root + "/bundle-upload");

  BOOST_TEST(store.preview_zip(multi, "bundle.zip", "../x").error().message
             == "source_subdir must stay within the uploaded archive");
  BOOST_TEST(store.preview_zip(multi, "bundle.zip", "nope").error().message
             == "source_subdir does not exist in the uploaded archive: nope");
  auto none = store.preview_zip(zip("none.zip", {{"readme.txt", "hi"}}), "none.zip");
  BOOST_TEST(none.error().message.starts_with("No SKILL.md found in "));
  BOOST_TEST(none.error().message.ends_with(" or its subdirectories (max depth: 2)"));
  BOOST_TEST(entries_below(root) == 0u);
  BOOST_TEST(entries_below(tmp) == 0u);
}

BOOST_FIXTURE_TEST_CASE(zip_install_stores_the_package, fixture) {
  auto single = zip("single.zip", {{"pkg/SKILL.md", skill_md("demo", "Use me")},
                                   {"pkg/run.sh", "echo", false, S_IFREG | 0755},
                                   {"pkg/data/notes.txt", "n"}});
  auto installed = store.install_zip(single, "demo.zip");
  BOOST_REQUIRE_MESSAGE(installed.ok(), (installed.ok() ? "" : installed.error().message));
  BOOST_REQUIRE(installed->size() == 1u);
  const auto target = root + "/demo-upload";
  BOOST_TEST(installed->front().package_root == target);
  BOOST_TEST(installed->front().instructions == "Use me");
  BOOST_TEST(!installed->front().has_source_path);
  BOOST_TEST(slurp(target + "/data/notes.txt") == "n");
  struct stat st{};
  BOOST_REQUIRE(::stat((target + "/run.sh").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0755u);
  BOOST_REQUIRE(::stat((target + "/data/notes.txt").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0644u);
  BOOST_TEST((**store.get("demo")).package_root == target);
  BOOST_TEST(entries_below(tmp) == 0u);

  auto again = store.install_zip(single, "demo.zip");
  BOOST_TEST(again.error().message == "Skill directory already exists: " + target);
  BOOST_TEST(entries_below(tmp) == 0u);
}

BOOST_FIXTURE_TEST_CASE(zip_install_selects_among_several_skills, fixture) {
  auto multi = zip("multi.zip", {{"a/SKILL.md", skill_md("alpha")}, {"b/SKILL.md", skill_md("beta")},
                                 {"x/a/SKILL.md", skill_md("other-a")}});
  BOOST_TEST(store.install_zip(multi, "bundle.zip").error().message
             == "Multiple skills found. Please choose one or more source_paths: a, b, x/a");
  BOOST_TEST(store.install_zip(multi, "bundle.zip", "", "upload", {"c"}).error().message
             == "Invalid source_path \"c\". Available: a, b, x/a");
  BOOST_TEST(store.install_zip(multi, "bundle.zip", "", "upload", {"a", "x/a"}).error().message
             == "Duplicate target directory selected: " + root + "/bundle-a-upload");
  BOOST_TEST(entries_below(root) == 0u);

  auto two = store.install_zip(multi, "bundle.zip", "", "upload", {"/a/", "\\a"}, "b");
  BOOST_REQUIRE_MESSAGE(two.ok(), (two.ok() ? "" : two.error().message));
  BOOST_REQUIRE(two->size() == 2u);
  BOOST_TEST((*two)[0].name == "alpha");
  BOOST_TEST((*two)[1].name == "beta");
  BOOST_TEST(fs::exists(root + "/bundle-a-upload/SKILL.md"));
  BOOST_TEST(fs::exists(root + "/bundle-b-upload/SKILL.md"));
  BOOST_TEST(store.list()->size() == 2u);

  // One selected target exists already: nothing of this call is installed.
  auto partial = store.install_zip(multi, "bundle.zip", "", "upload", {"x/a", "a"});
  BOOST_TEST(partial.error().message
             == "Skill directory already exists: " + root + "/bundle-a-upload");
  BOOST_TEST(std::distance(fs::directory_iterator{root}, fs::directory_iterator{}) == 2);
  BOOST_TEST(entries_below(tmp) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
