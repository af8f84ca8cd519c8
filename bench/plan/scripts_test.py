"""Tests of the planner's measurement scripts: measure.py turns measured.csv's
rows back into the configurations bench/e2e ran, validate.py puts a run
in the same set whether it comes from bench/e2e's files or from a session
of measure.py --with-e2e, measured.py names each session's file, and the
servers' CPU per step is read from a real sampler process and taken
between two step events, and compare_servers.py names, chooses and
summarises the configurations it runs.

Checked against the committed measured.csv and values worked out by hand.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import compare_servers  # noqa: E402
import measure  # noqa: E402
import measured  # noqa: E402
import netns  # noqa: E402
import runs  # noqa: E402
import validate  # noqa: E402
import wakeups  # noqa: E402

MEASURED = os.path.join(HERE, "measured.csv")


def measured_rows():
    with open(MEASURED) as f:
        return list(csv.DictReader(f))


class MeasureTest(unittest.TestCase):
    def test_e2e_configs_reproduce_every_measured_row(self):
        rows = measured_rows()
        configs = measure.e2e_configs(MEASURED)
        self.assertEqual(len(configs), len(rows))
        for c, r in zip(configs, rows):
            self.assertEqual(runs.mlp_params(c.hidden), int(r["params"]))
            self.assertEqual((c.workers, c.servers, c.rate), (int(r["workers"]),
                             int(r["servers"]), int(r["link_mbit"])))
            self.assertEqual((c.codec, c.bits, c.block, c.pull, c.pull_bits),
                             (r["codec"], int(r["bits"]), int(r["block"]), r["pull_codec"],
                              int(r["pull_bits"])))
            self.assertEqual(c.batch, int(r["batch_per_worker"]) * c.workers)
            self.assertIn(c.set, ("steps", "scaling"))

    def test_the_128_element_block_row_keeps_its_block(self):
        b128 = [c for c in measure.e2e_configs(MEASURED) if c.name == "loco4-delta-b128"]
        self.assertEqual([c.block for c in b128], [128])

    def test_hidden_for_knows_the_three_models_and_refuses_others(self):
        self.assertEqual(measure.hidden_for(1863690), [1024, 1024])
        self.assertEqual(measure.hidden_for(11882506), [3072, 3072])
        with self.assertRaises(SystemExit):
            measure.hidden_for(1000)


class RoleTest(unittest.TestCase):
    def test_a_session_row_takes_its_set_from_the_column(self):
        rows = measured_rows()
        for r in rows:
            session = dict(r, source="bench/plan/results/session_runs.csv",
                           set=validate.origin(r))
            self.assertEqual(validate.role(session), validate.role(r))

    def test_the_calibration_set_is_the_1_gbit_matrix_and_three_scaling_points(self):
        roles = [validate.role(r) for r in measured_rows()]
        self.assertEqual(roles.count("calibration"), 18)
        self.assertEqual(roles.count("held out"), 18)

    def test_new_rates_and_anchor(self):
        base = {"label": "loco4-delta", "source": "bench/plan/results/new_runs.csv"}
        self.assertEqual(validate.role(base), "held out (new rates)")
        self.assertEqual(validate.role(dict(base, label="anchor-loco4-delta")), "anchor")
        session = dict(base, source="bench/plan/results/session_runs.csv")
        self.assertEqual(validate.role(dict(session, set="new")), "held out (new rates)")
        self.assertEqual(validate.role(dict(session, set="anchor")), "anchor")

    def test_larger_models_are_held_out_and_beyond_every_fitted_size(self):
        fitted = {int(r["params"]) for r in measured_rows()}
        for c in measure.SIZE_CONFIGS:
            self.assertEqual(validate.role({"label": c.name, "set": c.set}),
                             "held out (new sizes)")
            self.assertGreater(runs.mlp_params(c.hidden), max(fitted))


class SessionFilesTest(unittest.TestCase):
    def test_each_session_gets_its_own_measured_file_with_server_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            for name in ("session_runs.csv", "session2_runs.csv", "new_runs.csv"):
                open(os.path.join(d, name), "w").close()
            old = measured.SESSION_PATTERN
            measured.SESSION_PATTERN = os.path.join(d, "session*_runs.csv")
            try:
                outs = {name: columns for _, name, columns in measured.outputs()}
            finally:
                measured.SESSION_PATTERN = old
        self.assertIn("measured_session.csv", outs)
        self.assertIn("measured_session2.csv", outs)
        self.assertIn("server_cpu_s", outs["measured_session2.csv"])
        self.assertNotIn("server_cpu_s", outs["measured.csv"])

    def test_convert_carries_the_server_cpu(self):
        row = {"config": "loco4-delta", "params": "1863690", "workers": "4", "servers": "2",
               "batch": "256", "link_mbit": "10000", "codec": "loco", "bits": "4",
               "block": "256", "pull": "delta", "step_s": "0.036", "push_bytes_per_step": "1",
               "pull_bytes_per_step": "2", "server_cpu_s_per_step": "0.00732", "set": "anchor"}
        out = measured.convert(row, "x")
        self.assertEqual(out["server_cpu_s"], "0.00732")
        self.assertEqual(out["batch_per_worker"], 64)
        self.assertEqual(measured.convert(dict(row, server_cpu_s_per_step=""), "x")
                         ["server_cpu_s"], "")


class WakeupsTest(unittest.TestCase):
    SCRIPT = "\n".join([
        "loco-worker  101/101 syscalls:sys_enter_recvmsg:",
        "loco-worker  101/105 syscalls:sys_enter_recvmsg:",
        "nexting_thread  200/201 syscalls:sys_enter_recvmsg:",
        "nexting_thread  200/202 syscalls:sys_enter_recvmsg:",
        "grpcpp_sync_ser  200/203 syscalls:sys_enter_epoll_wait:",
        "loco-coordinato  300/300 syscalls:sys_enter_recvmsg:",
        "loco-coordinato  300/300 syscalls:sys_enter_recvmsg:",
        "loco-coordinato  300/300 syscalls:sys_enter_recvmsg:",
        "garbage",
    ])

    def test_calls_are_counted_per_process_under_its_main_threads_name(self):
        by = wakeups.syscalls_by_process(self.SCRIPT)
        self.assertEqual(by[("loco-worker", "101")], {"sys_enter_recvmsg": 2})
        self.assertEqual(by[("?", "200")], {"sys_enter_recvmsg": 2, "sys_enter_epoll_wait": 1})
        self.assertEqual(by[("loco-coordinato", "300")], {"sys_enter_recvmsg": 3})

    def test_the_server_is_the_busiest_process_that_is_no_worker_or_coordinator(self):
        self.assertEqual(wakeups.server_calls(wakeups.syscalls_by_process(self.SCRIPT)), (2, 1))


class _Sampler:
    def __init__(self, events):
        self.events = events


class ServerCpuTest(unittest.TestCase):
    def test_the_busiest_server_between_the_window_ends(self):
        # Two servers; samples every 0.1 s; window from t = 1.05 to 1.95, 3 steps.
        events = [(1.0 + 0.1 * k, {"c": [[0, 0]], "cpu": [0.02 * k, 0.05 * k]})
                  for k in range(11)]
        events.insert(3, (1.25, {"c": [[0, 0]]}))  # a line without readings
        window = (1.05, 1.95, 3, {}, {})
        # Server 1: 0.05 s per 0.1 s over 0.9 s = 0.45 s, over 3 steps.
        self.assertAlmostEqual(runs._server_cpu_fields(_Sampler(events), window)
                               ["server_cpu_s_per_step"], 0.15, places=9)
        self.assertIsNone(runs._server_cpu_fields(_Sampler(events[:1]), window)
                          ["server_cpu_s_per_step"])

    def test_interpolation_goes_through_nested_lists(self):
        samples = [(0.0, [[0, 10], [4]]), (2.0, [[2, 30], [8]])]
        self.assertEqual(runs._sampled_at(samples, 0.5), [[0.5, 15.0], [5.0]])
        self.assertEqual(runs._sampled_at(samples, 9.0), [[2, 30], [8]])

    def test_a_real_sampler_reads_a_busy_process_tree(self):
        """The sampler finds the CPU of a process two levels below the root
        it is given (as a server runs under /usr/bin/time and timeout), and
        an idle tree stays near zero. Bounded: the busy loop stops itself
        after 3 s, the sampler is killed after 1.5 s."""
        topo = netns.Topology("lt", 1)
        topo.server_dev = lambda i: "lo"  # a device every namespace has
        busy = subprocess.Popen(["/usr/bin/timeout", "3", "/bin/sh", "-c",
                                 "/usr/bin/timeout 3 /bin/sh -c 'while :; do :; done'"])
        idle = subprocess.Popen(["/usr/bin/timeout", "3", "/bin/sleep", "3"])
        sampler = subprocess.Popen(topo.sampler_argv(0.05, [busy.pid, idle.pid]),
                                   stdout=subprocess.PIPE, text=True)
        started = time.monotonic()
        time.sleep(1.5)
        sampler.kill()
        elapsed = time.monotonic() - started
        lines = [json.loads(x) for x in sampler.stdout.read().splitlines()]
        for p in (busy, idle):
            p.kill()
            p.wait()
        sampler.wait()
        self.assertGreater(len(lines), 5)
        self.assertTrue(all(len(x["c"]) == 1 and len(x["cpu"]) == 2 for x in lines))
        busy_cpu = lines[-1]["cpu"][0] - lines[0]["cpu"][0]
        # At least a fifth of a core over the run (a loaded 2-core machine),
        # at most the wall time between the first and last readings.
        self.assertGreater(busy_cpu, 0.2 * (elapsed - 0.5))
        self.assertLessEqual(busy_cpu, elapsed + 0.05)
        self.assertLess(lines[-1]["cpu"][1], 0.1)


class CompareServersTest(unittest.TestCase):
    def test_names_are_unique_and_name_model_size_workers_shards_and_rate(self):
        configs = measure.CONFIGS + measure.SIZE_CONFIGS
        known = compare_servers.known_configs()
        self.assertEqual(len(known), len(configs))
        c = measure.Config("fp32-ps", [4096, 4096], 4, 2, 1000, "fp32", 4, "fp32", 8, 256)
        # 784*4096 + 4096 + 4096*4096 + 4096 + 4096*10 + 10 parameters.
        self.assertEqual(runs.mlp_params(c.hidden), 20_037_642)
        self.assertEqual(compare_servers.config_name(c), "fp32-ps-20.0M-W4-S2-1000mbit")
        self.assertEqual(known["fp32-ps-20.0M-W4-S2-1000mbit"].hidden, [4096, 4096])

    def test_the_defaults_are_the_two_configurations_pushing_over_32_mib(self):
        chosen = compare_servers.choose(compare_servers.DEFAULT_CONFIGS,
                                        compare_servers.known_configs())
        for c in chosen:
            self.assertEqual(c.codec, "fp32")
            push_bytes = 4 * runs.mlp_params(c.hidden) / c.servers
            self.assertGreater(push_bytes, 32 * 2**20, c)

    def test_an_unknown_name_is_refused_with_where_the_known_ones_are(self):
        with self.assertRaises(SystemExit) as e:
            compare_servers.choose(["fp32-ps-1.9M-W2-S1-200mbit", "nope"],
                                   compare_servers.known_configs())
        self.assertIn("unknown configuration(s) nope", str(e.exception))
        self.assertIn("--list", str(e.exception))

    def test_summary_gives_median_and_range_per_configuration_and_server(self):
        rows = [{"config": "a", "server": "new", "step_s": 1.5, "server_cpu_s_per_step": 0.4,
                 "server_peak_rss_mb": 290.0},
                {"config": "a", "server": "against", "step_s": 2.5,
                 "server_cpu_s_per_step": None, "server_peak_rss_mb": 300.0},
                {"config": "a", "server": "new", "step_s": 1.6, "server_cpu_s_per_step": 0.42,
                 "server_peak_rss_mb": 302.0},
                {"config": "a", "server": "new", "step_s": 1.51,
                 "server_cpu_s_per_step": 0.41, "server_peak_rss_mb": 295.0}]
        new, against = compare_servers.summary(rows)
        self.assertEqual((new["server"], new["runs"]), ("new", 3))
        self.assertEqual(new["step_s"], "1.51 (1.5-1.6)")
        self.assertEqual(new["server_cpu_s_per_step"], "0.41 (0.4-0.42)")
        self.assertEqual(new["server_peak_rss_mb"], "295 (290-302)")
        self.assertEqual(against["server_cpu_s_per_step"], "n/a")
        self.assertEqual(against["step_s"], "2.5 (2.5-2.5)")

    def test_bad_flags_are_refused_before_anything_runs(self):
        script = os.path.join(HERE, "compare_servers.py")
        for args, message in (
                ([], "--against-server is required"),
                (["--against-server", "/nonexistent"], "is not an executable file"),
                (["--against-server", "/bin/true", "--repeat", "0"],
                 "--repeat must be in [1, 9], got 0"),
                (["--against-server", "/bin/true", "--config", "nope"],
                 "unknown configuration(s) nope")):
            r = subprocess.run([sys.executable, script, *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(message, r.stdout, args)


if __name__ == "__main__":
    unittest.main()
