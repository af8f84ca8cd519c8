"""The configurations of the end-to-end benchmark's measured run (e2e.py
--full): the workers of its matrix, the parameter-server and DDP rows of
each group, the extra rows some groups add, the global batches, the
profile's window, and the helpers that turn a row into the dict runs.py
takes (ps_cfg, ddp_cfg) or list every parameter-server row by name for
--compare (named_configs). Constants only, nothing runs here.
"""

# Workers of every configuration of the measured run's matrix.
WORKERS = 4
PS_CONFIGS = [("loco4-bf16", "loco", 4, "bf16"), ("loco4-delta", "loco", 4, "delta"),
              ("fp32-ps", "fp32", 4, "fp32")]
# The workers' default quantization block (WorkerOptions::block_size).
BLOCK = 256
# (name, codec, bits, pull, block, worker args, server args).
# 4-bit codes for the return delta instead of 8: half the download. On the
# demo model too, where its accuracy is measured.
PULL4 = ("loco4-delta-pull4", "loco", 4, "delta", BLOCK, (), ("--pull-bits", 4))
DEMO_1G_EXTRA = [PULL4]
# Only where the targets are judged (large model, 1 Gbit/s): 128-element
# blocks, the earlier default, double the scales' share of the bytes
# (0.125 + 4/128 instead of 4/256). The last row measures the overlap of
# pushes and pulls with the backward pass by turning it off.
LARGE_1G_EXTRA = [("loco4-delta-b128", "loco", 4, "delta", 128, (), ()), PULL4,
                  ("loco4-delta-no-overlap", "loco", 4, "delta", BLOCK,
                   ("--overlap-backward=false",), ()),
                  # The server's memory levers, each turned back: gRPC's
                  # adaptive flow-control window, and one unary Push per
                  # shard instead of a stream of 256 KiB chunks.
                  ("loco4-bf16-adaptive-window", "loco", 4, "bf16", BLOCK, (),
                   ("--stream-window-kb", 0)),
                  ("loco4-bf16-unary-push", "loco", 4, "bf16", BLOCK,
                   ("--push-chunk-bytes=0",), ())]
DDP_CONFIGS = [("ddp-fp32", "fp32"), ("ddp-fp16", "fp16"), ("ddp-powersgd", "powersgd")]
# The profile of the measured run (10 Gbit/s, large model, loco4-bf16):
# PROFILE_S seconds of perf from PROFILE_SKIP_S after training starts, on a
# run of at least PROFILE_STEPS steps, so that the window holds steady
# training only (a 20-step run there lasts about 7 s: an 8-s window from
# its start also took in its end and the processes' exit).
PROFILE_S, PROFILE_SKIP_S, PROFILE_STEPS = 8, 2, 60
# The global batch of every row but the small-batch group below.
BATCH = 256
# The large model at 1 Gbit/s once more with a quarter of the batch (16 per
# worker): on 2 cores shared by 4 workers and 2 servers, the batch-256
# computation is half of a LoCo step; here communication dominates the
# step, as on a node with a device per worker. The targets are judged for
# both groups.
SMALL_BATCH = 64
SMALL_BATCH_PS = [("loco4-delta", "loco", 4, "delta", BLOCK, (), ()), PULL4,
                  ("fp32-ps", "fp32", 4, "fp32", BLOCK, (), ())]
SMALL_BATCH_DDP = [("ddp-fp32", "fp32")]


def ps_cfg(name, codec, bits, pull, hidden, steps, eval_every=0, servers=2, target=0.80,
           block=BLOCK, worker_args=(), server_args=(), batch=BATCH):
    """A parameter-server row as runs.run_ps takes it."""
    return {"name": name, "codec": codec, "bits": bits, "pull": pull, "hidden": hidden,
            "block": block, "worker_args": list(worker_args), "server_args": list(server_args),
            "servers": servers, "steps": steps, "batch": batch, "lr": 1e-3,
            "eval_every": eval_every, "target": target, "warmup": 2}


def ddp_cfg(name, hook, hidden, steps, eval_every=0, target=0.80, batch=BATCH):
    """A DDP row as runs.run_ddp takes it."""
    return {"name": name, "hook": hook, "hidden": hidden, "steps": steps, "batch": batch,
            "lr": 1e-3, "eval_every": eval_every, "target": target, "warmup": 2}


def named_configs():
    """Every parameter-server configuration of the measured run by name, as
    (name, codec, bits, pull, block, worker args, server args)."""
    out = {}
    for c in PS_CONFIGS:
        out[c[0]] = c + (BLOCK, (), ())
    for c in DEMO_1G_EXTRA + LARGE_1G_EXTRA + SMALL_BATCH_PS:
        out.setdefault(c[0], c)
    return out
