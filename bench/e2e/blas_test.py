"""Tests of blas.py: how a measured run chooses OpenBLAS's kernels.

choose() is tested with its probe replaced (the one piece below it), so
that every branch runs on any machine; the probe itself runs for real, but
only under the environment as it is: tests never unpin OpenBLAS, since on
some processors the unpinned kernels are what the pin protects against.
"""
import os
import subprocess
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas  # noqa: E402

PINNED = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "PATH": "/usr/bin"}


class ChooseTest(unittest.TestCase):
    def test_inherit_changes_nothing_and_runs_no_probe(self):
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=AssertionError("probed")):
            line = blas.choose("inherit", env)
        self.assertEqual(env, PINNED)
        self.assertIn("OPENBLAS_CORETYPE=Haswell", line)

    def test_auto_unpins_both_when_the_probe_passes(self):
        env = dict(PINNED)
        seen = {}

        def probe(trial):
            seen.update(trial)
            return "Cooperlake", 0.4
        with mock.patch.object(blas, "probe", side_effect=probe):
            line = blas.choose("auto", env)
        self.assertNotIn("OPENBLAS_CORETYPE", seen)  # probed unpinned
        self.assertNotIn("OPENBLAS_L2_SIZE", seen)
        self.assertEqual(env, {"PATH": "/usr/bin"})
        self.assertIn("Cooperlake", line)

    def test_auto_keeps_the_pin_when_the_probe_fails_or_cannot_run(self):
        for outcome in (("Cooperlake", 3.0), RuntimeError("no numpy")):
            env = dict(PINNED)
            effect = outcome if isinstance(outcome, Exception) else (lambda t, o=outcome: o)
            with mock.patch.object(blas, "probe", side_effect=effect):
                line = blas.choose("auto", env)
            self.assertEqual(env, PINNED, line)
            self.assertIn("as the environment has them", line)

    def test_a_named_core_is_set_only_when_it_passes(self):
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", return_value=("SkylakeX", 0.5)):
            blas.choose("SkylakeX", env)
        self.assertEqual(env, {"PATH": "/usr/bin", "OPENBLAS_CORETYPE": "SkylakeX"})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", return_value=("SkylakeX", 7.0)):
            with self.assertRaises(RuntimeError):
                blas.choose("SkylakeX", env)
        self.assertEqual(env, PINNED)


class ProbeTest(unittest.TestCase):
    def test_the_environments_kernels_pass_and_name_themselves(self):
        try:
            subprocess.run(["/usr/bin/python3", "-c", "import numpy"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError):
            self.skipTest("python3-numpy is missing (scripts/install-deps.sh --bench)")
        core, worst = blas.probe(dict(os.environ))
        self.assertNotEqual(core, "unknown")
        self.assertGreater(worst, 0.0)  # fp32 products do round
        self.assertLessEqual(worst, 1.0)


if __name__ == "__main__":
    unittest.main()
