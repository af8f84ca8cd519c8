"""What DistributedOptimizer refuses before its worker joins, against a
FakeWorker (tests/python/fake_worker.py): every local check runs before the
join, which fixes the cluster's model size, so a refusal leaves no worker
made (`workers == []`) and a corrected retry joins as if first. The same
against real servers: test_torch_optimizer.py,
test_local_mistakes_are_refused_before_the_cluster_is_touched."""

import pytest

torch = pytest.importorskip("torch")

import loco_ps.torch as lps  # noqa: E402
from fake_worker import fake_workers  # noqa: E402
from loco_ps import _core  # noqa: E402
from torch_task import make_model  # noqa: E402


@pytest.fixture
def workers(monkeypatch):
    """Every FakeWorker the optimizers under test build, in order."""
    return fake_workers(monkeypatch, lps)


def one_group_per_parameter(count):
    return [{"params": [torch.nn.Parameter(torch.zeros(1))]} for _ in range(count)]


def test_a_duplicated_parameter_is_refused_before_joining(workers):
    model = make_model()
    params = list(model.parameters())
    with pytest.raises(ValueError, match=r"some parameters appear more than once in parameter "
                                         r"group 0: param_groups\[0\]\['params'\]\[1\] \(the "
                                         r"tensor at \[0\] again\)"):
        lps.DistributedOptimizer([{"params": [params[0]] + params}], coordinator="fake:1")
    with pytest.raises(ValueError, match=r"more than once.*\[2\] \(the tensor at \[1\]"):
        lps.DistributedOptimizer([params[0], params[1], params[1]], coordinator="fake:1")
    with pytest.raises(ValueError, match="more than one parameter group"):
        lps.DistributedOptimizer([{"params": params}, {"params": params[:1]}],
                                 coordinator="fake:1")
    # Values the servers' float32 step would refuse after the join.
    with pytest.raises(ValueError, match=r"betas\[1\]=.* rounds to 1\.0 in float32"):
        lps.DistributedOptimizer(model, coordinator="fake:1", betas=(0.9, 1 - 1e-10))
    with pytest.raises(ValueError, match=r"eps=1e-50 rounds to 0"):
        lps.DistributedOptimizer(model, coordinator="fake:1", eps=1e-50)
    with pytest.raises(ValueError, match=r"lr \* weight_decay"):
        lps.DistributedOptimizer(model, coordinator="fake:1", lr=300.0, weight_decay=0.01)
    assert workers == []  # nothing was sent


def test_bits_do_not_apply_to_fp32_and_bf16(workers):
    for codec in ("fp32", "bf16"):
        opt = lps.DistributedOptimizer(make_model(), coordinator="fake:1", codec=codec, bits=32)
        assert workers[-1].options["codec"] == codec
        assert workers[-1].options["bits"] == 4  # the Worker's default, whatever was given
        opt.close()
    opt = lps.DistributedOptimizer(make_model(), coordinator="fake:1", codec="loco", bits=8)
    assert workers[-1].options["bits"] == 8
    opt.close()


def test_lr_given_where_the_coordinator_goes(workers):
    with pytest.raises(TypeError, match=r"coordinator=0\.001: give the coordinator's "
                                        r"\"host:port\" as a string.*lr=0\.001"):
        lps.DistributedOptimizer(make_model(), 1e-3)
    with pytest.raises(TypeError, match=r"coordinator=None"):
        lps.DistributedOptimizer(make_model())
    assert workers == []


def test_without_a_coordinator_the_connection_comes_from_the_environment(workers,
                                                                         monkeypatch):
    """coordinator=None takes loco-worker's variables for what is not
    given, as `python3 -m loco_ps.run` and the Kubernetes pods set them."""
    for variable in ("LOCO_COORDINATOR", "LOCO_INSECURE", "LOCO_TLS_CA", "LOCO_AUTH_TOKEN_FILE",
                     "LOCO_NAME", "LOCO_WAIT_FOR_WORKERS", "LOCO_TLS_CERT", "LOCO_TLS_KEY",
                     "LOCO_TLS_SERVER_NAME", "LOCO_METRICS_PORT", "LOCO_METRICS_HOST"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LOCO_COORDINATOR", "")  # empty counts as unset
    with pytest.raises(TypeError, match=r"\$LOCO_COORDINATOR is not set: .*python3 -m "
                                        r"loco_ps\.run"):
        lps.DistributedOptimizer(make_model())
    monkeypatch.setenv("LOCO_COORDINATOR", "fake:2")
    monkeypatch.setenv("LOCO_INSECURE", "yes")
    monkeypatch.setenv("LOCO_AUTH_TOKEN_FILE", "/etc/loco/auth/worker-token")
    monkeypatch.setenv("LOCO_NAME", "pod-7")
    monkeypatch.setenv("LOCO_WAIT_FOR_WORKERS", "0")  # loco-worker's "at once": one, us
    monkeypatch.setenv("LOCO_TLS_SERVER_NAME", "loco-coordinator")
    lps.DistributedOptimizer(make_model()).close()
    worker = workers[-1]
    assert worker.coordinator == "fake:2"
    assert worker.options["insecure"] is True
    assert worker.options["auth_token_file"] == "/etc/loco/auth/worker-token"
    assert worker.options["name"] == "pod-7"
    assert worker.options["tls_server_name"] == "loco-coordinator"
    assert "tls_cert" not in worker.options  # not set: not passed
    # An argument beats its variable.
    lps.DistributedOptimizer(make_model(), name="mine", insecure=False).close()
    assert workers[-1].options["name"] == "mine"
    assert workers[-1].options["insecure"] is False
    # A coordinator given reads nothing from the environment.
    lps.DistributedOptimizer(make_model(), coordinator="fake:1").close()
    assert workers[-1].coordinator == "fake:1"
    assert workers[-1].options["insecure"] is False
    assert workers[-1].options["name"] is None
    # loco-worker's LOCO_METRICS_PORT: 0 none, -1 any free port (metrics_port=0).
    for value, expected in (("0", None), ("-1", 0), ("9400", 9400)):
        monkeypatch.setenv("LOCO_METRICS_PORT", value)
        lps.DistributedOptimizer(make_model()).close()
        assert workers[-1].options.get("metrics_port") == expected, value
    monkeypatch.delenv("LOCO_METRICS_PORT")
    made = len(workers)
    for variable, value, says in [
            ("LOCO_METRICS_PORT", "-2", r"\$LOCO_METRICS_PORT='-2' \(for metrics_port\): "
                                        r"expected a port"),
            ("LOCO_INSECURE", "maybe", r"\$LOCO_INSECURE='maybe' \(for insecure\): expected "
                                      r"true or false"),
            ("LOCO_WAIT_FOR_WORKERS", "two", r"\$LOCO_WAIT_FOR_WORKERS='two' \(for "
                                             r"wait_for_workers\): expected an integer")]:
        monkeypatch.setenv(variable, value)
        with pytest.raises(ValueError, match=says):
            lps.DistributedOptimizer(make_model())
        monkeypatch.delenv(variable)
    assert len(workers) == made  # refused before a worker was made


def test_more_param_groups_than_a_push_carries_are_refused_before_joining(workers):
    limit = _core.MAX_HYPER_GROUPS
    assert limit == 4096  # kMaxHyperGroups, rpc/step_hyper.h
    with pytest.raises(ValueError, match=rf"the param groups make {limit + 1} hyper-parameter "
                                         rf"ranges .*a push carries at most {limit}\. Merge "):
        lps.DistributedOptimizer(one_group_per_parameter(limit + 1), coordinator="fake:1")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    groups = one_group_per_parameter(limit - 1) + [{"params": list(model.parameters())}]
    with pytest.raises(ValueError, match=rf"{limit + 1} hyper-parameter ranges \(one per group "
                                         r"with trainable parameters plus one for the averaged "
                                         r"buffers\)"):
        lps.DistributedOptimizer(groups, coordinator="fake:1", buffers=model)
    assert workers == []  # nothing was sent
    # At the limit, it joins, and every group reaches the worker.
    with lps.DistributedOptimizer(one_group_per_parameter(limit), coordinator="fake:1") as opt:
        assert len(workers) == 1 and workers[0].num_elements == limit
        assert len(workers[0].hyper) == limit
        assert opt.num_elements == limit
