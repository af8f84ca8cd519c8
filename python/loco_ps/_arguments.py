"""The checks and conversions of DistributedOptimizer's constructor arguments.

All of them run before the worker joins: the first join fixes the
cluster's model size, so a join followed by a refusal would leave a
corrected retry refused for its (right) size.
"""

import math

import torch


def worker_bits(codec, bits):
    """The bits to hand the Worker: `bits` for the block codecs; for fp32
    and bf16, which have no bits (the Worker ignores them too), its
    default, so that whatever was given (32, None) never reaches the
    binding's int conversion."""
    if not isinstance(codec, str):
        raise TypeError(f"codec={codec!r} is a {type(codec).__name__}; give one of "
                        "\"fp32\", \"bf16\", \"naive\", \"ef\", \"loco\"")
    if codec in ("fp32", "bf16"):
        return 4
    return bits


def check_arguments(coordinator, wait_for_workers, wait_timeout_s):
    if not isinstance(coordinator, str):
        hint = ""
        if isinstance(coordinator, (int, float)) and not isinstance(coordinator, bool):
            hint = (f"; unlike torch.optim.AdamW, the second positional argument is the "
                    f"coordinator: give lr as a keyword (lr={coordinator!r})")
        raise TypeError(f"coordinator={coordinator!r}: give the coordinator's \"host:port\" "
                        f"as a string{hint}")
    if not coordinator:
        raise ValueError(f"coordinator={coordinator!r}: give the coordinator's \"host:port\"")
    if isinstance(wait_for_workers, bool) or not isinstance(wait_for_workers, int) \
            or wait_for_workers < 1:
        raise ValueError(f"wait_for_workers={wait_for_workers!r} is not an integer >= 1")
    if not (isinstance(wait_timeout_s, (int, float)) and math.isfinite(wait_timeout_s)
            and wait_timeout_s > 0):
        raise ValueError(f"wait_timeout_s={wait_timeout_s!r} is not a finite number > 0")


def trainable(param_groups, names):
    """(name, parameter) of every parameter that requires grad, in
    param-group order: the flat layout."""
    out = []
    for group_index, group in enumerate(param_groups):
        for j, param in enumerate(group["params"]):
            if param.requires_grad:
                name = names.get(id(param), f"param_groups[{group_index}]['params'][{j}]")
                out.append((name, param))
    if not out:
        raise ValueError("no parameter requires grad: there is nothing to optimise")
    return out


def buffers_to_average(buffers, params):
    """(name, tensor) of the floating-point buffers DistributedOptimizer's `buffers`
    argument asks to average; [] for None."""
    if buffers is None:
        return []
    if isinstance(buffers, str):
        if buffers != "average":
            raise ValueError(f"buffers={buffers!r}: give None (buffers stay local), "
                             "\"average\", or the nn.Module whose buffers to average")
        if not isinstance(params, torch.nn.Module):
            raise ValueError("buffers=\"average\" averages the buffers of the module given "
                             "as params, but params are param groups; pass the module "
                             "itself: buffers=model")
        module = params
    elif isinstance(buffers, torch.nn.Module):
        module = buffers
    else:
        raise TypeError(f"buffers is a {type(buffers).__name__}; give None, \"average\" or "
                        "an nn.Module")
    return [(name, buffer) for name, buffer in module.named_buffers()
            if buffer.is_floating_point() or buffer.is_complex()]
