#!/usr/bin/env bash
# Installs the real services the cluster tests start (crates/herald-testkit runs them on loopback
# ports in temporary folders and stops them by PID): PostgreSQL and Redis, from Debian's packages,
# only if they are missing ('apt-get update' runs only when the package lists cannot install them).
# Nothing is started here and no system service is enabled. Idempotent.
set -euo pipefail

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

install() {
  if ! apt_install "$@"; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    apt_install "$@"
  fi
}

missing=()
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && [ -z "${HERALD_PG_BIN:-}" ]; then
  missing+=(postgresql postgresql-client)
fi
if ! command -v redis-server >/dev/null 2>&1 && [ -z "${HERALD_REDIS_SERVER:-}" ]; then
  missing+=(redis-server)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-services: PostgreSQL and Redis already installed"
else
  echo "install-services: installing ${missing[*]} (apt-get)"
  install "${missing[@]}"
fi
# Check that what the tests look for is there.
ls /usr/lib/postgresql/*/bin/postgres >/dev/null
command -v redis-server >/dev/null || [ -n "${HERALD_REDIS_SERVER:-}" ]
redis-server --version | head -1
ls -d /usr/lib/postgresql/*/bin | tail -1
