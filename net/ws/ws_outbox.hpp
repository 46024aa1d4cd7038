// The write side both WebSocket sessions share (internal to net/ws/).
#pragma once

#include "messages/base/metrics.hpp"
#include "net/ws/server_core.hpp"

namespace boxrt::net {

/// The write side both WebSocket sessions share (the RPC socket and the stdio relay):
/// one write queue, one write outstanding at a time, and a close that waits for every
/// message queued before it. It holds what both sessions share (the server, the socket,
/// the upgrade request, the peer and the life-cycle flags); `Derived` provides self(),
/// finish(why), on_upgraded() and the hooks after_enqueue(), after_write() (a write
/// completed), reply_done() (a reply left the queue, written or dropped) and
/// close_requested() (a close was asked for), plus the log labels write_what and
/// close_what.
template <class Derived>
class ws_outbox {
 protected:
  ws_outbox(server_core& srv, beast::tcp_stream&& stream, http::request<http::string_body> req,
            std::string peer)
    : srv_(srv), ws_(std::move(stream)), req_(std::move(req)), peer_(std::move(peer)) {}
  ~ws_outbox() { account(-static_cast<int64_t>(queued_bytes_)); }

  /// Keeps boxd_outbound_queue_bytes in step with queued_bytes_.
  static void account(int64_t delta) { metrics::boxd().outbound_queue_bytes.add(delta); }

  /// One message waiting to be written; a `reply` holds an in-flight slot until then.
  struct queued {
    std::string text;
    bool reply = false;
    /// != 0: the derived session's on_written(written) runs once it is written.
    uint64_t written = 0;
  };

  /// `in_order`: never ahead of what was queued before (a stream's frames), even when
  /// small; `written` as in queued.
  void enqueue(std::string text, bool reply = false, bool in_order = false, uint64_t written = 0) {
    auto& d = derived();
    if (closing_ || finished_ || close_) {
      if (reply)
        d.reply_done();
      return;
    }
    queued_bytes_ += text.size();
    account(static_cast<int64_t>(text.size()));
    peak_bytes_ = std::max(peak_bytes_, queued_bytes_);
    const bool small = text.size() <= small_message_bytes;
    if (Derived::small_first && small && !in_order && overtaken_ < max_overtaking) {
      // Ahead of every large message not started yet (one message is one frame
      // sequence, RFC 6455 §5.4: a message being written cannot be interrupted).
      const size_t at = (writing_ ? 1 : 0) + waiting_small_;
      if (at < queue_.size())
        ++overtaken_;
      queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(at), {std::move(text), reply, written});
      ++waiting_small_;
    } else {
      queue_.push_back({std::move(text), reply, written});
    }
    d.after_enqueue();
    if (!writing_)
      do_write();
  }

  void do_write() {
    auto& d = derived();
    if (waiting_small_ > 0)
      --waiting_small_; // the front is the first of them
    else
      overtaken_ = 0;   // a large message goes: the small ones start counting again
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(queue_.front().text),
                      [s = d.self()](beast::error_code ec, size_t) { s->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    auto& d = derived();
    writing_ = false;
    if (ec) {
      fail(ec, Derived::write_what, peer_);
      drop_queued();
      beast::get_lowest_layer(ws_).close();
      d.finish(ec.message());
      return;
    }
    queued_bytes_ -= queue_.front().text.size();
    account(-static_cast<int64_t>(queue_.front().text.size()));
    if (queue_.front().reply)
      d.reply_done();
    if (auto token = queue_.front().written) {
      if constexpr (requires { d.on_written(token); })
        d.on_written(token);
    }
    queue_.pop_front();
    if (!queue_.empty())
      do_write();
    else if (close_)
      maybe_close();
    d.after_write();
  }

  /// Drops every message not being written now (all of them when none is).
  void drop_queued() {
    auto& d = derived();
    const size_t keep = writing_ ? 1 : 0;
    while (queue_.size() > keep) {
      queued_bytes_ -= queue_.back().text.size();
      account(-static_cast<int64_t>(queue_.back().text.size()));
      if (queue_.back().reply)
        d.reply_done();
      queue_.pop_back();
    }
    waiting_small_ = 0;
    overtaken_ = 0;
    if (queue_.empty())
      std::deque<queued>{}.swap(queue_);
  }

  /// A server that is stopping takes no new session: closes the socket and finishes.
  bool closed_for_stop() {
    if (!srv_.stopping)
      return false;
    beast::get_lowest_layer(ws_).close();
    derived().finish("server stopping");
    return true;
  }

  /// Accepts the upgrade in req_ with `o`'s rules. When it is done the request is
  /// dropped; a failure is logged as `what` and finishes the session, a success calls
  /// d.on_upgraded() and then closes if a close was asked for meanwhile.
  void accept_upgrade(const accept_options& o, const char* what) {
    auto& d = derived();
    prepare_accept(ws_, srv_.opts.max_message_bytes, o);
    ws_.async_accept(req_, [s = d.self(), what](beast::error_code ec) {
      s->req_ = {};
      if (ec) {
        fail(ec, what, s->peer_);
        s->finish("upgrade failed");
        return;
      }
      s->accepted_ = true;
      s->on_upgraded();
      if (s->close_)
        s->maybe_close();
    });
  }

  /// Closes after every message queued so far.
  void request_close(uint16_t code, std::string reason) {
    auto& d = derived();
    if (closing_ || finished_ || close_)
      return;
    close_ = websocket::close_reason{static_cast<websocket::close_code>(code), reason};
    d.close_requested();
    maybe_close();
  }

  void maybe_close() {
    auto& d = derived();
    if (!accepted_ || writing_ || !queue_.empty() || closing_ || finished_)
      return;
    closing_ = true;
    ws_.async_close(*close_, [s = d.self()](beast::error_code ec) {
      if (ec)
        fail(ec, Derived::close_what, s->peer_);
      s->finish("closed by server");
    });
  }

  /// Messages this size or smaller may overtake larger ones not started yet (when
  /// Derived::small_first), at most max_overtaking times per large message, so a stream
  /// of small replies cannot starve a large one.
  static constexpr size_t small_message_bytes = 64 * 1024;
  static constexpr size_t max_overtaking = 1024;

  /// Front to back: the message being written (when writing_), the small messages that
  /// went ahead (waiting_small_ of them), then the rest in arrival order.
  std::deque<queued> queue_;
  size_t waiting_small_ = 0;
  size_t overtaken_ = 0;
  /// Bytes waiting in queue_, and the most there ever were.
  size_t queued_bytes_ = 0;
  size_t peak_bytes_ = 0;
  std::optional<websocket::close_reason> close_;
  bool writing_ = false;

  server_core& srv_;
  websocket::stream<beast::tcp_stream> ws_;
  /// The upgrade request, dropped once accepted.
  http::request<http::string_body> req_;
  std::string peer_;
  bool accepted_ = false;
  bool closing_ = false;
  bool finished_ = false;
  /// The connection slot reserved by the HTTP session is the session's to release.
  bool counted_ = true;

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }
};

} // namespace boxrt::net
