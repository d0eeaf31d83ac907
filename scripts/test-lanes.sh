#!/usr/bin/env bash
# Run every lane of `make test`, each a make target, to its end whatever the others did: a failing
# lane must not hide the next one's failures (the netem lane never ran behind a failing host lane).
# Then one line per lane and, last, the totals as a plain 'N passed, N failed' line (CI reads the
# closing lines), and exit 1 if any lane failed.
#
# --beside LANE starts that lane at once, in the background, while the others run one after
# another: the netem lane lives in a user-mode Linux kernel that uses one CPU and mostly waits
# on its own slow timers, so running it beside the host lanes takes the longer of the two
# instead of their sum (make test does not: on a 2-vCPU VM the host lanes' timing tests failed
# beside it). Its output goes to its log and is shown whole after the others. It runs
# at nice 5: where both want a CPU the host lanes' timing tests (pqs-linkemu at 100 Mbit/s) come
# first, and the lane beside counts its wait for a CPU as stolen time (emulation/uml.py) and judges
# by it.
#
# --prepare TARGET starts a make target that lanes need later (make test: the container image,
# which test_container.py otherwise builds in line, about 5 minutes cold) at once, in the
# background, at nice 19: it only takes the CPU the lanes leave idle (the netem
# lane's user-mode Linux leaves a CPU mostly idle), as the two nice-19 busy loops every test must
# bear would. Whoever needs its result waits for it there (podman-build.sh holds a lock while it
# builds). It is reported after the lanes, one line; if it failed, make test fails.
# Usage: test-lanes.sh [--prepare TARGET]... [--beside TARGET]... TARGET...   (make targets; each
# lane prints pytest's or the C tests' summary)
set -uo pipefail
MAKE=${MAKE:-make}
beside=() prepare=()
usage="usage: $0 [--prepare TARGET]... [--beside TARGET]... TARGET..."
while [ $# -gt 0 ] && { [ "$1" = --beside ] || [ "$1" = --prepare ]; }; do
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
  if [ "$1" = --beside ]; then beside+=("$2"); else prepare+=("$2"); fi
  shift 2
done
[ $# -gt 0 ] || [ ${#beside[@]} -gt 0 ] || { echo "$usage" >&2; exit 2; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/pqs-lanes.XXXXXX")
bg_pids=() prep_pids=()
# A lane beside the others runs in its own session (setsid): on Ctrl-C or TERM its whole group
# (make, pytest, the UML kernel) is stopped by the id recorded here, and nothing else.
# The same for a target prepared in the background.
stop_beside() { for p in "${bg_pids[@]}" "${prep_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done; }
trap 'stop_beside; exit 130' INT
trap 'stop_beside; exit 143' TERM
trap 'rm -rf "$logs"' EXIT
prep_start=$(date +%s)
for t in "${prepare[@]}"; do
  echo "=== $t started in the background (nice 19); its result follows the lanes'"
  # (the time it finished is written beside its log: how long it took, whatever the lanes took)
  setsid nice -n 19 bash -c '"$1" --no-print-directory "$2"; rc=$?; date +%s >"$3.end"; exit $rc' \
    prepare "$MAKE" "$t" "$logs/prepare-$t" >"$logs/prepare-$t.log" 2>&1 </dev/null &
  prep_pids+=($!)
done
for lane in "${beside[@]}"; do
  echo "=== lane $lane started beside the others (its output follows theirs)"
  setsid nice -n 5 "$MAKE" --no-print-directory "$lane" >"$logs/$lane.log" 2>&1 </dev/null &
  bg_pids+=($!)
done

# counts LOG: "passed failed skipped" from the lane's summary lines: pytest's closing line, the
# last one ("==== 3 failed, 1490 passed, 12 skipped in 2280.1s ====", or without the = with -q;
# errors count as failed), plus the C tests' "N passed, N failed" lines (test-c has two).
counts() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '
    /^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s( \([0-9:]+\))?( =+)?$/ { py = $0 }
    /^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3 }
    END { s = py
      while (match(s, /[0-9]+ (passed|failed|errors?|skipped)/)) {
        w = substr(s, RSTART, RLENGTH); split(w, a, " "); s = substr(s, RSTART + RLENGTH)
        if (a[2] == "passed") p += a[1]; else if (a[2] == "skipped") k += a[1]; else f += a[1] }
      printf "%d %d %d\n", p, f, k }'
}

total_p=0 total_f=0 failed_lanes=() summary=()
# tally LANE RC: the lane's line in the summary, from its log
tally() {
  local lane=$1 rc=$2 p f k note
  read -r p f k < <(counts "$logs/$lane.log")
  note=""
  # pytest selected nothing here (its closing line counts no test: "no tests ran", "N deselected";
  # its exit status 5 reaches us as make's 2): fine when PYTEST_ARGS filtered this lane's tests away
  if [ "$rc" -ne 0 ] && [ "$p$f" = 00 ] && [ -n "${PYTEST_ARGS:-}" ] \
      && grep -Eq '^(=+ )?(no tests ran|[0-9]+ deselected)( in [0-9.]+s)?' "$logs/$lane.log"; then
    rc=0; note=" (PYTEST_ARGS selected none here)"
  fi
  # a lane that failed without a failed test in its summary (a build error, a crash, a timeout,
  # pytest's "no tests collected" when nothing filters them) counts as one failure
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; note=" (exit $rc, no failed test in its summary)"; fi
  total_p=$((total_p + p)) total_f=$((total_f + f))
  if [ "$rc" -eq 0 ]; then status=ok; else status=FAILED; failed_lanes+=("$lane"); fi
  summary+=("$(printf 'lane %-10s %-6s %d passed, %d failed, %d skipped%s' "$lane" "$status" "$p" "$f" "$k" "$note")")
}

for lane in "$@"; do
  echo "=== lane $lane"
  "$MAKE" --no-print-directory "$lane" 2>&1 | tee "$logs/$lane.log"
  tally "$lane" "${PIPESTATUS[0]}"
done
for i in "${!beside[@]}"; do
  lane=${beside[$i]}
  wait "${bg_pids[$i]}"
  rc=$?
  echo "=== lane $lane (ran beside the others)"
  cat "$logs/$lane.log"
  tally "$lane" "$rc"
done
bg_pids=()
for i in "${!prepare[@]}"; do
  t=${prepare[$i]}
  wait "${prep_pids[$i]}"
  rc=$?
  end=$(cat "$logs/prepare-$t.end" 2>/dev/null || date +%s)
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf 'prepared %-10s ok     in %d s, in the background' "$t" $((end - prep_start)))")
  else
    echo "=== $t (prepared in the background) FAILED, exit $rc; the end of its output:"
    tail -n 40 "$logs/prepare-$t.log"
    summary+=("$(printf 'prepared %-10s FAILED exit %d after %d s' "$t" "$rc" $((end - prep_start)))")
    failed_lanes+=("$t") total_f=$((total_f + 1))
  fi
done
prep_pids=()
echo
printf '%s\n' "${summary[@]}"
[ ${#failed_lanes[@]} -eq 0 ] || echo "failed lanes: ${failed_lanes[*]}"
echo "$total_p passed, $total_f failed"
[ ${#failed_lanes[@]} -eq 0 ]
