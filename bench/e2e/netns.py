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

    def sampler_argv(self, period_s=0.1, cpu_roots=()):
        """A process to run in the server namespace: prints, every period_s,
        {"c": [[rx, tx], ...]} with the server-side byte counters of every
        link (its rx is the worker's upload, its tx the worker's download),
        and with cpu_roots (process ids) "cpu": [seconds, ...], the user and
        system CPU of each root's process tree (a Proc's `ip netns exec`,
        /usr/bin/time, timeout and the program under them). Cheap (file
        reads; the trees are looked up in /proc once a second), so steady-
        state bytes and CPU per step can be measured between two step
        events, leaving out the join and the initial copy."""
        devs = [self.server_dev(i) for i in range(self.workers)]
        code = ("import json,os,time\n"
                f"devs={devs!r}\n"
                f"roots={[int(r) for r in cpu_roots]!r}\n"
                "tick=os.sysconf('SC_CLK_TCK')\n"
                "def rd(d,k):\n"
                " with open(f'/sys/class/net/{d}/statistics/{k}_bytes') as f:\n"
                "  return int(f.read())\n"
                "def stat(p):\n"
                " try:\n"
                "  with open(f'/proc/{p}/stat') as f:\n"
                "   x=f.read().rsplit(')',1)[1].split()\n"
                "  return int(x[1]),(int(x[11])+int(x[12]))/tick\n"
                " except (OSError,IndexError,ValueError):\n"
                "  return None,0.0\n"
                "def trees():\n"
                " kids={}\n"
                " for e in os.listdir('/proc'):\n"
                "  if e.isdigit():\n"
                "   pp,_=stat(e)\n"
                "   if pp is not None: kids.setdefault(pp,[]).append(int(e))\n"
                " out=[]\n"
                " for r in roots:\n"
                "  t,todo=[],[r]\n"
                "  while todo:\n"
                "   q=todo.pop(); t.append(q); todo+=kids.get(q,[])\n"
                "  out.append(t)\n"
                " return out\n"
                "found,at=[],-1.0\n"
                "while True:\n"
                " line={'c':[[rd(d,'rx'),rd(d,'tx')] for d in devs]}\n"
                " if roots:\n"
                "  if time.monotonic()-at>=1.0:\n"
                "   found,at=trees(),time.monotonic()\n"
                "  line['cpu']=[sum(stat(q)[1] for q in t) for t in found]\n"
                " print(json.dumps(line),flush=True)\n"
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
