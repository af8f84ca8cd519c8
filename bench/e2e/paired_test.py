"""Tests of paired.py: the headline ratio in repeated pairs, against values
worked out by hand from made-up rows."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paired  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def row(config, step_s, batch=64, params=11_882_506, link=1000):
    return {"config": config, "params": params, "link_mbit": link, "batch": batch,
            "step_s": step_s}


class PairedTest(unittest.TestCase):
    def test_first_pair_takes_the_large_model_at_the_link_and_batch(self):
        rows = [row("fp32-ps", 9.0, params=1_000_000), row("fp32-ps", 8.0, link=10000),
                row("fp32-ps", 7.0, batch=256), row("loco4-delta", 0.3),
                row("fp32-ps", 1.0), row("loco4-delta-pull4@profile", 0.21)]
        fp32, loco = paired.first_pair(rows, 10_000_000, 1000, 64)
        self.assertEqual(fp32["step_s"], 1.0)
        self.assertEqual(loco["step_s"], 0.21)
        self.assertEqual(paired.first_pair(rows[:4], 10_000_000, 1000, 64), (None, None))

    def test_ratio_is_loco_over_fp32_and_none_when_a_row_is_missing(self):
        self.assertAlmostEqual(paired.ratio((row("fp32-ps", 1.25), row("x", 0.25))), 0.2)
        self.assertIsNone(paired.ratio((None, row("x", 0.25))))
        self.assertIsNone(paired.ratio((row("fp32-ps", 1.0), None)))
        self.assertIsNone(paired.ratio((row("fp32-ps", 0), row("x", 0.25))))

    def test_the_median_of_the_pairs_decides(self):
        pairs = [(row("fp32-ps", 1.0), row("l", 0.25)),   # 0.25
                 (row("fp32-ps", 1.1), row("l", 0.209)),  # 0.19
                 (row("fp32-ps", 1.0), row("l", 0.18))]   # 0.18
        lines = paired.summary_lines(pairs)
        self.assertEqual(lines[0], "- pair 1: LoCo-4 0.25 s / fp32 PS 1 s = 0.250")
        self.assertEqual(lines[1], "- pair 2: LoCo-4 0.209 s / fp32 PS 1.1 s = 0.190")
        self.assertEqual(lines[-1], "- median of 3 pair(s): 0.190 (range 0.180–0.250); "
                                    "LoCo-4 step ≤ 0.2× fp32 PS → met")
        pairs[1] = (row("fp32-ps", 1.0), row("l", 0.21))
        self.assertEqual(paired.summary_lines(pairs)[-1],
                         "- median of 3 pair(s): 0.210 (range 0.180–0.250); "
                         "LoCo-4 step ≤ 0.2× fp32 PS → MISSED")

    def test_an_even_count_takes_the_mean_of_the_middle_two(self):
        pairs = [(row("fp32-ps", 1.0), row("l", 0.19)), (row("fp32-ps", 1.0), row("l", 0.22))]
        self.assertIn("median of 2 pair(s): 0.205", paired.summary_lines(pairs)[-1])
        self.assertIn("→ MISSED", paired.summary_lines(pairs)[-1])

    def test_a_failed_row_leaves_its_pair_out_and_says_so(self):
        pairs = [(row("fp32-ps", 1.0), None), (row("fp32-ps", 1.0), row("l", 0.15))]
        lines = paired.summary_lines(pairs)
        self.assertEqual(lines[0], "- pair 1: a row is missing (not run, or failed); left out")
        self.assertIn("median of 1 pair(s): 0.150", lines[-1])
        self.assertEqual(paired.summary_lines([(None, None)])[-1],
                         "- no complete pair: the ratio ≤ 0.2× cannot be judged")

    def test_run_repeats_alternates_fp32_then_loco_and_numbers_from_first(self):
        calls = []

        def run_row(name, k):
            calls.append((name, k))
            return None if (name, k) == (paired.LOCO, 3) else row(name, 1.0)
        pairs = paired.run_repeats(run_row, 2, first=2)
        self.assertEqual(calls, [(paired.FP32, 2), (paired.LOCO, 2), (paired.FP32, 3),
                                 (paired.LOCO, 3)])
        self.assertEqual(len(pairs), 2)
        self.assertIsNone(pairs[1][1])
        self.assertEqual(paired.run_repeats(run_row, 0), [])

    def test_a_bad_pair_repeats_is_refused_with_what_would_be_right(self):
        for value in ("-1", "11"):
            r = subprocess.run([sys.executable, os.path.join(HERE, "e2e.py"), "--full",
                                "--pair-repeats", value],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 2, r.stdout)
            self.assertIn(f"--pair-repeats must be in [0, 10] (0: only the matrix's pair), "
                          f"got {value}", r.stdout)


if __name__ == "__main__":
    unittest.main()
