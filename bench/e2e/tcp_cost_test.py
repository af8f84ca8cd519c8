"""Tests of tcp_cost.py: its arithmetic against values worked out by hand,
and its /proc/stat reading against a made-up file."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tcp_cost  # noqa: E402


class TcpCostTest(unittest.TestCase):
    def test_row(self):
        # 100 MiB = 104.8576 MB in 0.5 s: 209.7 MB/s. Both ends: 0.1 + 0.2 +
        # 0.05 + 0.25 = 0.6 s, 5.722 ms/MB; system 0.45 s, 4.292 ms/MB;
        # the machine 0.8 s, 7.629 ms/MB.
        r = tcp_cost.row_from(1000, 100, 0.5, (0.1, 0.2), (0.05, 0.25), 0.8)
        self.assertEqual(r["mb_per_s"], 209.7)
        self.assertEqual(r["cpu_ms_per_mb"], 5.722)
        self.assertEqual(r["kernel_ms_per_mb"], 4.292)
        self.assertEqual(r["machine_ms_per_mb"], 7.629)
        self.assertEqual(r["rate_mbit"], 1000)
        self.assertIsNone(tcp_cost.row_from(0, 1, 0.0, (0, 0), (0, 0), 0)["mb_per_s"])

    def test_machine_busy_reads_the_cpu_line(self):
        tick = os.sysconf("SC_CLK_TCK")
        # user 10, nice 2, system 30, idle 900, iowait 7, irq 1, softirq 5,
        # steal 40: busy = 10 + 2 + 30 + 1 + 5 = 48 ticks.
        text = ("cpu  10 2 30 900 7 1 5 40 0 0\n"
                "cpu0 5 1 15 450 3 0 2 20 0 0\n")
        self.assertAlmostEqual(tcp_cost.machine_busy_s(text), 48 / tick)
        with self.assertRaises(RuntimeError):
            tcp_cost.machine_busy_s("cpu0 1 2 3 4 5 6 7\n")

    def test_size_is_checked_before_anything_runs(self):
        with self.assertRaises(ValueError):
            tcp_cost.measure(None, "/nonexistent", 0)


if __name__ == "__main__":
    unittest.main()
