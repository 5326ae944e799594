# Helpers of .ci/run, kept apart so that tests/test_ci.py can run them: what did not run is said at once, in a
# banner that a log skim cannot miss, and again in the summary that ends CI's output.

ci_skipped=()

# ci_skip WHAT WHY: say loudly that WHAT did not run, and keep it for the summary.
ci_skip() {
  local line
  line=$(printf '#%.0s' $(seq 100))
  printf '\n%s\n# ci: SKIPPED: %s\n#   why: %s\n%s\n\n' "$line" "$1" "$2" "$line" >&2
  ci_skipped+=("$1: $2")
}

# ci_ccl_outcome RC: what the oneCCL build's exit status means for CI. 0: built (run its tests); 3: no torch-ccl
# source here (no GitHub access, no TORCH_CCL_SRC, no cached wheel): the ccl tests are skipped, loudly, unless
# ORCH_REQUIRE_CCL_BUILD=1 says this runner can fetch it, which makes it a failure; anything else: a failure.
# Returns 0 to run the ccl tests, 1 to skip them, 2 to fail CI.
ci_ccl_outcome() {
  case "$1" in
    0) return 0 ;;
    3)
      if [ "${ORCH_REQUIRE_CCL_BUILD:-0}" = 1 ]; then
        echo "ci: FAILED: the oneCCL bindings could not be built (no torch-ccl source), and ORCH_REQUIRE_CCL_BUILD=1" \
             "says this runner can fetch it" >&2
        return 2
      fi
      ci_skip "the ccl tests (pytest -m ccl: a 2-rank ccl sweep and its all-reduce calibration)" \
              "no torch-ccl source here (no GitHub access, no TORCH_CCL_SRC) and no cached wheel; set TORCH_CCL_SRC, or ORCH_REQUIRE_CCL_BUILD=1 on a runner that must build it"
      return 1 ;;
    *) echo "ci: FAILED: the oneCCL build exited with status $1" >&2; return 2 ;;
  esac
}

# ci_summary: the last lines of CI's output: passed, and everything that did not run.
ci_summary() {
  echo "======================================== ci summary ========================================"
  if [ "${#ci_skipped[@]}" -eq 0 ]; then
    echo "ci: PASSED: every part ran"
  else
    echo "ci: PASSED WITH ${#ci_skipped[@]} PART(S) SKIPPED: NOT EVERYTHING WAS TESTED"
    for skipped in "${ci_skipped[@]}"; do echo "ci: SKIPPED: $skipped"; done
  fi
}
