"""The checks of a DistributedOptimizer step before anything of it is pushed.

step() runs them (and with overlap=True, the backward hook that starts the
step): each raises RuntimeError with nothing sent, so a step the cluster
would refuse, apply wrongly or wait on forever fails here, on this worker,
with a message that says what to do.

* check_before_push: the layout still matches requires_grad
  (check_layout), and the parameters hold what the cluster last wrote.
* check_no_idle_member: no other open optimizer of this process, last
  stepped on this thread, is an idle member of the same cluster.
"""

import gc
import threading


def check_before_push(flat, param_groups, names):
    """The checks of a step before anything of it is pushed (in step(),
    or with overlap=True in the backward hook that starts it): the layout
    still matches requires_grad, and the parameters hold what the
    cluster last wrote. Each raises, and nothing is sent. `flat`: the
    optimizer's FlatParameters; `param_groups` and `names` (id of a
    parameter to its name in the module) as check_layout takes them."""
    check_layout(flat, param_groups, names)
    changed = flat.changed_since_receive()
    if changed:
        listed = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more"
                                           if len(changed) > 5 else "")
        raise RuntimeError(
            f"loco_ps: parameter(s) {listed} changed since the cluster last wrote them "
            "(model.load_state_dict, an in-place re-initialisation or edit after the "
            "optimizer was built?); nothing was pushed. The cluster's copy is "
            "authoritative: a change made outside a step never reaches the servers (the "
            "next step would overwrite it, or with the servers' delta pull this worker "
            "would drift from the cluster). To start from a checkpoint, load it into the "
            "model before building the optimizer, on the first worker of a fresh cluster "
            "(the first worker's parameters initialise it); to resume training, restart "
            "the servers from their checkpoints (--checkpoint-dir). This optimizer's "
            "local parameters keep the change: close() it")


def check_layout(flat, param_groups, names):
    """RuntimeError when requires_grad changed since construction: the
    flat layout (what the cluster trains) is fixed then."""
    frozen = [flat.names[i] for i, p in enumerate(flat.params)
              if not p.requires_grad]
    unfrozen = []
    for g, group in enumerate(param_groups):
        for j, p in enumerate(group["params"]):
            if p.requires_grad and flat.index(p) is None:
                unfrozen.append(names.get(id(p), f"param_groups[{g}]['params'][{j}]"))
    if not frozen and not unfrozen:
        return
    what = []
    if frozen:
        what.append(f"requires_grad was turned off for {', '.join(frozen)} (the servers "
                    "would still move it, by its moments and weight decay)")
    if unfrozen:
        what.append(f"requires_grad was turned on for {', '.join(unfrozen)} (not in the "
                    "layout: it would never train)")
    raise RuntimeError(
        "loco_ps: the trainable parameters changed since the optimizer was built: "
        + "; ".join(what) + ". The cluster's flat layout is the parameters that required "
        "grad at construction, fixed at join; nothing was pushed. Build a new optimizer "
        "(against a new cluster: the model size is the cluster's) for another set, or "
        "keep requires_grad and freeze a part by putting it in a param group of its own "
        "whose lr and weight_decay you set to 0")


def check_no_idle_member(session, live_sessions, started):
    """RuntimeError when another open optimizer of this process, whose
    step() last ran on this thread, is a member of the same cluster and
    has no step in flight: every member must push each step, and only
    this thread, blocked in this step, would push its, so this step
    would wait for it until step_timeout_ms (a notebook cell that built
    a new optimizer while the old one lives on). Other threads' members
    (one worker per thread in one process) are not counted. `started`:
    backward (overlap=True) started this step, which the caller then
    aborts. `session`: the optimizer's _Session (it records this thread
    as its stepping_thread); `live_sessions`: the open sessions of the
    process."""
    this_thread = threading.get_ident()
    session.stepping_thread = this_thread
    if session.worker.world_size < 2:
        return

    def idle_members():
        return [other for other in list(live_sessions)
                if other is not session and not other.released
                and other.coordinator == session.coordinator
                and other.stepping_thread == this_thread and other.pending is None]

    if not idle_members():
        return
    gc.collect()  # an unreachable old optimizer leaves when collected
    idle = idle_members()
    if not idle:
        return
    ids = ", ".join(str(_worker_id(other.worker)) for other in idle)
    outcome = ("this step, which backward had started pushing, was aborted (what was "
               "pushed of it may be applied once the other member leaves: the next step() "
               "then resynchronises)" if started else "nothing was pushed")
    raise RuntimeError(
        f"loco_ps: another DistributedOptimizer of this process (worker {ids}) is still a "
        f"member of the cluster at {session.coordinator} and was last stepped on this "
        "thread: the cluster waits for every member's push, so this step would wait for "
        f"it until step_timeout_ms and then fail; {outcome}. close() the other "
        "optimizer first (a re-run notebook cell: call opt.close() before building a new "
        "one, or build it in a `with` block)")


def _worker_id(worker):
    try:
        return int(worker.worker_id)
    except Exception:  # closed, or a stand-in without one
        return "?"
