"""Tests of memory.py against values worked out by hand from made-up rows
(runs.run_ps's fields)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory  # noqa: E402


def row(config, params, server_mb, worker_mb, link=1000, batch=256, push=1_000_000, pull=None):
    return {"config": config, "params": params, "link_mbit": link, "batch": batch,
            "servers": 2, "workers": 4, "push_bytes_per_step": push, "pull_bytes_per_step": pull,
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
        self.assertIn("grows 16.78 B/param vs the bound's 16 + 0.33 (pushes held) + 0.00 "
                      "(answer held) = 16.33 B/param → MISSED", lines[0])
        # Fixed part: 120 - 16.78 x 6M / 2^20 = 24 MiB.
        self.assertIn("the fixed part is 24 MB", lines[0])

    def test_the_answer_the_servers_hold_counts_among_the_payloads(self):
        # The same rows, each worker pulling a bf16 model: 2 B/param, 24 MB a
        # step for 12M params, held once (each server its half). Slope bound:
        # 16 + 0.33 + 24M / 12M = 18.33 B/param, so 16.78 is met.
        rows = [row("loco4-bf16", 2_000_000, 40.0, 1.0, pull=4_000_000),
                row("loco4-bf16", 12_000_000, 120.0, 1.0, pull=24_000_000)]
        lines = memory.slope_lines(rows, 256)
        self.assertIn("16 + 0.33 (pushes held) + 2.00 (answer held) = 18.33 B/param → met",
                      lines[0])
        # Bound per server: 16 B x 1M + 2 MB pushes + 2 MB of a 4-MB answer
        # = 19.07 MiB: 19.0 MB is met, where the push-only bound (17.17 MiB)
        # would miss it.
        rows = [row("loco4-bf16", 2_000_000, 19.0, 101.0, pull=4_000_000),
                row("fp32-ps", 2_000_000, 30.0, 100.0)]
        line = memory.bound_lines(rows, 256)[0]
        self.assertIn("vs bound 19.1 MB (16 B x 1.00M shard params + 2.00 MB pushes + "
                      "2.00 MB answer held", line)
        self.assertIn("→ met; worker", line)

    def test_a_group_without_both_configurations_says_nothing(self):
        self.assertEqual(memory.bound_lines([row("loco4-bf16", 2_000_000, 17.0, 1.0)], 256), [])
        self.assertEqual(memory.slope_lines([row("loco4-bf16", 2_000_000, 17.0, 1.0)], 256), [])


if __name__ == "__main__":
    unittest.main()
