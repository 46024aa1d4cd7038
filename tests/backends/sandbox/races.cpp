// Host-side file work on trees a tenant can write, raced by the tenant: a real program in
// a real sandbox keeps swapping a folder of the tree with a symlink to a host decoy
// (renameat2 RENAME_EXCHANGE in a loop) while boxd works on the tree, round after round.
// No round may read a decoy byte, create, change or remove a decoy file, list a decoy
// name or hand a decoy file to the sandbox uid. Root and bubblewrap, as CI has.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "backends/linux/beneath.hpp"
#include "backends/linux/session_dir.hpp"
#include "backends/skills/skill_store.hpp"
#include "backends/state/transfer_store.hpp"
#include "managed_helpers.hpp"
#include "sandbox_fixture.hpp"

using namespace boxrt;
using namespace boxrt::testing;
namespace fs = std::filesystem;

namespace {

/// Rounds per operation: today's fixed bugs broke within 25 to 776.
constexpr int race_rounds = 2000;
/// Rounds of the operations that cost a millisecond or more each (a tree built and
/// removed), and of an archive upload (several milliseconds).
constexpr int slow_rounds = 300;
constexpr int zip_rounds = 150;

/// The racer. argv[1] is where its links lead (a host path: the host resolves it). Each
/// further argument names what to swap: a path that exists from the start; or
/// "DIR|NAME|SUFFIX", an entry DIR/<name>/SUFFIX that appears later, NAME either a
/// prefix (inotify tells when one appears) or a pattern with "{n}" for names the
/// host makes in sequence (n = 0, 1, ...: the racer tries the current and the next name
/// in a loop, so it swaps the moment one exists). A path is swapped with its partner
/// ".swap-<name>" beside it, a symlink to the decoy made on first sight, by
/// renameat2(RENAME_EXCHANGE) in a loop. "write:PATH" (with "{n}") keeps rewriting a
/// SKILL.md at PATH, the tenant that keeps a package alive while it is deleted.
const std::string racer_code = R"(
import ctypes, errno, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
decoy = sys.argv[1]
def pair(real):
    d, b = os.path.split(real)
    partner = os.path.join(d, '.swap-' + b)
    if not os.path.lexists(partner):
        try:
            os.symlink(decoy, partner)
        except OSError:
            pass
    return real.encode(), partner.encode()
fixed, watches, sequences = [], {}, []
ino = libc.inotify_init1(os.O_NONBLOCK)
writers = []
for spec in sys.argv[2:]:
    if spec.startswith('write:'):
        writers.append([spec[6:], 0])
        continue
    if '|' not in spec:
        fixed.append(pair(spec))
        continue
    d, name, suffix = spec.split('|')
    if '{n}' in name:
        sequences.append([d, name, suffix, 0, 0])
    else:
        # IN_CREATE | IN_MOVED_TO, read without blocking in the loop: the swap follows
        # the creation within microseconds.
        watches[libc.inotify_add_watch(ino, d.encode(), 0x100 | 0x80)] = (d, name, suffix)
def target(d, name, suffix):
    return os.path.join(d, name, suffix) if suffix else os.path.join(d, name)
# Something that appears is swapped for a burst (its first milliseconds, where every
# bug here lived), not forever: a rename in a loop slows every path lookup of the host.
burst = 20000
active, active_swaps, n, seen = None, 0, 0, set()
open('/workspace/.racer-ready', 'w').close()
while True:
    for a, b in fixed:
        libc.renameat2(-100, a, -100, b, 2)
    for seq in sequences:
        d, name, suffix, i, swaps = seq
        for k in (i, i + 1):
            if k == i and swaps >= burst:
                continue
            real = target(d, name.replace('{n}', str(k)), suffix)
            if libc.renameat2(-100, real.encode(), -100, pair(real)[1], 2) == 0:
                seq[3], seq[4] = k, (swaps + 1 if k == i else 1)
                break
    for w in writers:
        for k in (w[1], w[1] + 1):
            path = w[0].replace('{n}', str(k))
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except OSError:
                continue
            os.write(fd, ('---\nname: d%d\n---\nkept alive\n' % k).encode())
            os.close(fd)
            w[1] = k
    if watches:
        try:
            data = os.read(ino, 65536)
        except BlockingIOError:
            data = b''
        i = 0
        while i < len(data):
            wd, mask, cookie, length = struct.unpack_from('iIII', data, i)
            name = data[i + 16:i + 16 + length].rstrip(b'\0').decode()
            i += 16 + length
            if wd in watches and name.startswith(watches[wd][1]) and name not in seen:
                seen.add(name)
                d, prefix, suffix = watches[wd]
                active, active_swaps = pair(target(d, name, suffix)), 0
    if active is not None:
        failed = libc.renameat2(-100, active[0], -100, active[1], 2) != 0
        active_swaps += 1
        if (failed and ctypes.get_errno() == errno.ENOENT) or active_swaps >= burst:
            active = None
    n += 1
)";

/// What a decoy tree holds: per relative path, type, size, owner and content.
using tree_state = std::map<std::string, std::string>;

tree_state snapshot(const std::string& dir) {
  tree_state out;
  for (auto it = fs::recursive_directory_iterator{dir}; it != fs::recursive_directory_iterator{}; ++it) {
    struct stat st{};
    ::lstat(it->path().c_str(), &st);
    std::ostringstream line;
    line << (st.st_mode & S_IFMT) << " " << st.st_size << " " << st.st_uid << ":" << st.st_gid << " "
         << (st.st_mode & 07777);
    if (S_ISREG(st.st_mode)) {
      std::ifstream in{it->path()};
      line << " " << std::string{std::istreambuf_iterator<char>{in}, {}};
    }
    out[fs::relative(it->path(), dir).string()] = line.str();
  }
  return out;
}

void put(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path{path}.parent_path());
  std::ofstream{path, std::ios::binary | std::ios::trunc} << content;
}

struct race_fixture : sandbox_fixture {
  explicit race_fixture(bool on_tmpfs = false) {
    decoy = root + "/decoy";
    put(decoy + "/secret.txt", "DECOY-SECRET");
    put(decoy + "/decoy-only.txt", "decoy");
    put(decoy + "/SKILL.md", "---\nname: decoy-skill\n---\nDecoy");
    put(decoy + "/b/deep.txt", "DECOY-DEEP");
    fs::create_directories(decoy + "/a");
    before = snapshot(decoy);
    // Archive races make and remove thousands of files a second: on ext4 its inode
    // allocator becomes the bottleneck (it skips recently deleted inodes), so those
    // trees live on a tmpfs.
    fast = root + "/workspaces";
    fs::create_directories(fast);
    if (on_tmpfs)
      BOOST_REQUIRE(::mount("boxrt-race", fast.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=256m") == 0);
    area = tenant("ace0ace0ace0ace0ace0ace0");
    fs::create_directories(area);
    auto s = spec("racer", area);
    s.timeout_sec = 120;
    sandbox = start(s);
    uid = backend->sandbox_uid(*sandbox);
  }
  ~race_fixture() {
    if (racer)
      racer->terminate(std::chrono::milliseconds{200});
    racer.reset();
    if (sandbox)
      backend->stop_session(*sandbox);
    ::umount2(fast.c_str(), MNT_DETACH);
  }

  /// A folder the sandbox uid owns below the area (created with its parents). Only for
  /// trees the racer does not watch yet: use place() for those.
  void owned_dir(const std::string& rel) {
    fs::create_directories(area + "/" + rel);
    for (fs::path p = area + "/" + rel; p.string().size() > area.size(); p = p.parent_path())
      ::lchown(p.c_str(), uid, uid);
  }

  /// Builds a tree in a hidden staging folder of the area (`files`: relative path ->
  /// content; folders owned by the sandbox uid) and renames it to `rel` in one step, so
  /// the racer never sees it half made and the test never writes through a swapped
  /// link itself.
  void place(const std::string& rel, const std::map<std::string, std::string>& files) {
    auto stage = area + "/.staging";
    fs::remove_all(stage);
    fs::create_directories(stage);
    for (auto& [path, content] : files)
      put(stage + "/" + path, content);
    for (auto& e : fs::recursive_directory_iterator{stage})
      ::lchown(e.path().c_str(), uid, uid);
    ::lchown(stage.c_str(), uid, uid);
    fs::create_directories(fs::path{area + "/" + rel}.parent_path());
    BOOST_REQUIRE(::rename(stage.c_str(), (area + "/" + rel).c_str()) == 0);
  }

  /// Starts the racer on `patterns` (paths inside the sandbox, below /workspace) and
  /// waits until it has swapped `watch` (a host path) at least once.
  void race(std::vector<std::string> patterns, const std::string& watch = {}, const std::string& target = {}) {
    process_spec p;
    p.process_id = "racer";
    p.command = "python3";
    p.args = {"-c", racer_code, target.empty() ? decoy : target};
    p.args.insert(p.args.end(), patterns.begin(), patterns.end());
    auto r = backend->start_managed_process(*sandbox, p);
    BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
    racer = r.value();
    BOOST_REQUIRE(eventually([&] { return fs::exists(area + "/.racer-ready"); }));
    if (!watch.empty())
      BOOST_REQUIRE(eventually([&] {
        struct stat st{};
        return ::lstat(watch.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
      }));
  }

  /// True while the decoy is exactly as it was made.
  bool decoy_intact() { return snapshot(decoy) == before; }

  /// The racer must still be running when the rounds end, else they proved nothing.
  void require_racer_alive() { BOOST_REQUIRE_MESSAGE(!racer->exit_code(), racer->stderr_preview()); }

  uint32_t uid = 0;
  std::string decoy;
  std::string fast;
  std::string area;
  tree_state before;
  std::shared_ptr<backend_session> sandbox;
  std::shared_ptr<managed_process> racer;
};

struct tmpfs_race_fixture : race_fixture {
  tmpfs_race_fixture() : race_fixture(true) {}
};

/// A store of skills whose root is the raced area.
struct store_race_fixture : race_fixture {
  store_race_fixture() : store{area} {
    put(area + "/pkg/SKILL.md", "---\nname: pkg\n---\nPackage");
    owned_dir("pkg/sub");
    put(area + "/pkg/sub/secret.txt", "INNER");
    ::lchown((area + "/pkg/sub/secret.txt").c_str(), uid, uid);
  }
  skills::store store;
};

std::string zip_of(const std::string& path, int files) {
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  BOOST_REQUIRE(za != nullptr);
  static std::vector<std::string> keep;
  keep.clear();
  keep.reserve(static_cast<size_t>(files) + 1);
  auto add = [&](const std::string& name, std::string content) {
    keep.push_back(std::move(content));
    auto* src = zip_source_buffer(za, keep.back().data(), keep.back().size(), 0);
    BOOST_REQUIRE(zip_file_add(za, name.c_str(), src, ZIP_FL_OVERWRITE) >= 0);
  };
  add("pkg/SKILL.md", "---\nname: uploaded\n---\nUploaded");
  for (int i = 0; i < files; ++i)
    add("pkg/sub/payload" + std::to_string(i) + ".txt", "payload");
  BOOST_REQUIRE(zip_close(za) == 0);
  return path;
}

} // namespace

BOOST_AUTO_TEST_SUITE(race_suite, *boost::unit_test::precondition(sandbox_precondition))

BOOST_FIXTURE_TEST_CASE(a_raced_skill_file_read_never_reads_a_host_file, store_race_fixture) {
  race({"/workspace/pkg/sub"}, area + "/pkg/sub");
  for (int round = 0; round < race_rounds; ++round) {
    auto r = store.read_file("pkg", "sub/secret.txt");
    BOOST_REQUIRE_MESSAGE(!r.ok() || r->find("DECOY") == std::string::npos, "decoy read in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_skill_file_write_never_writes_a_host_file, store_race_fixture) {
  race({"/workspace/pkg/sub"}, area + "/pkg/sub");
  for (int round = 0; round < race_rounds; ++round) {
    (void)store.write_file("pkg", "sub/secret.txt", "OVERWRITTEN");
    (void)store.write_file("pkg", "sub/new" + std::to_string(round % 4) + ".txt", "created");
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_skill_listing_never_lists_a_host_folder, store_race_fixture) {
  race({"/workspace/pkg/sub"}, area + "/pkg/sub");
  for (int round = 0; round < race_rounds; ++round) {
    auto r = store.list_files("pkg", "sub", true);
    BOOST_REQUIRE_MESSAGE(!r.ok() || r->find("decoy-only") == std::string::npos, "decoy listed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_skill_delete_never_removes_a_host_file, store_race_fixture) {
  race({"/workspace|d{n}|sub", "write:/workspace/d{n}/SKILL.md"});
  for (int round = 0; round < slow_rounds; ++round) {
    auto name = "d" + std::to_string(round);
    place(name, {{"SKILL.md", "---\nname: " + name + "\n---\nDoomed"}, {"sub/inner.txt", "inner"}});
    auto r = store.remove(name);
    BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
    // A delete reply is true: the skill is gone.
    auto left = store.get(name);
    BOOST_REQUIRE(left.ok() && !*left);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_directory_scan_never_loads_a_host_package, store_race_fixture) {
  put(area + "/scan/a/SKILL.md", "---\nname: inner-skill\n---\nInner");
  owned_dir("scan/a");
  race({"/workspace/scan/a"}, area + "/scan/a");
  for (int round = 0; round < race_rounds; ++round) {
    auto r = store.scan_directory(area + "/scan");
    BOOST_REQUIRE_MESSAGE(!r.ok() || (r->name != "decoy-skill" && r->package_root.find(decoy) == std::string::npos),
                          "decoy loaded in round " << round);
    auto all = store.list();
    BOOST_REQUIRE_MESSAGE(!all.ok() || std::none_of(all->begin(), all->end(), [](auto& s) { return s.name == "decoy-skill"; }),
                          "decoy listed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_zip_install_never_writes_a_host_folder, tmpfs_race_fixture) {
  fs::create_directories(fast + "/private-tmp");
  skills::store store{area, fast + "/private-tmp"};
  auto archive = zip_of(fast + "/upload.zip", 200);
  // The links lead to an empty decoy folder, so a copy through them has nothing in
  // its way.
  race({"/workspace|r{n}-upload|"}, {}, decoy + "/a");
  auto parked = beneath::open_root(area);
  for (int round = 0; round < zip_rounds; ++round) {
    auto target = "r" + std::to_string(round) + "-upload";
    (void)store.install_zip(archive, "r" + std::to_string(round) + ".zip");
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
    // Keep the store small: every install lists it.
    (void)beneath::remove_tree(parked.get(), target);
    (void)beneath::remove_tree(parked.get(), ".swap-" + target);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_zip_extraction_never_writes_a_host_folder, tmpfs_race_fixture) {
  // The uploads' temp folder is one the tenant can write (the worst an operator can
  // configure): the extraction is raced inside it.
  owned_dir("tmp");
  skills::store store{fast + "/store", area + "/tmp"};
  auto archive = zip_of(fast + "/upload.zip", 200);
  race({"/workspace/tmp|langbot_box_skill_|"}, {}, decoy + "/a");
  for (int round = 0; round < zip_rounds; ++round) {
    (void)store.preview_zip(archive, "p.zip");
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_hand_over_never_gives_away_a_host_file, race_fixture) {
  // A writable extra mount below the workspace: its path leads through folders the
  // sandbox can swap.
  owned_dir("a/b");
  put(area + "/a/b/deep.txt", "inner");
  race({"/workspace/a"}, area + "/a");
  for (int round = 0; round < race_rounds; ++round) {
    auto fd = beneath::open_trusted(area + "/a/b", O_PATH | O_DIRECTORY);
    if (fd)
      BOOST_REQUIRE_EQUAL(beneath::hand_over(fd.get(), uid + 7, uid + 7), 0);
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_file_chunk_never_writes_a_host_folder, race_fixture) {
  owned_dir("transfer");
  race({"/workspace/transfer/conn-0", "/workspace/transfer/conn-1", "/workspace/transfer/conn-2",
        "/workspace/transfer/conn-3"});
  for (int round = 0; round < 4; ++round)
    owned_dir("transfer/conn-" + std::to_string(round));
  for (int round = 0; round < race_rounds; ++round) {
    auto dir = area + "/transfer/conn-" + std::to_string(round % 4);
    (void)write_transfer_chunk(dir, "upload-key", "chunk", round % 2 == 0, 1 << 20);
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_clean_up_never_removes_a_host_file, race_fixture) {
  owned_dir("sessions");
  race({"/workspace/sessions|old_{n}|sub"});
  for (int round = 0; round < slow_rounds; ++round) {
    auto name = "old_" + std::to_string(round);
    place("sessions/" + name, {{"sub/file.txt", "x"}});
    remove_foreign_session_dirs(area + "/sessions", "current");
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  require_racer_alive();
}

// The file actions (docs/files.md) run as the workspace's uid: the decoy is made that
// uid's own and reachable, so only the resolution beneath the workspace stands between
// a swapped folder and the decoy.
struct files_race_fixture : race_fixture {
  files_race_fixture() {
    ::chmod(root.c_str(), 0755);
    for (auto& e : fs::recursive_directory_iterator{decoy})
      ::lchown(e.path().c_str(), uid, uid);
    ::lchown(decoy.c_str(), uid, uid);
    before = snapshot(decoy);
    // Nothing here is named as in the decoy but secret.txt and b/deep.txt, whose sizes
    // differ from the decoy's (5 and 12 bytes against 12 and 10).
    place("d", {{"secret.txt", "INNER"}, {"b/deep.txt", "INNER-DEEPER"}, {"a/x", "ax"}});
  }
  result<file_result> act(file_verb verb, std::string path, std::string to = {}) {
    file_op op;
    op.verb = verb;
    op.path = std::move(path);
    op.to = std::move(to);
    op.depth = 3;
    op.recursive = true;
    op.make_parents = true;
    return backend->file_action(*sandbox, op, lim);
  }
  files::limits lim;
};

BOOST_FIXTURE_TEST_CASE(a_raced_file_read_list_or_stat_never_sees_a_host_file, files_race_fixture) {
  race({"/workspace/d"}, area + "/d");
  for (int round = 0; round < race_rounds; ++round) {
    auto r = act(file_verb::read, "d/secret.txt");
    BOOST_REQUIRE_MESSAGE(!r.ok() || r->data == "INNER", "decoy read in round " << round);
    auto l = act(file_verb::list, "d");
    if (l.ok())
      for (auto& e : l->entries)
        BOOST_REQUIRE_MESSAGE(e.path != "decoy-only.txt" && (e.path != "b/deep.txt" || e.size == 12),
                              "decoy listed in round " << round);
    auto st = act(file_verb::stat, "d/secret.txt");
    BOOST_REQUIRE_MESSAGE(!st.ok() || st->entries.at(0).size == 5, "decoy stat in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_file_write_never_writes_a_host_file, files_race_fixture) {
  race({"/workspace/d"}, area + "/d");
  for (int round = 0; round < race_rounds; ++round) {
    file_op w;
    w.verb = file_verb::write;
    w.path = "d/secret.txt";
    w.content = "OVERWRITTEN";
    w.truncate = round % 2 == 0;
    w.offset = round % 2 == 0 ? 0 : 3;
    w.append = round % 4 == 3;
    (void)backend->file_action(*sandbox, w, lim);
    w.path = "d/new" + std::to_string(round % 4) + ".txt";
    w.make_parents = true;
    (void)backend->file_action(*sandbox, w, lim);
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  require_racer_alive();
}

BOOST_FIXTURE_TEST_CASE(a_raced_file_remove_mkdir_or_move_never_changes_a_host_file, files_race_fixture) {
  race({"/workspace/d"}, area + "/d");
  for (int round = 0; round < race_rounds; ++round) {
    (void)act(file_verb::remove, "d/decoy-only.txt");
    (void)act(file_verb::remove, "d/b");
    (void)act(file_verb::mkdir, "d/sub" + std::to_string(round % 4) + "/deeper");
    (void)act(file_verb::move, "d/secret.txt", "d/a/moved.txt");
    (void)act(file_verb::move, "d/a/moved.txt", "d/secret.txt");
    (void)act(file_verb::move, "d/decoy-only.txt", "stolen.txt");
    BOOST_REQUIRE_MESSAGE(decoy_intact(), "decoy changed in round " << round);
  }
  BOOST_TEST(!fs::exists(area + "/stolen.txt"));
  require_racer_alive();
}

BOOST_AUTO_TEST_SUITE_END()
