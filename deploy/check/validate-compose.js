#!/usr/bin/env node
// Checks deploy/compose.yaml offline, without a container engine:
// node validate-compose.js COMPOSE.yaml. Exit 0 when clean, 1 with one line
// per problem. What it checks: the file parses (anchors and merge keys
// resolved); every service has an image or a build; depends_on names
// services that exist; named volumes are declared; bind-mounted files exist
// next to the compose file; the LoCo-PS servers have distinct shard ids
// 0..N-1 where N is every service's LOCO_NUM_SERVERS; the Prometheus
// configuration it mounts scrapes only services that exist; while a LoCo-PS
// service runs plaintext (LOCO_INSECURE), every published port is bound to
// the host's loopback (on another address anyone who reaches the host could
// join, register a server or read the metrics).
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const file = process.argv[2];
if (!file) { console.error("usage: node validate-compose.js compose.yaml"); process.exit(2); }
const dir = path.dirname(path.resolve(file));
const problems = [];
const report = (msg) => problems.push(`${path.basename(file)}: ${msg}`);

const doc = YAML.parseDocument(fs.readFileSync(file, "utf8"), { merge: true });
if (doc.errors.length) { console.log(`${file}: YAML: ${doc.errors[0].message}`); process.exit(1); }
const compose = doc.toJS({ maxAliasCount: 1000 });
const services = compose.services || {};
const names = new Set(Object.keys(services));
const volumes = new Set(Object.keys(compose.volumes || {}));
if (names.size === 0) report("no services");

const envOf = (s) => Array.isArray(s.environment)
  ? Object.fromEntries(s.environment.map((e) => [e.split("=")[0], e.split("=").slice(1).join("=")]))
  : (s.environment || {});
const commandOf = (s) => (Array.isArray(s.command) ? s.command : String(s.command || "").split(/\s+/));

// [host address or "", published port] of each `ports:` entry, short or long syntax.
const publishedPorts = (s) => (s.ports || []).map((p) => {
  if (typeof p === "object") return [p.host_ip || "", String(p.published ?? p.target)];
  const parts = String(p).split("/")[0].match(/^(?:(\[[^\]]*\]|[^:]*):)?(?:([^:]*):)?([^:]+)$/);
  if (!parts) return ["", String(p)];
  // "P", "H:C", "IP:H:C": with two parts the first is the host port, not an address.
  return parts[2] !== undefined ? [parts[1] || "", parts[2] || parts[3]] : ["", parts[1] ?? parts[3]];
});
const isLoopback = (ip) => /^127\./.test(ip) || ip === "::1" || ip === "[::1]" || ip === "localhost";

const shards = [];
const numServers = new Set();
let plaintext = false;
for (const [name, s] of Object.entries(services)) {
  if (!s.image && !s.build) report(`service ${name} has neither image nor build`);
  const deps = Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on || {});
  for (const d of deps) if (!names.has(d)) report(`service ${name} depends on '${d}', which is not a service`);
  for (const v of s.volumes || []) {
    const source = typeof v === "string" ? v.split(":")[0] : v.source;
    if (!source) continue;
    if (source.startsWith(".") || source.startsWith("/")) {
      if (!fs.existsSync(path.resolve(dir, source))) report(`service ${name} mounts ${source}, which does not exist`);
    } else if (!volumes.has(source)) {
      report(`service ${name} mounts volume '${source}', which is not declared under volumes:`);
    }
  }
  const cmd = commandOf(s);
  const env = envOf(s);
  if (cmd.some((c) => /^loco-(server|coordinator|worker)$/.test(c)) && env.LOCO_NUM_SERVERS !== undefined) {
    numServers.add(String(env.LOCO_NUM_SERVERS));
  }
  if (cmd.some((c) => /^loco-/.test(c)) && String(env.LOCO_INSECURE).toLowerCase() === "true") {
    plaintext = true;
  }
  if (cmd.includes("loco-server")) {
    const flag = cmd.find((c) => c.startsWith("--shard-id="));
    shards.push({ name, id: flag ? Number(flag.split("=")[1]) : Number(env.LOCO_SHARD_ID ?? 0) });
  }
}
if (numServers.size > 1) report(`services disagree on LOCO_NUM_SERVERS: ${[...numServers].join(", ")}`);
if (shards.length) {
  const n = numServers.size === 1 ? Number([...numServers][0]) : shards.length;
  const ids = shards.map((s) => s.id).sort((a, b) => a - b);
  const want = Array.from({ length: n }, (_, i) => i);
  if (JSON.stringify(ids) !== JSON.stringify(want)) {
    report(`server shard ids ${JSON.stringify(ids)} are not 0..${n - 1} (LOCO_NUM_SERVERS ${n}, one server per shard)`);
  }
}
if (plaintext) {
  for (const [name, s] of Object.entries(services)) {
    for (const [ip, port] of publishedPorts(s)) {
      if (isLoopback(ip)) continue;
      report(`service ${name} publishes port ${port} on ${ip || "every address of the host"} while ` +
             "the LoCo-PS services run plaintext (LOCO_INSECURE): bind it to the loopback " +
             `("127.0.0.1:${port}:..."), or turn on TLS and role tokens first`);
    }
  }
}
// The Prometheus configuration mounted into the prometheus service.
for (const s of Object.values(services)) {
  for (const v of s.volumes || []) {
    const [source, target] = typeof v === "string" ? v.split(":") : [v.source, v.target];
    if (!target || !target.endsWith("/prometheus.yml") || !fs.existsSync(path.resolve(dir, source))) continue;
    const prom = YAML.parse(fs.readFileSync(path.resolve(dir, source), "utf8"));
    for (const job of prom.scrape_configs || []) {
      const hosts = [
        ...(job.static_configs || []).flatMap((c) => c.targets || []).map((t) => t.split(":")[0]),
        ...(job.dns_sd_configs || []).flatMap((c) => c.names || []),
      ];
      for (const h of hosts) if (!names.has(h)) report(`${source}: job ${job.job_name} scrapes '${h}', which is not a service`);
    }
  }
}
for (const p of problems) console.log(p);
console.error(`validate-compose: ${names.size} services, ${problems.length} problems`);
process.exitCode = problems.length === 0 ? 0 : 1;
