# Sourced by the reproductions that run trainings side by side in the background: when the script ends, or is
# stopped (Ctrl-C, `timeout`, a scheduler's SIGTERM), every process it started in the background is stopped
# too, with everything those started, so no training runs on unseen, holding the cores, a GPU or an open pipe.
#
#   source training/reproductions/background.sh   # then start runs with `&` as usual

# SIGTERM to a process after its descendants, deepest first
stop_process_tree() {
  local child
  for child in $(pgrep -P "$1" || true); do stop_process_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# the background jobs still running when the script exits (nothing, after a `wait` for all of them)
stop_background_jobs() {
  local job
  for job in $(jobs -pr); do stop_process_tree "$job"; done
}

trap stop_background_jobs EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
