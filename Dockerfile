# One image for every LoCo-PS process: loco-coordinator, loco-server,
# loco-worker, loco-launch, loco-health-probe and the planner loco-plan. Multi-stage: the build
# stage compiles the build context (never a clone) with the project's own
# scripts; the runtime stage carries only the binaries, the shared libraries
# they load, the built-in models' data and the Python package loco_ps (with
# Debian's python3, numpy and PyTorch), and runs as a non-root user.
#
#   CPU image (docker or podman):
#     docker build -t loco-ps .
#   GPU image (CUDA 13; the build stage needs nvcc, the runtime stage only
#   the CUDA runtime libraries):
#     docker build -t loco-ps:cuda \
#       --build-arg BUILD_BASE=nvidia/cuda:13.0.1-devel-ubuntu24.04 \
#       --build-arg RUNTIME_BASE=nvidia/cuda:13.0.1-runtime-ubuntu24.04 \
#       --build-arg LOCO_CUDA=ON .
#   On a CUDA base, scripts/install-deps.sh runs against Ubuntu 24.04's
#   archive (main and universe), which carries the same -dev package names
#   (not yet built here: no CUDA base image is reachable where CI runs). The
#   runtime stage installs only python3, python3-numpy and python3-torch
#   through apt (the same names in Ubuntu 24.04's universe), no library by
#   name, so Ubuntu 24.04's t64 library renames do not matter (see below).
#
# Build arguments: BUILD_BASE, RUNTIME_BASE (above), LOCO_CUDA (AUTO|ON|OFF),
# JOBS (compile jobs; empty = all cores of the builder).
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

# ------------------------------------------------------------------ build
FROM ${BUILD_BASE} AS build
ARG LOCO_CUDA=AUTO
ARG JOBS=
WORKDIR /src
# Dependencies first, in their own layer: it is rebuilt only when the
# package list changes, not on every source change. LOCO_DEPS=build skips
# the packages only CI's deployment checks need (podman, debootstrap, ...).
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN LOCO_DEPS=build bash scripts/install-deps.sh \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ccache \
 && rm -rf /var/lib/apt/lists/*
COPY . .
# Tests and benchmarks off: the image carries the programs only. The ccache
# cache mount keeps objects between builds of changed sources (BuildKit and
# buildah both support it; it never ends up in the image). Each file
# compiles alone (LOCO_UNITY=OFF): ccache then keeps one object per file,
# and this is CI's build that shows every library file includes what it
# uses (the other builds compile in batches).
RUN --mount=type=cache,target=/root/.cache/ccache \
    rm -rf build \
 && BUILD_DIR=build LOCO_CUDA=${LOCO_CUDA} JOBS=${JOBS:-$(nproc)} \
    CMAKE_ARGS="-DLOCO_BUILD_TESTS=OFF -DLOCO_BUILD_BENCH=OFF -DLOCO_UNITY=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache" \
    bash scripts/build.sh
# Collects the shared libraries the binaries load, except the C library
# itself and the GPU driver's libraries (the container runtime injects
# those), so that the runtime stage needs no apt and no per-distribution
# package names: build and runtime bases only have to share a C library
# (bookworm/bookworm-slim, or CUDA's devel/runtime pair of one release).
# The Python package too (its extension module's libraries with them); the
# build stage's interpreter is the runtime base's (bookworm and
# bookworm-slim, or one Ubuntu release), so the module loads there.
RUN set -eu; mkdir -p /out/bin /out/lib /out/python; \
    for b in loco-coordinator loco-server loco-worker loco-launch loco-health-probe loco-plan; do \
      cp "build/bin/$b" /out/bin/; \
    done; \
    [ -f build/python/loco_ps/__init__.py ] || \
      { echo "build/python/loco_ps missing: pybind11-dev, python3-dev or python3-numpy absent?" >&2; exit 1; }; \
    cp -r build/python/loco_ps /out/python/; rm -rf /out/python/loco_ps/__pycache__; \
    ldd /out/bin/* /out/python/loco_ps/_core*.so | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | \
      grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libcuda|libnvidia[^/]*)\.so' | \
      xargs -r cp -L -t /out/lib/; \
    ls /out/lib

# ------------------------------------------------------------------ runtime
FROM ${RUNTIME_BASE} AS runtime
# The Python package's interpreter, numpy and PyTorch (CPU) from the base's
# own archive, first: this layer changes only with the base.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-numpy python3-torch \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/lib/ /usr/local/lib/loco/
COPY --from=build /out/python/loco_ps/ /usr/lib/python3/dist-packages/loco_ps/
# The PyTorch example (it starts its own loco_ps.Cluster from the programs
# above), for `docker run loco-ps python3 /usr/local/share/loco-ps/examples/...`.
COPY examples/torch_fashion_mnist.py /usr/local/share/loco-ps/examples/
# loco-plan's calibration, measured on the benchmark machine (bench/plan/),
# where the planner looks for it: <its bin/>/../share/loco-ps/plan/.
COPY bench/plan/calibration.txt /usr/local/share/loco-ps/plan/
# The built-in models' data: Fashion-MNIST (mlp) and the fortunes corpus
# (charlm), at the paths the worker's defaults name.
COPY --from=build /usr/share/datasets/fashion-mnist/ /usr/share/datasets/fashion-mnist/
COPY --from=build /usr/share/games/fortunes/ /usr/share/games/fortunes/
RUN echo /usr/local/lib/loco > /etc/ld.so.conf.d/loco.conf && ldconfig \
 && groupadd --system --gid 10001 loco \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/loco --create-home \
      --shell /usr/sbin/nologin loco \
 && mkdir -p /var/lib/loco/checkpoints /var/lib/loco/state \
 && chown loco:loco /var/lib/loco/checkpoints /var/lib/loco/state \
 && for b in /usr/local/bin/loco-*; do "$b" --help >/dev/null; done \
 && loco-plan --params 1e9 >/dev/null \
 && python3 -c "import loco_ps, loco_ps.torch" \
 && python3 /usr/local/share/loco-ps/examples/torch_fashion_mnist.py --help >/dev/null
USER 10001:10001
WORKDIR /var/lib/loco
# Processes listen on all interfaces in a container (each still needs
# --port or LOCO_PORT); metrics likewise, when --metrics-port is set.
ENV LOCO_HOST=0.0.0.0 LOCO_METRICS_HOST=0.0.0.0
# The coordinator and the servers answer the standard gRPC health check;
# the probe asks the plaintext health port when one is set (servers whose
# main port uses TLS), else the main port. A worker serves no gRPC: run its
# container with the health check disabled (compose: healthcheck.disable;
# docker/podman run --no-healthcheck); Kubernetes ignores HEALTHCHECK and
# uses the manifests' probes.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/bin/sh", "-c", "exec loco-health-probe --quiet --timeout-ms=3000 --address=127.0.0.1:${LOCO_HEALTH_PORT:-${LOCO_PORT:-7000}}"]
# No fixed entry point: the command names the program, e.g.
#   docker run loco-ps loco-coordinator --port=7000 --num-servers=2
# and the default is the local demo cluster in one container.
CMD ["loco-launch", "--progress=plain"]
