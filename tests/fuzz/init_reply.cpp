// What a hostile sandbox can write back to the host on init's channel
// (backends/init/init_channel.cpp): the input is the byte stream itself, read frame by frame
// from a real pipe as the bwrap driver reads it, each payload taken as an exec reply
// (then clipped as the reply is) and as a control reply. Whatever is accepted must keep
// within the output cap; a streamed exec's output frames name a stream. The init side's own decoders (what the host sends) run too.
#include <fcntl.h>
#include <unistd.h>

#include "backends/init/init_channel.hpp"
#include "backends/linux/output.hpp"
#include "fuzz_common.hpp"

using namespace boxrt;
namespace proto = init_protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1u << 20))
    return 0;
  // The first byte picks the output cap, as the exec request would have set it.
  const int64_t cap = int64_t{1} << (data[0] % 24);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    std::abort();
  ::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  if (!proto::write_all(fds[1], fuzz::as_text(data + 1, size - 1)))
    std::abort();
  ::close(fds[1]);
  std::string payload;
  const auto deadline = init_channel::clock_type::now() + std::chrono::seconds{5};
  for (int frames = 0; frames < 64; ++frames) {
    auto st = init_channel::read_frame(fds[0], payload, deadline, nullptr,
                                       init_channel::max_reply_bytes(cap));
    if (st != init_channel::read_status::ok)
      break;
    if (auto r = init_channel::accept_reply(payload, cap)) {
      fuzz::require(static_cast<int64_t>(r->stdout_kept.size()) <= cap, "kept stdout within the cap");
      auto shown = clip_captured(r->stdout_kept, r->stdout_total, cap);
      fuzz::require(shown.size() <= static_cast<size_t>(cap) + 3 + 96, "clipped stdout within the cap");
      (void) clip_captured(r->stderr_kept, r->stderr_total, cap);
    }
    // A streamed exec's output frame: only stdout or stderr, never more than was sent.
    if (auto out = proto::decode_output(payload)) {
      fuzz::require(out->stream == 1 || out->stream == 2, "output frame of stdout or stderr");
      fuzz::require(out->bytes.size() < payload.size(), "output frame within its payload");
    }
    (void) proto::decode_control_reply(payload);
    (void) proto::request_kind(payload);
    (void) proto::decode_request(payload);
    (void) proto::decode_spawn(payload);
    (void) proto::decode_kill(payload);
  }
  ::close(fds[0]);
  return 0;
}
