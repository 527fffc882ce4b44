#!/usr/bin/env bash
# Checks the container files for real, with Debian's podman (scripts/test.sh --extended runs it):
# 1. builds the image from the Dockerfile (of the committed tree: git archive HEAD), runs it
#    and waits for its HEALTHCHECK (/readyz) to pass, and checks that it runs as a user other
#    than root with /var/lib/herald a volume;
# 2. starts compose.yaml's two nodes with PostgreSQL and Redis, and checks that a message
#    published on node 1 reaches a subscriber on node 2 and is in node 2's history.
#
# Base images cannot be pulled on machines that reach only package registries, so this builds
# stand-ins for the ones the Dockerfile and compose.yaml name, from Debian's packages
# (debootstrap), and tags them with those names: debian:trixie-slim; rust:1-slim-trixie (that
# plus gcc and this machine's own Rust toolchain, since Debian's rustc is older than the
# workspace's dependencies need); postgres:17 and redis:7 (Debian's postgresql-17 and
# redis-server behind an entrypoint that reads the same variables as the official images').
# They are kept between runs (`podman images`); HERALD_CONTAINER_REBUILD_BASES=1 makes them
# again.
#
# Podman runs with the runc runtime, the cgroupfs manager and `default_ulimits = []` from a
# CONTAINERS_CONF file of its own. The image is built with CARGO_PROFILE=dev unless
# HERALD_CONTAINER_PROFILE=release (fat LTO in a fresh container: far longer on 2 cores). Each
# step is bounded by timeout; HERALD_CONTAINER_BUILD_TIMEOUT (seconds, default 3600) bounds the
# image build. Traffic stays on this machine: the containers talk over podman's own bridge,
# and the checks reach them through ports published on 127.0.0.1.
#
# Usage: scripts/check-container.sh
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${HERALD_CONTAINER_PROFILE:-dev}"
build_timeout="${HERALD_CONTAINER_BUILD_TIMEOUT:-3600}"
state=/var/tmp/herald-container-check
mkdir -p "$state"
step() { printf '\n-- %s\n' "$*"; }
fail() { echo "check-container: $*" >&2; exit 1; }

step "podman, debootstrap, runc (Debian's packages, when missing)"
missing=()
for tool in podman:podman debootstrap:debootstrap runc:runc iptables:iptables podman-compose:podman-compose curl:curl; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" uidmap fuse-overlayfs netavark aardvark-dns; } >/dev/null
fi
cat > "$state/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$state/containers.conf"
podman --version

# --- base images ----------------------------------------------------------------------------
have_image() { [ "${HERALD_CONTAINER_REBUILD_BASES:-0}" != 1 ] && podman image exists "$1"; }

debian=docker.io/library/debian:trixie-slim
if ! have_image "$debian"; then
  step "base image $debian from debootstrap (Debian trixie, minbase)"
  rm -rf "$state/rootfs"
  timeout 900 debootstrap --variant=minbase trixie "$state/rootfs" http://deb.debian.org/debian >"$state/debootstrap.log" 2>&1 \
    || { tail -20 "$state/debootstrap.log"; fail "debootstrap failed"; }
  rm -rf "$state/rootfs/var/lib/apt/lists/"* "$state/rootfs/var/cache/apt/"*.bin
  tar -C "$state/rootfs" -c . | podman import --change 'CMD ["bash"]' - "$debian" >/dev/null
  rm -rf "$state/rootfs"
fi

# A stand-in built FROM the Debian image: build_base TAG CONTEXT_DIR [podman build options...]
build_base() {
  local tag="$1" context="$2"; shift 2
  timeout 1200 podman build --pull=never --network=host --build-arg DEBIAN_FRONTEND=noninteractive \
    -t "$tag" "$@" "$context" >"$context/build.log" 2>&1 \
    || { tail -20 "$context/build.log"; fail "building the stand-in $tag failed ($context/build.log)"; }
}

rust=docker.io/library/rust:1-slim-trixie
if ! have_image "$rust"; then
  step "base image $rust: $debian, gcc and this machine's Rust toolchain"
  toolchain="$(rustc --print sysroot)"
  rm -rf "$state/rust" && mkdir -p "$state/rust/ca"
  # The CA certificates this machine adds to Debian's (an egress proxy's): cargo in the build
  # stage reaches crates.io through the same network.
  cp /usr/local/share/ca-certificates/*.crt "$state/rust/ca/" 2>/dev/null || true
  cat > "$state/rust/Containerfile" <<CONTAINERFILE
FROM $debian
ARG DEBIAN_FRONTEND
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
# As in the official image: the toolchain under /usr/local, cargo's home /usr/local/cargo.
RUN mkdir -p /usr/local/rustup/toolchain /usr/local/cargo/bin \
 && cp -a /toolchain/bin /toolchain/lib /usr/local/rustup/toolchain/ \
 && ln -s /usr/local/rustup/toolchain/bin/cargo /usr/local/rustup/toolchain/bin/rustc \
      /usr/local/rustup/toolchain/bin/rustdoc /usr/local/cargo/bin/
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:\$PATH
CONTAINERFILE
  build_base "$rust" "$state/rust" --volume "$toolchain:/toolchain:ro"
fi

postgres=docker.io/library/postgres:17
if ! have_image "$postgres"; then
  step "base image $postgres: $debian and Debian's postgresql-17"
  rm -rf "$state/postgres" && mkdir -p "$state/postgres"
  cat > "$state/postgres/docker-entrypoint.sh" <<'ENTRYPOINT'
#!/bin/sh
# What the official image's entrypoint does with POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB.
set -e
bin=/usr/lib/postgresql/17/bin
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
  "$bin/initdb" -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile=/tmp/pwfile \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f /tmp/pwfile
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  database="${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"
  if [ "$database" != postgres ]; then
    "$bin/pg_ctl" -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
    "$bin/createdb" -U "${POSTGRES_USER:-postgres}" "$database"
    "$bin/pg_ctl" -D "$PGDATA" -w stop >/dev/null
  fi
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*'
ENTRYPOINT
  cat > "$state/postgres/Containerfile" <<CONTAINERFILE
FROM $debian
ARG DEBIAN_FRONTEND
RUN apt-get update && apt-get install -y --no-install-recommends postgresql-common \
 && sed -i 's/^#\?create_main_cluster.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf \
 && apt-get install -y --no-install-recommends postgresql-17 && rm -rf /var/lib/apt/lists/*
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CONTAINERFILE
  build_base "$postgres" "$state/postgres"
fi

redis=docker.io/library/redis:7
if ! have_image "$redis"; then
  step "base image $redis: $debian and Debian's redis-server"
  rm -rf "$state/redis" && mkdir -p "$state/redis"
  cat > "$state/redis/docker-entrypoint.sh" <<'ENTRYPOINT'
#!/bin/sh
# As the official image's entrypoint: without a config file, Redis answers other hosts.
if [ "$1" = redis-server ]; then shift; exec redis-server --protected-mode no "$@"; fi
exec "$@"
ENTRYPOINT
  cat > "$state/redis/Containerfile" <<CONTAINERFILE
FROM $debian
ARG DEBIAN_FRONTEND
RUN apt-get update && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["redis-server"]
CONTAINERFILE
  build_base "$redis" "$state/redis"
fi

# --- 1. the image ---------------------------------------------------------------------------
image=localhost/herald:local
# The build context: the committed tree (what CI and users build), so that edits under way in
# the working tree do not break or change it; the working tree itself outside a git checkout.
# Files get the time of extraction, so cargo's cached output never passes for a changed file.
context="$state/context"
rm -rf "$context" && mkdir -p "$context"
if git rev-parse --git-dir >/dev/null 2>&1; then
  git archive --format=tar HEAD | tar -C "$context" -x -m
  commit="$(git log -1 --format='%h %cs')"
else
  tar -c --exclude=./target --exclude=./.git . | tar -C "$context" -x
  commit=unknown
fi
step "podman build of $commit (CARGO_PROFILE=$profile; at most ${build_timeout}s)"
start=$(date +%s)
previous="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
# --format docker keeps HEALTHCHECK (the OCI format has no field for it). No layers are kept
# (--layers=false): what makes a second build fast is cargo's cache mounts, kept by podman.
timeout "$build_timeout" podman build --pull=never --layers=false --format docker --network=host \
  --build-arg CARGO_PROFILE="$profile" --build-arg HERALD_BUILD_COMMIT="$commit" \
  -t "$image" "$context" >"$state/build.log" 2>&1 \
  || { tail -30 "$state/build.log"; fail "podman build failed or took over ${build_timeout}s ($state/build.log)"; }
echo "built in $(( $(date +%s) - start ))s"
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi

containers=()
cleanup() {
  # -v: with the anonymous volumes of /var/lib/herald.
  for c in "${containers[@]}"; do podman rm -f -v -t 0 "$c" >/dev/null 2>&1 || true; done
  if [ -n "${compose_up:-}" ]; then
    podman ps -a -q --filter label=io.podman.compose.project=herald-check | xargs -r podman rm -f -v -t 0 >/dev/null 2>&1 || true
    (cd "$state/compose" && timeout 120 podman-compose -p herald-check down -v >/dev/null 2>&1) || true
  fi
}
trap cleanup EXIT

version="$(podman run --rm "$image" --version)"
[ "$version" = "herald $(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$context/Cargo.toml") ($commit)" ] \
  || fail "the image's herald --version says: $version"
user="$(podman image inspect --format '{{.Config.User}}' "$image")"
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || fail "the image runs as '$user'"
podman image inspect --format '{{json .Config.Volumes}}' "$image" | grep -q '"/var/lib/herald"' \
  || fail "/var/lib/herald is not a volume"
podman image inspect --format '{{json .Config.Healthcheck}}' "$image" | grep -q '/readyz' \
  || fail "the image's health check is not on /readyz"

step "the image runs and its health check passes"
c=herald-check-single
containers+=("$c")
podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
# Podman without systemd says at ERROR that it cannot schedule the health check's timer; the
# check runs it by hand below.
podman run -d --name "$c" -p 127.0.0.1::7070 -e HERALD_API_KEY=hk_container_check_key "$image" \
  >/dev/null 2>>"$state/podman.log"
healthy=""
for _ in $(seq 1 60); do
  if podman healthcheck run "$c" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 1
done
[ -n "$healthy" ] || { podman logs "$c" | tail -20; fail "the health check never passed"; }
[ "$(podman exec "$c" id -u)" = 10001 ] || fail "the server does not run as uid 10001"
port="$(podman port "$c" 7070/tcp | head -1 | sed 's/.*://')"
curl -fsS "http://127.0.0.1:$port/readyz" | grep -q '"status":"ready"' || fail "/readyz from the host"
curl -fsS -H 'Authorization: Bearer hk_container_check_key' -d '{"data":{"n":1}}' \
  "http://127.0.0.1:$port/v1/channels/check/messages" | grep -q '"seq":1' || fail "publish to the container"
echo "health check passed, uid 10001, publish answered through 127.0.0.1:$port"

# --- 2. the compose file: two nodes, PostgreSQL, Redis ----------------------------------------
step "compose.yaml: two nodes on PostgreSQL and Redis"
# The compose file from the tree, with the image already built (no second build).
mkdir -p "$state/compose"
sed '/^  build: \.$/d' "$context/compose.yaml" > "$state/compose/compose.yaml"
export POSTGRES_PASSWORD=check-password HERALD_API_KEY=hk_compose_check_key
HERALD_TOKEN_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
HERALD_CREDENTIALS_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export HERALD_TOKEN_SECRET HERALD_CREDENTIALS_KEY
(cd "$state/compose" && timeout 120 podman-compose -p herald-check down -v >/dev/null 2>&1) || true
compose_up=1
(cd "$state/compose" && timeout 300 podman-compose -p herald-check up -d >"$state/compose.log" 2>&1) \
  || { tail -30 "$state/compose.log"; fail "podman-compose up failed"; }
ready() { curl -fsS "http://127.0.0.1:$1/readyz" 2>/dev/null | grep -q '"status":"ready"'; }
for node in 7071 7072; do
  for _ in $(seq 1 120); do ready "$node" && break; sleep 1; done
  ready "$node" || { podman ps -a; podman logs herald-check_herald-1_1 2>&1 | tail -20; fail "node on $node never got ready"; }
done
token="$(podman exec herald-check_herald-1_1 herald token --sub checker --channel news --ttl 10m)"
timeout 20 curl -fsS -N "http://127.0.0.1:7072/v1/sse?channel=news&since=0&token=$token" > "$state/sse.out" 2>/dev/null &
sse=$!
sleep 2
curl -fsS -H "Authorization: Bearer $HERALD_API_KEY" -d '{"data":{"via":"node 1"}}' \
  http://127.0.0.1:7071/v1/channels/news/messages | grep -q '"seq":1' || fail "publish on node 1"
for _ in $(seq 1 50); do grep -q '"via":"node 1"' "$state/sse.out" && break; sleep 0.2; done
kill "$sse" 2>/dev/null || true
grep -q '"via":"node 1"' "$state/sse.out" || fail "node 2's subscriber did not get node 1's message: $(cat "$state/sse.out")"
curl -fsS -H "Authorization: Bearer $HERALD_API_KEY" "http://127.0.0.1:7072/v1/channels/news/messages?since=0" \
  | grep -q '"via":"node 1"' || fail "node 2's history lacks node 1's message"
echo "node 1's message reached node 2's subscriber and history"
echo "container checks passed"
