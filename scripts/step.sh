# Sourced by the GPU scripts (gpu_run.sh, gpu_wgmma.sh, gpu_hopper.sh). `gpu_setup SCRIPT [ARCH WHY]` checks the
# machine with `doctor` (stopping with its fix), sets ARCH (the build this GPU runs; unless both it and the GPU's
# own architecture are ARCH, stops with WHY), SLUG, DATA=data/<gpu> (made) and SUMMARY=$DATA/SCRIPT.txt (emptied). `step NAME COMMAND...` runs the
# command bounded by STEP_LIMIT seconds, appends its status and seconds to SUMMARY, and carries on; `failed` is 1
# once a step failed.
gpu_setup() {
  local script=$1 want=${2:-} why=${3:-}
  $PY -m strassenbench doctor || exit 2
  ARCH=$($PY -m strassenbench doctor --arch) || exit 2
  if [ -n "$want" ]; then  # the GPU's own architecture too: a newer one also runs the sm_90 build, from its PTX
    local gpu
    gpu=$($PY -c "from strassenbench.device import gpu_arch; print(gpu_arch() or 'unknown')") || exit 2
    if [ "$ARCH" != "$want" ] || [ "$gpu" != "$want" ]; then
      echo "$script.sh: $why; this GPU is $gpu (it runs the $ARCH build)" >&2
      exit 2
    fi
  fi
  SLUG=$($PY -c "from strassenbench.device import slug, visible_gpus; print(slug(visible_gpus()[0]))") || exit 2
  DATA=${DATA:-data}/$SLUG
  mkdir -p "$DATA" || exit 2
  SUMMARY=$DATA/$script.txt
  : > "$SUMMARY"
}

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
