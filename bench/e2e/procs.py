"""One benchmark process inside a network namespace, bounded and measured.

Each process runs as
    ip netns exec NS /usr/bin/time -o F -f "%M %e %U %S" timeout --foreground -k 5 T argv...
so that it dies after T seconds whatever happens to the harness, and GNU
time records its peak RSS (KiB), wall, user and system CPU seconds. It gets
its own session; stop() sends SIGINT to that process group (GNU time ignores
SIGINT and so survives to write its record; our binaries and timeout treat
it as a request to stop), then SIGKILL after a bounded grace period.

stdout lines that parse as JSON objects are kept with their arrival time
(time.monotonic()), which is how step times are measured; everything else
goes to the log file beside stderr.
"""
import json
import os
import signal
import subprocess
import threading
import time


class Proc:
    def __init__(self, name, ns, argv, log_dir, limit_s, env=None):
        self.name = name
        self.time_file = os.path.join(log_dir, f"{name}.time")
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.events = []  # (monotonic seconds, dict)
        self._log = open(self.log_path, "w")
        cmd = ["ip", "netns", "exec", ns, "/usr/bin/time", "-o", self.time_file,
               "-f", "%M %e %U %S", "timeout", "--foreground", "-k", "5",
               str(int(limit_s))] + [str(a) for a in argv]
        full_env = dict(os.environ)
        full_env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
        full_env.update(env or {})
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log,
                                  start_new_session=True, env=full_env, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.p.stdout:
            now = time.monotonic()
            s = line.strip()
            if s.startswith("{"):
                try:
                    self.events.append((now, json.loads(s)))
                    continue
                except json.JSONDecodeError:
                    pass
            self._log.write(line)

    def alive(self):
        return self.p.poll() is None

    def wait(self, timeout_s):
        """Exit code, or None when still running after timeout_s."""
        try:
            rc = self.p.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=5)
        return rc

    def stop(self, grace_s=8):
        if self.alive():
            try:
                os.killpg(self.p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            if self.wait(grace_s) is None:
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.wait(5)
        self._reader.join(timeout=5)
        self._log.flush()

    def _time_record(self):
        """GNU time's record (peak KiB, wall s, user s, system s), or None
        when it wrote none."""
        try:
            with open(self.time_file) as f:
                lines = [ln for ln in f.read().splitlines() if ln.strip()]
            kib, wall, user, sys_ = lines[-1].split()
            return int(kib), float(wall), float(user), float(sys_)
        except (OSError, ValueError, IndexError):
            return None

    def usage(self):
        """(peak RSS bytes, wall s, cpu s) from GNU time, or None."""
        r = self._time_record()
        return None if r is None else (r[0] * 1024, r[1], r[2] + r[3])

    def cpu_split(self):
        """(user s, system s) from GNU time, or (0, 0) when it wrote none."""
        r = self._time_record()
        return (0.0, 0.0) if r is None else (r[2], r[3])

    def of(self, kind):
        return [(t, e) for t, e in self.events if e.get("event") == kind]

    def tail(self, n=15):
        self._log.flush()
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def stop_all(procs):
    for p in procs:
        if p.alive():
            try:
                os.killpg(p.p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
    for p in procs:
        p.stop()


def wait_all(procs, deadline):
    """Waits (until the monotonic deadline) for every process to exit, or
    until one of them fails (exits non-zero: the others, waiting for it as
    a peer, would wait to the deadline); returns the list of (name, rc, None
    for one still running) and whether they all ended in time."""
    while time.monotonic() < deadline:
        codes = [p.p.poll() for p in procs]
        if all(rc is not None for rc in codes) or any(rc not in (None, 0) for rc in codes):
            break
        time.sleep(0.05)
    out = [(p.name, p.wait(0)) for p in procs]
    return out, all(rc is not None for _, rc in out)
