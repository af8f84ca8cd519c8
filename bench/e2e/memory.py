"""The measured run's memory against its bounds (the summary's
"Memory against the bounds"): a server's peak RSS against 16 B per shard
parameter plus the payloads it holds, its growth per shard parameter
between the two model sizes, and a LoCo worker's state beyond the model.
Pure: rows in (runs.run_ps's), markdown lines out.

The payloads a server holds are the step's pushes (one per worker, its
shard's part) and its answer to the pulls: the shard's new parameters,
encoded once per step and served to every worker (bf16 for the loco4-bf16
rows judged here, 2 B per parameter). Each line gives both parts, so the
push-only reading can be read off it too.
"""
import report


def answer_bytes(row):
    """Bytes of one worker's pull of the whole model per step (0 when the row
    has none): the answers the servers hold, together, for that step."""
    return row.get("pull_bytes_per_step") or 0


def bound_lines(rows, batch):
    """Server: <= 16 B per shard parameter + held payloads; worker: LoCo state
    <= 1.1 B/param beyond the model, measured as the LoCo worker's peak RSS
    minus the fp32 worker's in the same group. `batch`: the global batch of
    the rows whose slope between model sizes is judged."""
    out = []
    groups = {}
    for r in rows:
        groups.setdefault((r["params"], r["link_mbit"], r["batch"]), {})[r["config"]] = r
    for (n, link, _), g in sorted(groups.items()):
        loco, fp32 = g.get("loco4-bf16"), g.get("fp32-ps")
        if not loco or not fp32:
            continue
        shard = n / loco["servers"]
        pushes = loco["workers"] * loco["push_bytes_per_step"] / loco["servers"]
        answer = answer_bytes(loco) / loco["servers"]
        held = pushes + answer
        bound = (16 * shard + held) / 2**20
        extra = (loco["worker_peak_rss_mb"] - fp32["worker_peak_rss_mb"]) * 2**20 / n
        out.append(f"- {report._params(n)} params @ {link} Mbit/s: server peak RSS "
                   f"{loco['server_peak_rss_mb']} MB vs bound {bound:.1f} MB (16 B x "
                   f"{shard / 1e6:.2f}M shard params + {pushes / 1e6:.2f} MB pushes + "
                   f"{answer / 1e6:.2f} MB answer held; the RSS "
                   f"also holds the process's code, libraries and threads, which no bound per "
                   f"parameter can hold) → "
                   f"{'met' if loco['server_peak_rss_mb'] <= bound else 'MISSED'}; worker: "
                   f"LoCo-4 minus fp32 peak RSS = {extra:.2f} B/param (bound 1.1; the fp32 "
                   f"worker's larger message buffers make this an underestimate) → "
                   f"{'met' if extra <= 1.1 else 'MISSED'}")
        if loco.get("server_end_rss_mb"):
            line = (f"  - the same server after training (its /metrics, "
                    f"process_resident_memory_bytes): {loco['server_end_rss_mb']} MB")
            if loco.get("server_end_heap_in_use_mb") is not None:
                line += (f", of which heap in use {loco['server_end_heap_in_use_mb']} MB "
                         f"and heap kept free by the allocator "
                         f"{loco.get('server_end_heap_free_mb')} MB")
            out.append(line)
    out += slope_lines(rows, batch)
    return out


def slope_lines(rows, batch):
    """The server's peak RSS per shard parameter between the two model sizes
    on one link: the slope the bound's 16 B/param + held payloads speaks of,
    without the process's fixed part (code, libraries, threads)."""
    out = []
    by_link = {}
    for r in rows:
        if (r["config"] == "loco4-bf16" and r.get("server_peak_rss_mb")
                and r["batch"] == batch):
            by_link.setdefault(r["link_mbit"], []).append(r)
    for link, rs in sorted(by_link.items()):
        if len(rs) < 2:
            continue
        small, large = min(rs, key=lambda r: r["params"]), max(rs, key=lambda r: r["params"])
        shard_s, shard_l = small["params"] / small["servers"], large["params"] / large["servers"]
        if shard_l <= shard_s:
            continue
        slope = ((large["server_peak_rss_mb"] - small["server_peak_rss_mb"]) * 2**20
                 / (shard_l - shard_s))
        pushes = large["workers"] * large["push_bytes_per_step"] / large["params"]
        answer = answer_bytes(large) / large["params"]
        held = pushes + answer
        fixed = large["server_peak_rss_mb"] - slope * shard_l / 2**20
        out.append(f"- per shard parameter, {report._params(small['params'])} → "
                   f"{report._params(large['params'])} params @ {link} Mbit/s: server peak RSS "
                   f"grows {slope:.2f} B/param vs the bound's 16 + {pushes:.2f} (pushes held) + "
                   f"{answer:.2f} (answer held) = {16 + held:.2f} B/param → "
                   f"{'met' if slope <= 16 + held else 'MISSED'}; the fixed part is {fixed:.0f} MB")
    return out
