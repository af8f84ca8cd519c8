"""CSV, Markdown and gnuplot output of the end-to-end benchmark."""
import csv
import os
import shutil
import subprocess


def write_csv(path, rows):
    if not rows:
        return
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def _fmt(x, nd=3):
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}g}" if abs(x) < 1000 else f"{x:.0f}"
    return str(x)


def _params(n):
    return f"{n / 1e6:.2f}M" if n < 10**6 else f"{n / 1e6:.1f}M"


def _mb(b):
    return "–" if b is None else f"{b / 1e6:.2f}"


def steps_table(rows):
    out = ["| model params | link | batch | config | step s (median) | "
           "compute / exposed comm s | link busy | CPU busy | "
           "push MB/step (counter) | up/down MB/step (veth) | final acc | steps→target | "
           "time→target s | worker RSS MB | server RSS MB | CPU s |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
           "| --- | --- |"]
    for r in rows:
        phases = (f"{_fmt(r.get('compute_s'))} / {_fmt(r.get('exposed_comm_s'))}"
                  if r.get("compute_s") is not None else "–")
        out.append(
            f"| {_params(r['params'])} | {r['link_mbit']} Mbit/s | {r.get('batch', '–')} | "
            f"{r['config']} | {_fmt(r['step_s'])} | {phases} | {_fmt(r.get('link_busy_share'))} | "
            f"{_fmt(r.get('cpu_busy_share'))} | "
            f"{_mb(r['push_bytes_per_step'])} | {_mb(r['veth_up_bytes_per_step'])} / "
            f"{_mb(r['veth_down_bytes_per_step'])} | {_fmt(r.get('final_accuracy'))} | "
            f"{_fmt(r.get('steps_to_target'))} | {_fmt(r.get('time_to_target_s'))} | "
            f"{_fmt(r['worker_peak_rss_mb'])} | {_fmt(r.get('server_peak_rss_mb'))} | "
            f"{_fmt(r['cpu_s'])} |")
    return "\n".join(out)


def ratios(rows, cores):
    """Per (model, link, global batch): the ratios the design asks for, from
    one run. The ratio columns take LoCo-4 with the bf16 return, or the
    delta return where a group has no bf16 row."""
    groups = {}
    for r in rows:
        key = (r["params"], r["link_mbit"], r.get("batch") or 0)
        groups.setdefault(key, {})[r["config"].split("@")[0]] = r
    out = ["| model params | link | batch | LoCo-4 step / fp32 PS | DDP fp32 step / LoCo-4 | "
           "DDP fp16 / LoCo-4 | PowerSGD / LoCo-4 | LoCo-4 push / fp32 (counters) | "
           "LoCo-4 up / fp32 up (veth) | CPU busy share |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = []
    for (n, link, batch), g in sorted(groups.items()):
        loco, fp32 = g.get("loco4-bf16") or g.get("loco4-delta"), g.get("fp32-ps")

        def div(a, b, key="step_s"):
            if not a or not b or not a.get(key) or not b.get(key):
                return None
            return a[key] / b[key]
        r_fp32 = div(loco, fp32)
        r_ddp = div(g.get("ddp-fp32"), loco)
        r_bytes = (loco["push_bytes_per_step"] / loco["push_fp32_bytes_per_step"]
                   if loco else None)
        r_veth = div(loco, fp32, "veth_up_bytes_per_step")
        busy = loco.get("cpu_busy_share") if loco else None
        out.append(f"| {_params(n)} | {link} Mbit/s | {batch or '–'} | {_fmt(r_fp32)} | "
                   f"{_fmt(r_ddp)} | "
                   f"{_fmt(div(g.get('ddp-fp16'), loco))} | "
                   f"{_fmt(div(g.get('ddp-powersgd'), loco))} | {_fmt(r_bytes)} | "
                   f"{_fmt(r_veth)} | {_fmt(busy)} |")
        if link == 1000 and n >= 10_000_000:
            def v(ok):
                return "–" if ok is None else ("met" if ok else "MISSED")
            # One line per LoCo-4 variant that ran: the return codec and the
            # block size change the step time and the bytes.
            for variant in ("loco4-bf16", "loco4-delta", "loco4-delta-b128", "loco4-delta-pull4"):
                lv = g.get(variant)
                if not lv:
                    continue
                rv_fp32 = div(lv, fp32)
                rv_ddp = div(g.get("ddp-fp32"), lv)
                rv_bytes = lv["push_bytes_per_step"] / lv["push_fp32_bytes_per_step"]
                verdicts.append(
                    f"- {n / 1e6:.1f}M params, 1 Gbit/s, W={lv['workers']}, global batch "
                    f"{batch}, {variant}: "
                    f"LoCo-4 step ≤ 0.2× fp32 PS: {_fmt(rv_fp32)} → "
                    f"{v(None if rv_fp32 is None else rv_fp32 <= 0.2)}; "
                    f"≥ 3× faster than DDP/gloo fp32: {_fmt(rv_ddp)} → "
                    f"{v(None if rv_ddp is None else rv_ddp >= 3)}; "
                    f"gradient wire bytes ≤ 0.13× fp32: {_fmt(rv_bytes)} → "
                    f"{v(rv_bytes <= 0.13)}")
    return "\n".join(out), verdicts


def transport_table(rows):
    out = ["| payload elements | W | S | request MB per link | link | median s | Mbit/s "
           "| fraction of link (median link) | lowest link |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['elements']} | {r.get('workers', 1)} | {r.get('servers', 1)} "
                   f"| {r['request_bytes'] / 1e6:.2f} | {r['link_mbit']} Mbit/s "
                   f"| {_fmt(r['median_s'])} | {r['mbit_per_s']} | {r['fraction_of_link']} "
                   f"| {r.get('lowest_fraction', r['fraction_of_link'])} |")
    return "\n".join(out)


def plot(results_dir, rows):
    """Grouped bars of median step time per configuration, one cluster per
    (model, link). Skipped (returns None) without gnuplot."""
    if not shutil.which("gnuplot") or not rows:
        return None
    configs = []
    for r in rows:
        c = r["config"].split("@")[0]
        if c not in configs:
            configs.append(c)
    groups = []
    for r in rows:
        g = (r["params"], r["link_mbit"], r.get("batch"))
        if g not in groups:
            groups.append(g)
    dat = os.path.join(results_dir, "step_time.dat")
    with open(dat, "w") as f:
        f.write("group " + " ".join(configs) + "\n")
        for n, link, batch in groups:
            vals = []
            for c in configs:
                m = [r for r in rows if r["config"].split("@")[0] == c
                     and (r["params"], r["link_mbit"], r.get("batch")) == (n, link, batch)]
                vals.append(str(m[0]["step_s"]) if m and m[0]["step_s"] else "NaN")
            f.write(f"\"{_params(n)},{link / 1000:g}Gb/s,b{batch}\" " + " ".join(vals) + "\n")
    png = os.path.join(results_dir, "step_time.png")
    script = (f"set terminal pngcairo size 1000,520\nset output '{png}'\n"
              "set style data histograms\nset style histogram clustered gap 1\n"
              "set style fill solid border -1\nset logscale y\nset grid ytics\n"
              "set ylabel 'median step time, s (log)'\nset key outside right\n"
              # The groups' names are longer than a cluster is wide.
              "set xtics rotate by -25 font ',9'\nset bmargin 5\n"
              "set title 'Step time on shaped links (W workers, one link each)'\n"
              f"plot for [i=2:{len(configs) + 1}] '{dat}' using i:xtic(1) title columnhead\n")
    run_gnuplot(script)
    return png


def run_gnuplot(script):
    """Runs a gnuplot script that draws with pngcairo, again with the plain
    png terminal when pngcairo is missing (gnuplot-nox builds may lack it).
    Raises CalledProcessError when both fail."""
    r = subprocess.run(["gnuplot"], input=script, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        subprocess.run(["gnuplot"], input=script.replace("pngcairo", "png"), text=True,
                       timeout=60, check=True)
