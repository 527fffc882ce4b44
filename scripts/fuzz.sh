#!/usr/bin/env bash
# Runs Herald's fuzz targets (fuzz/, cargo-fuzz on nightly Rust) for a bounded time each, after
# installing what they need when it is missing: the nightly toolchain and cargo-fuzz (pinned).
# New inputs the fuzzer finds go to a scratch folder, so the committed corpus only changes when
# asked (--update-corpus). A crash fails the run and names the input (fuzz/artifacts/<target>/):
# fix the cause, then move the input to fuzz/regressions/<target>/, where `cargo test` replays it.
#
# Usage: scripts/fuzz.sh [--seconds N] [--update-corpus] [TARGET...]
#   --seconds N       how long each target runs (default: $HERALD_FUZZ_SECONDS, else 60)
#   --update-corpus   add what the run found (inputs up to 2 KiB) to fuzz/corpus/<target> and
#                     minimise it (cmin)
#   TARGET...         only these targets (default: every target in fuzz/fuzz_targets)
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.1
seconds="${HERALD_FUZZ_SECONDS:-60}"
update=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --update-corpus) update=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo-fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# No sanitizer: Herald forbids unsafe code, so AddressSanitizer would find nothing the fuzzer's
# panics do not, and it halves the speed. Overflow checks and debug assertions stay on.
export CARGO_INCREMENTAL=0
cd fuzz
cargo +nightly fuzz build --sanitizer none

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=()
for t in "${targets[@]}"; do
  printf '\n-- fuzz %s (%ss)\n' "$t" "$seconds"
  mkdir -p "$scratch/$t" "corpus/$t"
  # The scratch folder comes first: libFuzzer writes what it finds there, and only reads corpus/.
  if ! cargo +nightly fuzz run --sanitizer none "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
    failed+=("$t")
    continue
  fi
  if [ "$update" = 1 ]; then
    # Inputs up to 2 KiB only: the corpus stays small (under 2 MB in all) for the repository.
    find "$scratch/$t" -type f -size -2049c -exec cp -n {} "corpus/$t/" \;
    cargo +nightly fuzz cmin --sanitizer none "$t" "corpus/$t"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz targets that crashed: ${failed[*]} (inputs in fuzz/artifacts/<target>/)" >&2
  exit 1
fi
echo "fuzzing: every target ran ${seconds}s without a crash"
