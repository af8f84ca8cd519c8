"""Bad input to loco_ps._core raises clear exceptions and leaves the cluster
untouched: after each refusal, a correct worker still trains, and its
parameters still follow the servers' AdamW exactly."""

import os
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import loco_ps
from loco_ps.cluster import find_program
from adamw_reference import AdamWReference

HYPER = dict(lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)
SIZE = 5_000
TOKEN = "the-right-token"

# Short bounded waits for the workers meant to fail.
FAST_FAIL = dict(join_timeout_ms=2000, rpc_timeout_ms=1000, max_retries=2,
                 initial_backoff_ms=10, max_backoff_ms=50, retry_budget_ms=500,
                 coordinator_outage_ms=1000)


def gradient(step):
    return np.random.default_rng(step).standard_normal(SIZE).astype(np.float32)


def assert_trains(worker, params, reference, steps=3):
    """Steps `worker` and `reference` (the servers' AdamW from the cluster's
    initial parameters, through every step so far) alike, and checks that
    `params` follows it."""
    for _ in range(steps):
        t = worker.version
        assert t == reference.t
        result = worker.step(gradient(t), params)
        reference.step(gradient(t))
        assert result["step"] == t and not result["resynced"]
    np.testing.assert_allclose(params, reference.params, rtol=1e-6, atol=1e-7)


def train_fresh_worker(cluster, **options):
    with cluster.worker(codec="fp32", **options) as worker:
        params = np.random.default_rng(11).standard_normal(SIZE).astype(np.float32)
        worker.join(SIZE)
        worker.init_parameters(params)
        assert worker.world_size == 1  # the refused workers left nothing behind
        assert_trains(worker, params, AdamWReference(params, **HYPER))


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster():
    with loco_ps.Cluster(num_servers=2, pull_codec="fp32", **HYPER) as c:
        yield c


@pytest.fixture
def token_cluster(tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    with loco_ps.Cluster(num_servers=1, pull_codec="fp32", auth_token_file=token, **HYPER) as c:
        yield c


def test_wrong_coordinator_address_fails_within_the_join_timeout(cluster):
    worker = loco_ps.Worker(f"127.0.0.1:{closed_port()}", insecure=True, codec="fp32",
                            **FAST_FAIL)
    started = time.monotonic()
    with pytest.raises((loco_ps.UnavailableError, loco_ps.DeadlineExceededError)) as raised:
        worker.join(SIZE)
    assert time.monotonic() - started < 15
    assert raised.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    assert "Join" in raised.value.message
    worker.close()
    train_fresh_worker(cluster)


def self_signed_ca(tmp_path):
    key, pem = tmp_path / "ca.key", tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(pem),
                    "-days", "1", "-subj", "/CN=loco-test-ca"],
                   check=True, capture_output=True, timeout=60)
    return str(pem)


def test_a_tls_worker_against_a_plaintext_cluster_is_refused_at_once(cluster, tmp_path):
    # Its own handshake finds no TLS there; no retry changes that, so the
    # join ends at its first attempt, not after coordinator_outage_ms.
    worker = loco_ps.Worker(cluster.coordinator, tls_ca=self_signed_ca(tmp_path), codec="fp32",
                            coordinator_outage_ms=60_000)
    with pytest.raises(loco_ps.PermissionDeniedError) as raised:
        worker.join(SIZE)
    assert raised.value.code == "UNAUTHENTICATED"
    assert "Join at " + cluster.coordinator in raised.value.message
    assert "this process speaks TLS but the peer does not (it runs with --insecure)" in (
        raised.value.message)
    worker.close()
    train_fresh_worker(cluster)


def test_ctrl_c_ends_a_join_that_retries_an_unreachable_coordinator():
    # Without FAST_FAIL: the join would retry for coordinator_outage_ms (5 min).
    worker = loco_ps.Worker(f"127.0.0.1:{closed_port()}", insecure=True, codec="fp32")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        worker.join(SIZE)
    timer.join()
    assert time.monotonic() - started < 10
    assert worker.num_elements == 0  # not joined
    worker.close()
    assert worker.closed


def test_ctrl_c_ends_a_join_that_waits_for_the_servers_to_register():
    # A coordinator of one shard whose server never comes: without Ctrl-C
    # the join would wait join_timeout_ms for the cluster to be ready.
    coordinator = subprocess.Popen(
        [find_program("loco-coordinator"), "--port=0", "--insecure", "--num-servers=1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = coordinator.stdout.readline()
        assert line.startswith("LISTENING "), line
        worker = loco_ps.Worker(line.split()[1], insecure=True, codec="fp32",
                                join_timeout_ms=120_000)
        raises_keyboard_interrupt_soon(lambda: worker.join(SIZE))
        assert worker.num_elements == 0  # not joined
        worker.close()
    finally:
        coordinator.terminate()
        coordinator.wait(timeout=30)


def worker_whose_second_server_is_gone(cluster):
    """A worker past one step, then server-1 killed. step_timeout_ms: how
    long its steps would wait for that server."""
    worker = cluster.worker(codec="fp32", step_timeout_ms=120_000)
    params = np.random.default_rng(3).standard_normal(SIZE).astype(np.float32)
    worker.join(SIZE)
    worker.init_parameters(params)
    worker.step(gradient(0), params)
    server_1 = cluster._processes[2]  # coordinator, server-0, server-1
    server_1.kill()
    server_1.wait()
    return worker, params


def raises_keyboard_interrupt_soon(call):
    """call() with a real SIGINT 0.5 s in: KeyboardInterrupt, within 10 s."""
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        call()
    timer.join()
    assert time.monotonic() - started < 10


def test_ctrl_c_ends_a_wait_for_a_cluster_step(cluster):
    # The cluster is at step 0 and stays there: without Ctrl-C the wait
    # would last its timeout, a minute.
    worker = cluster.worker(codec="fp32")
    raises_keyboard_interrupt_soon(lambda: worker.wait_for_cluster_step(100, 60))
    # The worker is free again, and the same wait with a short timeout
    # still says how far the cluster got.
    with pytest.raises(loco_ps.DeadlineExceededError) as raised:
        worker.wait_for_cluster_step(100, 0.2)
    assert "did not reach step 100" in raised.value.message
    worker.close()


def test_ctrl_c_ends_a_step_that_waits_for_a_server_that_is_gone(cluster):
    worker, params = worker_whose_second_server_is_gone(cluster)
    raises_keyboard_interrupt_soon(lambda: worker.step(gradient(1), params))
    worker.close()
    assert worker.closed


def test_ctrl_c_ends_a_background_step_that_waits_for_a_server_that_is_gone(cluster):
    worker, params = worker_whose_second_server_is_gone(cluster)
    grads = gradient(1)
    step = worker.start_background_step(grads, params, [0])
    raises_keyboard_interrupt_soon(step.finish)
    assert not step.running
    # abort() also ends a step that waits for the server, and at once.
    step = worker.start_background_step(grads, params, [0])
    step.mark_ready(0)
    time.sleep(0.3)  # the push to server-1 is being retried
    started = time.monotonic()
    step.abort("the training loop stops")
    assert time.monotonic() - started < 5
    worker.close()


def test_ctrl_c_ends_an_init_parameters_that_waits_for_a_server_that_is_gone(cluster):
    first, _ = worker_whose_second_server_is_gone(cluster)
    # Rank 1 waits for rank 0's copy to reach server-1: for step_timeout_ms.
    joiner = cluster.worker(codec="fp32", step_timeout_ms=120_000)
    joiner.join(SIZE)
    assert joiner.rank == 1
    params = np.zeros(SIZE, np.float32)
    raises_keyboard_interrupt_soon(lambda: joiner.init_parameters(params))
    assert joiner.version == 0
    # Rank 0 offers its own copy, retrying server-1: for retry_budget_ms.
    first.close()
    joiner.close()
    offering = cluster.worker(codec="fp32", max_retries=1000, retry_budget_ms=120_000)
    offering.join(SIZE)
    assert offering.rank == 0
    raises_keyboard_interrupt_soon(lambda: offering.init_parameters(params))
    offering.close()
    assert offering.closed


@pytest.fixture
def role_cluster(tmp_path):
    (tmp_path / "worker-token").write_text("the-worker-token\n")
    (tmp_path / "server-token").write_text("the-server-token\n")
    with loco_ps.Cluster(num_servers=2, pull_codec="fp32",
                         worker_token_file=tmp_path / "worker-token",
                         server_token_file=tmp_path / "server-token", **HYPER) as c:
        yield c


def test_separated_roles_train_with_the_worker_token_and_refuse_the_server_token(
        role_cluster, tmp_path):
    # The server token may not join: Join is for the worker role.
    worker = loco_ps.Worker(role_cluster.coordinator, auth_token_file=tmp_path / "server-token",
                            **dict(FAST_FAIL, insecure=True, codec="fp32"))
    with pytest.raises(loco_ps.PermissionDeniedError, match="worker role"):
        worker.join(SIZE)
    worker.close()
    # The cluster's worker presents the worker token and its tickets: it trains
    # exactly, and the servers required the tickets.
    train_fresh_worker(role_cluster)
    for shard in range(2):
        log = role_cluster.log(f"server-{shard}")
        assert "shard calls need their worker's ticket" in log
        assert "roles are not separated" not in log


def test_role_tokens_are_both_or_neither_and_never_with_the_shared_token(tmp_path):
    token = tmp_path / "token"
    token.write_text("t\n")
    with pytest.raises(ValueError, match="worker_token_file without server_token_file"):
        loco_ps.Cluster(worker_token_file=token)
    with pytest.raises(ValueError, match="server_token_file without worker_token_file"):
        loco_ps.Cluster(server_token_file=token)
    with pytest.raises(ValueError, match="the shared token would grant both roles"):
        loco_ps.Cluster(auth_token_file=token, worker_token_file=token, server_token_file=token)


@pytest.mark.parametrize("token", ["a-wrong-token", None])
def test_wrong_or_missing_token_is_refused(token_cluster, tmp_path, token):
    options = dict(FAST_FAIL, insecure=True, codec="fp32")
    if token is not None:
        wrong = tmp_path / "wrong"
        wrong.write_text(token)
        options["auth_token_file"] = wrong
    worker = loco_ps.Worker(token_cluster.coordinator, **options)
    with pytest.raises(loco_ps.PermissionDeniedError) as raised:
        worker.join(SIZE)
    assert raised.value.code in ("PERMISSION_DENIED", "UNAUTHENTICATED")
    if token is None:  # says which setting gives one, in each of its spellings
        assert "auth_token_file in Python" in raised.value.message
        assert "$LOCO_AUTH_TOKEN_FILE" in raised.value.message
    worker.close()
    train_fresh_worker(token_cluster)  # with the cluster's token


def test_bad_arrays_are_refused_before_anything_is_sent(cluster):
    with cluster.worker(codec="fp32") as worker:
        params = np.random.default_rng(5).standard_normal(SIZE).astype(np.float32)
        worker.join(SIZE)
        refused = [
            (TypeError, "params must have dtype float32", params.astype(np.float64)),
            (TypeError, "params must be a numpy.ndarray", list(params)),
            (ValueError, "params must be C-contiguous",
             np.repeat(params, 2)[::2]),
            (ValueError, "params must be 1-D", params.reshape(50, 100)),
            (ValueError, "params has 4999 elements", params[:-1].copy()),
        ]
        read_only = params.copy()
        read_only.setflags(write=False)
        refused.append((ValueError, "params is read-only", read_only))
        for error, message, bad in refused:
            with pytest.raises(error, match=message):
                worker.init_parameters(bad)
        worker.init_parameters(params)
        reference = AdamWReference(params, **HYPER)
        before = params.copy()
        grads = gradient(0)
        for error, message, bad in refused:
            with pytest.raises(error, match=message):
                worker.step(grads, bad)
            grad_message = message.replace("params", "grads")
            if "read-only" in message:
                continue  # grads are only read: a read-only array is fine
            with pytest.raises(error, match=grad_message):
                worker.step(bad, params)
        with pytest.raises(ValueError, match="share memory"):
            worker.step(params, params)
        np.testing.assert_array_equal(params, before)  # nothing was written
        assert worker.version == 0
        read_only_grads = grads.copy()
        read_only_grads.setflags(write=False)
        worker.step(read_only_grads, params)
        reference.step(grads)
        np.testing.assert_allclose(params, reference.params, rtol=1e-6, atol=1e-7)
        assert_trains(worker, params, reference)


def test_a_model_size_that_disagrees_is_refused(cluster):
    with cluster.worker(codec="fp32") as trainer:
        params = np.random.default_rng(9).standard_normal(SIZE).astype(np.float32)
        trainer.join(SIZE)
        trainer.init_parameters(params)
        reference = AdamWReference(params, **HYPER)
        assert_trains(trainer, params, reference)
        intruder = cluster.worker(codec="fp32", **FAST_FAIL)
        with pytest.raises((loco_ps.InvalidArgumentError,
                            loco_ps.FailedPreconditionError)) as raised:
            intruder.join(SIZE + 1)
        assert str(SIZE + 1) in raised.value.message and str(SIZE) in raised.value.message
        intruder.close()
        # The trainer's steps do not wait for the refused worker.
        assert_trains(trainer, params, reference)
        assert trainer.world_size == 1


def test_bad_options_are_refused_when_the_worker_is_made(cluster):
    with pytest.raises(TypeError, match="unexpected keyword argument 'rpc_timeout'"):
        loco_ps.Worker(cluster.coordinator, insecure=True, rpc_timeout=5)
    with pytest.raises(TypeError, match="rpc_timeout_ms must be an int"):
        loco_ps.Worker(cluster.coordinator, insecure=True, rpc_timeout_ms="5")
    with pytest.raises(loco_ps.InvalidArgumentError) as raised:
        loco_ps.Worker(cluster.coordinator, insecure=True, codec="zip")
    assert "codec" in raised.value.message
    # The coordinator's address is checked as loco-worker's --coordinator is:
    # gRPC would dial port 99999 as 34463, and retry an address without a port.
    for address in ("127.0.0.1:99999", "nowhere"):
        with pytest.raises(loco_ps.InvalidArgumentError) as raised:
            loco_ps.Worker(address, insecure=True)
        assert f"coordinator = '{address}'" in raised.value.message, raised.value.message
        assert "host:port" in raised.value.message, raised.value.message
    # The security checks name this module's keywords, not loco-worker's flags.
    with pytest.raises(loco_ps.InvalidArgumentError) as raised:
        loco_ps.Worker(cluster.coordinator)  # neither TLS nor plaintext asked for
    assert "pass tls_ca" in raised.value.message and "insecure=True" in raised.value.message
    assert "--" not in raised.value.message, raised.value.message
    with pytest.raises(loco_ps.InvalidArgumentError) as raised:
        loco_ps.Worker(cluster.coordinator, tls_ca="/nonexistent/ca.pem")
    assert "tls_ca names '/nonexistent/ca.pem'" in raised.value.message
    with pytest.raises(loco_ps.InvalidArgumentError) as raised:
        loco_ps.Worker(cluster.coordinator, insecure=True, tls_ca=__file__)
    assert raised.value.message.endswith(
        "insecure=True contradicts the TLS settings given (tls_cert, tls_key, tls_ca, "
        "tls_server_name): drop insecure=True to use TLS, or drop the TLS settings for "
        "plaintext"), raised.value.message
    with pytest.raises(loco_ps.InvalidArgumentError) as raised:
        loco_ps.Worker(cluster.coordinator, tls_ca=__file__, tls_cert=__file__)
    assert "tls_cert was given without tls_key" in raised.value.message
    with cluster.worker(codec="fp32") as worker:
        with pytest.raises(ValueError, match="num_elements"):
            worker.join(0)
        with pytest.raises(loco_ps.FailedPreconditionError, match="Join"):
            worker.init_parameters(np.zeros(SIZE, dtype=np.float32))
    train_fresh_worker(cluster)


def test_calls_from_two_threads_at_once_are_refused(cluster):
    with cluster.worker(codec="fp32") as worker:
        params = np.zeros(SIZE, dtype=np.float32)
        worker.join(SIZE)
        worker.init_parameters(params)
        reference = AdamWReference(params, **HYPER)
        grads = np.zeros(SIZE, dtype=np.float32)
        inside = threading.Event()
        release = threading.Event()
        seen = []

        def compute(ready):
            inside.set()
            # While this step runs (the GIL released around it), another
            # thread's call on the same worker is refused.
            release.wait(timeout=30)

        def other():
            inside.wait(timeout=30)
            try:
                worker.step(grads, params.copy())
            except RuntimeError as e:
                seen.append(e)
            finally:
                release.set()

        thread = threading.Thread(target=other)
        thread.start()
        worker.step_overlapped(compute, grads, params)
        thread.join(timeout=30)
        assert len(seen) == 1 and "another call" in str(seen[0])
        reference.step(grads)
        assert_trains(worker, params, reference)
