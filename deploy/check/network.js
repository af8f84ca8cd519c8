// NetworkPolicy rules for validate.js, with Kubernetes' semantics: a pod
// that no policy selects for Ingress accepts everything; a selected pod
// accepts what some ingress rule of a policy selecting it allows (no `from`:
// every source; no `ports`: every port). A peer's podSelector without a
// namespaceSelector means the policy's namespace; an empty namespaceSelector
// means every namespace. ipBlock peers are not resolved (they match no pod).
//
// Checks:
//  - a policy's podSelector matches some pod template of its namespace, and
//    each port its rules name is exposed by a pod it selects;
//  - LoCo-PS (when its coordinator, server and worker pods are present):
//    every one of them is selected by a policy, and the flows the system
//    needs get through (FLOWS below): the pods' gRPC calls, the kubelet's
//    probes on the health ports, Prometheus on the metrics ports from any
//    namespace.
"use strict";

const COMPONENT = "app.kubernetes.io/component";
// [source, target, port name]; a source is a component, "kubelet" (not a
// pod: only a rule without `from` admits it) or "other-namespace" (a pod of
// another namespace: Prometheus).
const FLOWS = [
  ["worker", "coordinator", "grpc"],
  ["server", "coordinator", "grpc"],
  ["worker", "server", "grpc"],
  ["kubelet", "coordinator", "health"],
  ["kubelet", "server", "health"],
  ["other-namespace", "coordinator", "metrics"],
  ["other-namespace", "server", "metrics"],
  ["other-namespace", "worker", "metrics"],
];

const isEmpty = (sel) => !sel || (Object.keys(sel.matchLabels || {}).length === 0 &&
  (sel.matchExpressions || []).length === 0);

// The container port of `spec` that `port` (a name or a number) names, as
// {name, number}, or null.
function resolvePort(spec, port, containersOf) {
  for (const c of containersOf(spec)) {
    for (const p of c.ports || []) {
      if (typeof port === "number" ? p.containerPort === port : p.name === port) {
        return { name: p.name, number: p.containerPort };
      }
    }
  }
  return null;
}

// Does `peer` admit `source` ({pod, namespace} or a string kind)?
function peerAdmits(peer, source, policyNamespace, labelSelectorMatches) {
  if (peer.ipBlock) return false;
  if (source === "kubelet") return false;
  if (source === "other-namespace") {
    return peer.namespaceSelector !== undefined && isEmpty(peer.namespaceSelector) &&
      isEmpty(peer.podSelector);
  }
  const sameNamespace = (source.namespace ?? null) === (policyNamespace ?? null);
  if (peer.namespaceSelector === undefined && !sameNamespace) return false;
  if (peer.namespaceSelector !== undefined && !isEmpty(peer.namespaceSelector)) return false;
  return peer.podSelector === undefined || isEmpty(peer.podSelector) ||
    labelSelectorMatches(peer.podSelector, source.labels);
}

function ruleAdmits(rule, source, target, port, policyNamespace, h) {
  const fromOk = rule.from === undefined || rule.from.length === 0 ||
    rule.from.some((peer) => peerAdmits(peer, source, policyNamespace, h.labelSelectorMatches));
  if (!fromOk) return false;
  if (rule.ports === undefined || rule.ports.length === 0) return true;
  const wanted = resolvePort(target.spec, port, h.containersOf);
  return rule.ports.some((p) => p.port === undefined ||
    (wanted && (p.port === wanted.name || p.port === wanted.number)));
}

const ingressPolicies = (policies) => policies.filter(({ obj }) =>
  (obj.spec?.policyTypes || ["Ingress"]).includes("Ingress"));

function selecting(policies, pod, h) {
  return ingressPolicies(policies).filter(({ obj }) =>
    (obj.metadata?.namespace ?? null) === (pod.namespace ?? null) &&
    h.labelSelectorMatches(obj.spec?.podSelector ?? {}, pod.labels));
}

// A policy that selects nothing, or names a port no selected pod exposes.
function checkPolicy({ obj, where }, pods, h) {
  const chosen = pods.filter((p) => (p.namespace ?? null) === (obj.metadata?.namespace ?? null) &&
    h.labelSelectorMatches(obj.spec?.podSelector ?? {}, p.labels));
  if (chosen.length === 0) {
    h.report(where, `podSelector ${JSON.stringify(obj.spec?.podSelector)} matches no pod template`);
    return;
  }
  for (const rule of obj.spec?.ingress || []) {
    for (const p of rule.ports || []) {
      if (p.port !== undefined && !chosen.some((pod) => resolvePort(pod.spec, p.port, h.containersOf))) {
        h.report(where, `ingress port ${JSON.stringify(p.port)} is exposed by no selected container`);
      }
    }
  }
}

function checkFlows(policies, pods, h) {
  const byComponent = new Map();
  for (const pod of pods) {
    const c = pod.labels?.[COMPONENT];
    if (["coordinator", "server", "worker"].includes(c)) byComponent.set(c, pod);
  }
  if (byComponent.size < 3) return;  // not a LoCo-PS rendering
  for (const [component, pod] of byComponent) {
    if (selecting(policies, pod, h).length === 0) {
      h.report(pod.where, `no NetworkPolicy selects the ${component} pods: any pod of the cluster can reach them`);
    }
  }
  for (const [from, to, port] of FLOWS) {
    const target = byComponent.get(to);
    const source = byComponent.get(from) ?? from;
    const chosen = selecting(policies, target, h);
    if (chosen.length === 0) continue;  // reported above; everything gets through
    const admitted = chosen.some(({ obj }) => (obj.spec?.ingress || []).some((rule) =>
      ruleAdmits(rule, source, target, port, obj.metadata?.namespace, h)));
    if (!admitted) {
      h.report(target.where, `the NetworkPolicies (${chosen.map(({ obj }) => obj.metadata?.name).join(", ")}) ` +
        `block ${from} -> ${to}:${port}, which LoCo-PS needs`);
    }
  }
}

// `objects`: [{obj, where}]; `pods`: validate.js's pod templates; `h`:
// {report, labelSelectorMatches, containersOf} from validate.js.
function checkNetworkPolicies(objects, pods, h) {
  const policies = objects.filter(({ obj }) => obj.kind === "NetworkPolicy");
  for (const p of policies) checkPolicy(p, pods, h);
  checkFlows(policies, pods, h);
}

module.exports = { checkNetworkPolicies };
