"""`python3 -m loco_ps.run`: a script as every worker of a local cluster,
finding it in the environment, or (--coordinator) as one machine's workers
of a running cluster; a failing worker ends the run with its status; bad
arguments are refused before anything starts."""

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time

import loco_ps

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "run_script.py")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def run(*args, timeout=180, env_extra=()):
    """python3 -m loco_ps.run with `args`, in this environment without its
    LOCO_* variables (but LOCO_BIN_DIR) and with `env`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCO_") or k == "LOCO_BIN_DIR"}
    env.update(dict(env_extra))
    return subprocess.run([sys.executable, "-m", "loco_ps.run", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def said(done):
    return f"exit status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-3000:]}"


def test_a_script_runs_as_every_worker_of_a_local_cluster():
    # A shell's settings for a cluster elsewhere (TLS) do not reach the
    # workers of this plaintext one.
    done = run("--workers", "2", "--servers", "2", "--metrics", SCRIPT, "--steps", "5",
               env_extra={"LOCO_TLS_CA": "/etc/loco/tls/ca.crt", "LOCO_INSECURE": "false"})
    assert done.returncode == 0, said(done)
    assert re.search(r"^loco_ps\.run: cluster at 127\.0\.0\.1:\d+ \(2 server\(s\)\); 2 worker",
                     done.stdout, re.M), said(done)
    assert re.search(r"^loco_ps\.run: server-1 metrics at http://127\.0\.0\.1:\d+/metrics",
                     done.stdout, re.M), said(done)
    finals = re.findall(r"^\[worker-(\d)\] rank (\d) world (\d) version (\d+) crc (\d+) "
                        r"metrics (127\.0\.0\.1:\d+)$", done.stdout, re.M)
    assert len(finals) == 2, said(done)
    assert sorted(f[0] for f in finals) == ["0", "1"], said(done)
    assert sorted(f[1] for f in finals) == ["0", "1"], said(done)  # one rank each
    assert all(f[2] == "2" and f[3] == "5" for f in finals), said(done)
    assert finals[0][4] == finals[1][4], said(done)  # the same parameters on both
    assert finals[0][5] != finals[1][5], said(done)  # --metrics: a free port each


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="needs Debian's dataset-fashion-mnist (scripts/install-deps.sh)")
def test_the_pytorch_example_runs_unchanged_as_the_workers():
    """examples/torch_fashion_mnist.py finds the cluster in the environment
    (no --coordinator): one worker each, the rank-0 one evaluating."""
    example = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                           "torch_fashion_mnist.py")
    done = run("--workers", "2", "--servers", "2", example, "--max-steps", "8", "--seed", "1")
    assert done.returncode == 0, said(done)
    assert len(re.findall(r"^\[worker-\d\] joining the cluster of 127\.0\.0\.1:\d+ "
                          r"\(\$LOCO_COORDINATOR\) \(step 0 waits for 2 worker", done.stdout,
                          re.M)) == 2, said(done)
    accuracy = re.findall(r"^\[worker-\d\] epoch 1 \(8 of 468 steps\): .*test accuracy "
                          r"([0-9.]+)%", done.stdout, re.M)
    assert len(accuracy) == 1 and float(accuracy[0]) > 30, said(done)
    assert len(re.findall(r"^\[worker-\d\] done: pushed", done.stdout, re.M)) == 2, said(done)


def test_a_failing_worker_stops_the_others_and_its_status_is_the_runs():
    started = time.monotonic()
    done = run("--workers", "2", SCRIPT, "--exit-code", "3", "--on-rank", "1",
               env_extra={"LOCO_METRICS_PORT": "9400"})  # not inherited: both would bind it
    assert done.returncode == 3, said(done)
    assert re.search(r"loco_ps\.run: worker-\d exited with 3; stopped the others", done.stderr), \
        said(done)
    assert "rank 1 exits with 3" in done.stdout, said(done)
    # The other waited in its first step for the failed one's push: stopped,
    # not waited for until its step timeout.
    assert time.monotonic() - started < 60, said(done)


def start(*args, env_extra=(), session=False):
    """python3 -m loco_ps.run with `args`, started (as run() runs it); with
    `session`, in a session and process group of its own, as a terminal
    starts a command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCO_") or k == "LOCO_BIN_DIR"}
    env.update(dict(env_extra))
    return subprocess.Popen([sys.executable, "-m", "loco_ps.run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=session)


def alive(pid):
    """Whether process `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ctrl_c_stops_every_worker_and_the_cluster_and_the_run_exits_130():
    """Ctrl-C in a terminal sends SIGINT to the command's process group:
    the workers, the cluster's coordinator and servers, and the run."""
    run_ = start("--workers", "2", SCRIPT, "--steps", "1000000", session=True)
    try:
        pids, coordinator, lines = [], None, []
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:
            line = run_.stdout.readline()
            if not line:
                break
            lines.append(line)
            if coordinator is None:
                found = re.match(r"loco_ps\.run: cluster at (127\.0\.0\.1:\d+)", line)
                coordinator = found.group(1) if found else None
            joined = re.match(r"\[worker-\d\] rank \d joined as process (\d+)$", line)
            if joined:
                pids.append(int(joined.group(1)))
        assert len(pids) == 2 and coordinator, "".join(lines)
        time.sleep(0.5)  # both are in their steps
        started = time.monotonic()
        os.killpg(run_.pid, signal.SIGINT)
        stdout, stderr = run_.communicate(timeout=60)
    finally:
        if run_.poll() is None:
            os.killpg(run_.pid, signal.SIGKILL)
            run_.wait()
    said_ = f"exit status {run_.returncode}\nstdout:\n{''.join(lines)}{stdout}\n" \
            f"stderr:\n{stderr[-3000:]}"
    assert run_.returncode == 130, said_
    assert "loco_ps.run: interrupted: stopped the workers" in stderr, said_
    assert time.monotonic() - started < 30, said_
    assert not any(alive(pid) for pid in pids), said_
    # The cluster is gone too: nothing listens on the coordinator's port.
    host, port = coordinator.rsplit(":", 1)
    with socket.socket() as probe:
        assert probe.connect_ex((host, int(port))) != 0, said_


def test_each_machine_runs_its_own_workers_of_a_running_cluster(tmp_path):
    """Two runs with --coordinator, as two machines would start theirs: one
    worker each of a cluster that needs a token, which only the callers'
    $LOCO_AUTH_TOKEN_FILE gives the workers."""
    token = tmp_path / "token"
    token.write_text("s3cret-run-token\n")
    with loco_ps.Cluster(num_servers=2, auth_token_file=str(token),
                         log_dir=str(tmp_path / "logs")) as cluster:
        callers = {"LOCO_INSECURE": "true", "LOCO_AUTH_TOKEN_FILE": str(token)}
        # Machine a types its flags; machine b's come from its environment
        # (as a pod's would), with a local cluster's LOCO_SERVERS ignored.
        machine_b = dict(callers, LOCO_COORDINATOR=cluster.coordinator, LOCO_WORKERS="1",
                         LOCO_WAIT_FOR_WORKERS="2", LOCO_NAME_PREFIX="machine-b",
                         LOCO_SERVERS="3")
        machines = [start("--coordinator", cluster.coordinator, "--workers", "1",
                          "--wait-for-workers", "2", "--name-prefix", "machine-a", SCRIPT,
                          "--steps", "5", env_extra=callers),
                    start(SCRIPT, "--steps", "5", env_extra=machine_b)]
        outputs = []
        for machine, source in zip(machines, ("", r" \(\$LOCO_COORDINATOR\)")):
            stdout, stderr = machine.communicate(timeout=180)
            outputs.append(f"exit status {machine.returncode}\nstdout:\n{stdout}\n"
                           f"stderr:\n{stderr[-3000:]}")
            assert machine.returncode == 0, outputs[-1]
            assert re.search(rf"^loco_ps\.run: joining the cluster at {cluster.coordinator}"
                             rf"{source}: 1 worker\(s\) of .*run_script\.py "
                             r"\(machine-[ab]-worker-<i>; step 0 waits for 2\)", stdout, re.M), \
                outputs[-1]
        assert "$LOCO_SERVERS ignored: it is for a local cluster" in outputs[1], outputs[1]
        finals = [re.findall(r"^\[worker-0\] rank (\d) world (\d) version (\d+) crc (\d+) ",
                             output, re.M) for output in outputs]
        assert all(len(f) == 1 for f in finals), outputs
        (rank_a, world_a, version_a, crc_a), (rank_b, world_b, version_b, crc_b) = \
            finals[0][0], finals[1][0]
        assert {rank_a, rank_b} == {"0", "1"}, outputs
        assert world_a == world_b == "2" and version_a == version_b == "5", outputs
        assert crc_a == crc_b, outputs  # the same parameters on both machines
        log = (tmp_path / "logs" / "coordinator.log").read_text(errors="replace")
        assert "machine-a-worker-0" in log and "machine-b-worker-0" in log, log[-3000:]

        # Without the caller's token the worker is refused, and the run ends
        # with the script's failure.
        done = run("--coordinator", cluster.coordinator, "--workers", "1", SCRIPT,
                   env_extra={"LOCO_INSECURE": "true"}, timeout=120)
        assert done.returncode == 1, said(done)
        assert re.search(r"token|unauthenticated", done.stdout, re.I), said(done)


@pytest.mark.parametrize("args, says", [
    (["--coordinator", "10.0.0.1", SCRIPT], "--coordinator '10.0.0.1': give the coordinator's "
                                             "host:port"),
    (["--coordinator", "10.0.0.1:70000", SCRIPT], "the port in 1..65535"),
    (["--coordinator", "10.0.0.1:7000", "--servers", "2", SCRIPT],
     "--servers is for the local cluster; with --coordinator the cluster is already running"),
    (["--wait-for-workers", "4", SCRIPT], "--wait-for-workers is for joining a running cluster"),
    (["--coordinator", "10.0.0.1:7000", "--wait-for-workers", "0", SCRIPT],
     "--wait-for-workers 0: need at least 1 worker"),
    (["--coordinator", "10.0.0.1:7000", "--name-prefix", "a b", SCRIPT],
     "--name-prefix 'a b': give a name without spaces"),
])
def test_bad_arguments_for_joining_are_refused_before_anything_starts(args, says):
    done = run(*args, timeout=60)
    assert done.returncode == 2, said(done)
    assert says in done.stderr, said(done)
    assert "joining the cluster" not in done.stdout, said(done)


@pytest.mark.parametrize("variables, says", [
    ({"LOCO_WORKERS": "0"}, "$LOCO_WORKERS='0' (for --workers): need at least 1 worker"),
    ({"LOCO_SERVERS": "two"}, "$LOCO_SERVERS='two' (for --servers): expected an integer >= 1"),
    ({"LOCO_PULL_CODEC": "zip"}, "$LOCO_PULL_CODEC='zip' (for --pull-codec): expected one of "
                                 "fp32, bf16, delta"),
    ({"LOCO_METRICS": "maybe"}, "$LOCO_METRICS='maybe' (for --metrics): expected true or false"),
    ({"LOCO_COORDINATOR": "10.0.0.1"}, "$LOCO_COORDINATOR='10.0.0.1' (for --coordinator): give "
                                       "the coordinator's host:port"),
    ({"LOCO_COORDINATOR": "10.0.0.1:7000", "LOCO_WAIT_FOR_WORKERS": "-1"},
     "$LOCO_WAIT_FOR_WORKERS='-1' (for --wait-for-workers): expected an integer >= 0"),
    ({"LOCO_COORDINATOR": "10.0.0.1:7000", "LOCO_NAME_PREFIX": "a b"},
     "$LOCO_NAME_PREFIX='a b' (for --name-prefix): give a name without spaces"),
])
def test_bad_settings_from_the_environment_are_refused_naming_the_variable(variables, says):
    done = run(SCRIPT, timeout=60, env_extra=variables)
    assert done.returncode == 2, said(done)
    assert says in done.stderr, said(done)
    assert "cluster at" not in done.stdout, said(done)


def test_flags_not_typed_come_from_the_environment_and_typed_ones_win():
    done = run("--workers", "2", SCRIPT, "--steps", "3",
               env_extra={"LOCO_WORKERS": "3", "LOCO_SERVERS": "2", "LOCO_METRICS": "yes",
                          "LOCO_NAME_PREFIX": "ignored"})
    assert done.returncode == 0, said(done)
    assert re.search(r"^loco_ps\.run: cluster at 127\.0\.0\.1:\d+ \(2 server\(s\)\); 2 worker",
                     done.stdout, re.M), said(done)
    assert re.search(r"^loco_ps\.run: server-1 metrics at http://", done.stdout, re.M), said(done)
    assert len(re.findall(r"^\[worker-\d\] rank \d world 2 version 3 crc \d+ metrics "
                          r"127\.0\.0\.1:\d+$", done.stdout, re.M)) == 2, said(done)
    assert "$LOCO_NAME_PREFIX ignored: it is for joining a running cluster" in done.stderr, \
        said(done)


def test_the_readme_configuration_table_lists_every_flag_in_order():
    """The rows --print-config-markdown prints, as one block of README's
    table (scripts/config-table.sh writes it)."""
    done = run("--print-config-markdown", timeout=60)
    assert done.returncode == 0, said(done)
    rows = done.stdout.splitlines()
    assert len(rows) == 8 and all(r.startswith("| `python3 -m loco_ps.run` | `--") for r in rows)
    with open(os.path.join(HERE, "..", "..", "README.md")) as readme:
        text = readme.read()
    for row in rows:
        assert row in text, f"README.md lacks the row (run scripts/config-table.sh):\n{row}"
    assert "\n".join(rows) + "\n" in text, "the rows are not one block in this order"


@pytest.mark.parametrize("args, says", [
    (["/nonexistent/train.py"], "/nonexistent/train.py: no such file"),
    (["--workers", "0", SCRIPT], "--workers 0: need at least 1 worker"),
    (["--pull-codec", "zip", SCRIPT], "argument --pull-codec: invalid choice: 'zip'"),
])
def test_bad_arguments_are_refused_before_anything_starts(args, says):
    done = run(*args, timeout=60)
    assert done.returncode == 2, said(done)
    assert says in done.stderr, said(done)
    assert "cluster at" not in done.stdout, said(done)
