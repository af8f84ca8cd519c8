"""The AdamW hyper-parameters of a step, per flat range of parameters.

A param group's trainable parameters are packed next to each other in the
flat layout (FlatParameters in param-group order), so each group is one
contiguous range [begin, end). hyper_ranges turns the optimizer's
param_groups into the tuples Worker.set_step_hyper takes:
(begin, end, lr, beta1, beta2, eps, weight_decay).
"""

import math

import numpy as np

from ._core import MAX_HYPER_GROUPS

_FLOAT32_MAX = float(np.finfo(np.float32).max)

# Keys of torch.optim.AdamW that change the update rule; the servers run
# plain AdamW, so a group asking for one of them is refused.
UNSUPPORTED_FLAGS = ("amsgrad", "maximize", "capturable", "differentiable")


def check_group(where, group):
    """Raises ValueError naming `where` (e.g. "param_groups[1]") when the
    group's hyper-parameters are not ones the servers' AdamW can run."""
    for key in UNSUPPORTED_FLAGS:
        if group.get(key):
            raise ValueError(f"{where} sets {key}=True; the servers run plain AdamW "
                             f"(without {key})")
    lr = _number(where, "lr", group["lr"])
    if not (math.isfinite(lr) and lr >= 0.0):
        raise ValueError(f"{where}: lr={lr!r} is not a finite value >= 0")
    betas = group["betas"]
    if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
        raise ValueError(f"{where}: betas={betas!r} is not a pair (beta1, beta2)")
    for name, beta in zip(("betas[0]", "betas[1]"), betas):
        beta = _number(where, name, beta)
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{where}: {name}={beta!r} is not in [0, 1)")
    eps = _number(where, "eps", group["eps"])
    if not (math.isfinite(eps) and eps > 0.0):
        raise ValueError(f"{where}: eps={eps!r} is not a finite value > 0")
    weight_decay = _number(where, "weight_decay", group["weight_decay"])
    if not (math.isfinite(weight_decay) and weight_decay >= 0.0):
        raise ValueError(f"{where}: weight_decay={weight_decay!r} is not a finite value >= 0")
    # The servers step in float32 and refuse what does not hold there
    # (rpc/step_hyper.cc, kernels/params.cc): checked here too, so that a
    # worker is refused before it joins.
    for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
        if abs(value) > _FLOAT32_MAX:
            raise ValueError(f"{where}: {name}={value!r} is beyond float32's range (the "
                             "servers step in float32)")
    for name, beta in zip(("betas[0]", "betas[1]"), betas):
        if not float(np.float32(float(beta))) < 1.0:
            raise ValueError(f"{where}: {name}={beta!r} rounds to 1.0 in float32 (the servers "
                             "step in float32); give a value further below 1")
    if not float(np.float32(eps)) > 0.0:
        raise ValueError(f"{where}: eps={eps!r} rounds to 0 in float32 (the servers step in "
                         "float32); give a larger value")
    if not float(np.float32(lr) * np.float32(weight_decay)) <= 1.0:
        raise ValueError(f"{where}: lr * weight_decay = {lr * weight_decay!r} exceeds 1 (the "
                         "decay factor 1 - lr*weight_decay would flip the parameters' sign)")


def check_coverage(ranges, num_elements):
    """ValueError unless `ranges` cover [0, num_elements) in order, each
    non-empty: what Worker.set_step_hyper requires of them."""
    position = 0
    for index, (begin, end, *_) in enumerate(ranges):
        if begin != position or end <= begin:
            raise ValueError(f"the param groups' flat ranges do not cover the layout in order: "
                             f"range {index} is [{begin}, {end}), expected one from {position} "
                             "(is a parameter listed twice?)")
        position = end
    if position != num_elements:
        raise ValueError(f"the param groups' flat ranges end at {position}, not at the "
                         f"layout's {num_elements} elements")


def check_range_count(ranges, buffers_range):
    """ValueError when there are more ranges than one push carries
    (MAX_HYPER_GROUPS, 4096). The client library counts the ranges that
    meet each shard, after the join; counted here over the whole model,
    before it, because the shard map is known only once joined and may
    change at a rejoin: a layout under the limit fits any map, and a
    refusal after the join would leave the cluster's model size fixed by a
    worker that cannot train. `buffers_range`: the last range is the
    averaged buffers' (named in the message)."""
    if len(ranges) <= MAX_HYPER_GROUPS:
        return
    buffers = " plus one for the averaged buffers" if buffers_range else ""
    raise ValueError(f"the param groups make {len(ranges)} hyper-parameter ranges (one per "
                     f"group with trainable parameters{buffers}); a push carries at most "
                     f"{MAX_HYPER_GROUPS}. Merge groups with the same lr, betas, eps and "
                     "weight_decay into one")


def _number(where, name, value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {name}={value!r} is not a number") from None


def group_hyper(group):
    """(lr, beta1, beta2, eps, weight_decay) of one param group, as floats."""
    beta1, beta2 = group["betas"]
    return (float(group["lr"]), float(beta1), float(beta2), float(group["eps"]),
            float(group["weight_decay"]))


def hyper_ranges(param_groups, flat):
    """One (begin, end, lr, beta1, beta2, eps, weight_decay) per group that
    holds trainable elements, in flat order; they cover [0, flat.num_elements)."""
    ranges = []
    for index, group in enumerate(param_groups):
        check_group(f"param_groups[{index}]", group)
        positions = [flat.index(p) for p in group["params"]]
        positions = [i for i in positions if i is not None]
        if not positions:
            continue
        begin, end = flat.begin(min(positions)), flat.end(max(positions))
        if begin == end:
            continue
        ranges.append((begin, end) + group_hyper(group))
    return ranges
