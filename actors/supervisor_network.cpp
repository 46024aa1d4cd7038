// box_set_network_policy / box_get_network_policy (docs/network.md): a workspace's own
// egress policy is part of its admission state (committed before the reply, restored
// with it, in etcd on a cluster) and is handed to the process's egress service, which
// applies it to the workspace's running sandboxes before the reply.
#include "actors/supervisor_detail.hpp"

#include "backends/linux/egress.hpp"
#include "messages/network_policy.hpp"

namespace boxrt::supervisor_detail {

namespace {

std::optional<network_policy> parsed(const heap_optional<std::string>& text) {
  if (!text)
    return std::nullopt;
  auto p = parse_network_policy(*text, "network_policy");
  return p ? std::optional<network_policy>{std::move(p.value())} : std::nullopt;
}

network_policy_reply policy_reply(self_ptr self, const std::string& workspace) {
  network_policy_reply r;
  r.workspace_uuid = workspace;
  const auto& own = self->state.admission->network_policy();
  const auto& fallback = config(self).network.default_policy;
  if (own) {
    r.policy = *own;
    r.effective = *own;
    r.source = "workspace";
  } else if (!fallback.empty()) {
    r.effective = fallback;
    r.source = "default";
  } else {
    r.source = "none";
  }
  return r;
}

} // namespace

void publish_network_policy(self_ptr self) {
  // No sandbox of this workspace runs yet: only the service's map changes. A workspace
  // without one clears what this process may still hold from an earlier owner.
  egress::service::global().set_policy(self->state.admission->box_ns(),
                                       parsed(self->state.admission->network_policy()));
}

caf::result<network_policy_reply> network_policy_action(self_ptr self, network_policy_request& req) {
  auto& st = self->state;
  if (st.state_error)
    return to_caf_error(st.state_error);
  if (!req.set)
    return policy_reply(self, req.workspace_uuid);
  // The contract refuses network "on" in admission mode: a policy would have nothing
  // to apply to, and is refused rather than kept as if it did.
  if (admission_mode(self))
    return to_caf_error({ec::validation, "network policies apply in standard mode only "
                                         "(admission mode refuses network \"on\")"});
  std::optional<std::string> next;
  if (!req.profile.empty()) {
    const auto& profiles = config(self).network.profiles;
    auto i = profiles.find(req.profile);
    if (i == profiles.end()) {
      std::string known;
      for (const auto& [name, _] : profiles)
        known += (known.empty() ? "" : ", ") + name;
      return to_caf_error({ec::validation, "unknown network profile " + json::quote(req.profile)
                                             + " (box.network_profiles has: " + (known.empty() ? "none" : known) + ")"});
    }
    next = i->second;
  } else if (!req.policy.empty()) {
    next = req.policy;
  }
  auto before = st.admission->network_policy();
  st.admission->set_network_policy(next);
  auto rp = self->make_response_promise<network_policy_reply>();
  commit_then(self, [self, rp, before, ws = req.workspace_uuid](box_error saved) mutable {
    auto& st = self->state;
    if (saved) {
      st.admission->set_network_policy(before ? std::optional<std::string>{*before} : std::nullopt);
      rp.deliver(to_caf_error(saved));
      report_idle(self);
      return;
    }
    // In force in the running sandboxes before the reply (an nft run each, on the
    // worker pool); the workspace's other requests wait meanwhile, so two changes
    // reach the service in their order.
    auto token = st.jobs.run(
      *st.args.pool, caf::actor_cast<supervisor_actor>(self),
      [scope = st.admission->box_ns(), policy = parsed(st.admission->network_policy())]() {
        return egress::service::global().set_policy(scope, policy);
      },
      [self, rp, ws](std::optional<box_error> applied) mutable {
        if (!applied)
          rp.deliver(to_caf_error({ec::box_error, "the network policy could not be applied"}));
        else if (*applied)
          rp.deliver(to_caf_error({ec::box_error, "the network policy is stored but not in force in a running "
                                                  "sandbox: " + applied->message}));
        else
          rp.deliver(policy_reply(self, ws));
        report_idle(self);
      });
    hold_mailbox(self, token);
  });
  return rp;
}

} // namespace boxrt::supervisor_detail
