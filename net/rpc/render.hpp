// The one renderer of health, readiness, backend info and status: the JSON of the RPC
// replies (box_health, box_get_backend_info, box_get_status) and the bodies of the
// HTTP probes (/healthz, /readyz), which leave out host paths and error texts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "messages/base/json.hpp"
#include "messages/requests.hpp"

namespace boxrt::net {

/// The readiness object of box_health (protocol.md §2.2).
void write_readiness(json::writer& w, const instance_settings& s);

/// The reply of box_get_backend_info.
std::string backend_info_json(const instance_settings& s);

/// The reply of box_get_status.
std::string status_json(const status_info& x);

/// box_get_storage_analysis's reply: size_bytes (the "root" entries' sum), directories,
/// active_sessions, managed_processes.
std::string storage_json(const storage_report& x);

/// True once the first readiness probe finished and everything required is ready.
bool instance_ready(const instance_settings& s);

/// Writes `name`, or null when it is empty.
void name_or_null(json::writer& w, const std::string& name);

/// The body of an HTTP probe and whether it is a 200: `live` for /healthz, else
/// /readyz; `info` empty when the directory did not answer in time.
struct probe_body {
  bool ok = false;
  std::string json;
};
/// `node_id`: this cluster node's id ("" renders null: no cluster).
probe_body render_probe(bool live, const std::optional<health_info>& info, uint64_t connections,
                        const std::string& node_id = {});

} // namespace boxrt::net
