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
AVX512 = {"avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


def stub(table):
    """A probe answering from table: OPENBLAS_CORETYPE (None = unset) ->
    (core, worst, seconds) or an exception; records what it was asked."""
    asked = []

    def probe(trial):
        key = trial.get("OPENBLAS_CORETYPE")
        asked.append((key, trial.get("OPENBLAS_L2_SIZE")))
        out = table[key]
        if isinstance(out, Exception):
            raise out
        return out
    return probe, asked


class ChooseTest(unittest.TestCase):
    def test_inherit_changes_nothing_and_runs_no_probe(self):
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=AssertionError("probed")):
            line = blas.choose("inherit", env)
        self.assertEqual(env, PINNED)
        self.assertIn("OPENBLAS_CORETYPE=Haswell", line)

    def test_auto_takes_the_fastest_candidate_that_passes(self):
        # OpenBLAS's own choice is its slow fallback; Cooperlake is fastest
        # but fails; SkylakeX passes and beats the pin.
        probe, asked = stub({"Haswell": ("Haswell", 0.4, 0.060), None: ("Prescott", 0.4, 0.120),
                             "SkylakeX": ("SkylakeX", 0.4, 0.035),
                             "Cooperlake": ("Cooperlake", 5.0, 0.030)})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=probe):
            line = blas.choose("auto", env, flags=AVX512 | {"avx512_bf16"})
        self.assertEqual(env, {"PATH": "/usr/bin", "OPENBLAS_CORETYPE": "SkylakeX"})
        self.assertEqual(sorted(asked, key=str), sorted(
            [("Haswell", "512"), (None, None), ("SkylakeX", None), ("Cooperlake", None)],
            key=str))  # the pin once as it is, every other candidate without the L2 size
        self.assertIn("SkylakeX", line)
        self.assertIn("Prescott 120.0 ms", line)
        self.assertIn("fails the probe", line)

    def test_auto_tries_only_cores_the_cpu_can_run(self):
        probe, asked = stub({"Haswell": ("Haswell", 0.4, 0.060), None: ("Prescott", 0.4, 0.120)})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=probe):
            blas.choose("auto", env, flags={"avx2", "fma"})
        self.assertEqual(env, PINNED)
        self.assertEqual(len(asked), 2)

    def test_auto_unpins_both_when_its_own_choice_is_fastest(self):
        probe, _ = stub({"Haswell": ("Haswell", 0.4, 0.060), None: ("Cooperlake", 0.4, 0.035),
                         "SkylakeX": ("SkylakeX", 0.4, 0.040),
                         "Cooperlake": ("Cooperlake", 0.4, 0.036)})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=probe):
            blas.choose("auto", env, flags=AVX512 | {"avx512_bf16"})
        self.assertEqual(env, {"PATH": "/usr/bin"})

    def test_auto_keeps_the_environment_within_the_margin(self):
        probe, _ = stub({"Haswell": ("Haswell", 0.4, 0.0610), None: ("Zen", 0.4, 0.0600)})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=probe):
            blas.choose("auto", env, flags={"avx2", "fma"})
        self.assertEqual(env, PINNED)

    def test_auto_without_a_pin_probes_its_own_choice_once(self):
        probe, asked = stub({None: ("Prescott", 0.4, 0.120), "Haswell": ("Haswell", 0.4, 0.06)})
        env = {"PATH": "/usr/bin"}
        with mock.patch.object(blas, "probe", side_effect=probe):
            blas.choose("auto", env, flags={"avx2", "fma"})
        self.assertEqual(asked, [(None, None), ("Haswell", None)])
        self.assertEqual(env, {"PATH": "/usr/bin", "OPENBLAS_CORETYPE": "Haswell"})

    def test_auto_keeps_the_pin_when_nothing_else_passes_or_can_run(self):
        for other in (("Cooperlake", 3.0, 0.01), RuntimeError("no numpy")):
            probe, _ = stub({"Haswell": RuntimeError("no numpy"), None: other})
            env = dict(PINNED)
            with mock.patch.object(blas, "probe", side_effect=probe):
                line = blas.choose("auto", env, flags=set())
            self.assertEqual(env, PINNED, line)
            self.assertIn("as the environment has them", line)

    def test_auto_leaves_a_pin_that_fails_for_one_that_passes(self):
        probe, _ = stub({"Haswell": ("Haswell", 9.0, 0.01), None: ("Prescott", 0.4, 0.12)})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", side_effect=probe):
            blas.choose("auto", env, flags=set())
        self.assertEqual(env, {"PATH": "/usr/bin"})

    def test_a_named_core_is_set_only_when_it_passes(self):
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", return_value=("SkylakeX", 0.5, 0.03)):
            blas.choose("SkylakeX", env)
        self.assertEqual(env, {"PATH": "/usr/bin", "OPENBLAS_CORETYPE": "SkylakeX"})
        env = dict(PINNED)
        with mock.patch.object(blas, "probe", return_value=("SkylakeX", 7.0, 0.03)):
            with self.assertRaises(RuntimeError):
                blas.choose("SkylakeX", env)
        self.assertEqual(env, PINNED)


class CpuFlagsTest(unittest.TestCase):
    def test_reads_the_flags_line(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cpuinfo.{os.getpid()}")
        with open(path, "w") as f:
            f.write("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f\nbugs\t: x\n")
        try:
            self.assertEqual(blas.cpu_flags(path), {"fpu", "sse2", "avx2", "fma", "avx512f"})
        finally:
            os.unlink(path)
        self.assertEqual(blas.cpu_flags(path + ".missing"), set())


class ProbeTest(unittest.TestCase):
    def test_the_environments_kernels_pass_and_name_themselves(self):
        try:
            subprocess.run(["/usr/bin/python3", "-c", "import numpy"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError):
            self.skipTest("python3-numpy is missing (scripts/install-deps.sh --bench)")
        core, worst, seconds = blas.probe(dict(os.environ))
        self.assertNotEqual(core, "unknown")
        self.assertGreater(worst, 0.0)  # fp32 products do round
        self.assertLessEqual(worst, 1.0)
        self.assertGreater(seconds, 0.0)


if __name__ == "__main__":
    unittest.main()
