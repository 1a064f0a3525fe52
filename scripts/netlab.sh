#!/usr/bin/env bash
# A two-host test lab on one machine: two network namespaces ("hosts" dtrain-a and dtrain-b)
# joined by a veth pair on 10.77.0.0/24, optionally shaped with tc tbf, and mpirun across them
# over TCP (an rsh agent that enters the other namespace, with a hostname of its own). Root only.
# mpirun's link to the other host's daemon is probed (TCP keepalive, ~16 s) and gives up on data
# it cannot deliver after ~6 s (tcp_retries2 in the lab's namespaces): a lab whose link is cut
# ends instead of leaving mpirun waiting for the daemon; cluster.timeout_s ends the ranks first.
#
#   scripts/netlab.sh up [--rate 1gbit] [--delay 1ms]   make the two hosts (replaces a lab)
#   scripts/netlab.sh run [mpirun options] -- CMD ...    one rank on each host (MPI over TCP)
#   scripts/netlab.sh cut | restore                     take the link down / up again
#   scripts/netlab.sh down                              remove the lab
#   scripts/netlab.sh check                             exit 0 when a lab can be made here
set -euo pipefail
A=dtrain-a B=dtrain-b
IP_A=10.77.0.1 IP_B=10.77.0.2 NET=10.77.0.0/24
HERE=$(cd "$(dirname "$0")" && pwd)

down() {
  # Daemons left behind by a cut link go with their host.
  for ns in "$A" "$B"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}

up() {
  local rate="" delay=""
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --delay) delay=$2; shift 2 ;;
      *) echo "netlab.sh up: unknown option $1" >&2; exit 2 ;;
    esac
  done
  down
  ip netns add "$A"
  ip netns add "$B"
  ip link add veth-dtrain-a netns "$A" type veth peer name veth-dtrain-b netns "$B"
  ip -n "$A" addr add "$IP_A/24" dev veth-dtrain-a
  ip -n "$B" addr add "$IP_B/24" dev veth-dtrain-b
  for ns in "$A" "$B"; do
    # A cut link fails a connection with data in flight after ~6 s of retransmissions instead
    # of ~15 min (Linux's default): mpirun's abort message to the other host's daemon gives up.
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=4
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "veth-${ns}" up
  done
  if [ -n "$rate" ]; then  # the same shaping both ways
    for ns in "$A" "$B"; do
      tc -n "$ns" qdisc add dev "veth-${ns}" root tbf rate "$rate" burst 256kb latency 100ms
    done
  fi
  if [ -n "$delay" ]; then
    for ns in "$A" "$B"; do
      if [ -n "$rate" ]; then echo "netlab.sh: --delay with --rate is not supported" >&2; exit 2; fi
      tc -n "$ns" qdisc add dev "veth-${ns}" root netem delay "$delay"
    done
  fi
}

# The rsh agent: mpirun calls it as `agent [options] HOST COMMAND...` to start its daemon there.
agent() {
  while [[ ${1:-} == -* ]]; do shift; done  # ssh-style options
  local host=$1; shift
  local ns=$A name=dtrain-a
  if [ "$host" = "$IP_B" ]; then ns=$B name=dtrain-b; fi
  exec ip netns exec "$ns" unshare --uts sh -c "hostname $name; exec $*"
}

run() {
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  exec ip netns exec "$A" unshare --uts sh -c 'hostname dtrain-a; exec "$@"' sh \
    mpirun --host "$IP_A:1,$IP_B:1" -np 2 \
    --mca plm_rsh_agent "$HERE/netlab.sh agent" \
    --mca btl tcp,self --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET" \
    --mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x PATH \
    "${opts[@]}" "$@"
}

check() {
  [ "$(id -u)" = 0 ] || { echo "netlab: needs root (network namespaces)"; exit 1; }
  command -v ip > /dev/null || { echo "netlab: no ip (iproute2)"; exit 1; }
  ip netns add dtrain-check 2> /dev/null || { echo "netlab: cannot create a network namespace here"; exit 1; }
  ip netns del dtrain-check
}

cmd=${1:-}; shift || true
case $cmd in
  up) up "$@" ;;
  down) down ;;
  run) run "$@" ;;
  agent) agent "$@" ;;
  cut) ip -n "$A" link set veth-dtrain-a down ;;
  restore) ip -n "$A" link set veth-dtrain-a up ;;
  check) check ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
