"""The small seeded task the DistributedOptimizer tests train: an MLP on a
synthetic classification problem, with the same batches in every process
(the parity tests compare runs of several processes with one torch run)."""

import torch
import torch.nn.functional as F

# Hidden 96: 11 332 parameters, enough for two shards (a shard is aligned
# to 4096 elements).
INPUTS, HIDDEN, CLASSES = 16, 96, 4


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, CLASSES))


def param_groups(model, lr):
    """Two groups: the weights with the optimizer's defaults, the biases with
    their own lr and no weight decay."""
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return [{"params": weights}, {"params": biases, "lr": 2 * lr, "weight_decay": 0.0}]


def batches(count, size=64, seed=1):
    """`count` batches of a task a teacher network labels: learnable, not trivial."""
    gen = torch.Generator().manual_seed(seed)
    teacher = torch.randn(INPUTS, CLASSES, generator=gen)
    out = []
    for _ in range(count):
        x = torch.randn(size, INPUTS, generator=gen)
        out.append((x, (torch.tanh(x) @ teacher).argmax(1)))
    return out


def scheduler(optimizer):
    """Halves the lr every 8 steps."""
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=8, gamma=0.5)


def train(model, optimizer, data, part=None, parts=1, with_scheduler=False):
    """One step per batch; with `part`, only that 1/parts of each batch (its
    mean loss). Returns the losses of the full batches before each step."""
    sched = scheduler(optimizer) if with_scheduler else None
    losses = []
    for x, y in data:
        if part is not None:
            size = len(x) // parts
            x, y = x[part * size:(part + 1) * size], y[part * size:(part + 1) * size]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
        if sched is not None:
            sched.step()
    return losses


def max_relative_difference(model_a, model_b):
    """max over tensors of max|a - b| / max|b|: the servers' kernel and
    torch's AdamW round differently by an ulp or so per step."""
    worst = 0.0
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        worst = max(worst, float((a - b).abs().max() / b.abs().max()))
    return worst
