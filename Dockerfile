# Herald's container image: the herald binary on a slim Debian, run as its own user, with the
# data directory a volume and a health check on /readyz (README.md, "Install";
# docs/operations.md, "Containers").
#
#   docker build -t herald .                  (podman build works the same)
#   docker run -d -p 7070:7070 -v herald-data:/var/lib/herald herald
#
# Build arguments:
#   CARGO_PROFILE        release (default: fat LTO, about 8 minutes on 2 cores) or dev (faster
#                        to build, slower to run; for trying the image)
#   HERALD_BUILD_COMMIT  what `herald --version` names, e.g. "$(git log -1 --format='%h %cs')":
#                        the build context has no .git, so it says "unknown" without it
#   RUST_IMAGE, RUNTIME_IMAGE  the two base images; keep their Debian releases the same (the
#                        binary links the build image's glibc)
ARG RUST_IMAGE=rust:1-slim-trixie
ARG RUNTIME_IMAGE=debian:trixie-slim

FROM ${RUST_IMAGE} AS build
# jemalloc's build runs make; SQLite, ring and jemalloc compile C with the image's gcc.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG CARGO_PROFILE=release
ARG HERALD_BUILD_COMMIT=
# The registry and target folders are build caches: a second build recompiles only what changed.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --locked --profile "$CARGO_PROFILE" -p herald \
 && if [ "$CARGO_PROFILE" = dev ]; then dir=debug; else dir="$CARGO_PROFILE"; fi \
 && install -D -m 0755 "target/$dir/herald" /out/herald \
 && /out/herald --version

FROM ${RUNTIME_IMAGE}
# curl for the health check; CA certificates for TLS to PostgreSQL and providers' proxies.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --user-group --uid 10001 --home-dir /var/lib/herald \
      --shell /usr/sbin/nologin herald \
 && install -d -o herald -g herald -m 0700 /var/lib/herald
COPY --from=build /out/herald /usr/local/bin/herald
COPY herald.example.toml /etc/herald/herald.example.toml
# Listen on every interface of the container; the data directory is the volume. Every other
# setting is a HERALD_* variable (docs/config.md), or a file given with HERALD_CONFIG.
ENV HERALD_LISTEN=0.0.0.0:7070 \
    HERALD_DATA=/var/lib/herald
USER herald
WORKDIR /var/lib/herald
VOLUME /var/lib/herald
EXPOSE 7070
# Ready: the store takes writes, the bus is connected, the server is not draining
# (docs/operations.md, "Health checks"). The port follows HERALD_LISTEN.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS -o /dev/null "http://127.0.0.1:${HERALD_LISTEN##*:}/readyz" || exit 1
# SIGTERM: clients are told `shutdown` and drained for up to shutdown_grace (10 s); give
# `docker stop` more than that (`--time 15`, compose's stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["herald"]
CMD ["serve"]
