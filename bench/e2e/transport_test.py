"""Tests of the transport probe's parts that need no namespaces: the row
runs.transport_row makes from the probes' events (against values worked out
by hand), and, when the binaries are given, transport_loopback.sh with two
probes pushing two shards at once through real loco-servers on loopback.

    transport_test.py [BIN_DIR]
"""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = sys.argv.pop(1) if len(sys.argv) > 1 else ""


def event(bytes_per_s, request_bytes=6_500_000, median_s=0.01):
    return {"elements": 12_582_912, "request_bytes": request_bytes, "pushes": 30,
            "median_s": median_s, "min_s": median_s / 2, "bytes_per_s": bytes_per_s}


class TransportRowTest(unittest.TestCase):
    def test_fractions_are_of_the_link_rate_median_and_lowest_link(self):
        # 10 Gbit/s = 1.25e9 B/s; links at 0.9, 0.8, 0.5 and 1.0 of it.
        events = [event(1.125e9), event(1.0e9), event(0.625e9), event(1.25e9)]
        row = runs.transport_row(events, 10000, workers=4, servers=2)
        self.assertEqual(row["workers"], 4)
        self.assertEqual(row["servers"], 2)
        # The median of four is the upper middle one (index 2 of the sorted).
        self.assertEqual(row["fraction_of_link"], 0.9)
        self.assertEqual(row["lowest_fraction"], 0.5)
        self.assertEqual(row["mbit_per_s"], 9000.0)
        self.assertEqual(row["link_mbit"], 10000)

    def test_one_probe_is_its_own_median_and_lowest(self):
        row = runs.transport_row([event(0.119e9)], 1000, workers=1, servers=1)
        self.assertEqual(row["fraction_of_link"], 0.952)
        self.assertEqual(row["lowest_fraction"], 0.952)
        self.assertEqual(row["mbit_per_s"], 952.0)


@unittest.skipUnless(BIN_DIR, "no BIN_DIR given")
class LoopbackTest(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run(["bash", os.path.join(HERE, "transport_loopback.sh"),
                               "--bin-dir", BIN_DIR, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)

    def test_two_probes_push_both_shards_and_report_each(self):
        r = self.run_script("--workers", "2", "--servers", "2", "--elements", "262144",
                            "--pushes", "5")
        self.assertEqual(r.returncode, 0, r.stdout)
        probes = re.findall(r"probe (\d): (\d+) Mbit/s .*\(([\d.]+) MB per round", r.stdout)
        self.assertEqual([p[0] for p in probes], ["0", "1"], r.stdout)
        for _, mbit, mb in probes:
            self.assertGreater(int(mbit), 0)
            # Both shards: 262144 4-bit codes and a 4-byte scale per 256 elements,
            # plus the requests' headers.
            self.assertGreater(float(mb), (262144 // 2 + 262144 // 256 * 4) / 1e6 - 0.005)
        self.assertIn("median probe", r.stdout)

    def test_bad_flags_are_refused_with_what_would_be_right(self):
        r = self.run_script("--workers", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid value '0' for --workers: expected an integer in [1, 64]",
                      r.stdout)
        r = self.run_script("--servers")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--servers needs a value", r.stdout)


if __name__ == "__main__":
    unittest.main()
