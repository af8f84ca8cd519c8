"""The BLAS kernels every process of a run multiplies with, chosen once.

Both sides use OpenBLAS: our workers link it, and the DDP peer loads it in
place of Debian torch's reference BLAS (LD_LIBRARY_PATH=OPENBLAS_DIR).
OpenBLAS picks its kernels from the CPU when it loads, unless
OPENBLAS_CORETYPE (with OPENBLAS_L2_SIZE) names them. Some machines set
those two in the environment, pinning older, narrower kernels because some
OpenBLAS builds compute wrong results on their processors; tests and CI keep
them as they are (--quick never changes them). A measured run (--full,
--transport) may instead run other kernels, but only after a probe shows
that they compute the model's products right: every process of the run then
inherits the choice (procs.Proc), ours and the peer's alike.

OpenBLAS's own choice is not always the better one: 0.3.21 does not know
newer processors and falls back to its oldest kernels (on an Intel Xeon of
model 207 it detects "Prescott", SSE3 only, 2-3x slower than the AVX2 pin).
So 'auto' times every candidate the CPU can run (the environment's,
OpenBLAS's own, the named AVX2 and AVX-512 cores) and keeps the fastest
that passes.
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
# or missing partial sums, garbage) misses it by orders of magnitude. Then it
# times one layer's products of the large MLP (forward, weight and input
# gradient at 64 rows; best of 5 each): the seconds that rank candidates.
PROBE = r"""
import json, time, numpy as np
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
seconds = 0.0
for m, k, n in ((64, 3072, 3072), (3072, 64, 3072), (64, 3072, 3072)):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a @ b
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    seconds += best
print(json.dumps({"worst": worst, "seconds": seconds}))
"""


def probe(environ):
    """Runs the probe under `environ`: (core OpenBLAS ran, worst error as a
    share of the bound, seconds of the timed products). Raises RuntimeError
    when it cannot run."""
    env = dict(environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OPENBLAS_VERBOSE="2",
               LD_LIBRARY_PATH=OPENBLAS_DIR)
    try:
        r = subprocess.run(["/usr/bin/python3", "-c", PROBE], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise RuntimeError("the BLAS probe did not finish in 300 s")
    core = re.search(r"Core: (\w+)", r.stdout)
    out = re.search(r'\{"worst": ([0-9.eE+-]+), "seconds": ([0-9.eE+-]+)\}', r.stdout)
    if r.returncode != 0 or not out:
        raise RuntimeError(f"the BLAS probe failed (needs python3-numpy): {r.stdout[-300:]}")
    return (core.group(1) if core else "unknown"), float(out.group(1)), float(out.group(2))


# The named cores 'auto' tries, with the CPU flags (/proc/cpuinfo) that
# each one's kernels need.
_AVX512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
NAMED_CANDIDATES = (("Haswell", {"avx2", "fma"}), ("SkylakeX", _AVX512),
                    ("Cooperlake", _AVX512 | {"avx512_bf16"}))
# The environment's kernels are kept unless another candidate is faster by
# more than this share (the probe's timing noise).
KEEP_MARGIN = 0.05


def cpu_flags(path="/proc/cpuinfo"):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _trial(environ, core):
    """environ with the pin replaced: core None = as the environment has
    it, "" = unpinned (OpenBLAS detects), a name = OPENBLAS_CORETYPE."""
    if core is None:
        return dict(environ)
    trial = {k: v for k, v in environ.items() if k not in PINNING}
    if core:
        trial["OPENBLAS_CORETYPE"] = core
    return trial


def _apply(environ, core):
    if core is None:
        return
    for k in PINNING:
        environ.pop(k, None)
    if core:
        environ["OPENBLAS_CORETYPE"] = core


def choose(requested, environ=os.environ, flags=None):
    """Sets the run's kernels in `environ` and returns a line saying which,
    and why. `requested` (--openblas-core): 'inherit' changes nothing; a
    core name sets OPENBLAS_CORETYPE to it and unsets OPENBLAS_L2_SIZE, but
    only when the probe passes under it (RuntimeError otherwise); 'auto'
    probes the environment as it is, OpenBLAS's own choice (both variables
    unset) and each of NAMED_CANDIDATES the CPU's `flags` allow, and sets the
    fastest that passes, keeping the environment's unless another is more
    than KEEP_MARGIN faster. When nothing can be probed, or nothing passes,
    the environment stays as it is."""
    pinned = {k: environ[k] for k in PINNING if k in environ}
    pinned_text = ", ".join(f"{k}={v}" for k, v in pinned.items()) or "no pinning"
    if requested == "inherit":
        return f"OpenBLAS kernels as the environment has them ({pinned_text})"
    if requested != "auto":
        core, worst, _ = probe(_trial(environ, requested))
        if worst > 1.0:
            raise RuntimeError(f"OpenBLAS core {core} fails the product probe "
                               f"({worst:.3g}x the error bound)")
        _apply(environ, requested)
        return (f"OpenBLAS kernels: {core} (OPENBLAS_CORETYPE={requested}; the environment "
                f"had {pinned_text}); the product probe's worst error is {worst:.3g}x the "
                f"fp32 error bound")
    flags = cpu_flags() if flags is None else flags
    candidates = [(None, "the environment's" if pinned else "its own choice")]
    if pinned:
        candidates.append(("", "its own choice"))
    candidates += [(name, f"OPENBLAS_CORETYPE={name}") for name, need in NAMED_CANDIDATES
                   if need <= flags and name != pinned.get("OPENBLAS_CORETYPE")]
    results, errors = [], []
    for core, how in candidates:
        try:
            results.append((core, how) + probe(_trial(environ, core)))
        except RuntimeError as e:
            errors.append(f"{how}: {e}")
    passed = [r for r in results if r[3] <= 1.0]
    tried = "; ".join(f"{how} {ran} {sec * 1e3:.1f} ms"
                      + ("" if worst <= 1.0 else f" (fails the probe, {worst:.3g}x the bound)")
                      for _, how, ran, worst, sec in results)
    if not passed:
        why = tried or "; ".join(errors)
        return f"OpenBLAS kernels as the environment has them ({pinned_text}): {why}"
    best = min(passed, key=lambda r: r[4])
    inherited = next((r for r in passed if r[0] is None), None)
    if inherited and inherited[4] <= best[4] * (1 + KEEP_MARGIN):
        best = inherited
    core, how, ran, worst, _ = best
    _apply(environ, core)
    return (f"OpenBLAS kernels: {ran} ({how}; the environment had {pinned_text}), the "
            f"fastest that passes the product probe (worst error {worst:.3g}x the fp32 error "
            f"bound); one layer's products, one thread: {tried}")


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
    on OpenBLAS as the environment had it (`original`: its PINNING
    variables before choose, empty when none was set), and on the run's
    kernels (os.environ, after choose); None without torch."""
    ref = torch_matmul_seconds(REFERENCE_BLAS_DIR, os.environ)
    run = torch_matmul_seconds(OPENBLAS_DIR, os.environ)
    if ref is None or run is None:
        return None
    line = (f"torch 1024x1024 matmul, 1 thread: reference BLAS (libblas3) {ref * 1e3:.1f} ms, "
            f"OpenBLAS with the run's kernels {run * 1e3:.1f} ms ({ref / run:.1f}x)")
    if any(original.get(k) != os.environ.get(k) for k in PINNING):
        # The environment as the run found it: its pin, or none.
        before = {k: v for k, v in os.environ.items() if k not in PINNING}
        before.update(original)
        then = torch_matmul_seconds(OPENBLAS_DIR, before)
        if then is not None:
            what = ("pinned kernels" if original else "kernels (OpenBLAS's own choice, "
                    "nothing pinned)")
            line += (f", with the environment's {what} {then * 1e3:.1f} ms "
                     f"({then / run:.2f}x slower)")
    return line + f"; the DDP peer runs with LD_LIBRARY_PATH={OPENBLAS_DIR}"
