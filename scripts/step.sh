# Sourced by the GPU scripts (gpu_run.sh, gpu_wgmma.sh): `step NAME COMMAND...` runs the command bounded by
# STEP_LIMIT seconds, appends its status and seconds to SUMMARY, and carries on; `failed` is 1 once a step failed.
failed=0
step() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== $name"
  timeout --kill-after=10 "$STEP_LIMIT" "$@" || rc=$?
  printf '%-10s %-6s %4ds\n' "$name" "$([ "$rc" = 0 ] && echo ok || echo "rc=$rc")" $((SECONDS - start)) \
    | tee -a "$SUMMARY"
  [ "$rc" = 0 ] || failed=1
  return 0
}
