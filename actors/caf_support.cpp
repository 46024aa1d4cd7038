#include "actors/caf_support.hpp"

#include <caf/all.hpp>

#include "actors/actors.hpp"
#include "actors/deadline.hpp"

namespace boxrt {

namespace {
constexpr caf::atom_value boxrt_category = caf::atom("boxrt");
} // namespace

caf::error to_caf_error(const box_error& err) {
  return caf::error{static_cast<uint8_t>(err.code), boxrt_category, caf::make_message(err.message)};
}

box_error from_caf_error(const caf::error& err) {
  if (!err)
    return {};
  if (err.category() == boxrt_category) {
    std::string text;
    const auto& ctx = err.context();
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      text = ctx.get_as<std::string>(0);
    return box_error{static_cast<ec>(err.code()), std::move(text)};
  }
  if (err == caf::sec::request_timeout)
    return box_error{ec::runtime_unavailable, std::string{request_timed_out_text}};
  if (err == caf::sec::request_receiver_down)
    return box_error{ec::runtime_unavailable, "Box runtime component stopped while serving the request"};
  return box_error{ec::runtime_unavailable, "Box runtime internal error: " + caf::to_string(err)};
}

void add_boxrt_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::boxrt>();
}

void configure_actor_system(caf::actor_system_config& cfg, size_t threads) {
  add_boxrt_types(cfg);
  tune_scheduler(cfg, threads);
}

void tune_scheduler(caf::actor_system_config& cfg, size_t threads) {
  cfg.set("scheduler.max-threads", threads);
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  cfg.set("logger.verbosity", caf::atom("quiet"));
}

} // namespace boxrt
