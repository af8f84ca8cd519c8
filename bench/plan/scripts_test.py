"""Tests of the planner's measurement scripts: measure.py turns measured.csv's
rows back into the configurations bench/e2e ran, and validate.py puts a
run in the same set whether it comes from bench/e2e's files or from a
session of measure.py --with-e2e.

Checked against the committed measured.csv and values worked out by hand.
"""
import csv
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import measure  # noqa: E402
import runs  # noqa: E402
import validate  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
