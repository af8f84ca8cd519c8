"""Tests of torch_overhead.py: the overhead of each pair with its spread
over the rounds, the verdict, the summary's text and the flags, against
values worked out by hand from made-up rows."""
import argparse
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402
import torch_overhead  # noqa: E402


def row(step_s, **fields):
    out = {"step_s": step_s, "system": "x"}
    out.update(fields)
    return out


def rounds_of(torch_steps, worker_steps, torch_row="torch-loco4", worker_row="worker-loco4"):
    return [{torch_row: row(t), worker_row: row(w)} for t, w in zip(torch_steps, worker_steps)]


class SpreadTest(unittest.TestCase):
    def test_overhead_of_the_medians_and_of_each_round(self):
        # Rounds' overheads: +5, +20, -10, +11, +0 %.
        rounds = rounds_of([0.105, 0.12, 0.09, 0.111, 0.1], [0.1] * 5)
        s = torch_overhead.spread(torch_bench.summarize(rounds), rounds, "torch-loco4",
                                  "worker-loco4")
        self.assertAlmostEqual(s["of_medians"], 0.105 / 0.1 - 1)
        for got, want in zip(s["rounds"], [0.05, 0.2, -0.1, 0.11, 0.0]):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(s["median"], 0.05)
        # Inclusive quartiles of -0.1, 0, 0.05, 0.11, 0.2: the 2nd and 4th.
        self.assertAlmostEqual(s["q1"], 0.0)
        self.assertAlmostEqual(s["q3"], 0.11)
        self.assertAlmostEqual(s["low"], -0.1)
        self.assertAlmostEqual(s["high"], 0.2)
        self.assertEqual(s["under_target"], 3)
        self.assertEqual(torch_overhead.verdict(s), "met")

    def test_rounds_missing_a_row_are_left_out_and_few_rounds_have_no_quartiles(self):
        rounds = rounds_of([0.13, 0.12], [0.1, 0.1]) + [{"torch-loco4": row(0.5)}]
        s = torch_overhead.spread(torch_bench.summarize(rounds), rounds, "torch-loco4",
                                  "worker-loco4")
        self.assertEqual(len(s["rounds"]), 2)
        self.assertAlmostEqual(s["median"], 0.25)
        self.assertIsNone(s["q1"])
        self.assertIsNone(s["q3"])
        # The medians over the rounds: 0.13 of torch's three, 0.1 of the worker's.
        self.assertAlmostEqual(s["of_medians"], 0.3)
        self.assertEqual(s["under_target"], 0)
        self.assertEqual(torch_overhead.verdict(s), "MISSED")

    def test_no_round_with_both_rows_is_none(self):
        rounds = [{"torch-loco4": row(0.1)}, {"worker-loco4": row(0.1)}]
        self.assertIsNone(torch_overhead.spread(torch_bench.summarize(rounds), rounds,
                                                "torch-loco4", "worker-loco4"))


class MarkdownTest(unittest.TestCase):
    def test_one_line_per_worker_count_and_pair_then_the_breakdowns(self):
        w1 = rounds_of([0.105, 0.12, 0.09, 0.111, 0.1], [0.1] * 5)
        for got, t, tensor in zip(w1, (0.2, 0.21, 0.19, 0.2, 0.23),
                                  (0.1, 0.1, 0.1, 0.1, 0.125)):
            got["torch-loco4-serial"] = row(t)
            got["worker-loco4-serial"] = row(0.2)
            got["worker-loco4-tensor"] = row(tensor)
        w2 = rounds_of([0.3], [0.2])
        results = [(1, torch_bench.summarize(w1), w1), (2, torch_bench.summarize(w2), w2)]
        text = torch_overhead.markdown("bench/e2e/run.sh --torch-overhead", "setup", ["a note"],
                                       results, ["round 1 x: boom"])
        self.assertIn("Command: `bench/e2e/run.sh --torch-overhead`", text)
        self.assertIn("- a note", text)
        self.assertIn("- FAILED: round 1 x: boom", text)
        # W = 1 overlapped: medians 0.105 / 0.1; rounds +5, +20, -10, +11, +0 %.
        self.assertIn("| 1 | overlapped, panel readiness | 0.1000 | 0.1050 | +5.0 % | +5.0 % "
                      "(+0.0 % to +11.0 %) | -10.0 % to +20.0 % | 3 of 5 | met |", text)
        # Against the tensor row: rounds +5, +20, -10, +11, -20 %; medians 0.105 / 0.1.
        self.assertIn("| 1 | overlapped, tensor readiness | 0.1000 | 0.1050 | +5.0 % | +5.0 % "
                      "(-10.0 % to +11.0 %) | -20.0 % to +20.0 % | 3 of 5 | met |", text)
        # Serial: rounds +0, +5, -5, +0, +15 %.
        self.assertIn("| 1 | serial | 0.2000 | 0.2000 | +0.0 % | +0.0 % (+0.0 % to +5.0 %) | "
                      "-5.0 % to +15.0 % | 4 of 5 | met |", text)
        self.assertIn("| 2 | overlapped, panel readiness | 0.2000 | 0.3000 | +50.0 % | +50.0 % "
                      "| +50.0 % to +50.0 % | 0 of 1 | MISSED |", text)
        self.assertIn("| 2 | overlapped, tensor readiness | – | 0.3000 | a row is missing |",
                      text)
        self.assertIn("| 2 | serial | – | – | a row is missing | – | – | – | – |", text)
        self.assertIn("## W = 2, S = 1", text)
        self.assertIn("| torch-loco4 | 0.1050 | 0.1050, 0.1200, 0.0900, 0.1110, 0.1000 |", text)
        self.assertIn("### W = 1: torch-loco4 against worker-loco4", text)
        self.assertIn("### W = 1: torch-loco4 against worker-loco4-tensor", text)
        # The three pairs in the order of PAIRS.
        self.assertLess(text.index("| 1 | overlapped, panel readiness"),
                        text.index("| 1 | overlapped, tensor readiness"))
        self.assertLess(text.index("| 1 | overlapped, tensor readiness"),
                        text.index("| 1 | serial"))
        self.assertIn("### W = 2: torch-loco4 against worker-loco4", text)
        self.assertNotIn("Where the CPU", text)

    def test_profiles_of_both_pairs(self):
        rounds = rounds_of([0.11], [0.1])
        profiles = {name: {"step_s": 0.1, "workers": {"libx": ms}, "servers": {"a": 1.0}}
                    for name, ms in (("torch-loco4", 3.0), ("worker-loco4", 2.0),
                                     ("torch-loco4-serial", 5.0))}
        text = torch_overhead.markdown("c", "s", [], [(1, torch_bench.summarize(rounds), rounds)],
                                       [], profiles)
        self.assertIn("## Where the CPU of a step goes at W = 1: torch-loco4 against "
                      "worker-loco4 (perf)", text)
        self.assertIn("| libx | 2.0 | 3.0 | +1.0 |", text)
        # The serial pair lacks its loco-worker row.
        self.assertIn("a profiled row is missing", text)


class RowsTest(unittest.TestCase):
    def test_five_rows_the_tensor_row_first_and_three_pairs_of_them(self):
        self.assertEqual([r[0] for r in torch_overhead.ROWS],
                         ["worker-loco4-tensor", "torch-loco4", "worker-loco4",
                          "torch-loco4-serial", "worker-loco4-serial"])
        names = {r[0] for r in torch_overhead.ROWS}
        for torch_row, worker_row, _ in torch_overhead.PAIRS:
            self.assertIn(torch_row, names)
            self.assertIn(worker_row, torch_overhead.PAIR_NAMES)
        self.assertEqual([p[1] for p in torch_overhead.PAIRS],
                         ["worker-loco4", "worker-loco4-tensor", "worker-loco4-serial"])

    def test_the_tensor_row_is_worker_loco4_with_tensor_readiness(self):
        p = {"hidden": [64], "steps": 5, "warmup": 2, "batch": 64, "servers": 1,
             "eval_every": 0}
        cfgs = {name: torch_bench._cfg(name, program, overlap, p)
                for name, program, overlap in torch_overhead.ROWS}
        tensor, panel = cfgs["worker-loco4-tensor"], cfgs["worker-loco4"]
        self.assertEqual(tensor["worker_args"], ["--ready-granularity", "tensor"])
        self.assertEqual(panel["worker_args"], [])
        self.assertEqual(dict(tensor, name=None, worker_args=None),
                         dict(panel, name=None, worker_args=None))
        self.assertEqual(cfgs["worker-loco4-serial"]["worker_args"],
                         ["--overlap-backward=false"])


class ArgumentsTest(unittest.TestCase):
    def parse(self, *argv):
        ap = argparse.ArgumentParser()
        torch_overhead.add_arguments(ap)
        a = ap.parse_args(list(argv))
        torch_overhead.check_arguments(ap, a)
        return a

    def test_defaults_and_worker_counts(self):
        a = self.parse()
        self.assertEqual((a.torch_overhead_workers, a.torch_overhead_repeat), ([1], 8))
        self.assertEqual(self.parse("--torch-overhead-workers", "1,2").torch_overhead_workers,
                         [1, 2])

    def test_bad_values_are_refused(self):
        for argv in (("--torch-overhead-workers", "a"), ("--torch-overhead-workers", "0"),
                     ("--torch-overhead-workers", "1,9"), ("--torch-overhead-repeat", "0"),
                     ("--torch-overhead-repeat", "31")):
            with self.assertRaises(SystemExit, msg=argv):
                with open(os.devnull, "w") as null:
                    saved, sys.stderr = sys.stderr, null
                    try:
                        self.parse(*argv)
                    finally:
                        sys.stderr = saved


if __name__ == "__main__":
    unittest.main()
