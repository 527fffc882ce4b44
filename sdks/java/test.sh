#!/usr/bin/env bash
# The Java SDK's test suite: builds sdks/java with Maven (dependencies pinned in pom.xml, downloaded
# into ~/.m2 on the first run, build output in sdks/java/target), checks the classes against
# Android API 26, and runs the JUnit tests against a real server: $HERALD_BIN, default
# ../../target/debug/herald. Prints a summary; exits non-zero on any failure. Bounded in time.
set -euo pipefail
cd "$(dirname "$0")"

bin="${HERALD_BIN:-../../target/debug/herald}"
if [ ! -x "$bin" ]; then
  echo "sdks/java: herald binary not found at $bin (set HERALD_BIN or cargo build -p herald)" >&2
  exit 1
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "sdks/java: $tool is not installed" >&2; exit 1; }
done

rm -rf target/surefire-reports
status=0
timeout 900 mvn -B -q --no-transfer-progress -Dstyle.color=never -Dherald.bin="$bin" test || status=$?

total=0 failed=0 errored=0 skipped=0
for report in target/surefire-reports/*.txt; do
  [ -f "$report" ] || continue
  line="$(grep -m1 'Tests run:' "$report" || true)"
  [ -n "$line" ] || continue
  read -r run fail err skip < <(echo "$line" | sed -E 's/.*Tests run: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+), Skipped: ([0-9]+).*/\1 \2 \3 \4/')
  total=$((total + run)); failed=$((failed + fail)); errored=$((errored + err)); skipped=$((skipped + skip))
done
echo "sdks/java: $total tests, $failed failed, $errored errors, $skipped skipped (herald: $bin)"
if [ "$status" -ne 0 ] || [ "$total" -eq 0 ]; then
  echo "sdks/java: FAILED (see sdks/java/target/surefire-reports)" >&2
  exit 1
fi
