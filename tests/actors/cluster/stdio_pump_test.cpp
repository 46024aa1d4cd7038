// The stdio pump (actors/cluster/stdio_pump.hpp) on CAF's deterministic test coordinator:
// the relay is an actor of the test that keeps what it hears and passes on what its
// "socket" (the test) sends, as the real relay does; the process is a pipe. The pump's
// reader and its stdin writes run on the manual pool, in settle().
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <thread>

#include "actors/cluster/stdio_pump.hpp"
#include "coordinator.hpp"

using namespace boxrt;

namespace {

/// A process whose stdout is a pipe the test writes, and whose stdin is a list.
class piped_process final : public managed_process {
 public:
  piped_process() {
    int fds[2];
    BOOST_REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
    out_ = fds[0];
    in_ = fds[1];
  }
  ~piped_process() override {
    ::close(out_);
    close_stdout();
  }
  /// What the process prints, then (optionally) its end.
  void print(std::string_view text) { BOOST_REQUIRE(::write(in_, text.data(), text.size()) == ssize_t(text.size())); }
  void close_stdout() {
    if (in_ >= 0)
      ::close(std::exchange(in_, -1));
  }

  int stdout_fd() const override { return out_; }
  bool write_stdin(std::string_view data) override {
    stdin_lines.emplace_back(data);
    return !stdin_closed;
  }
  std::optional<int64_t> exit_code() override { return std::nullopt; }
  std::string stderr_preview() const override { return {}; }
  void terminate(std::chrono::milliseconds) override {}

  std::vector<std::string> stdin_lines;
  bool stdin_closed = false;

 private:
  int out_ = -1;
  int in_ = -1;
};

/// What the relay heard from the pump, in order.
struct heard {
  bool pump = false;
  std::string stdout_text;
  std::vector<std::pair<uint64_t, bool>> written;
  std::optional<int32_t> end;
  std::vector<std::string> order;
};

constexpr uint64_t relay_key = 42;

stdio_relay_actor fake_relay(caf::actor_system& sys, std::shared_ptr<heard> h) {
  return sys.spawn([h](stdio_relay_actor::pointer self) -> stdio_relay_actor::behavior_type {
    auto pump = std::make_shared<stdio_pump_actor>();
    return {
      [](stop_atom) {},
      [](expire_atom) {},
      [self, h, pump](pump_atom) {
        h->pump = true;
        h->order.push_back("pump");
        *pump = caf::actor_cast<stdio_pump_actor>(self->current_sender());
      },
      [h](stdout_atom, std::string& chunk) {
        h->stdout_text += chunk;
        h->order.push_back("stdout");
      },
      [h](written_atom, uint64_t n, bool ok) {
        h->written.emplace_back(n, ok);
        h->order.push_back("written");
      },
      [h](stdend_atom, int32_t why) {
        h->end = why;
        h->order.push_back("end");
      },
      // From its socket: passed on to the pump as the relay.
      [self, pump](credit_atom, uint64_t key, uint64_t n) {
        if (key == relay_key)
          self->send(*pump, credit_atom_v, n);
      },
      [self, pump](stdin_atom, uint64_t key, std::string& line) {
        if (key == relay_key)
          self->send(*pump, stdin_atom_v, std::move(line));
      },
    };
  });
}

struct pump_fixture : test::coordinated {
  std::shared_ptr<piped_process> process = std::make_shared<piped_process>();
  std::shared_ptr<process_registry::entry> entry = [this] {
    auto e = std::make_shared<process_registry::entry>();
    e->process = process;
    return e;
  }();
  std::shared_ptr<heard> h = std::make_shared<heard>();
  stdio_relay_actor relay = fake_relay(sys, h);
  stdio_pump_actor pump;

  /// Spawns the pump; its reader waits on the pool until the test settles.
  void start() {
    pump = spawn_stdio_pump(sys, relay, entry, pool);
    sched.run(); // the pump introduces itself; its reader is queued, not run
  }

  void credit(uint64_t n) { caf::anon_send(relay, credit_atom_v, relay_key, n); }
  void line(std::string text) { caf::anon_send(relay, stdin_atom_v, relay_key, std::move(text)); }

  ~pump_fixture() {
    caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(pump, caf::exit_reason::user_shutdown);
    process->close_stdout(); // a reader still queued returns at the end of its pipe
    settle();
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(stdio_pump_suite)

BOOST_AUTO_TEST_CASE(stdout_reaches_the_relay_in_order_and_then_the_end) {
  pump_fixture f;
  f.process->print("hello ");
  f.process->print("world\n");
  f.process->close_stdout();
  f.start();
  BOOST_TEST(f.h->pump);
  BOOST_TEST(f.h->stdout_text.empty()); // nothing before the relay grants credit
  f.credit(1 << 20);
  f.settle();
  BOOST_TEST(f.h->stdout_text == "hello world\n");
  BOOST_REQUIRE(f.h->end);
  BOOST_TEST(*f.h->end == static_cast<int32_t>(stdio_end::exited));
  BOOST_TEST(f.h->order.front() == "pump");
  BOOST_TEST(f.h->order.back() == "end");
}

BOOST_AUTO_TEST_CASE(stdin_lines_are_written_one_at_a_time_in_order_and_acknowledged) {
  pump_fixture f;
  f.start();
  // The reader waits for stdout for as long as the process lives: it gets a thread of
  // its own, where it only waits (no credit, no output), so it sends nothing.
  std::thread reader{[&] { f.pool->run_queued(); }};
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
       f.pool->queued() > 0 && std::chrono::steady_clock::now() < until;)
    std::this_thread::yield();
  BOOST_REQUIRE(f.pool->queued() == 0u);
  f.line("first\n");
  f.line("second\n");
  f.line("third\n");
  f.sched.run(); // the lines reach the pump; only the first write is on the pool
  BOOST_TEST(f.pool->queued() == 1u);
  BOOST_TEST(f.process->stdin_lines.empty());
  f.settle();
  BOOST_TEST((f.process->stdin_lines == std::vector<std::string>{"first\n", "second\n", "third\n"}));
  BOOST_TEST((f.h->written == std::vector<std::pair<uint64_t, bool>>{{6, true}, {7, true}, {6, true}}));
  // Gone with the pump: its reader stops.
  caf::anon_send_exit(f.pump, caf::exit_reason::user_shutdown);
  f.settle();
  reader.join();
  BOOST_TEST(!f.h->end); // the pump was stopped, the process did not end
}

BOOST_AUTO_TEST_CASE(only_the_relay_may_grant_credit_or_write_stdin) {
  pump_fixture f;
  f.process->print("secret");
  f.process->close_stdout();
  f.start();
  auto stranger = f.sys.spawn([pump = f.pump](caf::event_based_actor* self) {
    self->send(pump, credit_atom_v, uint64_t{1} << 20);
    self->send(pump, stdin_atom_v, std::string{"rm -rf /\n"});
  });
  f.sched.run();
  BOOST_TEST(f.process->stdin_lines.empty());
  BOOST_TEST(f.pool->queued() == 1u); // only the reader, which has no credit
  // Forged reader messages without the pump's key change nothing either.
  caf::anon_send(f.pump, stdout_atom_v, uint64_t{0}, std::string{"forged"});
  caf::anon_send(f.pump, stdend_atom_v, uint64_t{0}, int32_t{0});
  f.sched.run();
  BOOST_TEST(f.h->stdout_text.empty());
  BOOST_TEST(!f.h->end);
  f.credit(1 << 20);
  f.settle();
  BOOST_TEST(f.h->stdout_text == "secret");
}

BOOST_AUTO_TEST_CASE(a_retired_session_ends_the_stream_as_stale_before_its_next_chunk) {
  pump_fixture f;
  f.process->print("late output");
  f.process->close_stdout();
  f.start();
  f.entry->stale = true;
  f.credit(1 << 20);
  f.settle();
  BOOST_TEST(f.h->stdout_text.empty());
  BOOST_REQUIRE(f.h->end);
  BOOST_TEST(*f.h->end == static_cast<int32_t>(stdio_end::stale));
}

BOOST_AUTO_TEST_CASE(a_pump_whose_relay_is_gone_quits_and_its_reader_stops) {
  pump_fixture f;
  f.start();
  caf::anon_send_exit(f.relay, caf::exit_reason::user_shutdown);
  f.sched.run();
  // The reader was still queued: it finds the pump gone and returns at once, although
  // stdout never ends.
  BOOST_TEST(f.pool->run_queued() == 1u);
  BOOST_TEST(!f.h->end);
}

BOOST_AUTO_TEST_SUITE_END()
