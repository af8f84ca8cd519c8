"""loco_ps.Cluster: real processes that start, say why when they cannot,
and stop on close, on garbage collection and at interpreter exit (after the
workers have left)."""

import gc
import os
import subprocess
import sys
import textwrap

import pytest

import loco_ps
from prom_text import scrape, total


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not alive either.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_processes_serve_and_stop_on_close():
    cluster = loco_ps.Cluster(num_servers=3)
    pids = [p.pid for p in cluster._processes]
    assert cluster.running and len(pids) == 4
    assert cluster.coordinator.startswith("127.0.0.1:")
    assert len(cluster.server_addresses) == 3
    assert "LISTENING" in cluster.log("server-2")
    log_dir = cluster.log_dir
    cluster.close()
    cluster.close()
    assert not cluster.running
    assert not any(alive(pid) for pid in pids)
    assert not os.path.exists(log_dir)  # a temporary folder of its own


def test_metrics_serve_the_servers_counts_of_what_the_worker_pushed():
    """metrics=True: the coordinator and each server serve /metrics on the
    free port it announced; the servers' push counters, summed, are the
    bytes the worker says it pushed (counted in another process)."""
    import numpy as np
    with loco_ps.Cluster(num_servers=2, metrics=True) as cluster:
        assert sorted(cluster.metrics_addresses) == ["coordinator", "server-0", "server-1"]
        assert len(set(cluster.metrics_addresses.values())) == 3
        worker = cluster.worker(codec="loco", bits=4)
        params = np.zeros(10_000, np.float32)
        worker.join(params.size)
        worker.init_parameters(params)
        rng = np.random.default_rng(0)
        for _ in range(3):
            worker.step(rng.standard_normal(params.size).astype(np.float32), params)
        traffic = worker.traffic
        worker.close()
        servers = [scrape(cluster.metrics_addresses[f"server-{k}"]) for k in range(2)]
        coordinator = scrape(cluster.metrics_addresses["coordinator"])
    for key in ("wire", "fp32"):
        pushed = sum(total(s, f"loco_server_{key}_bytes_total", direction="push")
                     for s in servers)
        assert pushed == traffic[f"push_{key}_bytes"] > 0, key
    assert traffic["push_fp32_bytes"] > 6 * traffic["push_wire_bytes"]  # 4-bit codes
    assert all(total(s, "loco_server_wire_bytes_total", direction="push") > 0 for s in servers)
    assert "loco_coordinator_active_workers" in coordinator
    # Without it, none.
    with loco_ps.Cluster() as plain:
        assert plain.metrics_addresses == {}
        assert "METRICS" not in plain.log("coordinator")


def test_processes_stop_when_the_cluster_is_garbage_collected():
    cluster = loco_ps.Cluster()
    pids = [p.pid for p in cluster._processes]
    del cluster
    gc.collect()
    assert not any(alive(pid) for pid in pids)


def test_a_process_that_cannot_start_is_named_with_its_log(tmp_path):
    with pytest.raises(loco_ps.ClusterStartError) as raised:
        loco_ps.Cluster(server_args=["--lr=-1"], log_dir=tmp_path)
    message = str(raised.value)
    assert "server-0 exited with status 2" in message
    assert "--lr" in message  # the end of its log
    assert (tmp_path / "server-0.log").exists()  # kept for a look


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(num_servers=1.7), TypeError, r"num_servers=1\.7 is a float, not an integer"),
    (dict(num_servers=0), ValueError, r"num_servers=0 must be >= 1"),
    (dict(num_servers=True), TypeError, r"num_servers=True is a bool"),
    (dict(betas=(0.9,)), ValueError, r"betas=\(0\.9,\) has 1 element\(s\); give a pair"),
    (dict(betas=0.9), TypeError, r"betas=0\.9 is a float; give a pair"),
    (dict(lr="fast"), TypeError, r"lr='fast' is a str, not a number"),
    (dict(weight_decay=float("nan")), ValueError, r"weight_decay=nan is not finite"),
    (dict(heartbeat_timeout_ms=2.5), TypeError, r"heartbeat_timeout_ms=2\.5"),
    (dict(pull_codec=8), TypeError, r"pull_codec=8"),
    (dict(metrics=1), TypeError, r"metrics=1 is not a bool; give True"),
])
def test_bad_arguments_are_named_before_anything_starts(kwargs, error, message, tmp_path):
    # bin_dir holds no programs: a check that came only after the lookup
    # would fail with FileNotFoundError instead.
    with pytest.raises(error, match=message):
        loco_ps.Cluster(bin_dir=tmp_path, **kwargs)


def test_a_missing_program_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="loco-coordinator not found"):
        loco_ps.Cluster(bin_dir=tmp_path)


def test_a_bin_dir_from_the_environment_is_the_only_place_looked(tmp_path, monkeypatch):
    # Not silently replaced by the build tree's or PATH's programs.
    monkeypatch.setenv("LOCO_BIN_DIR", str(tmp_path / "no-such-folder"))
    with pytest.raises(FileNotFoundError) as raised:
        loco_ps.Cluster()
    message = str(raised.value)
    assert "loco-coordinator not found in" in message and "no-such-folder" in message
    assert "$LOCO_BIN_DIR" in message


def test_workers_leave_and_processes_stop_at_interpreter_exit(tmp_path):
    # Neither the worker nor the cluster is closed by the script.
    script = textwrap.dedent("""
        import logging
        import numpy as np
        import loco_ps
        logging.basicConfig(level=logging.INFO)  # the library's INFO lines too
        cluster = loco_ps.Cluster(pull_codec="fp32")
        worker = cluster.worker(codec="fp32")
        params = np.ones(1000, dtype=np.float32)
        worker.join(params.size)
        worker.init_parameters(params)
        worker.step(np.ones_like(params), params)
        print(" ".join(str(p.pid) for p in cluster._processes), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)
    # The worker left while its cluster still answered.
    assert "left the cluster at step 1" in done.stderr
    assert "UNAVAILABLE" not in done.stderr and "failed" not in done.stderr
