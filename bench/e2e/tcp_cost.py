"""What moving a byte through one of the benchmark's links costs the CPU.

Every process of a measured run shares the same cores, so the kernel's work
for a byte (the sender's copy into the socket, the veth hop, tbf, the
receiver's copy out) is paid on those cores twice over, by both ends,
where a real cluster pays it on separate machines with NIC offloads. This
measures that cost on its own: one TCP stream of `mb` MiB from a worker
namespace to the server namespace over a veth link (shaped or not), plain
1 MiB writes and reads, and GNU time's user and system CPU of both ends.

The two processes' own CPU leaves out the softirq work that runs in
ksoftirqd or in whatever the CPU was running when a packet arrived (with
tbf, most of the receive path), so the machine's busy time over the
stream (/proc/stat: user, nice, system, irq, softirq) is taken too; on a
quiet machine it is the full cost.

A row: {"rate_mbit", "mib", "wall_s", "mb_per_s", "sender_user_s",
"sender_sys_s", "receiver_user_s", "receiver_sys_s", "cpu_ms_per_mb",
"kernel_ms_per_mb", "machine_busy_s", "machine_ms_per_mb"} (MB = 10^6
bytes; kernel = both ends' system time).
"""
import os
import time

import netns
import procs

PORT = 5391

RECEIVER = """
import json, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(({ip!r}, {port}))
s.listen(1)
s.settimeout({limit})
c, _ = s.accept()
c.settimeout({limit})
buf = memoryview(bytearray(1 << 20))
n = 0
while True:
    k = c.recv_into(buf)
    if not k:
        break
    n += k
print(json.dumps({{"event": "received", "bytes": n}}), flush=True)
"""

SENDER = """
import json, socket, time
for _ in range(100):  # the receiver may still be starting: <= 5 s
    try:
        s = socket.create_connection(({ip!r}, {port}), timeout={limit})
        break
    except OSError:
        time.sleep(0.05)
else:
    raise SystemExit("no receiver at {ip}:{port}")
data = memoryview(bytes(1 << 20))
t = time.monotonic()
for _ in range({mib}):
    s.sendall(data)
s.shutdown(socket.SHUT_WR)
s.recv(1)
print(json.dumps({{"event": "sent", "wall_s": time.monotonic() - t}}), flush=True)
"""


def machine_busy_s(stat_text):
    """Busy CPU seconds of the whole machine so far, from /proc/stat's text:
    user + nice + system + irq + softirq of the "cpu" line (not idle,
    iowait or the hypervisor's steal)."""
    for line in stat_text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in f[1:8])
            return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError("/proc/stat has no 'cpu' line")


def read_busy():
    with open("/proc/stat") as f:
        return machine_busy_s(f.read())


def row_from(rate_mbit, mib, wall_s, sender, receiver, busy_s):
    """The row's arithmetic: sender and receiver are (user s, sys s), busy_s
    the machine's busy CPU seconds over the stream."""
    mb = mib * (1 << 20) / 1e6
    cpu = sender[0] + sender[1] + receiver[0] + receiver[1]
    return {"rate_mbit": rate_mbit, "mib": mib, "wall_s": round(wall_s, 3),
            "mb_per_s": round(mb / wall_s, 1) if wall_s > 0 else None,
            "sender_user_s": sender[0], "sender_sys_s": sender[1],
            "receiver_user_s": receiver[0], "receiver_sys_s": receiver[1],
            "cpu_ms_per_mb": round(1000 * cpu / mb, 3),
            "kernel_ms_per_mb": round(1000 * (sender[1] + receiver[1]) / mb, 3),
            "machine_busy_s": round(busy_s, 3),
            "machine_ms_per_mb": round(1000 * busy_s / mb, 3)}


def measure(topo, log_dir, mib, limit_s=120):
    """One stream of `mib` MiB over link 0 of `topo` (already shaped, or not).
    Raises RuntimeError when either end fails or runs past limit_s."""
    if not 1 <= mib <= 100000:
        raise ValueError(f"mib must be in [1, 100000], got {mib}")
    ip = netns.SERVER_IP
    busy0 = read_busy()
    rx = procs.Proc("tcp-receiver", topo.server_ns,
                    ["/usr/bin/python3", "-c", RECEIVER.format(ip=ip, port=PORT, limit=limit_s)],
                    log_dir, limit_s)
    tx = procs.Proc("tcp-sender", topo.worker_ns(0),
                    ["/usr/bin/python3", "-c",
                     SENDER.format(ip=ip, port=PORT, limit=limit_s, mib=mib)],
                    log_dir, limit_s)
    deadline = time.monotonic() + limit_s + 10
    ended, ok = procs.wait_all([tx, rx], deadline)
    busy = read_busy() - busy0
    procs.stop_all([tx, rx])
    sent, got = tx.of("sent"), rx.of("received")
    if not ok or any(rc != 0 for _, rc in ended) or not sent or not got:
        raise RuntimeError(f"tcp cost stream failed: {ended}; sender: {tx.tail(5)} "
                           f"receiver: {rx.tail(5)}")
    if got[-1][1]["bytes"] != mib << 20:
        raise RuntimeError(f"received {got[-1][1]['bytes']} bytes, sent {mib << 20}")
    return row_from(topo.rate or 0, mib, sent[-1][1]["wall_s"], tx.cpu_split(), rx.cpu_split(),
                    busy)
