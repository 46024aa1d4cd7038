#include "backends/stream/exec_sink.hpp"

#include <algorithm>
#include <utility>

#include "backends/backend.hpp"

namespace boxrt {

namespace {

/// Bytes at the end of `s` that start a UTF-8 sequence not complete yet.
size_t cut_tail(std::string_view s) noexcept {
  auto n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80)
      continue;
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < need ? back : 0;
  }
  return 0;
}

} // namespace

output_framer::outcome output_framer::send(int stream, std::string text, int64_t offset) {
  for (;;) {
    auto until = gone_ ? std::min(deadline_, clock_type::now() + std::chrono::milliseconds{100}) : deadline_;
    auto r = sink_.wait_room(until);
    if (r == exec_sink::wait_result::stop)
      return outcome::stop;
    if (r == exec_sink::wait_result::room)
      break;
    if (clock_type::now() >= deadline_)
      return outcome::timeout;
    if (gone_())
      return outcome::gone;
  }
  sink_.emit({stream == 2 ? "stderr" : "stdout", std::move(text), offset});
  ++frames_;
  return outcome::ok;
}

output_framer::outcome output_framer::push(int stream, std::string_view raw) {
  const auto i = index(stream);
  const int64_t room = params_.max_output_bytes - seen_[0] - seen_[1];
  const bool over = static_cast<int64_t>(raw.size()) > room;
  if (over)
    raw = raw.substr(0, static_cast<size_t>(std::max<int64_t>(room, 0)));
  seen_[i] += static_cast<int64_t>(raw.size());
  const auto chunk = static_cast<size_t>(std::max<int64_t>(params_.max_chunk_bytes, 4));
  std::string& carry = carry_[i];
  while (!raw.empty()) {
    auto take = std::min(raw.size(), chunk > carry.size() ? chunk - carry.size() : size_t{1});
    std::string text = carry;
    text.append(raw.substr(0, take));
    raw.remove_prefix(take);
    // A cut sequence waits for its end (at most 3 bytes), unless nothing else is left.
    auto tail = cut_tail(text);
    if (tail == text.size() && text.size() < 4) {
      carry = std::move(text);
      continue;
    }
    carry = text.substr(text.size() - tail);
    text.resize(text.size() - tail);
    const int64_t offset = framed_[i];
    framed_[i] += static_cast<int64_t>(text.size());
    if (auto r = send(stream, std::move(text), offset); r != outcome::ok)
      return r;
  }
  return over ? outcome::limit : outcome::ok;
}

output_framer::outcome output_framer::flush() {
  for (int stream : {1, 2}) {
    auto& carry = carry_[index(stream)];
    if (carry.empty())
      continue;
    const int64_t offset = framed_[index(stream)];
    framed_[index(stream)] += static_cast<int64_t>(carry.size());
    if (auto r = send(stream, std::exchange(carry, {}), offset); r != outcome::ok)
      return r;
  }
  return outcome::ok;
}

result<stream_end> backend::exec_stream(backend_session& session, const box_spec& spec,
                                        const exec_limits& limits, const stream_params& params,
                                        exec_sink& sink) {
  auto r = exec(session, spec, limits);
  if (!r)
    return r.error();
  stream_end end;
  output_framer framer{sink, params, exec_sink::clock_type::now() + std::chrono::seconds{spec.timeout_sec}};
  auto how = framer.push(1, r->stdout_text);
  if (how == output_framer::outcome::ok)
    how = framer.push(2, r->stderr_text);
  if (how == output_framer::outcome::ok)
    how = framer.flush();
  // A stop that came while the command ran (it is not live here) is still the reason.
  end.ended = r->status == exec_status::timed_out ? "timeout"
              : how == output_framer::outcome::stop || !sink.stop_reason().empty() ? sink.stop_reason()
              : how == output_framer::outcome::limit   ? "output_limit"
              : how == output_framer::outcome::timeout ? "timeout"
                                                       : "exit";
  end.stdout_bytes = framer.bytes(1);
  end.stderr_bytes = framer.bytes(2);
  end.frames = framer.frames();
  end.result = std::move(r.value());
  end.result.stdout_text.clear();
  end.result.stderr_text.clear();
  return end;
}

} // namespace boxrt
