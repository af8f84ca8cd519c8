"""Tests of torch_bench.py: the --torch summary (medians over rounds, the
headline ratio, the Python layer's breakdown and verdict), the smoke run's
checks and the flags, against values worked out by hand from made-up rows."""
import argparse
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402
import torch_profile  # noqa: E402


def row(step_s, **fields):
    out = {"step_s": step_s, "system": "x"}
    out.update(fields)
    return out


def torch_row(step_s, compute_s, exposed, event_step_s, opt_step_s, worker_step_s, **kw):
    return row(step_s, compute_s=compute_s, exposed_comm_s=exposed, event_step_s=event_step_s,
               event_forward_s=compute_s / 4, event_backward_s=compute_s * 3 / 4,
               event_opt_step_s=opt_step_s, event_worker_step_s=worker_step_s, **kw)


class SummaryTest(unittest.TestCase):
    def test_medians_over_the_rounds_skip_missing_rows_and_fields(self):
        rounds = [{"a": row(1.0, push_bytes_per_step=10), "b": row(2.0)},
                  {"a": row(3.0, push_bytes_per_step=30), "b": None},
                  {"a": row(2.5), "b": row(4.0)}]
        s = torch_bench.summarize(rounds)
        self.assertEqual(s["a"]["step_s"], 2.5)
        self.assertEqual(s["a"]["runs"], [1.0, 3.0, 2.5])
        self.assertEqual(s["a"]["push_bytes_per_step"], 20)
        self.assertEqual(s["b"]["step_s"], 3.0)
        self.assertEqual(s["b"]["runs"], [2.0, 4.0])
        self.assertIsNone(s["b"]["compute_s"])

    def test_ratios_are_of_the_medians_and_per_round(self):
        rounds = [{"torch-loco4": row(0.2), "ddp-fp32": row(0.8)},
                  {"torch-loco4": row(0.3), "ddp-fp32": row(0.6)},
                  {"torch-loco4": row(0.25)}]
        s = torch_bench.summarize(rounds)
        self.assertAlmostEqual(torch_bench.ratio(s, "torch-loco4", "ddp-fp32"), 0.25 / 0.7)
        self.assertEqual(torch_bench.round_ratios(rounds, "torch-loco4", "ddp-fp32"),
                         [0.25, 0.5])
        self.assertIsNone(torch_bench.ratio(s, "torch-loco4", "missing"))

    def test_breakdown_and_the_wrapper_time(self):
        s = torch_bench.summarize([{
            "torch-loco4-serial": torch_row(0.110, 0.040, 0.065, 0.105, 0.065, 0.060),
            "worker-loco4-serial": row(0.100, compute_s=0.035, exposed_comm_s=0.062,
                                       event_step_s=0.097)}])
        parts = torch_bench.breakdown(s, "torch-loco4-serial", "worker-loco4-serial")
        self.assertEqual([p[0] for p in parts],
                         ["step", "computation", "exposed communication", "outside the step"])
        self.assertEqual(parts[0][1:], (0.100, 0.110))
        self.assertEqual(parts[1][1:], (0.035, 0.040))
        self.assertAlmostEqual(parts[3][1], 0.003)
        self.assertAlmostEqual(parts[3][2], 0.005)
        self.assertAlmostEqual(torch_bench.wrapper_seconds(s, "torch-loco4-serial"), 0.005)

    def test_markdown_states_the_ratio_the_overhead_and_its_verdict(self):
        rounds = [{"ddp-fp32": row(0.420, push_bytes_per_step=7_400_000),
                   "torch-loco4": torch_row(0.105, 0.03, 0.07, 0.1, 0.07, 0.09,
                                            push_bytes_per_step=980_000),
                   "worker-loco4": row(0.100, compute_s=0.025, exposed_comm_s=0.07,
                                       event_step_s=0.098),
                   "torch-loco4-serial": torch_row(0.150, 0.04, 0.1, 0.145, 0.1, 0.09),
                   "worker-loco4-serial": row(0.120, compute_s=0.03, exposed_comm_s=0.088,
                                              event_step_s=0.118)}]
        s = torch_bench.summarize(rounds)
        text = torch_bench.markdown("bench/e2e/run.sh --torch", "setup", ["a note"], s, rounds,
                                    [])
        self.assertIn("Command: `bench/e2e/run.sh --torch`", text)
        self.assertIn("- a note", text)
        self.assertIn("torch-loco4 0.1050 s / ddp-fp32 0.4200 s = **0.250**; each round's: "
                      "0.250, median 0.250", text)
        self.assertIn("7.40 MB handed to the network", text)
        self.assertIn("= **+5.0 %**; each round's: +5.0 %, median +5.0 %; target < +10.0 %: "
                      "met", text)
        self.assertIn("= **+25.0 %**; each round's: +25.0 %, median +25.0 %; target < "
                      "+10.0 %: MISSED", text)
        self.assertIn("| computation | 0.0300 | 0.0400 | 0.0100 | +6.7 % |", text)
        # Only for the serial pair, where the C++ step lies inside opt.step().
        self.assertEqual(text.count("the Python wrapper's own time"), 1)
        self.assertIn("in opt.step() (its wall time less the C++ step inside it): 0.0100 s, "
                      "+6.7 % of the step", text)

    def test_markdown_carries_the_profiles(self):
        profiles = {"torch-loco4-serial": {"step_s": 0.05, "workers": {"libx": 12.0},
                                           "servers": {"a": 3.0}},
                    "worker-loco4-serial": {"step_s": 0.04, "workers": {"libx": 10.0},
                                            "servers": {"a": 2.5}}}
        profiles["worker-loco4-serial"]["others_share"] = 0.25
        profiles["torch-loco4-serial"]["others_share"] = 0.5
        text = torch_bench.markdown("cmd", "setup", [], {}, [{}], [], profiles)
        self.assertIn("## Where the CPU of a step goes (serial pair, perf)", text)
        self.assertIn("took 25 % and 50 % of its busy CPU", text)
        self.assertIn("| libx | 10.0 | 12.0 | +2.0 |", text)
        self.assertIn("servers and coordinator: 2.5 ms/step with loco-worker, 3.0 with", text)
        text = torch_bench.markdown("cmd", "setup", [], {}, [{}], [], {})
        self.assertIn("a profiled row is missing", text)
        self.assertNotIn("Where the CPU", torch_bench.markdown("c", "s", [], {}, [{}], []))

    def test_markdown_says_so_when_rows_failed(self):
        text = torch_bench.markdown("cmd", "setup", [], {}, [{}], ["round 1 ddp-fp32: boom"])
        self.assertIn("- FAILED: round 1 ddp-fp32: boom", text)
        self.assertIn("torch-loco4 / ddp-fp32: a row is missing", text)


class ProfileTest(unittest.TestCase):
    SCRIPT = "\n".join([
        "    8562            906a93 (/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus)",
        "    8611      7f6722fbf42e (/usr/lib/x86_64-linux-gnu/libgrpc.so.29.0.0)",
        "    8611      7f6722fbf42f (/usr/lib/x86_64-linux-gnu/libgrpc.so.29.0.0)",
        "    8584  ffffffff813ae493 ([kernel.kallsyms])",
        "    8612      7f0000000001 (/work/b/python/loco_ps/_core.cpython-311-x86_64-linux-gnu.so)",
        "    8613      55aa00000001 (/work/b/bin/loco-worker)",
        "       0  ffffffff81000000 ([kernel.kallsyms])",
        "garbage",
        ""])

    def test_script_lines_become_samples_by_pid_and_library(self):
        got = torch_profile.parse_script(self.SCRIPT)
        self.assertEqual(got[("8611", "libgrpc.so.29.0.0")], 2)
        self.assertEqual(got[("8584", "[kernel.kallsyms]")], 1)
        self.assertEqual(got[("8612", torch_profile.OUR_CODE)], 1)
        self.assertEqual(got[("8613", torch_profile.OUR_CODE)], 1)
        self.assertEqual(len(got), 6)
        self.assertEqual(torch_profile.of_pids(got, {"8611", "8612", "8613"}),
                         {"libgrpc.so.29.0.0": 2, torch_profile.OUR_CODE: 2})

    def test_samples_become_cpu_ms_per_step(self):
        # 499 samples = 1 s of CPU; a 6 s window of 0.05 s steps holds 120.
        got = torch_profile.per_step({"a": 1497, "b": 499}, 0.05)
        self.assertAlmostEqual(got["a"], 3000 / 120)
        self.assertAlmostEqual(got["b"], 1000 / 120)

    def test_the_table_puts_the_largest_first_and_sums_the_rest(self):
        lines = torch_profile.table({"a": 1.0, "b": 5.0, "c": 0.5}, {"a": 2.0, "b": 4.0}, top=2)
        self.assertEqual(lines[2], "| b | 4.0 | 5.0 | +1.0 |")
        self.assertEqual(lines[3], "| a | 2.0 | 1.0 | -1.0 |")
        self.assertEqual(lines[4], "| the others | 0.0 | 0.5 | +0.5 |")
        self.assertEqual(lines[5], "| **all** | 6.0 | 6.5 | +0.5 |")


class QuickTest(unittest.TestCase):
    def good(self):
        return {"ddp-fp32": row(0.02, push_bytes_per_step=200_000, veth_up_bytes_per_step=1),
                "torch-loco4": row(0.01, push_bytes_per_step=26_000, veth_up_bytes_per_step=1,
                                   compute_s=0.002),
                "worker-loco4": row(0.01, push_bytes_per_step=26_000, veth_up_bytes_per_step=1,
                                    compute_s=0.001)}

    def test_a_complete_run_passes(self):
        self.assertEqual(torch_bench.quick_problems(self.good(), []), [])

    def test_every_missing_measurement_is_named(self):
        rows = self.good()
        del rows["worker-loco4"]
        rows["torch-loco4"]["compute_s"] = None
        rows["ddp-fp32"]["veth_up_bytes_per_step"] = None
        problems = torch_bench.quick_problems(rows, ["le1-srv"])
        self.assertEqual(problems, ["ddp-fp32: no steady-state veth counter samples",
                                    "torch-loco4: no step phases",
                                    "worker-loco4: no row (the run failed)",
                                    "namespaces left behind: ['le1-srv']"])

    def test_the_torch_peer_must_push_loco4_bytes(self):
        rows = self.good()
        rows["torch-loco4"]["push_bytes_per_step"] = 50_000
        problems = torch_bench.quick_problems(rows, [])
        self.assertEqual(len(problems), 2)
        self.assertIn("expected < 0.2x", problems[0])
        self.assertIn("1.92x loco-worker's bytes", problems[1])


class ArgumentsTest(unittest.TestCase):
    def parse(self, *argv):
        ap = argparse.ArgumentParser()
        torch_bench.add_arguments(ap)
        a = ap.parse_args(list(argv))
        torch_bench.check_arguments(ap, a)
        return a

    def test_defaults_and_hidden_sizes(self):
        a = self.parse("--torch-hidden", "256,128")
        self.assertEqual(a.torch_hidden, [256, 128])
        self.assertEqual((a.torch_steps, a.torch_warmup, a.torch_repeat), (50, 5, 2))

    def test_bad_values_are_refused(self):
        for argv in (("--torch-hidden", "a"), ("--torch-hidden", "0"), ("--torch-steps", "4"),
                     ("--torch-warmup", "0"), ("--torch-repeat", "11")):
            with self.assertRaises(SystemExit, msg=argv):
                with open(os.devnull, "w") as null:
                    saved, sys.stderr = sys.stderr, null
                    try:
                        self.parse(*argv)
                    finally:
                        sys.stderr = saved


if __name__ == "__main__":
    unittest.main()
