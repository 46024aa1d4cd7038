// The relay handshake (net/ws/handshake.cpp, protocol.md §1.2 and §1.4 checks 1-3): the
// input is the request target and its header values, one per line (path, control
// token or "-" for none, instance, workspace, generation, Sec-WebSocket-Protocol).
#include "fuzz_common.hpp"
#include "net/ws/handshake.hpp"

using namespace boxrt;

namespace {

constexpr std::string_view token = "0123456789abcdef0123456789abcdef";
constexpr std::string_view pinned = "inst-1";

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = fuzz::split(fuzz::as_text(data, size), '\n', 6);
  parts.resize(6);
  auto path = parts[0].substr(0, parts[0].find('?'));
  auto target = net::relay_target(path);
  if (!target)
    return 0;
  fuzz::require(!target->first.empty() && !target->second.empty(), "a relay target names both ids");
  net::relay_headers h;
  if (parts[1] != "-")
    h.token = parts[1];
  h.instance = parts[2];
  h.workspace = parts[3];
  h.generation = parts[4];
  (void) net::offers_mcp(parts[5]);
  for (auto configured : {token, std::string_view{}}) {
    relay_request r;
    auto why = net::check_relay_headers(h, configured, pinned, target->first, target->second, r);
    if (!why) {
      fuzz::require(r.generation >= 1, "an admitted generation is at least 1");
      fuzz::require(r.instance_uuid == pinned, "an admitted instance is the pinned one");
      fuzz::require(!r.workspace_uuid.empty(), "an admitted workspace is named");
    }
  }
  return 0;
}
