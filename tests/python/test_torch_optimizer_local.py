"""loco_ps.torch.DistributedOptimizer's Python side against a FakeWorker
(tests/python/fake_worker.py): flat storage, hyper-parameter ranges, hooks
and the overlapped step's threads, without a cluster. The same behaviours
against real servers are in test_torch_optimizer.py."""

import gc
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import loco_ps.torch as lps  # noqa: E402
from fake_worker import fake_workers  # noqa: E402


@pytest.fixture
def workers(monkeypatch):
    """Every FakeWorker the optimizers under test build, in order."""
    return fake_workers(monkeypatch, lps)


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def batches(count, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(32, 8, generator=gen), torch.randint(0, 4, (32,), generator=gen))
            for _ in range(count)]


def groups_of(model):
    return [{"params": [model[0].weight, model[2].weight]},
            {"params": [model[0].bias, model[2].bias], "weight_decay": 0.0, "lr": 2e-3}]


def train(model, opt, data, scheduler=None):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()


def max_relative_difference(model_a, model_b):
    """max over tensors of max|a - b| / max|b|: float32 rounding differs
    between the servers' kernel and torch's AdamW by an ulp or so per step."""
    worst = 0.0
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        worst = max(worst, float((a - b).abs().max() / b.abs().max()))
    return worst


def test_matches_torch_adamw_with_groups_and_scheduler(workers):
    reference, ours = make_model(), make_model()
    data = batches(25)
    ref_opt = torch.optim.AdamW(groups_of(reference), lr=1e-2, weight_decay=0.05)
    opt = lps.DistributedOptimizer(groups_of(ours), coordinator="fake:1", lr=1e-2,
                                   weight_decay=0.05)
    decay = lambda step: 0.9 ** step  # noqa: E731
    train(reference, ref_opt, data, torch.optim.lr_scheduler.LambdaLR(ref_opt, decay))
    train(ours, opt, data, torch.optim.lr_scheduler.LambdaLR(opt, decay))
    assert max_relative_difference(ours, reference) < 1e-5
    # One range per group, the groups' own lr, re-sent as the scheduler moved it.
    worker = workers[0]
    assert [h[2] for h in worker.hyper_calls[0]] == [1e-2, 2e-3]
    assert [h[6] for h in worker.hyper_calls[0]] == [0.05, 0.0]
    assert len(worker.hyper_calls) == 25
    opt.close()


def test_parameters_are_views_of_one_flat_buffer(workers):
    model = make_model()
    frozen = model[0].bias
    frozen.requires_grad_(False)
    before = frozen.detach().clone()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert opt.num_elements == sum(p.numel() for p in trainable) == workers[0].num_elements
    base = trainable[0].data_ptr()
    offset = 0
    for p in trainable:
        assert p.data_ptr() == base + 4 * offset
        offset += p.numel()
    train(model, opt, batches(2))
    assert torch.equal(frozen, before)
    opt.close()


def test_missing_or_replaced_gradients(workers):
    model, reference = make_model(), make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3, weight_decay=0.01)
    x, y = batches(1)[0]
    for m, o in ((model, opt), (reference, ref_opt)):
        m.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), y).backward()
        m[2].bias.grad = None  # counts as zero for the cluster
        if o is ref_opt:
            m[2].bias.grad = torch.zeros_like(m[2].bias)
        o.step()
    assert max_relative_difference(model, reference) < 1e-6
    # .grad is the flat view again
    assert model[2].bias.grad is not None
    opt.close()


def test_refuses_parameters_it_cannot_hold(workers):
    model = make_model()
    model.register_parameter("phase", torch.nn.Parameter(torch.zeros(3, dtype=torch.complex64)))
    with pytest.raises(TypeError, match=r"phase has dtype torch\.complex64.*floating-point"):
        lps.DistributedOptimizer(model, coordinator="fake:1")
    sparse = make_model()
    sparse[0].weight = torch.nn.Parameter(sparse[0].weight.detach().to_sparse())
    with pytest.raises(TypeError, match=r"0\.weight has layout torch\.sparse_coo"):
        lps.DistributedOptimizer(sparse, coordinator="fake:1")
    with pytest.raises(ValueError, match=r"amsgrad"):
        lps.DistributedOptimizer([{"params": make_model().parameters(), "amsgrad": True}],
                                 coordinator="fake:1")
    # torch.optim.AdamW's own keywords: the ones that change the update are
    # refused by name, not mistaken for a Worker option.
    for flag in ("amsgrad", "maximize", "capturable", "differentiable"):
        with pytest.raises(ValueError, match=rf"^{flag}=True: the servers run plain AdamW"):
            lps.DistributedOptimizer(make_model(), coordinator="fake:1", **{flag: True})
    with pytest.raises(ValueError, match="coordinator"):
        lps.DistributedOptimizer(make_model(), coordinator="")
    assert workers == []  # nothing was sent


def test_state_dict_round_trip(workers):
    model = make_model()
    opt = lps.DistributedOptimizer(groups_of(model), coordinator="fake:1", lr=1e-2)
    train(model, opt, batches(2))
    saved = opt.state_dict()
    assert saved["loco_ps"]["step"] == 2
    assert saved["state"] == {}
    opt.param_groups[0]["lr"] = 0.5
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["lr"] == 1e-2
    train(model, opt, batches(1))
    assert workers[0].hyper[0][2] == 1e-2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.load_state_dict(torch.optim.AdamW(groups_of(make_model()), lr=1e-2).state_dict()
                            | {"state": {0: {"step": torch.tensor(3.0)}}})
    assert any("moments" in str(w.message) for w in caught)
    opt.close()


def test_takes_a_call_written_for_torch_adamw(workers):
    """The keywords of torch.optim.AdamW are accepted as AdamW takes them,
    and the param groups carry the same keys as AdamW's."""
    model = make_model()
    keywords = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-7, weight_decay=0.0, amsgrad=False,
                    maximize=False, foreach=True, capturable=False)
    opt = lps.DistributedOptimizer(model, coordinator="fake:1", **keywords)
    reference = torch.optim.AdamW(make_model().parameters(), **keywords)
    assert set(reference.param_groups[0]) <= set(opt.param_groups[0])
    train(model, opt, batches(1))
    assert workers[0].hyper[0][2:] == (1e-2, 0.9, 0.99, 1e-7, 0.0)
    opt.close()


def test_close_is_idempotent_and_runs_on_collection(workers):
    opt = lps.DistributedOptimizer(make_model(), coordinator="fake:1")
    opt.close()
    opt.close()
    assert workers[0].left and workers[0].closed
    with pytest.raises(RuntimeError, match="closed"):
        opt.step()
    opt = lps.DistributedOptimizer(make_model(), coordinator="fake:1", overlap=True)
    del opt
    gc.collect()
    assert workers[1].left and workers[1].closed


def test_an_expired_worker_rejoins_and_drops_the_step(workers):
    model = make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    data = batches(3)
    train(model, opt, data[:1])
    workers[0].expire_at_step = 1
    with pytest.warns(RuntimeWarning, match="joined again"):
        train(model, opt, data[1:2])
    assert workers[0].version == 1 and not workers[0].expired
    train(model, opt, data[2:])
    assert workers[0].version == 2
    opt.close()


class SlowBackward(torch.autograd.Function):
    """Identity whose backward sleeps, as a long backward pass would take
    time between layers: the last layer's gradient is final meanwhile."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.05)
        return grad


class SlowMiddle(torch.nn.Module):
    def forward(self, x):
        return SlowBackward.apply(x)


def test_overlap_is_bit_for_bit_and_reports_suffixes(workers):
    plain, overlapped = make_model(), make_model()
    plain.insert(2, SlowMiddle())
    overlapped.insert(2, SlowMiddle())
    data = batches(6)
    opt_plain = lps.DistributedOptimizer(plain, coordinator="fake:1", lr=1e-2)
    opt_overlap = lps.DistributedOptimizer(overlapped, coordinator="fake:1", lr=1e-2,
                                           overlap=True)
    train(plain, opt_plain, data)
    train(overlapped, opt_overlap, data)
    for a, b in zip(plain.parameters(), overlapped.parameters()):
        assert torch.equal(a, b)
    calls = workers[1].ready_calls
    assert len(calls) == 6
    # Backward finished the last layer first: its suffix was reported while
    # the slow layer slept (the earlier layers' report may come too late to
    # be needed, once step() has ended the computation). ready_from falls.
    size = workers[1].num_elements
    last_layer = size - sum(p.numel() for p in overlapped[-1].parameters())
    assert all(c and last_layer <= c[0] < size and c == sorted(c, reverse=True)
               for c in calls), calls
    opt_plain.close()
    opt_overlap.close()


def test_overlap_needs_no_sync_to_accumulate(workers):
    plain, overlapped = make_model(), make_model()
    (x1, y1), (x2, y2) = batches(2)
    opt_plain = lps.DistributedOptimizer(plain, coordinator="fake:1")
    opt_overlap = lps.DistributedOptimizer(overlapped, coordinator="fake:1", overlap=True)
    for model, opt in ((plain, opt_plain), (overlapped, opt_overlap)):
        opt.zero_grad()
        with opt.no_sync():
            F.cross_entropy(model(x1), y1).backward()
        F.cross_entropy(model(x2), y2).backward()
        opt.step()
    for a, b in zip(plain.parameters(), overlapped.parameters()):
        assert torch.equal(a, b)
    opt_overlap.zero_grad()
    F.cross_entropy(overlapped(x1), y1).backward()
    with pytest.raises(RuntimeError, match="a step is in flight"):
        opt_overlap.zero_grad()
    with pytest.raises(RuntimeError, match="no_sync"):
        F.cross_entropy(overlapped(x2), y2).backward()
    opt_plain.close()
    opt_overlap.close()


def test_broadcast_buffers_names_the_averaging_option(workers):
    with pytest.raises(NotImplementedError, match="buffers"):
        lps.broadcast_buffers(torch.nn.BatchNorm1d(3))


def test_bad_hyper_parameters_are_named(workers):
    with pytest.raises(ValueError, match=r"betas=0\.9 is not a pair"):
        lps.DistributedOptimizer(make_model(), coordinator="fake:1", betas=0.9)
    with pytest.raises(ValueError, match=r"param_groups\[1\]: eps=0\.0"):
        lps.DistributedOptimizer([{"params": [make_model()[0].weight]},
                                  {"params": [make_model()[0].bias], "eps": 0.0}],
                                 coordinator="fake:1")
    model = make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    opt.param_groups[0]["lr"] = float("nan")
    with pytest.raises(ValueError, match=r"param_groups\[0\]: lr=nan"):
        train(model, opt, batches(1))
    opt.close()
    assert workers[0].version == 0  # nothing was pushed


def test_step_with_a_closure_returns_its_loss(workers):
    model, reference = make_model(), make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3, weight_decay=0.01)
    x, y = batches(1)[0]
    for m, o in ((model, opt), (reference, ref_opt)):
        def closure(m=m, o=o):
            o.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            return loss
        assert float(o.step(closure)) > 0
    assert max_relative_difference(model, reference) < 1e-6
    opt.close()


# ------------------------------------------------------------ staged parameters
# A parameter that cannot be a view of the flat float32 vector (bfloat16,
# float16, float64, on a GPU, or not contiguous) keeps its own storage: its
# gradient is copied into the flat vector, and the cluster's fp32 values are
# written back into it, rounded to its dtype.


def flat_of(tensors):
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


@pytest.mark.parametrize("dtype,tolerance", [(torch.float64, 1e-5), (torch.bfloat16, 1e-3)])
def test_low_and_high_precision_models_train_on_the_fp32_master(workers, dtype, tolerance):
    # Reference: torch.optim.AdamW on an fp32 master; the gradient comes from
    # a copy of the model in `dtype` holding the master rounded to it, as a
    # mixed-precision trainer computes it.
    model = make_model().to(dtype)
    master = make_model()
    with torch.no_grad():
        for m, p in zip(master.parameters(), model.parameters()):
            m.copy_(p)
    low = make_model().to(dtype)
    ref_opt = torch.optim.AdamW(master.parameters(), lr=1e-2, weight_decay=0.05)
    opt = lps.DistributedOptimizer(model, coordinator="fake:1", lr=1e-2, weight_decay=0.05)
    assert all(p.dtype == dtype for p in model.parameters())
    for x, y in batches(8):
        with torch.no_grad():
            for lp, m in zip(low.parameters(), master.parameters()):
                lp.copy_(m)
        low.zero_grad()
        F.cross_entropy(low(x.to(dtype)).float(), y).backward()
        for m, lp in zip(master.parameters(), low.parameters()):
            m.grad = lp.grad.float()
        ref_opt.step()

        opt.zero_grad()
        F.cross_entropy(model(x.to(dtype)).float(), y).backward()
        opt.step()
        # Exactly the flat fp32 values, rounded to the model's dtype.
        values = opt._flat.values
        for i, p in enumerate(model.parameters()):
            assert p.dtype == dtype
            assert torch.equal(p, opt._flat.value_view(i).to(dtype)), i
    master_now = flat_of(master.parameters())
    worst = float(((values - master_now).abs().max()) / master_now.abs().max())
    assert worst < tolerance, worst
    opt.close()


def test_float16_parameters_and_gradients_are_staged_exactly(workers):
    # float16 matmul has no CPU kernel in this torch: the gradients are set.
    model = make_model().half()
    start = flat_of(model.parameters())
    opt = lps.DistributedOptimizer(model, coordinator="fake:1", lr=1e-3)
    assert torch.equal(opt._flat.values, start)  # float16 -> float32 is exact
    gen = torch.Generator().manual_seed(5)
    grads = [torch.randn(p.shape, generator=gen).half() for p in model.parameters()]
    for p, g in zip(model.parameters(), grads):
        p.grad = g.clone()
    opt.step()
    assert torch.equal(opt._flat.grads, flat_of(grads))
    for i, p in enumerate(model.parameters()):
        assert p.dtype == torch.float16
        assert torch.equal(p, opt._flat.value_view(i).half())
    assert not torch.equal(flat_of(model.parameters()), start)
    opt.zero_grad()
    assert all(float(p.grad.abs().max()) == 0 for p in model.parameters())
    assert float(opt._flat.grads.abs().max()) == 0
    opt.close()


def test_a_non_contiguous_parameter_is_staged_and_trains_like_torch(workers):
    model, reference = make_model(), make_model()
    for m in (model, reference):
        m[2].weight.data = m[2].weight.data.t().contiguous().t()
    assert not model[2].weight.is_contiguous()
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.05)
    opt = lps.DistributedOptimizer(model, coordinator="fake:1", lr=1e-2, weight_decay=0.05)
    data = batches(10)
    train(reference, ref_opt, data)
    train(model, opt, data)
    assert not model[2].weight.is_contiguous()  # its own storage, updated in place
    assert max_relative_difference(model, reference) < 1e-5
    opt.close()


def test_overlap_with_staged_parameters_is_bit_for_bit(workers):
    plain, overlapped = make_model().bfloat16(), make_model().bfloat16()
    data = [(x.bfloat16(), y) for x, y in batches(5)]

    def run(model, opt):
        for x, y in data:
            opt.zero_grad()
            F.cross_entropy(model(x).float(), y).backward()
            opt.step()

    run(plain, lps.DistributedOptimizer(plain, coordinator="fake:1", lr=1e-2))
    run(overlapped, lps.DistributedOptimizer(overlapped, coordinator="fake:1", lr=1e-2,
                                             overlap=True))
    for a, b in zip(plain.parameters(), overlapped.parameters()):
        assert torch.equal(a, b)
    assert len(workers[1].ready_calls) == 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device and a CUDA torch")
def test_a_cuda_model_trains_like_the_same_model_on_the_host(workers):
    host, device = make_model(), make_model().cuda()
    data = batches(6)
    host_opt = lps.DistributedOptimizer(host, coordinator="fake:1", lr=1e-2)
    device_opt = lps.DistributedOptimizer(device, coordinator="fake:1", lr=1e-2, overlap=True)
    train(host, host_opt, data)
    for x, y in data:
        device_opt.zero_grad()
        F.cross_entropy(device(x.cuda()), y.cuda()).backward()
        device_opt.step()
    assert all(p.is_cuda for p in device.parameters())
    assert max_relative_difference(device.cpu(), host) < 1e-4


# ------------------------------------------------- misuse the optimizer detects


def test_share_memory_after_building_trains_as_without(workers):
    # share_memory() moves the flat storage into shared memory and frees the
    # old: the worker must be handed views of where the tensors are now.
    plain, shared, reference = make_model(), make_model(), make_model()
    data = batches(6)
    opt_plain = lps.DistributedOptimizer(plain, coordinator="fake:1", lr=1e-2)
    opt_shared = lps.DistributedOptimizer(shared, coordinator="fake:1", lr=1e-2)
    shared.share_memory()
    assert all(p.is_shared() for p in shared.parameters())
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.01)
    train(plain, opt_plain, data)
    train(shared, opt_shared, data)
    train(reference, ref_opt, data)
    for a, b in zip(plain.parameters(), shared.parameters()):
        assert torch.equal(a, b)
    assert max_relative_difference(shared, reference) < 1e-5
    assert opt_shared._flat.values.is_shared()
    opt_plain.close()
    opt_shared.close()


def test_parameters_changed_outside_a_step_are_refused(workers):
    model = make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    train(model, opt, batches(1))
    # A checkpoint loaded after the optimizer was built.
    model.load_state_dict(make_model(seed=3).state_dict())
    with pytest.raises(RuntimeError, match=r"(?s)0\.weight, 0\.bias, 2\.weight, 2\.bias changed "
                                           r"since the cluster last wrote them.*load it into "
                                           r"the model before building the optimizer"):
        opt.step()
    assert workers[0].version == 1  # nothing was pushed
    opt.close()
    # One tensor re-initialised in place, on a staged (bfloat16) model.
    model = make_model().bfloat16()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    torch.nn.init.zeros_(model[2].bias)
    with pytest.raises(RuntimeError, match=r"parameter\(s\) 2\.bias changed"):
        opt.step()
    opt.close()


def test_the_trainable_set_is_fixed_at_construction(workers):
    model = make_model()
    model[0].bias.requires_grad_(False)
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    train(model, opt, batches(1))
    model[0].bias.requires_grad_(True)
    with pytest.raises(RuntimeError, match=r"requires_grad was turned on for 0\.bias .*"
                                           r"never train.*Build a new optimizer"):
        train(model, opt, batches(1))
    model[0].bias.requires_grad_(False)
    model[2].weight.requires_grad_(False)
    with pytest.raises(RuntimeError, match=r"requires_grad was turned off for 2\.weight"):
        train(model, opt, batches(1))
    assert workers[0].version == 1
    opt.close()
    # With overlap=True the backward pass that starts the step refuses too.
    model = make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1", overlap=True)
    model[0].weight.requires_grad_(False)
    x, y = batches(1)[0]
    with pytest.raises(RuntimeError, match=r"turned off for 0\.weight"):
        F.cross_entropy(model(x), y).backward()
    assert workers[1].version == 0
    opt.close()


def test_copies_and_pickles_are_refused(workers):
    import copy
    import pickle
    opt = lps.DistributedOptimizer(make_model(), coordinator="fake:1")
    for attempt in (lambda: copy.deepcopy(opt), lambda: copy.copy(opt),
                    lambda: pickle.dumps(opt)):
        with pytest.raises(TypeError, match=r"cannot be pickled or copied.*state_dict\(\)"):
            attempt()
    opt.close()


def test_a_resynchronised_step_warns(workers):
    model = make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    apply = workers[0]._apply

    def resynced(grads, params):
        return dict(apply(grads, params), resynced=True)

    workers[0]._apply = resynced
    with pytest.warns(RuntimeWarning, match=r"step 0 was not applied with this worker's "
                                            r"gradient.*dropped"):
        train(model, opt, batches(1))
    assert opt.last_step_result["resynced"]
    opt.close()


def test_a_second_backward_says_what_was_pushed(workers):
    # The layout is (first, second); a backward that reaches only `first`
    # leaves nothing final (the final part grows from the end): nothing of
    # the step was pushed.
    first = torch.nn.Parameter(torch.ones(3))
    second = torch.nn.Parameter(torch.ones(2))
    opt = lps.DistributedOptimizer([first, second], coordinator="fake:1", overlap=True)
    first.sum().backward()
    with pytest.raises(RuntimeError, match=r"no_sync.*nothing of this step had been pushed"):
        first.sum().backward()
    opt.close()
    # Both final after the first backward: the servers may have applied it.
    model = make_model()
    opt = lps.DistributedOptimizer(model, coordinator="fake:1", overlap=True)
    x, y = batches(1)[0]
    F.cross_entropy(model(x), y).backward()
    with pytest.raises(RuntimeError, match=r"all of its gradient had been reported final.*may "
                                           r"already have applied this step.*resynchronises"):
        F.cross_entropy(model(x), y).backward()
    opt.close()


def test_an_idle_member_on_this_thread_is_named_before_the_step_waits(workers):
    # A notebook cell re-run: a second optimizer joins the cluster while the
    # first, last stepped on this thread, lives on.
    old_model, model = make_model(), make_model()
    old = lps.DistributedOptimizer(old_model, coordinator="fake:1")
    train(old_model, old, batches(1))
    opt = lps.DistributedOptimizer(model, coordinator="fake:1")
    workers[1].worker_id = 2
    for worker in workers:
        worker.world_size = 2
    with pytest.raises(RuntimeError, match=r"another DistributedOptimizer of this process "
                                           r"\(worker 1\) is still a member.*close\(\) the other"):
        train(model, opt, batches(1))
    assert workers[1].version == 0
    old.close()
    train(model, opt, batches(1))
    assert workers[1].version == 1
    opt.close()
