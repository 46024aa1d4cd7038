// __file_chunk (protocol.md §1.11): strict base64, the per-connection key limit and
// the one-at-a-time file writes on the worker pool.
#include "net/rpc/action_support.hpp"

#include "messages/base/base64.hpp"

namespace boxrt::net {

namespace rpc_detail {

bool valid_file_key(std::string_view key) {
  if (key.empty() || key.size() > 255 || key.find("..") != std::string_view::npos)
    return false;
  auto alnum = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (!alnum(key.front()))
    return false;
  return std::all_of(key.begin(), key.end(),
                     [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

reply write_chunk(const std::shared_ptr<transfer_io>& io, const std::string& dir, const std::string& key,
                  const std::string& bytes, bool first, int64_t max_bytes) {
  std::lock_guard<std::mutex> guard{io->mtx};
  if (io->closed)
    return failure({ec::runtime_unavailable, "Connection closed"});
  if (auto err = write_transfer_chunk(dir, key, bytes, first, max_bytes))
    return failure(std::move(err));
  return success("{}");
}

void do_file_chunk(connection_env& env, const element& data, const action_context*,
                   done_fn done) {
  auto invalid = [&](const char* text) { done(failure({ec::value, text})); };
  // The reference's order: the key first (read and checked), then the other keys are
  // read (KeyError), then each check of the protocol.md §1.11 table.
  auto key_v = lookup(data, "file_key");
  if (!key_v)
    return done(failure(key_error("file_key")));
  std::string_view key;
  if (key_v->get_string().get(key) != json_ok || !valid_file_key(key))
    return invalid("Invalid file transfer key");
  auto b64_v = lookup(data, "chunk_base64");
  if (!b64_v)
    return done(failure(key_error("chunk_base64")));
  auto index_v = lookup(data, "chunk_index");
  if (!index_v)
    return done(failure(key_error("chunk_index")));
  auto amount_v = lookup(data, "chunk_amount");
  if (!amount_v)
    return done(failure(key_error("chunk_amount")));
  std::string_view b64;
  if (b64_v->get_string().get(b64) != json_ok || py::code_points(b64) > file_chunk_base64_chars)
    return invalid("File transfer chunk exceeds the protocol limit");
  __int128 index = 0;
  __int128 amount = 0;
  if (!read_integer(*index_v, index) || !read_integer(*amount_v, amount) || amount <= 0
      || index < 0 || index >= amount)
    return invalid("Invalid file chunk position");
  std::string why;
  auto bytes = base64_decode(b64, &why);
  if (!bytes) // binascii.Error is a ValueError; its texts are kept
    return done(failure({ec::value, std::move(why)}));
  if (bytes->size() > file_chunk_bytes)
    return invalid("File transfer chunk exceeds the protocol limit");
  // The transport leaves transfer_dir empty when uploads have nowhere to go.
  if (env.transfer_dir.empty())
    return done(failure({ec::runtime, "File transfers are not available on this connection"}));
  if (!env.transfers)
    env.transfers = std::make_shared<transfer_state>();
  auto& keys = env.transfers->keys;
  if (keys.find(key) == keys.end()) {
    if (keys.size() >= max_active_transfers)
      return invalid("Active file transfer capacity reached");
    keys.emplace(key);
  }
  auto dir = env.transfer_dir;
  auto io = env.transfers->io;
  with_settings(env, done,
                [run = runner(env), io, dir, key = std::string{key}, payload = std::move(bytes.value()),
                 first = index == 0, done](const instance_settings& s) {
                  auto max_bytes = s.config.limits.max_rpc_file_bytes;
                  run_blocking_on(
                    run,
                    [io, dir, key, payload, first, max_bytes] {
                      return write_chunk(io, dir, key, payload, first, max_bytes);
                    },
                    done);
                });
}

} // namespace rpc_detail

using namespace rpc_detail;

void close_transfers(connection_env& env) {
  if (!env.transfers)
    return;
  auto io = env.transfers->io;
  auto dir = env.transfer_dir;
  env.transfers.reset();
  if (dir.empty() || !env.pool)
    return;
  env.pool->submit([io, dir] {
    std::lock_guard<std::mutex> guard{io->mtx};
    io->closed = true;
    remove_transfer_folder(dir);
  });
}

} // namespace boxrt::net
