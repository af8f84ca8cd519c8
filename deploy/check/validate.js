#!/usr/bin/env node
// Validates rendered Kubernetes manifests offline: node validate.js FILE...
// (multi-document YAML, e.g. the output of `kubectl kustomize`). Exit 0 when
// every object passes, 1 with one line per problem otherwise, 2 on usage or
// unreadable input.
//
// Checks, per object:
//  - schema: the Kubernetes (or Prometheus Operator) JSON schema of its
//    apiVersion/kind, from the npm package kubernetes-models; an unknown
//    apiVersion/kind fails;
//  - unknown fields: kubernetes-models' schemas accept any extra property, so
//    the schema's own validator runs on a proxy that records which
//    properties it reads; a property it never reads is not in the schema
//    (maps such as labels are read key by key, so their keys count as known);
// and across objects:
//  - every container has an image;
//  - a workload's selector matches its pod template's labels;
//  - a Service's, PodMonitor's or PodDisruptionBudget's selector matches
//    some pod template;
//  - every port a Service, probe or PodMonitor names (or numbers) is
//    exposed by a container of the pods it selects;
//  - every volumeMount names a volume of its pod (or a volumeClaimTemplate);
//  - every file a LOCO_*_FILE/_CERT/_KEY/_CA setting names (from the
//    container's env or a ConfigMap it takes whole) lies in a volume the
//    container mounts, and among the volume's items when it lists them;
//  - LoCo-PS: LOCO_NUM_SERVERS in ConfigMap loco-config equals the replicas
//    of StatefulSet loco-server (the shard count is one fact in two places);
//  - NetworkPolicies (network.js): each selects pods and names ports they
//    expose; every LoCo-PS pod is selected, and the flows it needs get
//    through.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const { checkNetworkPolicies } = require("./network");

const problems = [];
const report = (where, msg) => problems.push(`${where}: ${msg}`);

// ------------------------------------------------------------ schemas
// The model file of apiVersion/kind names its compiled schema module.
function schemaValidator(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const candidates = group === ""
    ? [`kubernetes-models/${version}/${kind}`]
    : [`kubernetes-models/${group}/${version}/${kind}`,
       `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`];
  for (const c of candidates) {
    let file;
    try { file = require.resolve(c); } catch { continue; }
    const m = /require\("([^"]*_schemas\/[^"]+)"\)/.exec(fs.readFileSync(file, "utf8"));
    if (m) return require(path.resolve(path.dirname(file), m[1])).validate;
  }
  return null;
}

// Wraps `value` so that every property read is recorded in `seen`
// (object -> Set of keys).
function tracked(value, seen) {
  if (value === null || typeof value !== "object") return value;
  const keys = new Set();
  seen.set(value, keys);
  const children = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string") keys.add(key);
      const v = Reflect.get(target, key, receiver);
      if (v === null || typeof v !== "object") return v;
      if (!children.has(key)) children.set(key, tracked(v, seen));
      return children.get(key);
    },
  });
}

function unknownFields(value, seen, at, out) {
  if (value === null || typeof value !== "object") return;
  const keys = seen.get(value);
  for (const k of Object.keys(value)) {
    const here = Array.isArray(value) ? `${at}[${k}]` : (at ? `${at}.${k}` : k);
    if (keys && !keys.has(k)) out.push(here);
    else unknownFields(value[k], seen, here, out);
  }
}

function checkSchema(obj, where) {
  const validate = schemaValidator(obj.apiVersion, obj.kind);
  if (!validate) {
    report(where, `unknown apiVersion/kind ${obj.apiVersion}/${obj.kind} (no schema in kubernetes-models)`);
    return;
  }
  const seen = new Map();
  const ok = validate(tracked(obj, seen));
  if (!ok) {
    for (const e of validate.errors || []) {
      report(where, `schema: ${e.instancePath || "/"} ${e.message}${e.params ? " " + JSON.stringify(e.params) : ""}`);
    }
    return;  // unknown-field detection is only sound on a valid object
  }
  const unknown = [];
  unknownFields(obj, seen, "", unknown);
  for (const u of unknown) report(where, `unknown field ${u}`);
}

// ------------------------------------------------------------ cross-object rules
// The pod template of a workload, or null.
function podTemplate(obj) {
  if (obj.kind === "Pod") return { metadata: obj.metadata, spec: obj.spec };
  if (obj.kind === "CronJob") return obj.spec?.jobTemplate?.spec?.template ?? null;
  if (["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"].includes(obj.kind)) {
    return obj.spec?.template ?? null;
  }
  return null;
}

const matches = (selector, labels) =>
  Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);

function labelSelectorMatches(sel, labels) {
  if (!sel) return false;
  if (!matches(sel.matchLabels, labels)) return false;
  for (const e of sel.matchExpressions || []) {
    const has = labels && Object.prototype.hasOwnProperty.call(labels, e.key);
    const v = has ? labels[e.key] : undefined;
    if (e.operator === "In" && !(has && e.values.includes(v))) return false;
    if (e.operator === "NotIn" && has && e.values.includes(v)) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

function containersOf(spec) {
  return [...(spec?.initContainers || []), ...(spec?.containers || [])];
}

// Does some container of `spec` expose `port` (a name or a number)?
function exposes(spec, port) {
  return containersOf(spec).some((c) => (c.ports || []).some((p) =>
    typeof port === "number" ? p.containerPort === port : p.name === port));
}

function checkWorkload(obj, where, pods) {
  const tpl = podTemplate(obj);
  if (!tpl) return;
  const labels = tpl.metadata?.labels || {};
  if (obj.kind !== "Pod") {
    const sel = obj.kind === "CronJob" ? obj.spec?.jobTemplate?.spec?.selector : obj.spec?.selector;
    const needsSelector = !["Job", "CronJob"].includes(obj.kind);
    if (needsSelector && !sel) report(where, "no spec.selector");
    if (sel && !labelSelectorMatches(sel, labels)) {
      report(where, `selector ${JSON.stringify(sel)} does not match the pod template's labels ${JSON.stringify(labels)}`);
    }
  }
  const claimNames = new Set((obj.spec?.volumeClaimTemplates || []).map((v) => v.metadata?.name));
  const volumeNames = new Set((tpl.spec?.volumes || []).map((v) => v.name));
  for (const c of containersOf(tpl.spec)) {
    const cw = `${where} container ${c.name}`;
    if (!c.image || String(c.image).trim() === "") report(cw, "has no image");
    for (const probeName of ["livenessProbe", "readinessProbe", "startupProbe"]) {
      const probe = c[probeName];
      if (!probe) continue;
      const port = probe.httpGet?.port ?? probe.tcpSocket?.port ?? probe.grpc?.port;
      if (port !== undefined && !(c.ports || []).some((p) =>
        typeof port === "number" ? p.containerPort === port : p.name === port)) {
        report(cw, `${probeName} uses port ${JSON.stringify(port)}, which the container does not expose`);
      }
    }
    for (const m of c.volumeMounts || []) {
      if (!volumeNames.has(m.name) && !claimNames.has(m.name)) {
        report(cw, `volumeMount ${m.name} names no volume of the pod (nor a volumeClaimTemplate)`);
      }
    }
  }
  pods.push({ where, namespace: obj.metadata?.namespace, labels, spec: tpl.spec });
}

// LOCO_* settings that name a file the program reads at start.
const isFileSetting = (name) => /^LOCO_.*(_FILE|_CERT|_KEY|_CA)$/.test(name);

// The file settings a container sees: from the ConfigMaps it takes whole
// (envFrom) and its own env (which wins), plain values only.
function fileSettings(c, configMaps) {
  const out = new Map();
  for (const from of c.envFrom || []) {
    const data = configMaps.get(from.configMapRef?.name)?.data || {};
    for (const [k, v] of Object.entries(data)) if (isFileSetting(k)) out.set(k, String(v));
  }
  for (const e of c.env || []) {
    if (isFileSetting(e.name) && typeof e.value === "string") out.set(e.name, e.value);
    if (isFileSetting(e.name) && e.value === undefined) out.delete(e.name);
  }
  return out;
}

// Every file a LOCO_* setting names must be in a volume the container
// mounts; in a Secret or ConfigMap volume that lists `items`, one of them
// (otherwise the pod starts and the program exits on the missing file).
function checkFileSettings(obj, where, configMaps) {
  const tpl = podTemplate(obj);
  if (!tpl) return;
  const volumes = new Map((tpl.spec?.volumes || []).map((v) => [v.name, v]));
  for (const c of containersOf(tpl.spec)) {
    for (const [name, file] of fileSettings(c, configMaps)) {
      if (file === "") continue;
      const mount = (c.volumeMounts || []).find((m) =>
        file.startsWith(m.mountPath.replace(/\/$/, "") + "/"));
      const at = `${where} container ${c.name}: ${name}=${file}`;
      if (!mount) {
        report(at, "is in no volume the container mounts");
        continue;
      }
      const v = volumes.get(mount.name);
      const items = (v?.secret ?? v?.configMap)?.items;
      const rel = file.slice(mount.mountPath.replace(/\/$/, "").length + 1);
      if (items && !items.some((i) => i.path === rel)) {
        report(at, `is not among the items of volume ${mount.name} (${items.map((i) => i.path).join(", ")})`);
      }
    }
  }
}

function selectedPods(pods, namespace, test) {
  return pods.filter((p) => (p.namespace ?? null) === (namespace ?? null) && test(p.labels));
}

function checkService(obj, where, pods) {
  const sel = obj.spec?.selector;
  if (!sel || Object.keys(sel).length === 0) return;  // externally managed endpoints
  const chosen = selectedPods(pods, obj.metadata?.namespace, (l) => matches(sel, l));
  if (chosen.length === 0) {
    report(where, `selector ${JSON.stringify(sel)} matches no pod template`);
    return;
  }
  for (const p of obj.spec?.ports || []) {
    const target = p.targetPort ?? p.port;
    if (!chosen.some((pod) => exposes(pod.spec, target))) {
      report(where, `port ${p.name ?? p.port} targets ${JSON.stringify(target)}, which no selected container exposes`);
    }
  }
}

function checkPodMonitor(obj, where, pods) {
  const sel = obj.spec?.selector;
  const chosen = selectedPods(pods, obj.metadata?.namespace, (l) => labelSelectorMatches(sel, l));
  if (chosen.length === 0) {
    report(where, `selector ${JSON.stringify(sel)} matches no pod template`);
    return;
  }
  for (const ep of obj.spec?.podMetricsEndpoints || []) {
    if (ep.port !== undefined && !chosen.some((pod) => exposes(pod.spec, ep.port))) {
      report(where, `podMetricsEndpoint port ${JSON.stringify(ep.port)} is exposed by no selected container`);
    }
  }
}

function checkDisruptionBudget(obj, where, pods) {
  const sel = obj.spec?.selector;
  if (selectedPods(pods, obj.metadata?.namespace, (l) => labelSelectorMatches(sel, l)).length === 0) {
    report(where, `selector ${JSON.stringify(sel)} matches no pod template: the budget guards nothing`);
  }
}

function checkShardCount(objects) {
  const cm = objects.find((o) => o.obj.kind === "ConfigMap" && o.obj.metadata?.name === "loco-config");
  const sts = objects.find((o) => o.obj.kind === "StatefulSet" && o.obj.metadata?.name === "loco-server");
  if (!cm || !sts) return;
  const n = cm.obj.data?.LOCO_NUM_SERVERS;
  const replicas = sts.obj.spec?.replicas ?? 1;
  if (n === undefined || Number(n) !== replicas) {
    report(sts.where, `replicas ${replicas} differs from LOCO_NUM_SERVERS ${JSON.stringify(n)} in ConfigMap loco-config (one shard per server pod)`);
  }
}

// ------------------------------------------------------------ main
function main(files) {
  if (files.length === 0) {
    console.error("usage: node validate.js MANIFEST.yaml...");
    return 2;
  }
  const objects = [];
  for (const file of files) {
    let text;
    try { text = fs.readFileSync(file, "utf8"); } catch (e) {
      console.error(`validate: cannot read ${file}: ${e.message}`);
      return 2;
    }
    YAML.parseAllDocuments(text).forEach((doc, i) => {
      if (doc.errors.length) { report(`${file} document ${i + 1}`, `YAML: ${doc.errors[0].message}`); return; }
      const obj = doc.toJS();
      if (obj === null || obj === undefined) return;
      const where = `${path.basename(file)}: ${obj.kind ?? "?"}/${obj.metadata?.name ?? "?"}`;
      if (typeof obj !== "object" || !obj.apiVersion || !obj.kind) {
        report(where, "not a Kubernetes object (apiVersion and kind are required)");
        return;
      }
      objects.push({ obj, where });
    });
  }
  const pods = [];
  for (const { obj, where } of objects) {
    checkSchema(obj, where);
    checkWorkload(obj, where, pods);
  }
  for (const { obj, where } of objects) {
    if (obj.kind === "Service") checkService(obj, where, pods);
    if (obj.kind === "PodMonitor") checkPodMonitor(obj, where, pods);
    if (obj.kind === "PodDisruptionBudget") checkDisruptionBudget(obj, where, pods);
  }
  const configMaps = new Map(objects.filter((o) => o.obj.kind === "ConfigMap")
    .map((o) => [o.obj.metadata?.name, o.obj]));
  for (const { obj, where } of objects) checkFileSettings(obj, where, configMaps);
  checkShardCount(objects);
  checkNetworkPolicies(objects, pods, { report, labelSelectorMatches, containersOf });
  for (const p of problems) console.log(p);
  console.error(`validate: ${objects.length} objects, ${problems.length} problems`);
  return problems.length === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
