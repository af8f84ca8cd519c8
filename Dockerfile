# One image for every LoCo-PS process: loco-coordinator, loco-server,
# loco-worker and loco-launch. Multi-stage: the build stage compiles the
# context with the project's own scripts; the runtime stage carries only the
# binaries and their shared libraries, and runs as a non-root user.
#
#   CPU image:  docker build -t loco-ps .
#   GPU image:  docker build -t loco-ps:cuda \
#                 --build-arg BUILD_BASE=nvidia/cuda:13.0.0-devel-ubuntu24.04 \
#                 --build-arg RUNTIME_BASE=nvidia/cuda:13.0.0-runtime-ubuntu24.04 .
# (The project's scripts target Debian 12; a CUDA base must provide the same
# packages through apt.)
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
ARG LOCO_CUDA=AUTO
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN rm -rf build && LOCO_CUDA=${LOCO_CUDA} CMAKE_ARGS="-DLOCO_BUILD_TESTS=OFF -DLOCO_BUILD_BENCH=OFF" \
      bash scripts/build.sh

FROM ${RUNTIME_BASE} AS runtime
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
      libopenblas0 zlib1g ca-certificates procps dataset-fashion-mnist \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/loco --create-home loco
COPY --from=build /src/build/bin/loco-coordinator /src/build/bin/loco-server \
                  /src/build/bin/loco-worker /src/build/bin/loco-launch /usr/local/bin/
USER loco
WORKDIR /var/lib/loco
# Every server process also registers the standard gRPC health service, which
# Kubernetes probes use; the image's own check is that a LoCo process runs.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s \
  CMD pgrep -x loco-server >/dev/null || pgrep -x loco-coordinator >/dev/null || pgrep -x loco-worker >/dev/null || exit 1
ENTRYPOINT ["/usr/local/bin/loco-launch"]
