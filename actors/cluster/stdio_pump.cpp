// The process's end of a stdio relay on another cluster node (stdio_pump.hpp).
#include "actors/cluster/stdio_pump.hpp"

#include <algorithm>
#include <cerrno>
#include <deque>
#include <mutex>
#include <random>
#include <string>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/pool_job.hpp"
#include "messages/type_ids.hpp"

namespace boxrt {

namespace {

/// The most the reader takes from stdout at once (the local relay's chunk).
constexpr size_t chunk_bytes = 64 * 1024;

/// What the pump and its reader share: the reader blocks in poll() on stdout (while it
/// has credit) and on `wake`, which the pump signals when credit arrives or it ends.
struct reader_link {
  int out = -1;  // this reader's own duplicate of the process's stdout
  int wake = -1; // eventfd
  std::mutex mtx;
  uint64_t credit = 0;
  bool stop = false;

  ~reader_link() {
    if (out >= 0)
      ::close(out);
    if (wake >= 0)
      ::close(wake);
  }

  void signal() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake, &one, sizeof one);
  }
};

/// Runs on a pool thread until stdout ends or the pump stops it: sends each chunk, and
/// then the end, to the pump (one sender, so in order). Its messages are anonymous and
/// carry the pump's `key`, which no other actor (of any node) knows.
void read_stdout(const std::shared_ptr<reader_link>& link, const stdio_pump_actor& pump, uint64_t key) {
  std::string buf;
  for (;;) {
    uint64_t credit;
    {
      std::lock_guard lock{link->mtx};
      if (link->stop)
        return;
      credit = link->credit;
    }
    pollfd fds[2] = {{link->wake, POLLIN, 0}, {credit > 0 ? link->out : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      caf::anon_send(pump, stdend_atom_v, key, static_cast<int32_t>(stdio_end::unavailable));
      return;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = ::read(link->wake, &v, sizeof v);
    }
    if (fds[1].revents == 0)
      continue;
    buf.resize(std::min<uint64_t>(chunk_bytes, credit));
    auto n = ::read(link->out, buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      caf::anon_send(pump, stdend_atom_v, key, static_cast<int32_t>(stdio_end::exited));
      return;
    }
    {
      std::lock_guard lock{link->mtx};
      link->credit -= static_cast<uint64_t>(n);
    }
    caf::anon_send(pump, stdout_atom_v, key, std::string{buf.data(), static_cast<size_t>(n)});
  }
}

struct pump_state {
  static inline const char* name = "boxrt.stdio_pump";
  /// Not an aggregate: CAF would otherwise build the state from the actor's pointer.
  pump_state() = default;
  stdio_relay_actor relay;
  std::shared_ptr<process_registry::entry> entry;
  std::shared_ptr<worker_pool> pool;
  std::shared_ptr<reader_link> link;
  std::deque<std::string> lines;
  /// Tags the anonymous messages of this pump's reader and stdin writes.
  uint64_t key = 0;
  bool writing = false;
  bool ended = false;
};

using pump_ptr = stdio_pump_actor::stateful_pointer<pump_state>;

/// Sends the end to the relay once and quits.
void end(pump_ptr self, stdio_end why) {
  auto& st = self->state;
  if (st.ended)
    return;
  st.ended = true;
  if (st.entry->stale.load())
    why = stdio_end::stale;
  self->send(st.relay, stdend_atom_v, static_cast<int32_t>(why));
  self->quit();
}

void write_next(pump_ptr self) {
  auto& st = self->state;
  if (st.writing || st.lines.empty() || st.ended)
    return;
  // The fence holds for stdin too: a retired session's process gets nothing more.
  if (st.entry->stale.load()) {
    end(self, stdio_end::stale);
    return;
  }
  st.writing = true;
  auto line = std::move(st.lines.front());
  st.lines.pop_front();
  uint64_t n = line.size();
  pool_job(
    *st.pool, caf::actor_cast<stdio_pump_actor>(self),
    [process = st.entry->process, line = std::move(line)] { return process->write_stdin(line); },
    written_atom_v, st.key, n);
}

stdio_pump_actor::behavior_type pump_behavior(pump_ptr self, stdio_relay_actor relay,
                                              std::shared_ptr<process_registry::entry> entry,
                                              std::shared_ptr<worker_pool> pool) {
  auto& st = self->state;
  st.relay = std::move(relay);
  st.entry = std::move(entry);
  st.pool = std::move(pool);
  st.key = stdio_key();
  self->monitor(st.relay);
  self->set_down_handler([self](const caf::down_msg&) {
    // The relay is gone: nobody to tell.
    self->state.ended = true;
    self->quit();
  });
  self->send(st.relay, pump_atom_v);
  int fd = st.entry->process ? st.entry->process->stdout_fd() : -1;
  auto link = std::make_shared<reader_link>();
  link->out = fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  link->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (link->out < 0 || link->wake < 0) {
    end(self, stdio_end::unavailable);
    return stdio_pump_actor::behavior_type::make_empty_behavior();
  }
  st.link = link;
  self->attach_functor([link] {
    {
      std::lock_guard lock{link->mtx};
      link->stop = true;
    }
    link->signal();
  });
  st.pool->submit([link, me = caf::actor_cast<stdio_pump_actor>(self), key = st.key] { read_stdout(link, me, key); });
  auto from_relay = [self] { return self->current_sender() == self->state.relay.address(); };
  return {
    [self, from_relay](credit_atom, uint64_t n) {
      auto& st = self->state;
      if (!from_relay())
        return;
      {
        std::lock_guard lock{st.link->mtx};
        st.link->credit += n;
      }
      st.link->signal();
    },
    [self, from_relay](stdin_atom, std::string& line) {
      if (!from_relay())
        return;
      self->state.lines.push_back(std::move(line));
      write_next(self);
    },
    [self](stdout_atom, uint64_t key, std::string& chunk) {
      // From the reader, in order; checked against the fence before each.
      auto& st = self->state;
      if (key != st.key || st.ended)
        return;
      if (st.entry->stale.load()) {
        end(self, stdio_end::stale);
        return;
      }
      self->send(st.relay, stdout_atom_v, std::move(chunk));
    },
    [self](stdend_atom, uint64_t key, int32_t why) {
      if (key != self->state.key)
        return;
      end(self, static_cast<stdio_end>(why));
    },
    [self](written_atom, uint64_t key, uint64_t n, bool ok) {
      auto& st = self->state;
      if (key != st.key || st.ended)
        return;
      st.writing = false;
      self->send(st.relay, written_atom_v, n, ok);
      write_next(self);
    },
  };
}

} // namespace

uint64_t stdio_key() {
  std::random_device rd;
  return rd() | (uint64_t{rd()} << 32);
}

stdio_pump_actor spawn_stdio_pump(caf::actor_system& sys, stdio_relay_actor relay,
                                  std::shared_ptr<process_registry::entry> entry,
                                  std::shared_ptr<worker_pool> pool) {
  return sys.spawn(pump_behavior, std::move(relay), std::move(entry), std::move(pool));
}

} // namespace boxrt
