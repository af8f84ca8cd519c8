"""loco_ps.torch.DistributedOptimizer against a real local cluster
(loco_ps.Cluster: a coordinator and parameter servers as processes).

1. fp32, one worker: the parameters equal torch.optim.AdamW's.
2. fp32, two worker processes, each on half of every batch: equal to AdamW
   on the full batch's mean gradient.
3. LoCo-4 and fp32 from the same seed both learn.
4. Bad input gets a clear exception, and the cluster trains on.
Also: overlap=True is bit for bit overlap=False; a bfloat16 model trains on
the servers' fp32 master; model.share_memory() after building trains the
same; a second backward with overlap=True says what was applied, and the
resynchronised step after it warns; mistakes found locally are refused
before the cluster is touched.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

import loco_ps  # noqa: E402
import loco_ps.torch as lps  # noqa: E402
import torch_task  # noqa: E402
from prom_text import scrape, total  # noqa: E402
from torch_task import (batches, make_model, max_relative_difference,  # noqa: E402
                        param_groups, train)

HERE = os.path.dirname(os.path.abspath(__file__))
LR, WEIGHT_DECAY = 1e-2, 0.05
STEPS = 24
# Relative to each tensor's largest element (torch_task.max_relative_difference):
# the servers' float32 AdamW and torch's differ by an ulp or so per step.
PARITY_TOLERANCE = 1e-5


def fp32_cluster(**kwargs):
    """Servers whose flags equal the optimizer's defaults, returning fp32
    parameters (the delta codec's 8-bit rounding would hide a mismatch)."""
    return loco_ps.Cluster(num_servers=2, lr=LR, weight_decay=WEIGHT_DECAY, pull_codec="fp32",
                           **kwargs)


def optimizer(params, cluster, **kwargs):
    kwargs = {"codec": "fp32", "lr": LR, "weight_decay": WEIGHT_DECAY, "insecure": True,
              **kwargs}
    return lps.DistributedOptimizer(params, coordinator=cluster.coordinator, **kwargs)


def reference_run(groups, steps=STEPS):
    model = make_model()
    params = param_groups(model, LR) if groups else model.parameters()
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)
    train(model, opt, batches(steps), with_scheduler=groups)
    return model


@pytest.mark.parametrize("groups", [False, True], ids=["one-group", "groups-and-scheduler"])
def test_one_worker_fp32_matches_torch_adamw(groups):
    reference = reference_run(groups)
    with fp32_cluster() as cluster:
        model = make_model()
        with optimizer(param_groups(model, LR) if groups else model, cluster) as opt:
            train(model, opt, batches(STEPS), with_scheduler=groups)
            assert opt.worker.version == STEPS
    difference = max_relative_difference(model, reference)
    print(f"one worker, {'groups' if groups else 'one group'}: max relative difference "
          f"{difference:.3g}")
    assert difference < PARITY_TOLERANCE


@pytest.mark.parametrize("groups", [False, True], ids=["one-group", "groups-and-scheduler"])
def test_two_workers_fp32_match_adamw_on_the_mean_gradient(groups, tmp_path):
    reference = reference_run(groups)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    with fp32_cluster() as cluster:
        workers = []
        for part in range(2):
            argv = [sys.executable, os.path.join(HERE, "torch_parity_worker.py"),
                    f"--coordinator={cluster.coordinator}", f"--part={part}", "--parts=2",
                    f"--steps={STEPS}", f"--lr={LR!r}", f"--weight-decay={WEIGHT_DECAY!r}",
                    f"--out={tmp_path / f'part{part}.pt'}"] + (["--groups"] if groups else [])
            workers.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True))
        outputs = [w.communicate(timeout=240)[0] for w in workers]
    for w, output in zip(workers, outputs):
        assert w.returncode == 0, output
    for part in range(2):
        model = make_model()
        model.load_state_dict(torch.load(tmp_path / f"part{part}.pt"))
        difference = max_relative_difference(model, reference)
        print(f"two workers, part {part}: max relative difference {difference:.3g}")
        assert difference < PARITY_TOLERANCE


def test_a_bfloat16_model_trains_on_the_servers_fp32_master():
    # The model stays bfloat16; the servers' fp32 AdamW is the master. The
    # reference: torch.optim.AdamW on an fp32 master whose gradient comes from
    # a bfloat16 copy of it. After every step the model holds the cluster's
    # values rounded to bfloat16, exactly.
    steps = 6
    model = make_model().bfloat16()
    master, low = make_model(), make_model().bfloat16()
    with torch.no_grad():
        for m, p in zip(master.parameters(), model.parameters()):
            m.copy_(p)
    ref_opt = torch.optim.AdamW(master.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    data = batches(steps)
    with fp32_cluster() as cluster, optimizer(model, cluster) as opt:
        for x, y in data:
            with torch.no_grad():
                for lp, m in zip(low.parameters(), master.parameters()):
                    lp.copy_(m)
            low.zero_grad()
            torch.nn.functional.cross_entropy(low(x.bfloat16()).float(), y).backward()
            for m, lp in zip(master.parameters(), low.parameters()):
                m.grad = lp.grad.float()
            ref_opt.step()

            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x.bfloat16()).float(), y).backward()
            opt.step()
            for i, p in enumerate(model.parameters()):
                assert p.dtype == torch.bfloat16
                assert torch.equal(p, opt._flat.value_view(i).bfloat16()), i
        values = opt._flat.values.clone()
    reference = torch.cat([m.detach().reshape(-1) for m in master.parameters()])
    worst = float((values - reference).abs().max() / reference.abs().max())
    print(f"bfloat16 model, {steps} steps: the fp32 masters differ by {worst:.3g}")
    assert worst < 1e-3


def test_loco4_and_fp32_both_learn():
    data = batches(80, size=128)
    final = {}
    for codec in ("fp32", "loco"):
        with loco_ps.Cluster(num_servers=2, lr=LR, weight_decay=0.0) as cluster:
            model = make_model()
            with optimizer(model, cluster, codec=codec, bits=4, weight_decay=0.0,
                           metrics_port=0) as opt:
                losses = train(model, opt, data)
                if codec == "loco":
                    traffic = opt.traffic
                    pushed = total(scrape(opt.metrics_address), "loco_worker_wire_bytes_total",
                                   direction="push")
            assert opt.metrics_address is None  # closed: the port is let go
        first, last = losses[0], sum(losses[-10:]) / 10
        print(f"{codec}: loss {first:.4f} -> {last:.4f}")
        assert last < 0.5 * first, f"{codec} did not learn: loss {first:.4f} -> {last:.4f}"
        final[codec] = last
    # LoCo-4 lands near fp32, and its pushes are ~8x smaller.
    assert final["loco"] < 1.5 * final["fp32"] + 0.05
    assert traffic["push_fp32_bytes"] > 6 * traffic["push_wire_bytes"]
    # What Prometheus would scrape from the worker (metrics_port) is what
    # the optimizer's own counters say.
    assert pushed == traffic["push_wire_bytes"]


def test_bad_input_gets_clear_errors_and_the_cluster_trains_on():
    data = batches(6)
    with fp32_cluster() as cluster:
        model = make_model()
        with optimizer(model, cluster) as opt:
            losses = train(model, opt, data[:2])

            complex_model = make_model()
            complex_model.register_parameter(
                "phase", torch.nn.Parameter(torch.zeros(3, dtype=torch.complex64)))
            with pytest.raises(TypeError, match=r"phase has dtype torch\.complex64"):
                optimizer(complex_model, cluster)

            bigger = torch.nn.Sequential(make_model(), torch.nn.Linear(torch_task.CLASSES, 2))
            with pytest.raises(loco_ps.ClusterError) as refused:
                optimizer(bigger, cluster, join_timeout_ms=5000)
            print(f"a model of another size: {refused.value!r}")
            assert isinstance(refused.value, (loco_ps.InvalidArgumentError,
                                              loco_ps.FailedPreconditionError))

            started = time.monotonic()
            with pytest.raises(loco_ps.ClusterError) as unreachable:
                optimizer(make_model(), _Address("127.0.0.1:1"), rpc_timeout_ms=500,
                          max_retries=1, join_timeout_ms=2000, coordinator_outage_ms=2000)
            print(f"no coordinator there: {unreachable.value!r} after "
                  f"{time.monotonic() - started:.1f} s")
            assert time.monotonic() - started < 30
            with pytest.raises((ValueError, loco_ps.ClusterError)):
                optimizer(make_model(), _Address("not an address"))

            losses += train(model, opt, data[2:])
            assert opt.worker.version == 6
    reference = reference_run(groups=False, steps=6)
    assert max_relative_difference(model, reference) < PARITY_TOLERANCE


class _Address:
    """Stands in for a Cluster where only the coordinator address matters."""

    def __init__(self, coordinator):
        self.coordinator = coordinator


class _SlowBackward(torch.autograd.Function):
    """Identity whose backward sleeps, as a long backward pass takes time
    between layers: the last layers' gradients are pushed meanwhile."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.02)
        return grad


class _Slow(torch.nn.Module):
    def forward(self, x):
        return _SlowBackward.apply(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_overlap_is_bit_for_bit_the_plain_step(dtype):
    # bfloat16: staged parameters, whose gradients the backward hooks copy
    # into the flat buffer while the C++ step thread pushes.
    data = [(x.to(dtype), y) for x, y in batches(10)]
    results = {}
    for overlap in (False, True):
        with loco_ps.Cluster(num_servers=2, lr=LR, weight_decay=WEIGHT_DECAY) as cluster:
            model = make_model().to(dtype)
            model.insert(2, _Slow())
            with optimizer(model, cluster, codec="loco", overlap=overlap) as opt:
                for x, y in data:
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(model(x).float(), y).backward()
                    opt.step()
                assert opt.worker.version == len(data)
            results[overlap] = [p.detach().clone() for p in model.parameters()]
    for plain, overlapped in zip(results[False], results[True]):
        assert plain.dtype == dtype
        assert torch.equal(plain, overlapped)


def test_an_expired_worker_rejoins_inside_step():
    """A worker stopped (SIGSTOP) past the heartbeat timeout is expired by
    the coordinator; once it runs again, its next step() joins again and
    training goes on."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    with loco_ps.Cluster(num_servers=1, heartbeat_timeout_ms=2000) as cluster:
        worker = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "torch_elastic_worker.py"),
             f"--coordinator={cluster.coordinator}", "--steps=12", "--interval=0.1"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        try:
            for line in worker.stdout:
                lines.append(line)
                if line == "STEP 3\n" and lines.count(line) == 1:
                    worker.send_signal(signal.SIGSTOP)
                    time.sleep(5.0)  # 2.5 heartbeat timeouts
                    worker.send_signal(signal.SIGCONT)
            worker.wait(timeout=120)
        finally:
            worker.kill()
    output = "".join(lines)
    assert worker.returncode == 0, output
    rejoined = [int(line.split()[1]) for line in lines if line.startswith("REJOINED ")]
    # Once, unless a loaded machine delayed heartbeats past the timeout again.
    assert rejoined and rejoined[0] >= 1, output
    # 12 steps; the one that found the worker expired was dropped (and the
    # one before it too, when its push came before the expiry was seen and
    # was refused).
    versions = [int(line.split()[1]) for line in lines if line.startswith("STEP ")]
    assert len(versions) == 12 and versions[:3] == [1, 2, 3], output
    assert versions == sorted(versions), output
    assert 12 - 2 * rejoined[0] <= versions[-1] <= 12 - rejoined[0], output


def bn_model(seed=0):
    torch.manual_seed(seed)
    # 5 636 parameters and 512 float buffers: two shards.
    return torch.nn.Sequential(torch.nn.Linear(torch_task.INPUTS, 256),
                               torch.nn.BatchNorm1d(256), torch.nn.Tanh(),
                               torch.nn.Linear(256, torch_task.CLASSES))


def float_buffers(model):
    return {n: b.clone() for n, b in model.named_buffers() if b.is_floating_point()}


def train_two_bn_workers(cluster, steps, buffers, overlap=False):
    """Two workers on two threads, each on its own half of every batch;
    records each worker's model state before every step and its float
    buffers after."""
    import copy
    import threading
    data = batches(steps, size=64)
    models = [bn_model(), bn_model(seed=1)]  # the second's init is overwritten
    records = [[], []]
    errors = []
    barrier = threading.Barrier(2)

    def run(index):
        try:
            model = models[index]
            with optimizer(model, cluster, buffers=buffers, overlap=overlap,
                           weight_decay=0.0) as opt:
                barrier.wait(timeout=60)
                for x, y in data:
                    x, y = x[index * 32:(index + 1) * 32], y[index * 32:(index + 1) * 32]
                    before = copy.deepcopy(model.state_dict())
                    opt.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    opt.step()
                    records[index].append((before, x, float_buffers(model)))
        except BaseException as error:  # reported on the main thread
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    return records


F = torch.nn.functional


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
def test_averaged_buffers_hold_the_workers_mean_after_every_step(overlap):
    # Each step: both workers start from the same parameters and buffers;
    # after it, both hold the mean of what each one's forward made of them,
    # computed here by replaying each worker's forward on a copy.
    steps = 6
    with fp32_cluster() as cluster:
        records = train_two_bn_workers(cluster, steps, "average", overlap)
    for t in range(steps):
        before = [records[i][t][0] for i in range(2)]
        for name, value in before[0].items():
            assert torch.equal(value, before[1][name]), f"step {t}: {name} differs before"
        expected = {}
        for i in range(2):
            replay = bn_model()
            replay.load_state_dict(before[i])
            replay.train()
            with torch.no_grad():
                replay(records[i][t][1])
            for name, value in float_buffers(replay).items():
                expected[name] = expected.get(name, 0) + value / 2
        for i in range(2):
            for name, value in records[i][t][2].items():
                torch.testing.assert_close(value, expected[name], rtol=1e-6, atol=1e-7,
                                           msg=f"step {t}, worker {i}: {name}")


def test_without_averaging_the_workers_buffers_drift_apart():
    with fp32_cluster() as cluster:
        records = train_two_bn_workers(cluster, 3, None)
    last = [records[i][-1][2] for i in range(2)]
    assert not torch.equal(last[0]["1.running_mean"], last[1]["1.running_mean"])


def test_bad_buffers_arguments_are_named():
    with fp32_cluster() as cluster:
        model = bn_model()
        with pytest.raises(ValueError, match="buffers='everything'"):
            optimizer(model, cluster, buffers="everything")
        with pytest.raises(ValueError, match="buffers=model"):
            optimizer(param_groups(model, LR), cluster, buffers="average")
        with pytest.raises(TypeError, match="buffers is a int"):
            optimizer(model, cluster, buffers=3)
        model.register_buffer("phase", torch.zeros(3, dtype=torch.complex64))
        with pytest.raises(TypeError, match="buffer phase has dtype torch.complex64"):
            optimizer(list(bn_model().parameters()), cluster, buffers=model)
        with pytest.raises(NotImplementedError, match="buffers=\"average\""):
            lps.broadcast_buffers(model)


def test_a_wrong_token_is_refused_and_the_cluster_trains_on(tmp_path):
    good, bad = tmp_path / "token", tmp_path / "wrong-token"
    good.write_text("a-token-the-cluster-was-started-with-0123456789\n")
    bad.write_text("some-other-token-nobody-gave-the-cluster-98765\n")
    data = batches(4)
    with loco_ps.Cluster(num_servers=2, lr=LR, weight_decay=WEIGHT_DECAY, pull_codec="fp32",
                         auth_token_file=good) as cluster:
        model = make_model()
        with optimizer(model, cluster, auth_token_file=str(good)) as opt:
            train(model, opt, data[:2])
            with pytest.raises(loco_ps.PermissionDeniedError) as refused:
                optimizer(make_model(), cluster, auth_token_file=str(bad), max_retries=1,
                          join_timeout_ms=3000)
            print(f"a wrong token: {refused.value!r}")
            assert opt.world_size == 1, "the refused worker was admitted"
            train(model, opt, data[2:])
            assert opt.worker.version == 4
    reference = reference_run(groups=False, steps=4)
    assert max_relative_difference(model, reference) < PARITY_TOLERANCE


def test_share_memory_after_building_matches_torch_adamw():
    # model.share_memory() moves the flat storage the worker reads and
    # writes; the optimizer must follow it.
    steps = 6
    with fp32_cluster() as cluster:
        model = make_model()
        with optimizer(model, cluster) as opt:
            model.share_memory()
            train(model, opt, batches(steps))
            assert all(p.is_shared() for p in model.parameters())
    assert max_relative_difference(model, reference_run(groups=False, steps=steps)) \
        < PARITY_TOLERANCE


def test_a_second_backward_with_overlap_is_reported_truthfully():
    # One worker: the first backward made the whole gradient final, so the
    # servers apply the step (one shard, whose step this test waits for);
    # the error says they may have, and the next step(), whose push the
    # servers refuse, warns that it resynchronised.
    data = batches(4)
    with loco_ps.Cluster(num_servers=1, lr=LR, weight_decay=WEIGHT_DECAY,
                         pull_codec="fp32") as cluster:
        model = make_model()
        with optimizer(model, cluster, overlap=True) as opt:
            train(model, opt, data[:1])
            x, y = data[1]
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            with cluster.worker() as observer:
                assert observer.wait_for_cluster_step(2, 30) == 2
            with pytest.raises(RuntimeError, match=r"no_sync.*may already have applied"):
                F.cross_entropy(model(x), y).backward()
            with pytest.warns(RuntimeWarning, match=r"not applied with this worker's gradient"):
                train(model, opt, data[2:3])
            assert opt.last_step_result["resynced"]
            assert opt.worker.version == 2  # the aborted step 1 was applied
            train(model, opt, data[3:])
            assert opt.worker.version == 3
    # The cluster applied data[1]'s first gradient and dropped data[2]'s.
    reference = make_model()
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    train(reference, ref_opt, [data[0], data[1], data[3]])
    assert max_relative_difference(model, reference) < PARITY_TOLERANCE


def test_local_mistakes_are_refused_before_the_cluster_is_touched():
    with fp32_cluster() as cluster:
        model = make_model()
        params = list(model.parameters())
        # A duplicated parameter is refused before joining, so the cluster's
        # model size is not fixed wrongly and the corrected call works.
        with pytest.raises(ValueError, match="more than once"):
            optimizer([params[0]] + params, cluster)
        # So are more param groups than a push carries (these 4097 would
        # have fixed the model size at 4097 elements).
        many = [{"params": [torch.nn.Parameter(torch.zeros(1))]} for _ in range(4097)]
        with pytest.raises(ValueError, match="a push carries at most 4096"):
            optimizer(many, cluster)
        # bits do not apply to fp32 (the Worker would refuse bits=32).
        with optimizer(params, cluster, bits=32) as old:
            train(model, old, batches(1))
            # A second optimizer on the same cluster, on this thread, while
            # the first lives on (a re-run notebook cell): its step would
            # wait for the idle member; it says so at once.
            other = make_model()
            with optimizer(other, cluster, step_timeout_ms=3000) as opt:
                started = time.monotonic()
                with pytest.raises(RuntimeError, match=r"another DistributedOptimizer .*still a "
                                                       r"member"):
                    train(other, opt, batches(1))
                assert time.monotonic() - started < 2
                old.close()
                train(other, opt, batches(1))
                assert opt.worker.version == 2
