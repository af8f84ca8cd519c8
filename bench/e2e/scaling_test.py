"""Tests of scaling.py: the servers' time per step against W, S and the model.

measure_alone() runs the real loco-bench-cpu-step on a small model (its path
is the first argument); the table's and the plot data's arithmetic is
checked against values worked out by hand from made-up rows; plot() must
draw a PNG when gnuplot is there.
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling  # noqa: E402

BINARY = None  # set from argv in __main__


def row(params, workers, servers, step_s, server_s, rss=100.0):
    return {"params": params, "workers": workers, "servers": servers, "step_s": step_s,
            "server_compute_s": server_s, "server_peak_rss_mb": rss}


def alone(server_s):
    return {"step": 0.01, "compress": 0.002, "server": server_s, "apply": 0.001, "copy": 0.001}


class ScalingTest(unittest.TestCase):
    def test_model_sizes_put_one_halfway_and_drop_repeats(self):
        self.assertEqual(scaling.model_sizes([1024, 1024], [3072, 3072]),
                         [[1024, 1024], [2048, 2048], [3072, 3072]])
        # Different depths: no halfway model.
        self.assertEqual(scaling.model_sizes([64], [128, 128]), [[64], [128, 128]])
        # The same model twice is swept once.
        self.assertEqual(scaling.model_sizes([64, 64], [64, 64]), [[64, 64]])
        self.assertEqual(scaling.model_sizes([64, 64], [65, 65]),
                         [[64, 64], [65, 65]])

    def test_points_cover_one_to_eight_workers_and_one_to_four_shards(self):
        self.assertEqual(sorted({w for w, s in scaling.POINTS if s == 2}), [1, 2, 4, 8])
        self.assertEqual(sorted({s for w, s in scaling.POINTS if w == 4}), [1, 2, 4])
        self.assertEqual(len(set(scaling.POINTS)), len(scaling.POINTS))

    def test_table_divides_the_alone_step_by_the_shards(self):
        rows = [row(2_000_000, 4, 2, 0.3, 0.03), row(2_000_000, 4, 4, 0.25, 0.01),
                row(12_000_000, 8, 2, 0.5, 0.12)]
        # Every shard alone: 0.04 s over 2 shards = 0.02 per shard, so the
        # cluster's 0.03 is 1.50x it; 0.04 over 4 = 0.01, 1.00x.
        got = scaling.table(rows, {(2_000_000, 4, 2): alone(0.04),
                                   (2_000_000, 4, 4): alone(0.04)}).split("\n")
        self.assertEqual(len(got), 5)
        self.assertEqual(got[2], "| 2.0M | 4 | 2 | 0.3 | 0.03 | 0.02 | 1.50 | 100 |")
        self.assertEqual(got[3], "| 2.0M | 4 | 4 | 0.25 | 0.01 | 0.01 | 1.00 | 100 |")
        # No alone figure: dashes, not a made-up ratio.
        self.assertEqual(got[4], "| 12.0M | 8 | 2 | 0.5 | 0.12 | – | – | 100 |")

    def test_series_keeps_the_points_of_each_panel_sorted(self):
        rows = [row(5, 4, 2, 0.3, 0.03), row(5, 1, 2, 0.2, 0.01), row(5, 4, 4, 0.3, 0.02),
                row(7, 2, 2, 0.3, 0.05), row(5, 4, 1, 0.3, 0.06)]
        a = {(5, 1, 2): alone(0.02), (5, 4, 4): alone(0.08)}
        self.assertEqual(scaling.series(rows, a, "workers"),
                         {5: [(1, 0.01, 0.01), (4, 0.03, None)], 7: [(2, 0.05, None)]})
        self.assertEqual(scaling.series(rows, a, "servers"),
                         {5: [(1, 0.06, None), (2, 0.03, None), (4, 0.02, 0.02)]})

    def test_series_by_model_takes_the_four_worker_two_shard_points(self):
        rows = [row(9, 4, 2, 0.3, 0.09), row(5, 4, 2, 0.3, 0.03), row(5, 8, 2, 0.3, 0.06),
                row(5, 4, 4, 0.3, 0.02)]
        self.assertEqual(scaling.series_by_model(rows, {(9, 4, 2): alone(0.1)}),
                         [(5, 0.03, None), (9, 0.09, 0.05)])

    def test_measure_alone_runs_the_benchmark_for_the_point(self):
        got = scaling.measure_alone(BINARY, [128, 128], workers=4, shards=2, global_batch=32)
        self.assertGreater(got["server"], 0)
        self.assertLess(got["server"], 10)
        # More payloads to decode make the same shards' step dearer: 32
        # workers against 1, the median of a few repetitions. (Decoding is
        # cheap beside AdamW now: 8 workers cost only ~15% more than 1, within
        # a loaded machine's noise; 32 cost about twice as much.)
        one = scaling.measure_alone(BINARY, [512, 512], workers=1, shards=2, global_batch=32)
        many = scaling.measure_alone(BINARY, [512, 512], workers=32, shards=2, global_batch=32)
        self.assertGreater(many["server"], one["server"])

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot is not installed")
    def test_plot_draws_a_png(self):
        rows = [row(5, w, 2, 0.3, 0.01 * w) for w in (1, 2, 4, 8)]
        rows += [row(5, 4, s, 0.3, 0.04 / s) for s in (1, 4)]
        with tempfile.TemporaryDirectory() as d:
            png = scaling.plot(d, rows, {(5, 4, 2): alone(0.06)})
            self.assertEqual(png, os.path.join(d, "scaling.png"))
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_plot_without_rows_draws_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(scaling.plot(d, [], {}))
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    BINARY = sys.argv.pop(1)
    unittest.main()
