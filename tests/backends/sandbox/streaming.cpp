// A streamed exec (box_exec_stream, docs/streaming.md) on real sandboxes, on the suite's
// driver: output goes out while the command runs; a consumer without room holds the
// command on its pipe write (not killed, nothing buffered); a stop, the output limit and
// the timeout end it with TERM then KILL; a sandbox that dies ends the stream with an
// error at once.
#include "backends/sandbox/sandbox.hpp"

#include <signal.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <climits>
#include <cstdint>
#include <vector>

#include "sandbox_fixture.hpp"

using namespace boxrt;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using testing::sandbox_precondition;

/// Records frames; gives room while it has credit; says stop when told.
class recording_sink final : public exec_sink {
 public:
  explicit recording_sink(int64_t credit) : credit_(credit) {}

  wait_result wait_room(clock_type::time_point until) override {
    std::unique_lock lock{mtx_};
    cv_.wait_until(lock, until, [&] { return credit_ > 0 || !stop_.empty(); });
    if (!stop_.empty())
      return wait_result::stop;
    return credit_ > 0 ? wait_result::room : wait_result::expired;
  }
  void emit(stream_chunk c) override {
    std::lock_guard lock{mtx_};
    --credit_;
    ++emitted_;
    if (frames_.size() < keep_)
      frames_.push_back(std::move(c));
    cv_.notify_all();
  }
  /// Keeps only the first `n` frames (a flood is counted, not stored).
  void keep(size_t n) { keep_ = n; }
  int64_t emitted() const {
    std::lock_guard lock{mtx_};
    return emitted_;
  }
  std::string stop_reason() const override {
    std::lock_guard lock{mtx_};
    return stop_;
  }

  void stop(std::string why) {
    std::lock_guard lock{mtx_};
    stop_ = std::move(why);
    cv_.notify_all();
  }
  /// Waits (at most 20 s) until `n` frames came; returns them.
  std::vector<stream_chunk> frames(size_t n) {
    std::unique_lock lock{mtx_};
    BOOST_REQUIRE(cv_.wait_for(lock, 20s, [&] { return frames_.size() >= n; }));
    return frames_;
  }

 private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  int64_t credit_;
  std::string stop_;
  std::vector<stream_chunk> frames_;
  size_t keep_ = SIZE_MAX;
  int64_t emitted_ = 0;
};

/// Host pids of processes whose command line holds `marker`.
std::vector<pid_t> pids_with(const std::string& marker) {
  std::vector<pid_t> out;
  for (auto& e : fs::directory_iterator{"/proc"}) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream in{e.path() / "cmdline", std::ios::binary};
    std::string cmd{std::istreambuf_iterator<char>{in}, {}};
    if (cmd.find(marker) != std::string::npos)
      out.push_back(std::stoi(name));
  }
  return out;
}

/// True when `pid` sleeps in a pipe write (its reader stopped reading).
bool blocked_writing(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/wchan"};
  std::string w;
  in >> w;
  return w == "pipe_write" || w == "anon_pipe_write";
}

/// Polls `pred` for at most 20 s.
template <class Pred>
bool eventually(Pred pred) {
  auto until = std::chrono::steady_clock::now() + 20s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

struct stream_fixture : testing::sandbox_fixture {
  std::future<result<stream_end>> stream(backend_session& session, box_spec s, std::string cmd,
                                         stream_params params, recording_sink& sink) {
    s.cmd = std::move(cmd);
    return std::async(std::launch::async, [this, &session, s, params, &sink] {
      return backend->exec_stream(session, s, exec_limits{}, params, sink);
    });
  }
};

std::string joined(const std::vector<stream_chunk>& frames, const std::string& which) {
  std::string out;
  for (auto& f : frames)
    if (f.stream == which)
      out += f.data;
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_suite, *boost::unit_test::precondition(sandbox_precondition))

BOOST_FIXTURE_TEST_CASE(a_consumer_without_room_holds_the_command_on_its_write_until_it_cancels, stream_fixture) {
  auto s = spec("streamed");
  auto session = start(s);
  recording_sink sink{2};
  const std::string marker = "stall-" + std::to_string(::getpid());
  auto done = stream(*session, s, "echo one; cat /dev/zero /nonexistent/" + marker, {}, sink);
  // Output arrives while the command runs (it never ends by itself).
  auto frames = sink.frames(2);
  // (A busy machine may read "one\n" and the first zeros in one read: one frame then.)
  BOOST_CHECK_EQUAL(frames[0].stream, "stdout");
  BOOST_CHECK(frames[0].data.starts_with("one\n"));
  BOOST_CHECK_EQUAL(frames[0].offset, 0);
  BOOST_CHECK_EQUAL(frames[1].offset, static_cast<int64_t>(frames[0].data.size()));
  // No more room: the command blocks on its pipe, alive.
  BOOST_REQUIRE(eventually([&] {
    for (auto p : pids_with(marker))
      if (blocked_writing(p))
        return true;
    return false;
  }));
  BOOST_CHECK_EQUAL(sink.frames(0).size(), 2u);
  sink.stop("cancel");
  auto end = done.get();
  BOOST_REQUIRE_MESSAGE(end.ok(), (end.ok() ? std::string{} : end.error().message));
  BOOST_CHECK_EQUAL(end.value().ended, "cancel");
  BOOST_CHECK_EQUAL(end.value().frames, 2);
  BOOST_CHECK(pids_with(marker).empty());
  // The session goes on.
  BOOST_CHECK_EQUAL(run(*session, s, "echo next").stdout_text, "next");
}

BOOST_FIXTURE_TEST_CASE(a_streamed_command_past_its_output_limit_is_ended, stream_fixture) {
  auto s = spec("limited");
  auto session = start(s);
  recording_sink sink{1 << 30};
  stream_params p;
  p.max_output_bytes = 100000;
  p.max_chunk_bytes = 4096;
  auto end = stream(*session, s, "head -c 10000000 /dev/zero | tr '\\0' a; echo never", p, sink).get();
  BOOST_REQUIRE(end.ok());
  BOOST_CHECK_EQUAL(end.value().ended, "output_limit");
  BOOST_CHECK_EQUAL(end.value().stdout_bytes, 100000);
  auto frames = sink.frames(0);
  BOOST_CHECK_EQUAL(joined(frames, "stdout"), std::string(100000, 'a'));
  for (auto& f : frames)
    BOOST_CHECK_LE(f.data.size(), 4096u);
}

BOOST_FIXTURE_TEST_CASE(a_streamed_command_that_ignores_term_is_killed_at_its_timeout, stream_fixture) {
  auto s = spec("quiet");
  s.timeout_sec = 1;
  auto session = start(s);
  recording_sink sink{1 << 30};
  stream_params p;
  p.stop_grace_ms = 200;
  // The command ignores TERM: the KILL after the grace ends it.
  auto end = stream(*session, s, "trap '' TERM; echo start; sleep 30", p, sink).get();
  BOOST_REQUIRE(end.ok());
  BOOST_CHECK_EQUAL(end.value().ended, "timeout");
  BOOST_CHECK(end.value().result.status == exec_status::timed_out);
  BOOST_CHECK_EQUAL(end.value().result.exit_code, -1);
  auto frames = sink.frames(0);
  BOOST_CHECK_EQUAL(joined(frames, "stdout"), "start\n");
  BOOST_CHECK_EQUAL(run(*session, s, "echo next").stdout_text, "next");
}

BOOST_FIXTURE_TEST_CASE(a_command_that_never_stops_writing_meets_its_timeout, stream_fixture) {
  // A consumer that always has room: output never pauses, and the timeout still comes.
  auto s = spec("endless");
  s.timeout_sec = 1;
  auto session = start(s);
  recording_sink sink{int64_t{1} << 40};
  sink.keep(4);
  stream_params p;
  p.stop_grace_ms = 200;
  p.max_output_bytes = int64_t{1} << 50;  // yes writes more than 1 GiB a second here
  auto end = stream(*session, s, "yes", p, sink).get();
  BOOST_REQUIRE(end.ok());
  BOOST_CHECK_EQUAL(end.value().ended, "timeout");
  BOOST_CHECK(end.value().result.status == exec_status::timed_out);
  BOOST_CHECK_GT(sink.emitted(), 4);
  BOOST_CHECK_EQUAL(end.value().frames, sink.emitted());
  BOOST_TEST_MESSAGE("yes streamed " << end.value().stdout_bytes << " bytes in " << end.value().result.duration_ms << " ms");
  BOOST_CHECK_EQUAL(run(*session, s, "echo next").stdout_text, "next");
}

BOOST_FIXTURE_TEST_CASE(utf8_cut_between_reads_and_invalid_bytes_are_framed_as_box_exec_does, stream_fixture) {
  auto s = spec("utf8");
  auto session = start(s);
  recording_sink sink{1 << 30};
  // é split over two writes with a pause between; then a lone invalid byte on stderr.
  auto end = stream(*session, s, "printf 'caf\\303'; sleep 0.3; printf '\\251!'; printf 'x\\377y' >&2", {}, sink).get();
  BOOST_REQUIRE(end.ok());
  auto frames = sink.frames(0);
  BOOST_CHECK_EQUAL(joined(frames, "stdout"), "caf\xc3\xa9!");
  for (auto& f : frames)
    if (f.stream == "stdout")
      BOOST_CHECK_MESSAGE(f.data.back() != '\xc3', "a frame ends inside a sequence");
  // Raw bytes pass through; the wire encodes the invalid one as U+FFFD.
  BOOST_CHECK_EQUAL(joined(frames, "stderr"), "x\xffy");
  BOOST_CHECK_EQUAL(end.value().stdout_bytes, 6);
  BOOST_CHECK_EQUAL(end.value().stderr_bytes, 3);
}

BOOST_FIXTURE_TEST_CASE(a_stream_cancelled_before_it_starts_never_runs, stream_fixture) {
  auto s = spec("early");
  auto session = start(s);
  recording_sink sink{8};
  sink.stop("cancel");
  auto end = stream(*session, s, "touch /workspace/ran", {}, sink).get();
  BOOST_REQUIRE(end.ok());
  BOOST_CHECK_EQUAL(end.value().ended, "cancel");
  BOOST_CHECK_EQUAL(end.value().result.exit_code, -1);
  BOOST_CHECK_EQUAL(run(*session, s, "test -e /workspace/ran && echo ran || echo never").stdout_text, "never");
}

BOOST_FIXTURE_TEST_CASE(a_sandbox_that_dies_while_its_consumer_has_no_room_ends_the_stream_at_once, stream_fixture) {
  // No credit left: nothing is read from init, and its death is still seen at once.
  auto s = spec("doomed-stalled");
  auto session = start(s);
  recording_sink sink{1};
  const std::string marker = "stalled-" + std::to_string(::getpid());
  auto done = stream(*session, s, "echo alive; cat /dev/zero /nonexistent/" + marker, {}, sink);
  sink.frames(1);
  std::vector<pid_t> procs;
  BOOST_REQUIRE(eventually([&] {
    procs = pids_with(marker);
    for (auto p : procs)
      if (blocked_writing(p))
        return true;
    return false;
  }));
  std::ifstream stat{"/proc/" + std::to_string(procs[0]) + "/stat"};
  std::string line{std::istreambuf_iterator<char>{stat}, {}};
  pid_t parent = std::stoi(line.substr(line.rfind(')') + 4));
  // The command's parent is init (sh execs cat) or sh, whose parent is init.
  std::ifstream pstat{"/proc/" + std::to_string(parent) + "/stat"};
  std::string pline{std::istreambuf_iterator<char>{pstat}, {}};
  pid_t init = pline.find("(sh)") != std::string::npos ? std::stoi(pline.substr(pline.rfind(')') + 4)) : parent;
  BOOST_REQUIRE_EQUAL(::kill(init, SIGKILL), 0);
  BOOST_REQUIRE(done.wait_for(20s) == std::future_status::ready);
  auto end = done.get();
  BOOST_REQUIRE(!end.ok());
  BOOST_CHECK_MESSAGE(end.error().message.find("exited during the command") != std::string::npos,
                      end.error().message);
}

BOOST_FIXTURE_TEST_CASE(a_sandbox_that_dies_mid_stream_ends_it_with_an_error_at_once, stream_fixture) {
  auto s = spec("doomed");
  auto session = start(s);
  recording_sink sink{1 << 30};
  const std::string marker = "doomed-" + std::to_string(::getpid());
  auto done = stream(*session, s, "echo alive; sleep 1000; : " + marker, {}, sink);
  sink.frames(1);
  std::vector<pid_t> shells;
  BOOST_REQUIRE(eventually([&] { return !(shells = pids_with(marker)).empty(); }));
  // Its init, killed from the host (the command itself may not signal it).
  std::ifstream stat{"/proc/" + std::to_string(shells[0]) + "/stat"};
  std::string line{std::istreambuf_iterator<char>{stat}, {}};
  pid_t init = std::stoi(line.substr(line.rfind(')') + 4));
  BOOST_REQUIRE_EQUAL(::kill(init, SIGKILL), 0);
  BOOST_REQUIRE(done.wait_for(20s) == std::future_status::ready);
  auto end = done.get();
  BOOST_REQUIRE(!end.ok());
  BOOST_CHECK_MESSAGE(end.error().message.find("exited during the command") != std::string::npos,
                      end.error().message);
  BOOST_CHECK_EQUAL(run(*session, s, "echo again").stdout_text, "again");
}

BOOST_AUTO_TEST_SUITE_END()
