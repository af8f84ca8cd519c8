"""The BLAS kernels every process of a run multiplies with, chosen once.

Both sides use OpenBLAS: our workers link it, and the DDP peer loads it in
place of Debian torch's reference BLAS (LD_LIBRARY_PATH=OPENBLAS_DIR).
OpenBLAS picks its kernels from the CPU when it loads, unless
OPENBLAS_CORETYPE (with OPENBLAS_L2_SIZE) names them. Some machines set
those two in the environment, pinning older, narrower kernels because some
OpenBLAS builds compute wrong results on their processors; tests and CI keep
them as they are (--quick never changes them). A measured run (--full,
--transport) may instead let OpenBLAS choose, or name a core, but only after
a probe shows that the kernels it then runs compute the model's products
right: every process of the run then inherits the choice (procs.Proc), ours
and the peer's alike.
"""
import os
import re
import subprocess

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
REFERENCE_BLAS_DIR = "/usr/lib/x86_64-linux-gnu/blas"
PINNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# The x86 cores OPENBLAS_CORETYPE names in a DYNAMIC_ARCH build (0.3.21).
X86_CORES = ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge",
             "Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Barcelona", "Bulldozer",
             "Piledriver", "Steamroller", "Excavator", "Zen")

# The probe: the MLP's products (forward, input gradient, weight gradient at
# a per-worker batch of 64) in fp32 against fp64. An element's error is
# judged against the bound gamma_k * (|A||B|)_ij, gamma_k = k u / (1 - k u),
# u = 2^-24, that any correct summation order meets; a broken kernel (wrong
# or missing partial sums, garbage) misses it by orders of magnitude.
PROBE = r"""
import json, numpy as np
rng = np.random.default_rng(7)
worst = 0.0
for m, k, n in ((64, 784, 3072), (64, 3072, 3072), (64, 3072, 10), (3072, 64, 3072),
                (784, 64, 3072), (64, 10, 3072)):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    for x, y in ((a, b), (np.ascontiguousarray(b.T), np.ascontiguousarray(a.T))):
        c = x @ y
        ref = x.astype(np.float64) @ y.astype(np.float64)
        mag = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
        kk = x.shape[1]
        gamma = kk * 2.0**-24 / (1 - kk * 2.0**-24)
        worst = max(worst, float(np.max(np.abs(c - ref) / (gamma * mag + 1e-30))))
print(json.dumps({"worst": worst}))
"""


def probe(environ):
    """Runs the probe under `environ`: (core OpenBLAS ran, worst error as a
    share of the bound). Raises RuntimeError when it cannot run."""
    env = dict(environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OPENBLAS_VERBOSE="2",
               LD_LIBRARY_PATH=OPENBLAS_DIR)
    try:
        r = subprocess.run(["/usr/bin/python3", "-c", PROBE], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise RuntimeError("the BLAS probe did not finish in 300 s")
    core = re.search(r"Core: (\w+)", r.stdout)
    worst = re.search(r'\{"worst": ([0-9.eE+-]+)\}', r.stdout)
    if r.returncode != 0 or not worst:
        raise RuntimeError(f"the BLAS probe failed (needs python3-numpy): {r.stdout[-300:]}")
    return (core.group(1) if core else "unknown"), float(worst.group(1))


def choose(requested, environ=os.environ):
    """Sets the run's kernels in `environ` and returns a line saying which,
    and why. `requested` (--openblas-core): 'inherit' changes nothing;
    'auto' unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE together so that
    OpenBLAS detects the CPU; a core name sets OPENBLAS_CORETYPE to it and
    unsets OPENBLAS_L2_SIZE. Either of the last two is kept only when the
    probe passes under it; otherwise the environment is restored. Raises
    RuntimeError when a named core fails the probe."""
    pinned = {k: environ[k] for k in PINNING if k in environ}
    pinned_text = ", ".join(f"{k}={v}" for k, v in pinned.items()) or "no pinning"
    if requested == "inherit":
        return f"OpenBLAS kernels as the environment has them ({pinned_text})"
    trial = {k: v for k, v in environ.items() if k not in PINNING}
    if requested != "auto":
        trial["OPENBLAS_CORETYPE"] = requested
    try:
        core, worst = probe(trial)
    except RuntimeError as e:
        if requested != "auto":
            raise
        return f"OpenBLAS kernels as the environment has them ({pinned_text}): {e}"
    if worst > 1.0:
        if requested != "auto":
            raise RuntimeError(f"OpenBLAS core {core} fails the product probe "
                               f"({worst:.3g}x the error bound)")
        return (f"OpenBLAS kernels as the environment has them ({pinned_text}): its own "
                f"choice, {core}, failed the product probe ({worst:.3g}x the error bound)")
    for k in PINNING:
        environ.pop(k, None)
    if requested != "auto":
        environ["OPENBLAS_CORETYPE"] = requested
    how = "its own choice" if requested == "auto" else "OPENBLAS_CORETYPE=" + requested
    return (f"OpenBLAS kernels: {core} ({how}; the environment had {pinned_text}); "
            f"the product probe's worst error is {worst:.3g}x the fp32 error bound")


def torch_matmul_seconds(lib_dir, environ):
    """Seconds per 1024x1024 fp32 product in Debian's torch on one thread,
    with the BLAS in lib_dir, under `environ`; None when it could not be
    measured."""
    code = ("import time,torch;torch.set_num_threads(1);a=torch.randn(1024,1024);"
            "b=torch.randn(1024,1024);a@b;t=time.perf_counter();[a@b for _ in range(5)];"
            "print((time.perf_counter()-t)/5)")
    env = dict(environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if os.path.isdir(lib_dir):
        env["LD_LIBRARY_PATH"] = lib_dir
    try:
        r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300)
        return float(r.stdout.strip()) if r.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError):
        return None


def speedup_note(original):
    """One line for the summary: the peer's product on the reference BLAS,
    on OpenBLAS as the environment `original` pins it, and on the run's
    kernels (os.environ, after choose); None without torch."""
    ref = torch_matmul_seconds(REFERENCE_BLAS_DIR, os.environ)
    run = torch_matmul_seconds(OPENBLAS_DIR, os.environ)
    if ref is None or run is None:
        return None
    line = (f"torch 1024x1024 matmul, 1 thread: reference BLAS (libblas3) {ref * 1e3:.1f} ms, "
            f"OpenBLAS with the run's kernels {run * 1e3:.1f} ms ({ref / run:.1f}x)")
    if any(original.get(k) != os.environ.get(k) for k in PINNING):
        pinned = torch_matmul_seconds(OPENBLAS_DIR, original)
        if pinned is not None:
            line += (f", with the environment's pinned kernels {pinned * 1e3:.1f} ms "
                     f"({pinned / run:.2f}x slower)")
    return line + f"; the DDP peer runs with LD_LIBRARY_PATH={OPENBLAS_DIR}"
