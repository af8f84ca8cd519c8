"""examples/torch_fashion_mnist.py, run as its users run it: a few steps
of LoCo-4 against a local cluster on Debian's Fashion-MNIST, and its
refusals of bad flags."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "torch_fashion_mnist.py")
DATA_DIR = "/usr/share/datasets/fashion-mnist"

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
    pytest.mark.skipif(not os.path.isdir(DATA_DIR),
                       reason="needs Debian's dataset-fashion-mnist (scripts/install-deps.sh)"),
]


def run_example(*args, timeout=240):
    return subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def test_a_few_steps_of_loco_4_learn_and_push_a_fraction_of_fp32():
    done = run_example("--workers", "2", "--servers", "2", "--max-steps", "8", "--seed", "1")
    said = f"exit status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    final = re.search(r"final test accuracy ([0-9.]+)% after 8 steps .*pushed ([0-9.]+) MiB of "
                      r"gradients \(as fp32: ([0-9.]+) MiB\)", done.stdout)
    assert final, said
    accuracy, pushed, as_fp32 = (float(g) for g in final.groups())
    # Ten classes: chance is 10 %. Eight steps of 2 x 64 images reach about 60 %.
    assert accuracy > 30, said
    # 4-bit codes plus one fp32 scale per 128-element block: 32 / 4.25 = 7.5 x
    # less than fp32 (the printed MiB are rounded to 0.1).
    assert 6.0 < as_fp32 / pushed < 9.0, said


def test_the_workers_of_each_step_share_its_global_batch_whatever_their_number():
    """step_batch: while workers leave and join, each step's ranks together
    take exactly the step's --workers x --batch-size images, each once, and
    the steps of an epoch never take one image twice."""
    import numpy as np
    spec = importlib.util.spec_from_file_location("torch_fashion_mnist", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    order = np.random.default_rng(5).permutation(1200)
    workers, batch_size = 4, 25
    global_batch = workers * batch_size
    seen = []
    for step, world in enumerate([4, 4, 3, 3, 5, 1, 2, 4, 7, global_batch, global_batch + 1]):
        shares = [example.step_batch(order, step, global_batch, rank, world)
                  for rank in range(world)]
        step_images = order[step * global_batch:(step + 1) * global_batch]
        assert all(len(share) > 0 for share in shares), (step, world)
        if world <= global_batch:
            taken = np.sort(np.concatenate(shares))
            assert np.array_equal(taken, np.sort(step_images)), (step, world)
            assert max(map(len, shares)) - min(map(len, shares)) <= 1, (step, world)
            seen.extend(taken.tolist())
        else:  # more workers than images: the last repeat one, none is missed
            assert set(np.concatenate(shares).tolist()) == set(step_images.tolist())
        if world == workers:
            assert all(len(share) == batch_size for share in shares), step
    assert len(seen) == len(set(seen)), "an image was taken twice in one epoch"


def test_two_processes_join_a_running_cluster_as_its_workers():
    """--coordinator: each process is one worker of a cluster it did not
    start (here a loco_ps.Cluster of this test, as a Kubernetes deployment
    would be), shares the data by the cluster's rank and world, and serves
    its /metrics when asked."""
    import loco_ps
    with loco_ps.Cluster(num_servers=2, lr=2e-3, weight_decay=0.0) as cluster:
        common = ["--coordinator", cluster.coordinator, "--insecure", "--workers", "2",
                  "--max-steps", "8", "--seed", "1"]
        procs = [subprocess.Popen([sys.executable, EXAMPLE, *common, "--name", f"joined-{i}",
                                   *(["--metrics-port", "0"] if i == 0 else [])],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ))
                 for i in range(2)]
        outputs = [p.communicate(timeout=240) for p in procs]
        # A pod the Deployment restarts after the run finds its steps done.
        again = run_example(*common[:3], "--workers", "1", "--max-steps", "8", timeout=120)
        log = cluster.log("coordinator")
    said = "\n".join(f"worker {i}: exit status {p.returncode}\nstdout:\n{out}\nstderr:\n"
                     f"{err[-2000:]}" for i, (p, (out, err)) in enumerate(zip(procs, outputs)))
    assert all(p.returncode == 0 for p in procs), said
    stdout = [out for out, _ in outputs]
    # Rank 0, whichever process it is, evaluates; both report their pushes.
    accuracies = [float(a) for out in stdout
                  for a in re.findall(r"epoch 1 \(8 of \d+ steps\): .*test accuracy ([0-9.]+)%",
                                      out)]
    assert len(accuracies) == 1 and accuracies[0] > 30, said
    for out in stdout:
        pushed = re.search(r"done: pushed ([0-9.]+) MiB of gradients \(as fp32: ([0-9.]+) MiB\)",
                           out)
        assert pushed and 6.0 < float(pushed.group(2)) / float(pushed.group(1)) < 9.0, said
    assert re.search(r"metrics: http://127\.0\.0\.1:\d+/metrics", stdout[0]), said
    assert "metrics:" not in stdout[1], said
    assert "joined-0" in log and "joined-1" in log, log
    assert again.returncode == 0, again.stderr[-2000:]
    assert "the cluster is at step 8 of 8: nothing left to train" in again.stdout, again.stdout
    assert "done: pushed 0.0 MiB" in again.stdout, again.stdout


@pytest.mark.parametrize("args, says", [
    (["--coordinator", "127.0.0.1:1"], "give --tls-ca (the cluster's CA) or --insecure"),
    (["--coordinator", "127.0.0.1:1", "--insecure", "--servers", "2"],
     "--servers: the cluster of --coordinator has its own servers"),
    (["--coordinator", "127.0.0.1:1", "--insecure", "--metrics-port", "70000"],
     "--metrics-port 70000: expected a port in [0, 65535]"),
    (["--metrics-port", "0"], "--metrics-port: for joining a running cluster (--coordinator)"),
    (["--bits", "3"], "--bits 3: the block codecs take 2, 4 or 8 bits"),
    (["--codec", "lossy"], "--codec 'lossy': choose one of"),
    (["--workers", "0"], "--workers 0: need at least 1 worker"),
    (["--data-dir", "/nonexistent"], "install Debian's dataset-fashion-mnist"),
])
def test_a_bad_flag_is_refused_before_anything_starts(args, says):
    done = run_example(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr, done.stderr
    assert "cluster:" not in done.stdout, done.stdout
