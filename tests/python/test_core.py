"""loco_ps._core against a real local cluster (loco_ps.Cluster: a
coordinator and servers as processes on loopback): the package imports from
the build tree, steps give the servers' AdamW on the mean gradient, and the
parameters are written into the caller's numpy array in place."""

import gc
import os
import threading
import time

import numpy as np
import pytest

import loco_ps
from loco_ps import _core
from adamw_reference import AdamWReference, mean_gradient
from prom_text import scrape, total

HYPER = dict(lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)
SIZE = 10_000  # two shards of the default 4096-element alignment: 8192 + 1808


def gradient(worker_index, step, size=SIZE):
    rng = np.random.default_rng(1000 * worker_index + step)
    return rng.standard_normal(size).astype(np.float32)


def initial_params(size=SIZE):
    return np.random.default_rng(7).standard_normal(size).astype(np.float32)


def assert_matches(params, expected):
    np.testing.assert_allclose(params, expected, rtol=1e-6, atol=1e-7)


def joined_fp32_worker(cluster):
    """An fp32 worker of `cluster`, joined, and the parameters it holds (the
    initial ones, offered first). The caller closes the worker."""
    worker = cluster.worker(codec="fp32")
    params = initial_params()
    worker.join(SIZE)
    worker.init_parameters(params)
    return worker, params


@pytest.fixture
def cluster():
    with loco_ps.Cluster(num_servers=2, pull_codec="fp32", **HYPER) as c:
        yield c


def test_imports_from_the_build_tree():
    package_dir = os.path.dirname(loco_ps.__file__)
    assert os.path.dirname(_core.__file__) == package_dir
    build_python = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if build_python:
        assert os.path.realpath(package_dir).startswith(os.path.realpath(build_python))
    assert loco_ps.Worker is _core.Worker
    assert issubclass(loco_ps.UnavailableError, loco_ps.ClusterError)
    assert issubclass(loco_ps.ClusterError, RuntimeError)
    assert "rpc_timeout_ms" in loco_ps.ADVANCED_OPTIONS


def train_two_fp32_workers(cluster, params, gradients):
    """Two fp32 workers of `cluster` on threads of their own, joined and
    initialised from params[i], step together with the gradients that
    gradients(i) lists (one per step), in place on params[i]; returns each
    one's step results. Concurrent steps on two threads: each waits for the
    other's push, so this also shows that step releases the GIL."""
    results = [[], []]
    errors = []
    initialised = threading.Barrier(2)

    def train(index):
        try:
            with cluster.worker(codec="fp32", name=f"w{index}") as worker:
                worker.join(SIZE)
                worker.init_parameters(params[index])
                initialised.wait(timeout=30)  # both take part from step 0
                for g in gradients(index):
                    results[index].append(worker.step(g, params[index]))
                worker.leave()
        except BaseException as e:  # reported on the main thread
            errors.append(e)
            initialised.abort()

    threads = [threading.Thread(target=train, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    assert not any(th.is_alive() for th in threads)
    return results


def test_two_workers_fp32_match_adamw_on_the_mean_gradient(cluster):
    steps = 5
    start = initial_params()
    params = [start.copy(), start.copy()]
    results = train_two_fp32_workers(
        cluster, params, lambda index: [gradient(index, t) for t in range(steps)])

    reference = AdamWReference(start, **HYPER)
    for t in range(steps):
        reference.step(mean_gradient([gradient(0, t), gradient(1, t)]))
    assert_matches(params[0], reference.params)
    np.testing.assert_array_equal(params[0], params[1])
    for index in range(2):
        assert [r["step"] for r in results[index]] == list(range(steps))
        assert not any(r["resynced"] for r in results[index])
        assert results[index][-1]["push_wire_bytes"] == 4 * SIZE  # fp32: nothing saved


def test_non_finite_gradient_elements_are_sent_as_zero_and_every_worker_steps(cluster):
    # What an fp16 overflow leaves in one worker's gradient: the step is not
    # skipped (the other worker would wait for its push), each non-finite
    # element goes out as 0 and is counted in that worker's result.
    start = initial_params()
    params = [start.copy(), start.copy()]
    bad = {3: np.inf, 5000: -np.inf, 9000: np.nan}  # in both shards (8192 + 1808)

    def sent(index):
        g = gradient(index, 0)
        if index == 0:
            for i, value in bad.items():
                g[i] = value
        return g

    results = [r[0] for r in train_two_fp32_workers(cluster, params, lambda i: [sent(i)])]
    assert [r["nonfinite"] for r in results] == [len(bad), 0]
    assert not any(r["resynced"] for r in results)
    cleaned = sent(0)
    cleaned[list(bad)] = 0.0
    reference = AdamWReference(start, **HYPER)
    reference.step(mean_gradient([cleaned, gradient(1, 0)]))
    assert_matches(params[0], reference.params)
    np.testing.assert_array_equal(params[0], params[1])
    assert np.isfinite(params[0]).all()


def test_params_are_written_in_place(cluster):
    with cluster.worker(codec="fp32") as worker:
        params = initial_params()
        address = params.ctypes.data
        view = params[:16]  # a view made before the steps sees their result
        worker.join(params.size)
        worker.init_parameters(params)
        reference = AdamWReference(params, **HYPER)
        assert worker.version == 0
        for t in range(3):
            result = worker.step(gradient(0, t), params)
            reference.step(gradient(0, t))
            assert result["step"] == t
        assert params.ctypes.data == address
        np.testing.assert_array_equal(view, params[:16])
        assert_matches(params, reference.params)
        assert worker.version == 3
        assert worker.rank == 0 and worker.world_size == 1 and worker.worker_id > 0
        assert worker.num_elements == SIZE
        traffic = worker.traffic
        assert traffic["steps"] == 3 and traffic["push_fp32_bytes"] == 3 * 4 * SIZE


def test_a_late_worker_receives_the_clusters_parameters(cluster):
    first = cluster.worker(codec="fp32")
    params = initial_params()
    first.join(SIZE)
    first.init_parameters(params)
    first.step(gradient(0, 0), params)
    first.close()  # leaves: the next worker is alone in the cluster
    with cluster.worker(codec="fp32") as late:
        mine = np.zeros(SIZE, dtype=np.float32)  # offered, but the cluster has parameters
        late.join(SIZE)
        late.init_parameters(mine)
        np.testing.assert_array_equal(mine, params)
        assert late.version == 1


def test_overlapped_step_matches_the_reference(cluster):
    worker, params = joined_fp32_worker(cluster)
    with worker:
        reference = AdamWReference(params, **HYPER)
        grads = np.empty(SIZE, dtype=np.float32)
        calls = []

        def compute(t):
            def run(ready):
                # A backward pass: the end of the gradient is final first.
                wanted = gradient(0, t)
                for begin in (7_500, 5_000, 2_500, 0):
                    grads[begin:] = wanted[begin:]
                    ready(begin)
                    calls.append(begin)
            return run

        for t in range(3):
            result = worker.step_overlapped(compute(t), grads, params)
            reference.step(gradient(0, t))
            assert result["step"] == t
        assert calls == [7_500, 5_000, 2_500, 0] * 3
        assert_matches(params, reference.params)


def test_overlapped_step_reraises_what_compute_raised(cluster):
    worker, params = joined_fp32_worker(cluster)
    with worker:
        reference = AdamWReference(params, **HYPER)
        grads = np.zeros(SIZE, dtype=np.float32)
        kept = []

        def failing(ready):
            kept.append(ready)
            # Nothing final yet (an empty suffix): no shard can have been
            # pushed, so the failed step leaves the cluster as it was. (A
            # shard whose range was final may be pushed before the failure,
            # and stays pushed: client/worker.h.)
            ready(SIZE)
            raise KeyError("no gradient this time")

        with pytest.raises(KeyError, match="no gradient this time"):
            worker.step_overlapped(failing, grads, params)
        with pytest.raises(RuntimeError, match="after the gradient computation returned"):
            kept[0](0)  # the callback does not outlive its step
        with pytest.raises(ValueError, match="ready_from"):
            worker.step_overlapped(lambda ready: ready(SIZE + 1), grads, params)
        # The abandoned steps changed nothing: the next one is step 0.
        result = worker.step(gradient(0, 0), params)
        reference.step(gradient(0, 0))
        assert result["step"] == 0
        assert_matches(params, reference.params)


PARTS = [0, 2_500, 5_000, 7_500]  # a background step's layout: four parts of SIZE


def test_background_step_matches_the_reference(cluster):
    worker, params = joined_fp32_worker(cluster)
    with worker:
        reference = AdamWReference(params, **HYPER)
        grads = np.empty(SIZE, dtype=np.float32)
        for t in range(3):
            step = worker.start_background_step(grads, params, PARTS)
            assert step.running and step.num_parts == len(PARTS)
            wanted = gradient(0, t)
            # A backward pass: the end of the gradient is final first; part
            # 1 is marked before part 2, so it waits for it to be reported.
            for part in (3, 1, 2):
                begin = PARTS[part]
                end = PARTS[part + 1] if part + 1 < len(PARTS) else SIZE
                grads[begin:end] = wanted[begin:end]
                assert step.mark_ready(part)
                assert step.is_ready(part)
            assert not step.mark_ready(3)  # a second mark changes nothing
            assert not step.is_ready(0)
            grads[:PARTS[1]] = wanted[:PARTS[1]]  # never marked: final at finish()
            with pytest.raises(RuntimeError, match="one at a time"):
                worker.step(grads, params)  # the step holds the worker until it ends
            result = step.finish()
            assert not step.running
            reference.step(wanted)
            assert result["step"] == t
            with pytest.raises(loco_ps.FailedPreconditionError, match="ended already"):
                step.finish()
        assert_matches(params, reference.params)
        assert worker.version == 3


def test_background_step_refuses_bad_layouts_and_parts(cluster):
    worker, params = joined_fp32_worker(cluster)
    with worker:
        grads = np.zeros(SIZE, dtype=np.float32)
        for part_begins, error, message in (([5, 10], ValueError, "start with 0"),
                                            ([0, 10, 5], ValueError, "must not fall"),
                                            ([0, SIZE + 1], ValueError, "beyond"),
                                            ([0, -1], TypeError, r"part_begins\[1\]"),
                                            ([0, 2.5], TypeError, r"part_begins\[1\]"),
                                            ("0", TypeError, "sequence of ints")):
            with pytest.raises(error, match=message):
                worker.start_background_step(grads, params, part_begins)
        with pytest.raises(ValueError, match="share memory"):
            worker.start_background_step(params, params, PARTS)
        step = worker.start_background_step(grads, params, PARTS)
        with pytest.raises(IndexError, match="outside"):
            step.mark_ready(len(PARTS))
        with pytest.raises(IndexError, match="outside"):
            step.is_ready(-1)
        step.finish()  # the refusals took no slot: the worker went on


def test_an_aborted_or_dropped_background_step_changes_nothing(cluster):
    worker, params = joined_fp32_worker(cluster)
    with worker:
        reference = AdamWReference(params, **HYPER)
        grads = np.zeros(SIZE, dtype=np.float32)
        # Nothing final yet: no shard can have been pushed.
        step = worker.start_background_step(grads, params, PARTS)
        step.mark_ready(0)  # below the unmarked parts: not reported
        step.abort("no gradient this time")
        step.abort("again")  # nothing happens once it has ended
        assert not step.running
        with pytest.raises(loco_ps.FailedPreconditionError, match="ended already"):
            step.finish()
        worker.start_background_step(grads, params, PARTS)  # dropped: aborted
        result = worker.step(gradient(0, 0), params)
        reference.step(gradient(0, 0))
        assert result["step"] == 0
        assert_matches(params, reference.params)


def test_close_aborts_a_background_step(cluster):
    worker, params = joined_fp32_worker(cluster)
    step = worker.start_background_step(np.zeros(SIZE, dtype=np.float32), params, PARTS)
    started = time.monotonic()
    worker.close()  # does not wait for marks that will never come
    assert time.monotonic() - started < 10
    assert worker.closed and not step.running


def test_the_default_codec_trains(cluster):
    # 4-bit LoCo pushes: a quadratic's minimum is approached.
    target = np.random.default_rng(3).standard_normal(SIZE).astype(np.float32)
    with cluster.worker() as worker:
        params = np.zeros(SIZE, dtype=np.float32)
        worker.join(SIZE)
        worker.init_parameters(params)
        before = np.linalg.norm(params - target)
        for _ in range(30):
            worker.step(params - target, params)
        after = np.linalg.norm(params - target)
        assert worker.traffic["push_wire_bytes"] < worker.traffic["push_fp32_bytes"] / 6
    assert after < 0.9 * before


def test_bits_apply_to_the_block_codecs_only(cluster):
    # fp32 and bf16 send every element and have no bits: a value meant for
    # a block codec is ignored (as DistributedOptimizer ignores it), and the
    # worker trains. The block codecs still refuse it.
    for codec in ("fp32", "bf16"):
        with cluster.worker(codec=codec, bits=32) as worker:
            params = initial_params()
            worker.join(SIZE)
            worker.init_parameters(params)
            result = worker.step(gradient(0, worker.version), params)
            assert result["push_wire_bytes"] == (4 if codec == "fp32" else 2) * SIZE
    for codec in ("naive", "ef", "loco"):
        with pytest.raises(loco_ps.InvalidArgumentError, match="bits 32 is not supported"):
            cluster.worker(codec=codec, bits=32)


def test_set_step_hyper_steps_each_group_with_its_own_values(cluster):
    # Two groups across the shard boundary (8192), neither with the servers'
    # flags: each range follows AdamW with its group's values, and an empty
    # list goes back to the flags.
    split = 6000
    first = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-7, weight_decay=0.0)
    second = dict(lr=0.002, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.2)

    def groups():
        return [(0, split, first["lr"], *first["betas"], first["eps"], first["weight_decay"]),
                (split, SIZE, second["lr"], *second["betas"], second["eps"],
                 second["weight_decay"])]

    start = initial_params()
    params = start.copy()
    with cluster.worker(codec="fp32") as worker:
        with pytest.raises(loco_ps.FailedPreconditionError, match="join first"):
            worker.set_step_hyper(groups())
        worker.join(SIZE)
        worker.init_parameters(params)
        worker.set_step_hyper(groups())
        references = [AdamWReference(start[:split], **first),
                      AdamWReference(start[split:], **second)]
        for t in range(4):
            g = gradient(0, t)
            worker.step(g, params)
            references[0].step(g[:split])
            references[1].step(g[split:])
        assert_matches(params[:split], references[0].params)
        assert_matches(params[split:], references[1].params)

        # Back to the servers' flags (HYPER): the next step follows them.
        worker.set_step_hyper([])
        flags = AdamWReference(start, **HYPER)
        flags.t, flags.params = 4, params.copy()
        flags.m = np.concatenate([references[0].m, references[1].m])
        flags.v = np.concatenate([references[0].v, references[1].v])
        g = gradient(0, 4)
        worker.step(g, params)
        flags.step(g)
        assert_matches(params, flags.params)


def test_set_step_hyper_refuses_bad_groups_and_keeps_the_earlier_ones(cluster):
    good = [(0, SIZE, 0.03, 0.9, 0.99, 1e-6, 0.0)]
    bad = [
        ("not a list", 3, TypeError, "list"),
        ("a short tuple", [(0, SIZE, 0.01)], TypeError, r"groups\[0\]"),
        ("a float index", [(0.0, SIZE, 0.01, 0.9, 0.99, 1e-6, 0.0)], TypeError, "begin"),
        ("a string lr", [(0, SIZE, "fast", 0.9, 0.99, 1e-6, 0.0)], TypeError, "lr"),
        ("a gap", [(0, 10, 0.01, 0.9, 0.99, 1e-6, 0.0), (20, SIZE, 0.01, 0.9, 0.99, 1e-6, 0.0)],
         ValueError, "should begin at 10"),
        ("short of the end", [(0, SIZE - 1, 0.01, 0.9, 0.99, 1e-6, 0.0)], ValueError,
         "every element needs a group"),
        ("beta1 of 1", [(0, SIZE, 0.01, 1.0, 0.99, 1e-6, 0.0)], ValueError, "beta1"),
        ("a negative lr", [(0, SIZE, -0.01, 0.9, 0.99, 1e-6, 0.0)], ValueError, "lr"),
    ]
    start = initial_params()
    params = start.copy()
    with cluster.worker(codec="fp32") as worker:
        worker.join(SIZE)
        worker.init_parameters(params)
        worker.set_step_hyper(good)
        for what, groups, error, message in bad:
            with pytest.raises(error, match=message):
                worker.set_step_hyper(groups)
        reference = AdamWReference(start, lr=0.03, betas=(0.9, 0.99), eps=1e-6,
                                   weight_decay=0.0)
        for t in range(3):
            worker.step(gradient(0, t), params)
            reference.step(gradient(0, t))
        assert_matches(params, reference.params)


def test_workers_that_disagree_on_a_steps_lr_get_invalid_argument():
    # The first push to a shard fixes the step's values; the other worker's
    # step raises InvalidArgumentError naming lr and withdraws from the step,
    # so the winner's step completes on its own gradient while the refused
    # worker does nothing (as a notebook showing the error does). Once the
    # refused worker sends the same values, it resynchronises to the
    # winner's parameters and the next step takes both gradients.
    with loco_ps.Cluster(num_servers=1, pull_codec="fp32", **HYPER) as cluster:
        _disagree_then_agree(cluster)


def _disagree_then_agree(cluster):
    start = initial_params()
    params = [start.copy(), start.copy()]
    lrs = [0.01, 0.02]
    workers = [cluster.worker(codec="fp32", name=f"w{i}", step_timeout_ms=30000)
               for i in range(2)]
    outcome = [None, None]
    try:
        for i, worker in enumerate(workers):
            worker.join(SIZE)
        for i, worker in enumerate(workers):
            worker.init_parameters(params[i])
            worker.set_step_hyper([(0, SIZE, lrs[i], 0.9, 0.99, 1e-6, 0.0)])

        def step(i):
            try:
                outcome[i] = workers[i].step(gradient(i, 0), params[i])
            except loco_ps.ClusterError as error:
                outcome[i] = error

        threads = [threading.Thread(target=step, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        # Both returned: one refused, the other (before withdrawals: waiting
        # until step_timeout_ms, then DeadlineExceededError) completed.
        refused = [i for i in range(2) if isinstance(outcome[i], loco_ps.ClusterError)]
        assert len(refused) == 1, outcome
        refused = refused[0]
        winner = 1 - refused
        error = outcome[refused]
        assert isinstance(error, loco_ps.InvalidArgumentError), error
        assert "lr" in str(error)
        assert isinstance(outcome[winner], dict), outcome[winner]
        reference = AdamWReference(start, lr=lrs[winner], betas=(0.9, 0.99), eps=1e-6,
                                   weight_decay=0.0)
        reference.step(gradient(winner, 0))
        assert_matches(params[winner], reference.params)

        workers[refused].set_step_hyper([(0, SIZE, lrs[winner], 0.9, 0.99, 1e-6, 0.0)])
        result = workers[refused].step(gradient(refused, 0), params[refused])
        assert result["resynced"], result
        np.testing.assert_array_equal(params[refused], params[winner])

        threads = [threading.Thread(target=step_one, args=(workers[i], i, params[i], outcome))
                   for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        assert all(isinstance(o, dict) for o in outcome), outcome
    finally:
        for worker in workers:
            worker.close()
    reference.step(mean_gradient([gradient(0, 1), gradient(1, 1)]))
    assert_matches(params[0], reference.params)
    np.testing.assert_array_equal(params[0], params[1])


def step_one(worker, i, params, outcome):
    """Step 1 of worker `i` on a thread; its result or error in outcome[i]."""
    try:
        outcome[i] = worker.step(gradient(i, 1), params)
    except loco_ps.ClusterError as error:
        outcome[i] = error


def test_close_is_idempotent_and_later_calls_raise(cluster):
    worker, params = joined_fp32_worker(cluster)
    worker.step(gradient(0, 0), params)
    worker.leave()
    worker.leave()
    worker.close()
    worker.close()
    assert worker.closed and worker.version == 1
    with pytest.raises(loco_ps.FailedPreconditionError, match="closed"):
        worker.step(gradient(0, 1), params)


def test_a_worker_serves_its_metrics_on_the_port_it_bound_until_closed(cluster):
    worker = cluster.worker(codec="loco", bits=4, metrics_port=0)
    params = initial_params()
    worker.join(SIZE)
    worker.init_parameters(params)
    for step in range(3):
        worker.step(gradient(0, step), params)
    address = worker.metrics_address
    host, port = address.rsplit(":", 1)
    assert host == "127.0.0.1" and 0 < int(port) <= 65535
    samples = scrape(address)
    traffic = worker.traffic
    # The counters the worker's own traffic dict reports, summed over shards.
    for direction in ("push", "pull"):
        wire = total(samples, "loco_worker_wire_bytes_total", direction=direction)
        fp32 = total(samples, "loco_worker_fp32_bytes_total", direction=direction)
        assert wire == traffic[f"{direction}_wire_bytes"] > 0, direction
        assert fp32 == traffic[f"{direction}_fp32_bytes"] >= wire, direction
    assert traffic["push_fp32_bytes"] > 6 * traffic["push_wire_bytes"]  # 4-bit codes
    assert samples["process_resident_memory_bytes"] > 0
    worker.close()
    assert worker.metrics_address is None
    with pytest.raises(OSError):  # the port is let go at close
        scrape(address)
    # And when a worker is collected without close(): its server does not
    # hold it alive.
    dropped = cluster.worker(metrics_port=0)
    address = dropped.metrics_address
    assert scrape(address)["process_resident_memory_bytes"] > 0
    del dropped
    gc.collect()
    with pytest.raises(OSError):
        scrape(address)


def test_metrics_port_and_host_are_checked_before_anything_starts(cluster):
    for port, error, says in [(True, TypeError, "must be an int"),
                              ("9400", TypeError, "must be an int"),
                              (-1, ValueError, "metrics_port=-1 is not a port"),
                              (65536, ValueError, "0 for any free port"),
                              (2 ** 70, ValueError, "out of range")]:
        with pytest.raises(error, match=says):
            cluster.worker(metrics_port=port)
    with pytest.raises(ValueError, match="metrics_host='bad!!'"):
        cluster.worker(metrics_port=0, metrics_host="bad!!")
    without = cluster.worker()
    assert without.metrics_address is None
    without.close()


def test_a_metrics_port_that_is_taken_raises_unavailable_naming_it(cluster):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(loco_ps.UnavailableError, match=f"metrics_port: .*{port}"):
            cluster.worker(metrics_port=port)
