// Decoders of the admission plane: grants, revocations, entitlement snapshots and the
// admission policy.
#include "messages/codec/reader.hpp"

namespace boxrt {

using namespace codec_detail;

result<admission_grant> decode_admission_grant(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "grant must be an object"};
  reader r{obj, ec::validation};
  admission_grant g;
  if (auto err = read_tenant_ids(r, g))
    return *err;
  if (auto err = r.req_int("execution_generation", g.execution_generation, bound::ge, 1))
    return *err;
  if (auto err = r.req_int("entitlement_revision", g.entitlement_revision, bound::ge, 1))
    return *err;
  {
    element v;
    if (auto err = r.require("expires_at", v))
      return *err;
    if (auto err = read_expiry(r, v, g.expires_at))
      return *err;
  }
  if (auto err = r.req_int("max_sessions", g.max_sessions, bound::ge, 0))
    return *err;
  if (auto err = r.req_int("max_managed_processes", g.max_managed_processes, bound::ge, 0))
    return *err;
  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "execution_generation",
                                 "entitlement_revision", "expires_at", "max_sessions",
                                 "max_managed_processes"}))
    return *err;
  return g;
}

result<admission_revocation> decode_admission_revocation(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "revocation must be an object"};
  reader r{obj, ec::validation};
  admission_revocation rev;
  if (auto err = read_tenant_ids(r, rev))
    return *err;
  if (auto err = r.req_int("entitlement_revision", rev.entitlement_revision, bound::ge, 1))
    return *err;
  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "entitlement_revision"}))
    return *err;
  return rev;
}

result<entitlement_snapshot> decode_entitlement_snapshot(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "entitlement snapshot must be an object"};
  reader r{obj, ec::validation};
  entitlement_snapshot s;

  for (auto [key, field] : {std::pair{"instance_uuid", &entitlement_snapshot::instance_uuid},
                            std::pair{"workspace_uuid", &entitlement_snapshot::workspace_uuid}}) {
    std::string& value = s.*field;
    if (auto err = r.req_str(key, value))
      return *err;
    const size_t n = code_points(value);
    if (n < 1 || n > 256)
      return r.fail(key, "must be between 1 and 256 characters");
  }

  if (auto err = r.req_int("entitlement_revision", s.entitlement_revision, bound::ge, 1))
    return *err;

  {
    element v;
    if (auto err = r.require("status", v))
      return *err;
    std::string_view text;
    if (v.get_string().get(text) != ok)
      text = {};
    if (text == "active")
      s.status = entitlement_status::active;
    else if (text == "suspended")
      s.status = entitlement_status::suspended;
    else if (text == "cancelled")
      s.status = entitlement_status::cancelled;
    else
      return r.fail("status must be one of: active, suspended, cancelled");
  }

  if (auto err = r.req_int("not_before", s.not_before, bound::ge, 0))
    return *err;

  if (auto err = r.req_int("expires_at", s.expires_at, bound::gt, 0))
    return *err;

  if (auto v = r.get("features")) {
    object features;
    if (v->get_object().get(features) != ok)
      return r.fail("features must be an object");
    for (auto field : features) {
      if (strip(field.key).empty())
        return r.fail("Entitlement feature names must be non-empty");
      bool enabled = false;
      if (field.value.get_bool().get(enabled) != ok)
        return r.fail("Entitlement feature " + py::repr(field.key) + " must be a boolean");
      s.features[std::string{field.key}] = enabled;
    }
  }

  if (auto v = r.get("limits")) {
    object limits;
    if (v->get_object().get(limits) != ok)
      return r.fail("limits must be an object");
    for (auto field : limits) {
      if (strip(field.key).empty())
        return r.fail("Entitlement limit names must be non-empty");
      int64_t value = 0;
      if (read_int(field.value, value) != int_read::ok || value < 0)
        return r.fail("Entitlement limit " + py::repr(field.key) + " must be a non-negative integer");
      s.limits[std::string{field.key}] = value;
    }
  }

  if (auto err = r.str("plan_name", s.plan_name))
    return *err;
  if (r.get("plan_name")) {
    const size_t n = code_points(s.plan_name);
    if (n < 1 || n > 128)
      return r.fail("plan_name must be between 1 and 128 characters");
  }

  // LangBot 4.11's optional billing facts: null or an integer within its bound.
  for (auto [key, field, floor] : {std::tuple{"subscription_started_at", &entitlement_snapshot::subscription_started_at, 0},
                                   std::tuple{"plan_revision", &entitlement_snapshot::plan_revision, 1},
                                   std::tuple{"monthly_bonus_credits", &entitlement_snapshot::monthly_bonus_credits, 0}})
    if (auto err = r.integer(key, s.*field, bound::ge, floor))
      return *err;

  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "entitlement_revision",
                                 "status", "not_before", "expires_at", "features", "limits",
                                 "plan_name", "subscription_started_at", "plan_revision",
                                 "monthly_bonus_credits"}))
    return *err;
  s.fingerprint = canonical_json(s);
  return s;
}

result<admission_policy> decode_admission_policy(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "box.admission must be an object"};
  reader r{obj, ec::validation};
  admission_policy p;

  if (auto err = r.boolean("required", p.required))
    return *err;

  if (auto v = r.get("logical_session_id")) {
    std::string_view s;
    if (v->get_string().get(s) != ok || s != "global")
      return r.fail("logical_session_id must be global");
  }

  if (auto v = r.get("required_backend")) {
    std::string_view s;
    // "scripted" is accepted for the test backend only: it names no isolation, and
    // its readiness is what its own config says.
    if (v->get_string().get(s) != ok || (s != "bwrap" && s != "nsjail" && s != "scripted"))
      return r.fail("required_backend must be one of: bwrap, nsjail");
    p.required_backend = std::string{s};
  }

  if (auto err = r.integer("max_sessions", p.max_sessions))
    return *err;
  if (p.max_sessions < 0 || p.max_sessions > 1)
    return r.fail("max_sessions must be between 0 and 1");

  if (auto err = r.integer("max_managed_processes", p.max_managed_processes))
    return *err;
  if (p.max_managed_processes != 0)
    return r.fail("max_managed_processes must be 0");

  if (auto err = r.integer("max_grant_ttl_sec", p.max_grant_ttl_sec, bound::gt, 0))
    return *err;

  if (auto err = r.integer("max_timeout_sec", p.max_timeout_sec, bound::gt, 0))
    return *err;

  if (auto err = r.number("cpus", p.cpus, bound::gt, 0))
    return *err;
  if (auto err = r.at_most("cpus", p.cpus, resource_bounds::cpus()))
    return *err;

  if (auto err = r.integer("memory_mb", p.memory_mb, bound::at_least, 32))
    return *err;
  if (auto err = r.at_most("memory_mb", p.memory_mb, resource_bounds::memory_mb))
    return *err;

  if (auto err = r.integer("pids_limit", p.pids_limit, bound::gt, 0))
    return *err;
  if (auto err = r.at_most("pids_limit", p.pids_limit, resource_bounds::pids_limit))
    return *err;

  if (auto err = r.boolean("read_only_rootfs", p.read_only_rootfs))
    return *err;

  if (auto err = r.integer("workspace_quota_mb", p.workspace_quota_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("workspace_quota_mb", p.workspace_quota_mb, resource_bounds::quota_mb))
    return *err;

  if (auto err = r.integer("readiness_cache_sec", p.readiness_cache_sec, bound::ge, 0))
    return *err;

  if (auto err = r.stripped("entitlements_file", p.entitlements_file))
    return *err;

  if (auto err = r.forbid_extra({"required", "logical_session_id", "required_backend",
                                 "max_sessions", "max_managed_processes", "max_grant_ttl_sec",
                                 "max_timeout_sec", "cpus", "memory_mb", "pids_limit",
                                 "read_only_rootfs", "workspace_quota_mb",
                                 "readiness_cache_sec", "entitlements_file"}))
    return *err;
  return p;
}

} // namespace boxrt
