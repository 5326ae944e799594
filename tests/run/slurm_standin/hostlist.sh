# shellcheck shell=bash
# Expand a SLURM host list: "standin[0-2,5],other" -> one name per line. Sourced by scontrol and srun.
expand_hostlist() {
  local list=$1 item prefix ranges range lo hi n
  # split on commas that are not inside brackets
  while [ -n "$list" ]; do
    if [[ $list =~ ^([^,\[]*)\[([^]]*)\](.*)$ ]]; then
      prefix=${BASH_REMATCH[1]} ranges=${BASH_REMATCH[2]} list=${BASH_REMATCH[3]#,}
      IFS=, read -ra range <<<"$ranges"
      for item in "${range[@]}"; do
        lo=${item%-*} hi=${item#*-}
        for ((n = 10#$lo; n <= 10#$hi; n++)); do printf '%s%0*d\n' "$prefix" "${#lo}" "$n"; done
      done
    else
      item=${list%%,*}
      printf '%s\n' "$item"
      [ "$item" = "$list" ] && list='' || list=${list#*,}
    fi
  done
}

# The cpulist of node $1 (its index), from ORCH_STANDIN_NODE_CPUS; empty: no restriction.
node_cpus() {
  local lists
  [ -z "${ORCH_STANDIN_NODE_CPUS:-}" ] && return 0
  IFS=";" read -ra lists <<<"$ORCH_STANDIN_NODE_CPUS"
  if [ "$1" -ge "${#lists[@]}" ]; then
    echo "slurm stand-in: ORCH_STANDIN_NODE_CPUS names ${#lists[@]} node(s), no CPUs for node $1" >&2
    return 1
  fi
  printf '%s\n' "${lists[$1]}"
}
