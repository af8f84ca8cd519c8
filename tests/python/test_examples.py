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


@pytest.mark.parametrize("args, says", [
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
