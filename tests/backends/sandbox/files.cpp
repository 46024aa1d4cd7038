// The file actions of a session's workspace (docs/files.md) on real sandboxes, on the
// suite's driver: round trips with odd names, empty and sparse files; paths and links
// that lead out; permissions as the workspace's uid; a quota image filled up; a
// read-only workspace; two tenants at once; actions beside a running command. The
// racer (races.cpp) tries each action against a swapping tenant.
#include "backends/sandbox/sandbox.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "managed_helpers.hpp"
#include "sandbox_fixture.hpp"

using namespace boxrt;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using testing::sandbox_precondition;

struct files_fixture : testing::sandbox_fixture {
  result<file_result> act(backend_session& s, file_op op) { return backend->file_action(s, op, lim); }

  file_result ok(backend_session& s, file_op op) {
    auto r = act(s, std::move(op));
    BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
    return r.value();
  }

  static file_op write(std::string path, std::string content) {
    file_op op;
    op.verb = file_verb::write;
    op.path = std::move(path);
    op.content = std::move(content);
    op.truncate = true;
    return op;
  }
  static file_op on(file_verb verb, std::string path) {
    file_op op;
    op.encoding = "raw";
    op.verb = verb;
    op.path = std::move(path);
    return op;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream in{path, std::ios::binary};
    return {std::istreambuf_iterator<char>{in}, {}};
  }

  files::limits lim;
};

} // namespace

BOOST_AUTO_TEST_SUITE(files_suite, *boost::unit_test::precondition(sandbox_precondition))

BOOST_FIXTURE_TEST_CASE(round_trips_with_odd_names_empty_and_sparse_files, files_fixture) {
  auto area = tenant("f11f11f11f11f11f11f11f11");
  auto s = start(spec("files", area));
  const auto uid = backend->sandbox_uid(*s);
  // A name with a space and a newline, in folders made on the way; a name that is not
  // UTF-8; an empty file.
  const std::string odd = "with space/new\nline.txt";
  const std::string latin = std::string{"caf\xe9"} + ".bin";
  auto w = write("/workspace/" + odd, "hello\n");
  w.make_parents = true;
  BOOST_TEST(ok(*s, w).written == 6);
  BOOST_TEST(ok(*s, write(latin, std::string{"\0\x01\xff", 3})).size == 3);
  BOOST_TEST(ok(*s, write("empty", "")).size == 0);
  auto r = ok(*s, on(file_verb::read, odd));
  BOOST_TEST(r.data == "hello\n");
  BOOST_TEST(r.eof);
  BOOST_TEST(r.path == "/workspace/" + odd);
  BOOST_TEST(ok(*s, on(file_verb::read, latin)).data == std::string("\0\x01\xff", 3));
  auto e = ok(*s, on(file_verb::read, "empty"));
  BOOST_TEST(e.data.empty());
  BOOST_TEST(e.eof);
  // Owned by the workspace's uid, as a command's files are; the command sees them.
  struct stat st{};
  BOOST_REQUIRE(::lstat((area + "/" + odd).c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == uid);
  BOOST_TEST(::lstat((area + "/with space").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == uid);
  BOOST_TEST(run(*s, spec("files", area), "cat '/workspace/with space/new\nline.txt'").stdout_text == "hello");
  // Sparse: one byte 64 MiB in, written in place; the hole reads as zeros.
  auto sparse = write("sparse.bin", "x");
  sparse.offset = 64 << 20;
  sparse.truncate = false;
  BOOST_TEST(ok(*s, sparse).size == (64 << 20) + 1);
  BOOST_REQUIRE(::stat((area + "/sparse.bin").c_str(), &st) == 0);
  BOOST_TEST(st.st_blocks * 512 < 1 << 20); // still sparse
  auto mid = on(file_verb::read, "sparse.bin");
  mid.offset = (64 << 20) - 2;
  mid.length = 10;
  r = ok(*s, mid);
  BOOST_TEST(r.data == std::string("\0\0x", 3));
  BOOST_TEST(r.eof);
  // Ranged writes and an append build a file in pieces.
  BOOST_TEST(ok(*s, write("pieces", "aaaa")).size == 4);
  auto ranged = write("pieces", "BB");
  ranged.offset = 1;
  ranged.truncate = false;
  ok(*s, ranged);
  auto app = write("pieces", "++");
  app.append = true;
  app.truncate = false;
  BOOST_TEST(ok(*s, app).size == 6);
  BOOST_TEST(slurp(area + "/pieces") == "aBBa++");
  // Listing: names, types, sizes; two levels; the non-UTF-8 name as its bytes.
  auto ls = on(file_verb::list, "/workspace");
  ls.depth = 2;
  auto l = ok(*s, ls);
  std::map<std::string, file_entry> by;
  for (auto& x : l.entries)
    by[x.path] = x;
  BOOST_TEST(by.count(latin) == 1);
  BOOST_TEST(by["with space"].type == "dir");
  BOOST_TEST(by[odd].size == 6);
  BOOST_TEST(by["sparse.bin"].size == (64 << 20) + 1);
  BOOST_TEST(!l.truncated);
  // stat, mkdir, move, remove.
  auto stat = ok(*s, on(file_verb::stat, "pieces"));
  BOOST_REQUIRE(stat.entries.size() == 1);
  BOOST_TEST(stat.entries[0].type == "file");
  BOOST_TEST(stat.entries[0].mode == 0644);
  auto mk = on(file_verb::mkdir, "a/b/c");
  BOOST_TEST(!act(*s, mk).ok()); // no parents
  mk.make_parents = true;
  ok(*s, mk);
  auto mv = on(file_verb::move, "pieces");
  mv.to = "a/b/c/moved";
  ok(*s, mv);
  BOOST_TEST(slurp(area + "/a/b/c/moved") == "aBBa++");
  auto again = on(file_verb::move, "empty");
  again.to = "a/b/c/moved";
  auto refused = act(*s, again);
  BOOST_REQUIRE(!refused.ok());
  BOOST_TEST(refused.error().message == "[Errno 17] File exists: '/workspace/a/b/c/moved'");
  again.overwrite = true;
  ok(*s, again);
  BOOST_TEST(slurp(area + "/a/b/c/moved").empty());
  auto rm = on(file_verb::remove, "a");
  auto busy = act(*s, rm);
  BOOST_REQUIRE(!busy.ok());
  BOOST_TEST(busy.error().message == "[Errno 39] Directory not empty: '/workspace/a'");
  rm.recursive = true;
  ok(*s, rm);
  BOOST_TEST(!fs::exists(area + "/a"));
  // Errors: not found, is a directory, too large; the root cannot go.
  auto missing = act(*s, on(file_verb::read, "nope"));
  BOOST_REQUIRE(!missing.ok());
  BOOST_TEST(missing.error().message == "[Errno 2] No such file or directory: '/workspace/nope'");
  BOOST_TEST((missing.error().code == ec::box_error));
  auto dir = act(*s, on(file_verb::read, "with space"));
  BOOST_REQUIRE(!dir.ok());
  BOOST_TEST(dir.error().message == "[Errno 21] Is a directory: '/workspace/with space'");
  auto big = on(file_verb::read, "sparse.bin");
  big.length = lim.max_call_bytes + 1;
  auto too = act(*s, big);
  BOOST_REQUIRE(!too.ok());
  BOOST_TEST((too.error().code == ec::validation));
  auto root = act(*s, on(file_verb::remove, "/workspace"));
  BOOST_REQUIRE(!root.ok());
  BOOST_TEST((root.error().code == ec::validation));
  backend->stop_session(*s);
}

BOOST_FIXTURE_TEST_CASE(paths_and_links_that_lead_out_are_refused, files_fixture) {
  auto area = tenant("f22f22f22f22f22f22f22f22");
  auto outside = root + "/outside.txt";
  {
    std::ofstream{outside} << "HOST";
  }
  auto s = start(spec("links", area));
  // Links the tenant makes: out by absolute path, out by .., and one inside.
  run(*s, spec("links", area),
      "echo inner > /workspace/real.txt && ln -s " + outside + " /workspace/abs && ln -s ../../.. /workspace/up"
        + " && ln -s real.txt /workspace/inside && mkdir /workspace/d");
  for (const std::string& p : std::vector<std::string>{"/etc/passwd", "../x", "/workspace/../x", "/workspacex/y", std::string{"a\0b", 3}}) {
    auto r = act(*s, on(file_verb::read, p));
    BOOST_REQUIRE_MESSAGE(!r.ok(), p);
    BOOST_TEST((r.error().code == ec::validation), p);
  }
  for (std::string p : {"abs", "up/outside.txt", "up"}) {
    auto r = act(*s, on(file_verb::read, p));
    BOOST_REQUIRE_MESSAGE(!r.ok(), p);
    auto ls = act(*s, on(file_verb::list, p));
    BOOST_REQUIRE_MESSAGE(!ls.ok(), p);
    auto ranged = write(p + "/x", "w");
    ranged.truncate = false;
    ranged.offset = 1;
    BOOST_TEST(!act(*s, ranged).ok(), p);
  }
  auto follows = ok(*s, on(file_verb::read, "inside"));
  BOOST_TEST(follows.data == "inner\n");
  auto st = ok(*s, on(file_verb::stat, "abs"));
  BOOST_TEST(st.entries[0].type == "symlink");
  BOOST_TEST(st.entries[0].target == outside);
  // A whole-file write to a link replaces the link, never the file it names; a removal
  // removes the link.
  ok(*s, write("abs", "replaced"));
  auto ranged = write("up", "x");
  ranged.truncate = false;
  ranged.offset = 0;
  ranged.append = true;
  BOOST_TEST(!act(*s, ranged).ok());
  ok(*s, on(file_verb::remove, "up"));
  auto mv = on(file_verb::move, "real.txt");
  mv.to = "../escaped.txt";
  BOOST_TEST((act(*s, mv).error().code == ec::validation));
  BOOST_TEST(slurp(outside) == "HOST");
  BOOST_TEST(fs::exists(area + "/real.txt"));
  backend->stop_session(*s);
}

BOOST_FIXTURE_TEST_CASE(permissions_hold_as_for_the_workspace_user, files_fixture) {
  auto area = tenant("f33f33f33f33f33f33f33f33");
  auto s = start(spec("perms", area));
  run(*s, spec("perms", area), "echo locked > /workspace/locked && chmod 000 /workspace/locked");
  // boxd's own file in the workspace, closed to others.
  {
    std::ofstream{area + "/host-only"} << "HOST";
  }
  ::chmod((area + "/host-only").c_str(), 0600);
  ::chown((area + "/host-only").c_str(), 0, 0);
  for (std::string p : {"locked", "host-only"}) {
    auto r = act(*s, on(file_verb::read, p));
    BOOST_REQUIRE_MESSAGE(!r.ok(), p);
    BOOST_TEST(r.error().message == "[Errno 13] Permission denied: '/workspace/" + p + "'");
    auto ranged = write(p, "x");
    ranged.truncate = false;
    ranged.offset = 0;
    BOOST_TEST(!act(*s, ranged).ok(), p);
  }
  BOOST_TEST(slurp(area + "/host-only") == "HOST");
  // A new file's mode as asked, its owner the workspace's.
  auto w = write("mine", "x");
  w.mode = 0600;
  ok(*s, w);
  struct stat st{};
  BOOST_REQUIRE(::stat((area + "/mine").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0600u);
  BOOST_TEST(st.st_uid == backend->sandbox_uid(*s));
  backend->stop_session(*s);
}

BOOST_FIXTURE_TEST_CASE(a_full_quota_image_leaves_no_partial_file, files_fixture) {
  auto area = tenant("f44f44f44f44f44f44f44f44");
  auto sp = spec("quota", area);
  sp.workspace_quota_mb = 16;
  auto s = start(sp);
  lim.max_call_bytes = 32 << 20;
  std::string big(24 << 20, 'q');
  auto r = act(*s, write("full.bin", big));
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.error().message == "[Errno 28] No space left on device: '/workspace/full.bin'");
  auto l = ok(*s, on(file_verb::list, ""));
  for (auto& e : l.entries)
    BOOST_TEST(e.path.find("full.bin") == std::string::npos, e.path);
  for (auto& e : l.entries)
    BOOST_TEST(e.path.find(".boxrt-write") == std::string::npos, e.path);
  // An existing file keeps its content when its replacement does not fit.
  ok(*s, write("kept", "old"));
  BOOST_TEST(!act(*s, write("kept", big)).ok());
  BOOST_TEST(ok(*s, on(file_verb::read, "kept")).data == "old");
  backend->stop_session(*s);
}

BOOST_FIXTURE_TEST_CASE(a_read_only_workspace_takes_no_change, files_fixture) {
  auto area = tenant("f55f55f55f55f55f55f55f55");
  fs::create_directories(area);
  {
    std::ofstream{area + "/given"} << "given";
  }
  auto sp = spec("ro", area);
  sp.host_path_mode = mount_mode::ro;
  auto s = start(sp);
  BOOST_TEST(ok(*s, on(file_verb::read, "given")).data == "given");
  auto w = act(*s, write("new", "x"));
  BOOST_REQUIRE(!w.ok());
  BOOST_TEST(w.error().message == "[Errno 30] Read-only file system: '/workspace/new'");
  BOOST_TEST(!act(*s, on(file_verb::remove, "given")).ok());
  BOOST_TEST(!act(*s, on(file_verb::mkdir, "d")).ok());
  BOOST_TEST(fs::exists(area + "/given"));
  BOOST_TEST(!fs::exists(area + "/new"));
  backend->stop_session(*s);
}

BOOST_FIXTURE_TEST_CASE(two_tenants_live_cannot_reach_each_others_files, files_fixture) {
  auto a_path = tenant("f66f66f66f66f66f66f66f66");
  auto b_path = tenant("f77f77f77f77f77f77f77f77");
  auto a = start(spec("a", a_path));
  auto b = start(spec("b", b_path));
  ok(*b, write("secret", "B-SECRET"));
  // A names B's file by every road: a host path, a .. path, a link it plants.
  run(*a, spec("a", a_path), "ln -s " + b_path + " /workspace/to-b && ln -s " + b_path + "/secret /workspace/b-secret");
  for (const std::string& p : std::vector<std::string>{b_path + "/secret", "../ws-f77f77f77f77f77f77f77f77/secret", "to-b/secret", "b-secret"}) {
    auto r = act(*a, on(file_verb::read, p));
    BOOST_TEST_CONTEXT(p) {
      BOOST_REQUIRE(!r.ok());
      auto ranged = write(p, "A");
      ranged.truncate = false;
      BOOST_TEST(!act(*a, ranged).ok());
      BOOST_TEST(!act(*a, on(file_verb::list, p.substr(0, p.rfind('/') == std::string::npos ? p.size() : p.rfind('/')))).ok());
    }
  }
  auto mv = on(file_verb::move, "to-b/secret");
  mv.to = "stolen";
  BOOST_TEST(!act(*a, mv).ok());
  BOOST_TEST(ok(*b, on(file_verb::read, "secret")).data == "B-SECRET");
  BOOST_TEST(slurp(b_path + "/secret") == "B-SECRET");
  backend->stop_session(*a);
  backend->stop_session(*b);
}

BOOST_FIXTURE_TEST_CASE(file_actions_run_beside_a_running_command, files_fixture) {
  auto area = tenant("f88f88f88f88f88f88f88f88");
  auto s = start(spec("beside", area));
  auto sp = spec("beside", area);
  sp.cmd = "touch /workspace/started; while [ ! -e /workspace/go ]; do sleep 0.05; done; cat /workspace/go";
  auto running = std::async(std::launch::async, [&] { return backend->exec(*s, sp, exec_limits{}); });
  BOOST_REQUIRE(testing::eventually([&] { return fs::exists(area + "/started"); }));
  // The command waits for a file only a file action gives it.
  ok(*s, write("go", "released"));
  BOOST_REQUIRE(running.wait_for(20s) == std::future_status::ready);
  auto r = running.get();
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->stdout_text == "released");
  backend->stop_session(*s);
}

BOOST_AUTO_TEST_SUITE_END()
