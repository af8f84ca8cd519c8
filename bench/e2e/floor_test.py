"""Tests of floor.py: the compute floor of a LoCo-4 step.

measure() runs the real loco-bench-cpu-step on a small model (its path is
the first argument); the floor's arithmetic is checked against values
worked out by hand from made-up rows.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor  # noqa: E402

BINARY = None  # set from argv in __main__

ALONE = {"step": 0.030, "compress": 0.010, "server": 0.04, "apply": 0.008, "copy": 0.007}


def row(config, step_s, batch=64, params=11_882_506, link=1000):
    return {"config": config, "params": params, "link_mbit": link, "batch": batch,
            "workers": 4, "servers": 2, "step_s": step_s}


class FloorTest(unittest.TestCase):
    def test_measure_runs_the_benchmark_and_reads_every_figure(self):
        got = floor.measure(BINARY, [128, 128], 8, 4, 3, shards=3, reps=3)
        self.assertEqual(set(got), {"step", "compress", "server", "apply", "copy"})
        for key, seconds in got.items():
            self.assertGreater(seconds, 0, key)
            self.assertLess(seconds, 10, key)

    def test_measure_reports_a_refused_flag(self):
        with self.assertRaisesRegex(RuntimeError, "exit 2"):
            floor.measure(BINARY, [128], 8, 3, 4, reps=1)

    def test_parse_names_a_missing_figure(self):
        text = ("step (forward+backward) median s: 0.5\n"
                "compress (LoCo-4, every shard) median s: 0.1\n"
                "server (every shard, 4 payloads) median s: 0.2\n"
                "copy (memcpy of the parameters) median s: 0.05\n")
        with self.assertRaisesRegex(ValueError, "no apply figure"):
            floor.parse(text)

    def test_floor_is_the_computation_spread_over_the_cores(self):
        # 4 workers x (0.030 + 0.010 + 0.008) + the servers' 0.04 = 0.232 s
        # of CPU; on 2 cores 0.116 s, on 4 0.058 s.
        self.assertAlmostEqual(floor.floor_seconds(ALONE, 4, 2), 0.116)
        self.assertAlmostEqual(floor.floor_seconds(ALONE, 4, 4), 0.058)
        self.assertAlmostEqual(floor.floor_seconds(ALONE, 1, 2), 0.044)

    def test_lines_for_the_delta_rows_of_the_large_model_at_1_gbit(self):
        rows = [row("loco4-delta", 0.232), row("loco4-delta-pull4", 0.2),
                row("fp32-ps", 1.16), row("loco4-bf16", 0.3),
                # Not stated: the small model, and 10 Gbit/s.
                row("loco4-delta", 0.1, params=1_863_690),
                row("loco4-delta", 0.2, link=10000)]
        alone = {(16, 8): ALONE, (16, 4): dict(ALONE, apply=0.004)}
        lines = floor.floor_lines(rows, alone, 2)
        self.assertEqual(len(lines), 4, lines)
        delta, pull4 = lines[2], lines[3]
        # 0.116 s floor; 0.232 / 0.116 = 2.00; 0.116 / 1.16 = 0.1.
        self.assertIn("| loco4-delta |", delta)
        self.assertIn("| 0.116 | 0.232 | 2.00 | 0.1 |", delta)
        # apply 0.004: 4 x 0.044 + 0.04 = 0.216 -> 0.108 s; 0.2 / 0.108 = 1.85.
        self.assertIn("| loco4-delta-pull4 |", pull4)
        self.assertIn("| 0.108 | 0.200 | 1.85 | 0.0931 |", pull4)

    def test_no_lines_without_a_matching_measurement(self):
        rows = [row("loco4-delta", 0.232), row("fp32-ps", 1.16)]
        self.assertEqual(floor.floor_lines(rows, {(64, 8): ALONE}, 2), [])
        self.assertEqual(floor.floor_lines(rows, {}, 2), [])


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: floor_test.py PATH/TO/loco-bench-cpu-step [unittest args]")
    BINARY = sys.argv.pop(1)
    unittest.main()
