// The /rpc/ws frame decoder (net/rpc/envelope.cpp): Python-json reading with its rewrite,
// the lax pydantic envelope, the context models and the action table's refusals.
#include <simdjson.h>

#include "fuzz_common.hpp"
#include "net/rpc/envelope.hpp"

namespace {

// The fuzzer reaches both sides of the table: names starting with "box_" or "__" count
// as known, anything else gets "Action ... not found".
bool known(std::string_view action) {
  return action.rfind("box_", 0) == 0 || action.rfind("__", 0) == 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static simdjson::dom::parser parser;
  std::string text{boxrt::fuzz::as_text(data, size)};
  auto env = boxrt::net::read_envelope(parser, text, known);
  if (env.what == boxrt::net::envelope::kind::request) {
    boxrt::fuzz::require(!env.seq_id.empty(), "a request has a seq_id");
    if (env.refusal.empty())
      boxrt::fuzz::require(env.data.is_object(), "a runnable request has object data");
  }
  return 0;
}
