"""Network namespaces and shaped links for the end-to-end benchmark.

Topology (a star, one shaped link per worker):

    worker ns PFX-w<i>  --veth PFXw<i> (10.77.<i>.2/24)
           ||  tbf RATE on both ends (egress of each side)
    server ns PFX-srv   --veth PFXs<i> (10.77.<i>.1/24)

The server namespace holds the coordinator and every parameter server; they
listen on 10.78.0.1 (on its loopback), which every worker namespace routes
through its own link, so one advertised address reaches all workers. The
server namespace forwards between links, so workers reach each other
(PyTorch DDP's all-reduce) through the same shaped links: worker to worker
traffic crosses two links, like a switch. The server namespace itself is not
shaped beyond the per-worker links (it has W links: a server with W times a
worker's bandwidth).

Every name starts with a unique prefix so that cleanup(prefix) removes this
run's namespaces and interfaces, and only them, even after a crash.
"""
import json
import os
import signal
import subprocess
import time

SERVER_IP = "10.78.0.1"


def sh(*args, check=True, timeout=30):
    """Runs a command (argument list), bounded; returns stdout."""
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def worker_ip(i):
    return f"10.77.{i}.2"


class Topology:
    def __init__(self, prefix, workers):
        if len(prefix) > 9:
            raise ValueError(f"prefix '{prefix}' too long: interface names must stay <= 15 chars")
        if not 1 <= workers <= 250:
            raise ValueError(f"workers must be in [1, 250], got {workers}")
        self.prefix, self.workers = prefix, workers
        self.server_ns = f"{prefix}-srv"
        self.rate = None

    def worker_ns(self, i):
        return f"{self.prefix}-w{i}"

    def worker_dev(self, i):
        return f"{self.prefix}w{i}"

    def server_dev(self, i):
        return f"{self.prefix}s{i}"

    def create(self):
        s = self.server_ns
        sh("ip", "netns", "add", s)
        sh("ip", "-n", s, "link", "set", "lo", "up")
        sh("ip", "-n", s, "addr", "add", f"{SERVER_IP}/32", "dev", "lo")
        sh("ip", "netns", "exec", s, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        for i in range(self.workers):
            w, wd, sd = self.worker_ns(i), self.worker_dev(i), self.server_dev(i)
            sh("ip", "netns", "add", w)
            sh("ip", "-n", w, "link", "set", "lo", "up")
            sh("ip", "link", "add", wd, "netns", w, "type", "veth", "peer", "name", sd,
               "netns", s)
            sh("ip", "-n", w, "addr", "add", f"{worker_ip(i)}/24", "dev", wd)
            sh("ip", "-n", s, "addr", "add", f"10.77.{i}.1/24", "dev", sd)
            sh("ip", "-n", w, "link", "set", wd, "up")
            sh("ip", "-n", s, "link", "set", sd, "up")
            sh("ip", "-n", w, "route", "add", f"{SERVER_IP}/32", "via", f"10.77.{i}.1")
            sh("ip", "-n", w, "route", "add", "10.77.0.0/16", "via", f"10.77.{i}.1")

    def shape(self, rate_mbit):
        """tbf on both ends of every link: rate, a burst of 2 ms at that rate
        (at least 64 KiB, so that a GSO segment fits), 20 ms of queue."""
        self.rate = rate_mbit
        burst = max(64 * 1024, int(rate_mbit * 1e6 / 8 * 0.002))
        for i in range(self.workers):
            for ns, dev in ((self.worker_ns(i), self.worker_dev(i)),
                            (self.server_ns, self.server_dev(i))):
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                   "rate", f"{rate_mbit}mbit", "burst", str(burst), "latency", "20ms")

    def unshape(self):
        """No qdisc of ours on any link: the veth pair's own pace."""
        self.rate = None
        for i in range(self.workers):
            for ns, dev in ((self.worker_ns(i), self.worker_dev(i)),
                            (self.server_ns, self.server_dev(i))):
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root",
                   check=False)

    def counters(self):
        """{worker index: (tx_bytes, rx_bytes)} on the worker side of each link."""
        out = {}
        for i in range(self.workers):
            js = json.loads(sh("ip", "-n", self.worker_ns(i), "-s", "-j", "link", "show", "dev",
                               self.worker_dev(i)))
            st = js[0]["stats64"]
            out[i] = (st["tx"]["bytes"], st["rx"]["bytes"])
        return out

    def sampler_argv(self, period_s=0.1):
        """A process to run in the server namespace: prints, every period_s,
        {"c": [[rx, tx], ...]} with the server-side byte counters of every
        link (its rx is the worker's upload, its tx the worker's download).
        Cheap (file reads), so steady-state bytes per step can be measured
        between two step events, leaving out the join and the initial copy."""
        devs = [self.server_dev(i) for i in range(self.workers)]
        code = ("import json,sys,time\n"
                f"devs={devs!r}\n"
                "def rd(d,k):\n"
                " with open(f'/sys/class/net/{d}/statistics/{k}_bytes') as f:\n"
                "  return int(f.read())\n"
                "while True:\n"
                " print(json.dumps({'c':[[rd(d,'rx'),rd(d,'tx')] for d in devs]}),flush=True)\n"
                f" time.sleep({period_s})\n")
        return ["/usr/bin/python3", "-c", code]

    def destroy(self):
        return cleanup(self.prefix)


def list_namespaces(prefix):
    names = []
    for line in sh("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(prefix + "-"):
            names.append(name)
    return names


def cleanup(prefix):
    """Kills every process left in this prefix's namespaces, then deletes
    them (their veths go with them). Bounded: a few rounds, then gives up
    and says what is left. Returns the names still present."""
    for _ in range(3):
        names = list_namespaces(prefix)
        if not names:
            return []
        for ns in names:
            for pid in sh("ip", "netns", "pids", ns, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        time.sleep(0.2)
        for ns in names:
            sh("ip", "netns", "del", ns, check=False)
    return list_namespaces(prefix)
