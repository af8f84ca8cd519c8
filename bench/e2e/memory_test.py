"""Tests of memory.py against values worked out by hand from made-up rows
(runs.run_ps's fields)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory  # noqa: E402


def row(config, params, server_mb, worker_mb, link=1000, batch=256, push=1_000_000):
    return {"config": config, "params": params, "link_mbit": link, "batch": batch,
            "servers": 2, "workers": 4, "push_bytes_per_step": push,
            "server_peak_rss_mb": server_mb, "worker_peak_rss_mb": worker_mb}


class MemoryTest(unittest.TestCase):
    def test_bound_and_worker_state(self):
        # 2M params over 2 servers: 1M per shard; held payloads 4 x 1 MB / 2.
        # Bound: (16 x 1M + 2M) B = 17.17 MiB. Worker: (101 - 100) MiB / 2M
        # = 0.52 B/param.
        rows = [row("loco4-bf16", 2_000_000, 17.0, 101.0),
                row("fp32-ps", 2_000_000, 30.0, 100.0)]
        lines = memory.bound_lines(rows, 256)
        self.assertEqual(len(lines), 1)
        self.assertIn("server peak RSS 17.0 MB vs bound 17.2 MB", lines[0])
        self.assertIn("→ met; worker", lines[0])
        self.assertIn("= 0.52 B/param (bound 1.1", lines[0])
        rows[0]["server_peak_rss_mb"] = 17.5
        self.assertIn("→ MISSED; worker", memory.bound_lines(rows, 256)[0])

    def test_slope_between_model_sizes(self):
        # Shards of 1M and 6M params; RSS 40 -> 120 MiB: 80 MiB / 5M params
        # = 16.78 B/param. Held: 4 x 1 MB / 12M params = 0.33 B/param.
        rows = [row("loco4-bf16", 2_000_000, 40.0, 1.0),
                row("loco4-bf16", 12_000_000, 120.0, 1.0),
                row("loco4-bf16", 12_000_000, 500.0, 1.0, batch=64)]  # not this batch
        lines = memory.slope_lines(rows, 256)
        self.assertEqual(len(lines), 1)
        self.assertIn("grows 16.8 B/param vs the bound's 16 + 0.33", lines[0])
        self.assertIn("= 16.3 B/param → MISSED", lines[0])
        # Fixed part: 120 - 16.78 x 6M / 2^20 = 24 MiB.
        self.assertIn("the fixed part is 24 MB", lines[0])

    def test_a_group_without_both_configurations_says_nothing(self):
        self.assertEqual(memory.bound_lines([row("loco4-bf16", 2_000_000, 17.0, 1.0)], 256), [])
        self.assertEqual(memory.slope_lines([row("loco4-bf16", 2_000_000, 17.0, 1.0)], 256), [])


if __name__ == "__main__":
    unittest.main()
