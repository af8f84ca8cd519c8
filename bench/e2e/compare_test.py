"""Tests of compare.py's pure parts (the order of the runs, the CPU per
step, the medians and ratios, the markdown) against values worked out by
hand, and of e2e.py's refusals of bad --compare flags (no root needed:
flags are checked first). The runs themselves are the ctest e2e_compare_quick.
"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def row(step, compute, exposed, busy):
    return {"step_s": step, "compute_s": compute, "exposed_comm_s": exposed,
            "cpu_busy_share": busy}


class CompareTest(unittest.TestCase):
    def test_order_reverses_every_other_pair(self):
        self.assertEqual(compare.order(1), ["A", "B"])
        self.assertEqual(compare.order(3), ["A", "B", "B", "A", "A", "B"])

    def test_cpu_per_step_is_busy_share_times_cores_times_step(self):
        self.assertAlmostEqual(compare.cpu_per_step(row(0.25, 0.1, 0.15, 0.9), 2), 0.45)
        self.assertIsNone(compare.cpu_per_step(row(0.25, 0.1, 0.15, None), 2))
        self.assertIsNone(compare.cpu_per_step(row(None, 0.1, 0.15, 0.9), 2))

    def test_summary_medians_and_ratio(self):
        a = [row(0.30, 0.10, 0.20, 0.8), row(0.20, 0.10, 0.10, 0.8), row(0.25, 0.12, 0.13, 0.8)]
        b = [row(0.24, 0.10, 0.14, 0.9), row(0.21, 0.09, 0.12, 0.9), row(0.18, 0.08, 0.10, 0.9)]
        for r in a + b:
            r["cpu_s_per_step"] = compare.cpu_per_step(r, 2)
        s = compare.summarize({"A": a, "B": b})
        self.assertAlmostEqual(s["step_s"]["A"], 0.25)
        self.assertAlmostEqual(s["step_s"]["B"], 0.21)
        self.assertAlmostEqual(s["step_s"]["ratio"], 0.84)
        self.assertAlmostEqual(s["exposed_comm_s"]["ratio"], round(0.12 / 0.13, 3))
        # CPU per step: A 0.4 (0.25 * 0.8 * 2), B 0.378 (0.21 * 0.9 * 2).
        self.assertAlmostEqual(s["cpu_s_per_step"]["A"], 0.4)
        self.assertAlmostEqual(s["cpu_s_per_step"]["ratio"], round(0.378 / 0.4, 3))
        self.assertEqual(s["step_s"]["A_runs"], [0.30, 0.20, 0.25])

    def test_a_field_no_run_measured_has_no_median_and_no_ratio(self):
        a, b = [{"step_s": 0.2}], [{"step_s": 0.1}]
        s = compare.summarize({"A": a, "B": b})
        self.assertIsNone(s["compute_s"]["A"])
        self.assertIsNone(s["compute_s"]["ratio"])
        self.assertAlmostEqual(s["step_s"]["ratio"], 0.5)
        text = compare.markdown("x", "cmd", {"A": "a", "B": "b"}, s)
        self.assertIn("| step s | 0.2 | 0.1 | 0.2 | 0.1 | 0.500 |", text)
        self.assertIn("| compute s | – | – | – | – | – |", text)

    def test_bad_compare_flags_are_refused_with_what_would_be_right(self):
        cases = [
            (["--compare", "nope", "--against-build-dir", "/tmp"], "one of loco4-bf16"),
            (["--compare", "loco4-delta"], "needs --against-build-dir"),
            (["--compare", "loco4-delta", "--against-build-dir", "/tmp", "--rate", "0"],
             r"--rate must be in \[1, 100000\]"),
            (["--compare", "loco4-delta", "--against-build-dir", "/tmp", "--repeat", "0"],
             r"--repeat in \[1, 20\]"),
            (["--compare", "loco4-delta", "--against-build-dir", "/tmp", "--workers", "4",
              "--batch", "2"], "--batch >= --workers"),
            (["--quick", "--against-build-dir", "/tmp"], "is for --compare"),
        ]
        for argv, want in cases:
            r = subprocess.run([sys.executable, os.path.join(HERE, "e2e.py")] + argv,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 2, (argv, r.stdout))
            self.assertRegex(r.stdout, want)


if __name__ == "__main__":
    unittest.main()
