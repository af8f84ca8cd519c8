"""The configurations the end-to-end benchmark compares, each one run on a
Topology (netns.py): our parameter server (coordinator + S servers in the
server namespace, W loco-workers in their own namespaces), the PyTorch DDP
peer (ddp_peer.py, W ranks), and the transport probe. Every run is bounded
by a deadline; every process is stopped before a run returns.

A run returns one flat dict (a CSV row): configuration, measured step time,
bytes (the processes' own counters and the veth counters), accuracy, memory
and CPU use. Field meanings are in bench/README.md.
"""
import os
import re
import statistics
import subprocess
import time

from netns import SERVER_IP, worker_ip, sh
from procs import Proc, stop_all, wait_all

COORD_PORT, SERVER_PORT, METRICS_PORT, DDP_PORT = 7000, 7100, 9100, 29500
HERE = os.path.dirname(os.path.abspath(__file__))


def mlp_params(hidden):
    sizes = [784] + hidden + [10]
    return sum(sizes[k] * sizes[k + 1] + sizes[k + 1] for k in range(len(sizes) - 1))


def insecure_flag(binary):
    """['--insecure'] when the binary has that flag (plaintext after TLS)."""
    out = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=10).stdout
    return ["--insecure"] if "--insecure" in out else []


def step_times(proc, warmup):
    """Seconds between consecutive step events of one worker, skipping the
    first `warmup` steps (join, first full pull, allocator warm-up)."""
    ts = [t for t, e in proc.of("step")]
    d = [b - a for a, b in zip(ts, ts[1:])]
    return d[warmup:] if len(d) > warmup else d


def step_phases(proc, warmup):
    """Medians over one worker's steps after the first `warmup`: the time
    inside its Step call ("step_s" of its events), the gradient computation's
    part ("compute_s") and the rest, what the step then waited for (its last
    pushes, the other workers, the servers' step, the pulls)."""
    ev = [e for _, e in proc.of("step")][warmup:]
    ev = [e for e in ev if "compute_s" in e and "step_s" in e]
    if not ev:
        return {"compute_s": None, "exposed_comm_s": None}
    return {"compute_s": round(statistics.median(e["compute_s"] for e in ev), 5),
            "exposed_comm_s": round(statistics.median(e["step_s"] - e["compute_s"] for e in ev),
                                    5)}


def event_medians(proc, warmup, keys):
    """{"event_<key>": median} of the given numeric keys of one worker's
    step events after the first `warmup` (None where no event has one)."""
    ev = [e for _, e in proc.of("step")][warmup:]
    out = {}
    for key in keys:
        vals = [e[key] for e in ev if isinstance(e.get(key), (int, float))]
        out[f"event_{key}"] = round(statistics.median(vals), 5) if vals else None
    return out


def scrape(ns, port):
    """Prometheus text of a process's /metrics, read from inside its namespace."""
    return sh("ip", "netns", "exec", ns, "curl", "-s", "--max-time", "5",
              f"http://127.0.0.1:{port}/metrics", check=False, timeout=15)


def metric_value(text, name):
    total, found = 0.0, False
    for m in re.finditer(r"^" + re.escape(name) + r"(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", text,
                         re.M):
        total += float(m.group(1))
        found = True
    return total if found else None


def _usage(procs):
    rss, cpu = [], 0.0
    for p in procs:
        u = p.usage()
        if u:
            rss.append(u[0])
            cpu += u[2]
    return rss, cpu


def _busy(cpu_s, wall_s):
    """CPU seconds of every process of a run / (the workers' wall time x
    the machine's cores): near 1.0, the run was CPU-bound on this machine
    (startup and data loading included in both)."""
    return round(cpu_s / (wall_s * (os.cpu_count() or 1)), 3) if wall_s else None


def _window(proc, warmup):
    """(t0, t1, steps, first event, last event): the steady-state window of
    one worker, from its step event `warmup` to its last one."""
    ev = proc.of("step")
    if len(ev) < 2:
        return None
    k = min(warmup, len(ev) - 2)
    return ev[k][0], ev[-1][0], len(ev) - 1 - k, ev[k][1], ev[-1][1]


def _lerp(a, b, f):
    """a + f (b - a), element by element through nested lists."""
    if isinstance(a, list):
        return [_lerp(x, y, f) for x, y in zip(a, b)]
    return a + f * (b - a)


def _sampled_at(samples, t):
    """[(time, counters)] interpolated linearly at t (the nearest sample
    when t is outside them)."""
    for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
        if ta <= t <= tb:
            return _lerp(ca, cb, (t - ta) / (tb - ta) if tb > ta else 0.0)
    return min(samples, key=lambda s: abs(s[0] - t))[1]


def _server_cpu_fields(sampler, window):
    """CPU seconds (user + system, every thread) per step of the busiest
    server in the steady window, from the sampler's "cpu" readings of the
    server processes: what loco-plan predicts as the largest shard's
    server CPU per step."""
    samples = [(t, e["cpu"]) for t, e in sampler.events if e.get("cpu")]
    if not window or len(samples) < 2 or window[2] <= 0:
        return {"server_cpu_s_per_step": None}
    t0, t1, n, _, _ = window
    a, b = _sampled_at(samples, t0), _sampled_at(samples, t1)
    return {"server_cpu_s_per_step": round(max(y - x for x, y in zip(a, b)) / n, 5)}


def _link_fields(topo, sampler, window, before, after, steps, step_s):
    """Bytes per step on the links, measured by the kernel: in the steady
    window (from the server-side counter samples nearest its ends; worker
    upload = server-side rx), and over the whole run (join, initial copy and
    final evaluation included)."""
    out = {}
    tx = [after[i][0] - before[i][0] for i in range(topo.workers)]
    rx = [after[i][1] - before[i][1] for i in range(topo.workers)]
    out["veth_total_up_bytes_per_step"] = round(statistics.mean(tx) / steps)
    out["veth_total_down_bytes_per_step"] = round(statistics.mean(rx) / steps)
    samples = [(t, e["c"]) for t, e in sampler.events if "c" in e]
    up = down = None
    if window and len(samples) >= 2:
        t0, t1, n, _, _ = window
        a, b = _sampled_at(samples, t0), _sampled_at(samples, t1)
        if n > 0:
            up = statistics.mean(b[i][0] - a[i][0] for i in range(topo.workers)) / n
            down = statistics.mean(b[i][1] - a[i][1] for i in range(topo.workers)) / n
    out["veth_up_bytes_per_step"] = round(up) if up is not None else None
    out["veth_down_bytes_per_step"] = round(down) if down is not None else None
    rate_bytes = topo.rate * 1e6 / 8 if topo.rate else None
    # The share of a step the busier direction of a link must be busy:
    # 1.0 = link-bound; the rest of the step is computation or waiting.
    out["link_busy_share"] = (round(max(up, down) / rate_bytes / step_s, 3)
                              if up is not None and rate_bytes and step_s else None)
    return out


def _accuracy_fields(evals, target, step_s):
    """Final accuracy and steps/time to the target accuracy. Evaluation time
    is not in the measured step time: time to target = steps x median step."""
    accs = sorted((e["step"], e["test_accuracy"]) for e in evals if "test_accuracy" in e)
    out = {"final_accuracy": round(accs[-1][1], 4) if accs else None,
           "steps_to_target": None, "time_to_target_s": None}
    for s, a in accs:
        if a >= target:
            out["steps_to_target"] = s
            out["time_to_target_s"] = round(s * step_s, 2) if step_s else None
            break
    return out


def _when_training(proc, deadline, start):
    """Calls start() once `proc` has printed 3 step events (steady training),
    or not at all if it exits or the deadline passes first; bounded polling."""
    while time.monotonic() < deadline and proc.alive():
        if len(proc.of("step")) >= 3:
            start()
            return
        time.sleep(0.05)


def loco_worker_argv(bins, i, cfg, insecure):
    """The argv of loco-worker i of a run_ps cluster. --bits and --block-size
    go with a block codec only: loco-worker refuses them beside fp32 or bf16,
    which would ignore them."""
    quant = ([] if cfg["codec"] in ("fp32", "bf16")
             else ["--bits", cfg["bits"], "--block-size", cfg["block"]])
    return [bins["loco-worker"], "--coordinator", f"{SERVER_IP}:{COORD_PORT}",
            "--name", f"w{i}", "--codec", cfg["codec"]] + quant + [
            "--hidden", ",".join(map(str, cfg["hidden"])), "--steps", cfg["steps"],
            "--global-batch", cfg["batch"], "--seed", 1, "--wait-for-workers", cfg["workers"],
            "--blas-threads", 1, "--eval", "rank0" if cfg["eval_every"] else "none",
            "--eval-every", cfg["eval_every"] or 0] + insecure + cfg.get("worker_args", [])


def run_ps(topo, bins, log_dir, cfg, limit_s, on_training=None, worker=None):
    """cfg: name, codec, bits, pull, hidden (list), servers, steps, batch,
    lr, eval_every, target, warmup, metrics (scrape servers); optionally
    system (the row's, "loco-ps" by default).

    worker(i, cfg, insecure) -> (argv, env) starts worker i in place of
    loco-worker (loco_worker_argv): any program that joins the cluster and
    prints loco-worker's step events (cumulative traffic counters, step_s,
    compute_s) is measured the same way. insecure is ["--insecure"] or []:
    whether the cluster listens in plaintext."""
    W, S = topo.workers, cfg["servers"]
    n = mlp_params(cfg["hidden"])
    deadline = time.monotonic() + limit_s
    procs, servers = [], []
    ins_c, ins_s, ins_w = (insecure_flag(bins[b]) for b in
                           ("loco-coordinator", "loco-server", "loco-worker"))
    tag = cfg["name"]
    try:
        coord = Proc(f"{tag}-coordinator", topo.server_ns,
                     [bins["loco-coordinator"], "--host", "0.0.0.0", "--port", COORD_PORT,
                      "--num-servers", S, "--heartbeat-timeout-ms", 30000] + ins_c,
                     log_dir, limit_s)
        procs.append(coord)
        for k in range(S):
            servers.append(Proc(
                f"{tag}-server{k}", topo.server_ns,
                [bins["loco-server"], "--host", "0.0.0.0", "--port", SERVER_PORT + k,
                 "--shard-id", k, "--num-servers", S,
                 "--coordinator", f"127.0.0.1:{COORD_PORT}",
                 "--advertise-address", f"{SERVER_IP}:{SERVER_PORT + k}",
                 "--pull-codec", cfg["pull"], "--lr", cfg["lr"],
                 "--metrics-host", "127.0.0.1", "--metrics-port", METRICS_PORT + k] + ins_s
                + cfg.get("server_args", []),
                log_dir, limit_s))
        procs += servers
        sampler = Proc(f"{tag}-counters", topo.server_ns,
                       topo.sampler_argv(0.05, [s.p.pid for s in servers]), log_dir, limit_s)
        procs.append(sampler)
        before = topo.counters()
        workers = []
        wcfg = dict(cfg, workers=W)
        for i in range(W):
            if worker:
                argv, env = worker(i, wcfg, ins_w)
            else:
                argv, env = loco_worker_argv(bins, i, wcfg, ins_w), None
            workers.append(Proc(f"{tag}-worker{i}", topo.worker_ns(i), argv, log_dir, limit_s,
                                env=env))
        procs += workers
        if on_training:
            _when_training(workers[0], deadline, on_training)
        results, in_time = wait_all(workers, deadline)
        after = topo.counters()
        metrics = [scrape(topo.server_ns, METRICS_PORT + k) for k in range(S)]
    finally:
        stop_all(procs)
    failed = [f"{name} exit {rc}" for name, rc in results if rc != 0]
    if failed or not in_time:
        detail = "\n".join(f"--- {p.name}\n{p.tail()}" for p in procs if p.p.returncode)
        raise RuntimeError(f"{tag}: {', '.join(failed) or 'timed out'}\n{detail}")

    d = step_times(workers[0], cfg["warmup"])
    step_s = statistics.median(d) if d else None
    phases = step_phases(workers[0], cfg["warmup"])
    steps = cfg["steps"]
    win = _window(workers[0], cfg["warmup"])
    if not win:
        raise RuntimeError(f"{tag}: worker 0 reported fewer than 2 steps")
    _, _, nwin, first, last = win

    def per_step(key):  # the workers' own cumulative counters, steady window
        return (last[key] - first[key]) / nwin
    push, push32 = per_step("push_wire_bytes"), per_step("push_fp32_bytes")
    pull, pull32 = per_step("pull_wire_bytes"), per_step("pull_fp32_bytes")
    w_rss, w_cpu = _usage(workers)
    s_rss, s_cpu = _usage(servers + [coord])
    wall = max(u[1] for u in (w.usage() for w in workers) if u) if all(
        w.usage() for w in workers) else None
    row = {"config": tag, "system": cfg.get("system", "loco-ps"), "codec": cfg["codec"],
           "bits": cfg["bits"], "block": cfg["block"], "pull": cfg["pull"], "params": n,
           "batch": cfg["batch"],
           "workers": W, "servers": S,
           "link_mbit": topo.rate, "steps": steps, "step_s": round(step_s, 5) if step_s else None,
           "step_s_p90": round(sorted(d)[int(0.9 * (len(d) - 1))], 5) if d else None,
           "push_bytes_per_step": round(push), "push_fp32_bytes_per_step": round(push32),
           "pull_bytes_per_step": round(pull), "pull_fp32_bytes_per_step": round(pull32),
           "worker_peak_rss_mb": round(max(w_rss) / 2**20, 1) if w_rss else None,
           "server_peak_rss_mb": round(max(u[0] for s in servers if (u := s.usage())) / 2**20, 1)
           if all(s.usage() for s in servers) else None,
           "cpu_s": round(w_cpu + s_cpu, 1), "wall_s": round(wall, 1) if wall else None}
    row["cpu_busy_share"] = _busy(w_cpu + s_cpu, wall)
    row.update(phases)
    row.update(event_medians(workers[0], cfg["warmup"], cfg.get("event_medians", ())))
    row.update(_link_fields(topo, sampler, win, before, after, steps, step_s))
    row.update(_server_cpu_fields(sampler, win))
    row.update(_accuracy_fields([e for w in workers for _, e in w.of("eval")], cfg["target"],
                                step_s))
    apply_sum = [metric_value(m, "loco_server_decode_aggregate_seconds_sum") or 0.0
                 for m in metrics]
    opt_sum = [metric_value(m, "loco_server_optimizer_seconds_sum") or 0.0 for m in metrics]
    completed = [metric_value(m, "loco_server_steps_completed_total") or 0.0 for m in metrics]
    if all(c > 0 for c in completed):
        # Server compute per step: decode+average plus AdamW, of the slowest shard.
        row["server_compute_s"] = round(max((a + o) / c for a, o, c in
                                            zip(apply_sum, opt_sum, completed)), 5)
    # Each server's resident memory once training is over (its steady
    # state; the peak above also holds start-up), from its own /metrics.
    end_rss = [metric_value(m, "process_resident_memory_bytes") for m in metrics]
    if end_rss and all(r is not None for r in end_rss):
        row["server_end_rss_mb"] = round(max(end_rss) / 2**20, 1)
        # The same server's heap: what it still holds, and what the
        # allocator keeps free for reuse (the rest of the RSS is code,
        # libraries and thread stacks).
        worst = end_rss.index(max(end_rss))
        for key, name in (("server_end_heap_in_use_mb", "loco_process_heap_in_use_bytes"),
                          ("server_end_heap_free_mb", "loco_process_heap_free_bytes")):
            value = metric_value(metrics[worst], name)
            if value is not None:
                row[key] = round(value / 2**20, 1)
    return row


def run_ddp(topo, log_dir, cfg, limit_s, blas_dir):
    """The PyTorch DDP peer: W ranks, one per worker namespace."""
    W = topo.workers
    n = mlp_params(cfg["hidden"])
    deadline = time.monotonic() + limit_s
    env = {"LD_LIBRARY_PATH": blas_dir} if blas_dir else {}
    procs = []
    tag = cfg["name"]
    try:
        sampler = Proc(f"{tag}-counters", topo.server_ns, topo.sampler_argv(0.05), log_dir,
                       limit_s)
        procs.append(sampler)
        before = topo.counters()
        for i in range(W):
            e = dict(env, GLOO_SOCKET_IFNAME=topo.worker_dev(i))
            procs.append(Proc(
                f"{tag}-rank{i}", topo.worker_ns(i),
                ["/usr/bin/python3", os.path.join(HERE, "ddp_peer.py"), "--rank", i, "--world", W,
                 "--master", f"{worker_ip(0)}:{DDP_PORT}",
                 "--hidden", ",".join(map(str, cfg["hidden"])), "--steps", cfg["steps"],
                 "--global-batch", cfg["batch"], "--lr", cfg["lr"], "--hook", cfg["hook"],
                 "--eval-every", cfg["eval_every"] or 0,
                 "--eval", "rank0" if cfg["eval_every"] else "none",
                 "--timeout-s", int(limit_s)],
                log_dir, limit_s, env=e))
        ranks = procs[1:]
        results, in_time = wait_all(ranks, deadline)
        after = topo.counters()
    finally:
        stop_all(procs)
    failed = [f"{name} exit {rc}" for name, rc in results if rc != 0]
    if failed or not in_time:
        detail = "\n".join(f"--- {p.name}\n{p.tail()}" for p in ranks)
        raise RuntimeError(f"{tag}: {', '.join(failed) or 'timed out'}\n{detail}")
    d = step_times(ranks[0], cfg["warmup"])
    step_s = statistics.median(d) if d else None
    comm = ranks[0].of("step")[-1][1]["comm_bytes"]
    rss, cpu = _usage(ranks)
    wall = max(u[1] for p in ranks if (u := p.usage()))
    row = {"config": tag, "system": "ddp-gloo", "codec": cfg["hook"], "bits": None,
           "pull": None, "params": n, "batch": cfg["batch"], "workers": W, "servers": 0,
           "link_mbit": topo.rate,
           "steps": cfg["steps"], "step_s": round(step_s, 5) if step_s else None,
           "step_s_p90": round(sorted(d)[int(0.9 * (len(d) - 1))], 5) if d else None,
           "push_bytes_per_step": comm, "push_fp32_bytes_per_step": 4 * n,
           "pull_bytes_per_step": None, "pull_fp32_bytes_per_step": None,
           "worker_peak_rss_mb": round(max(rss) / 2**20, 1) if rss else None,
           "server_peak_rss_mb": None, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1)}
    row["cpu_busy_share"] = _busy(cpu, wall)
    row.update(_link_fields(topo, sampler, _window(ranks[0], cfg["warmup"]), before, after,
                            cfg["steps"], step_s))
    row.update(_accuracy_fields([e for _, e in ranks[0].of("eval")], cfg["target"], step_s))
    return row


def run_transport(topo, bins, log_dir, elements, pushes, limit_s, servers=1,
                  chunk_bytes=None):
    """The transport probe: one probe process in each of the topology's
    worker namespaces (W = topo.workers), all pushing at once to `servers`
    loco-servers (every shard of the model, one stream each, when more than
    one). Each probe's link use is its own request bytes per median round
    over the link's rate; the row gives the median and the lowest over the
    W links."""
    deadline = time.monotonic() + limit_s
    procs, probes = [], []
    tag = f"transport-{elements}-w{topo.workers}-s{servers}"
    server_insecure = insecure_flag(bins["loco-server"])
    try:
        procs.append(Proc(f"{tag}-coordinator", topo.server_ns,
                          [bins["loco-coordinator"], "--host", "0.0.0.0", "--port", COORD_PORT,
                           "--num-servers", servers, "--heartbeat-timeout-ms", 600000]
                          + insecure_flag(bins["loco-coordinator"]), log_dir, limit_s))
        for k in range(servers):
            procs.append(Proc(f"{tag}-server{k}", topo.server_ns,
                              [bins["loco-server"], "--host", "0.0.0.0", "--port", SERVER_PORT + k,
                               "--shard-id", k, "--coordinator", f"127.0.0.1:{COORD_PORT}",
                               "--advertise-address", f"{SERVER_IP}:{SERVER_PORT + k}"]
                              + server_insecure, log_dir, limit_s))
        for i in range(topo.workers):
            argv = [bins["loco-bench-e2e-transport"], "--coordinator",
                    f"{SERVER_IP}:{COORD_PORT}", "--elements", elements, "--pushes", pushes,
                    "--timeout-ms", int(limit_s * 1000), "--probes", topo.workers,
                    "--seed", i + 1]
            if servers > 1:
                argv.append("--all-shards")
            if chunk_bytes is not None:
                argv += ["--push-chunk-bytes", chunk_bytes]
            probes.append(Proc(f"{tag}-probe{i}", topo.worker_ns(i), argv, log_dir, limit_s))
        procs += probes
        results, in_time = wait_all(probes, deadline)
    finally:
        stop_all(procs)
    events = []
    for probe, (_, code) in zip(probes, results):
        ev = probe.of("transport")
        if not ev or code != 0:
            raise RuntimeError(f"{tag}: {probe.name} failed (exit {code})\n{probe.tail()}")
        events.append(ev[-1][1])
    return transport_row(events, topo.rate, topo.workers, servers)


def transport_row(events, link_mbit, workers, servers):
    """One transport.csv row from the probes' events (pure; transport_test.py)."""
    rate = link_mbit * 1e6 / 8
    fractions = sorted(e["bytes_per_s"] / rate for e in events)
    mid = sorted(events, key=lambda e: e["bytes_per_s"])[len(events) // 2]
    return {"elements": mid["elements"], "workers": workers, "servers": servers,
            "request_bytes": mid["request_bytes"], "link_mbit": link_mbit,
            "pushes": mid["pushes"], "median_s": mid["median_s"], "min_s": mid["min_s"],
            "mbit_per_s": round(mid["bytes_per_s"] * 8 / 1e6, 1),
            "fraction_of_link": round(fractions[len(fractions) // 2], 3),
            "lowest_fraction": round(fractions[0], 3)}
