#!/usr/bin/env bash
# Two "nodes" on one machine: two Linux network namespaces joined by a veth pair, optionally
# capped by an htb qdisc on both ends (the set-up of tests/multiprocess/two_nodes_test.py and of
# docs/distributed.md "Rehearsing a multi-node job on one machine", as a shell library).
#
# Source it (needs root, iproute2's `ip`; `tc` for the rate limit):
#   source tools/netns_pair.sh
#   trap netns_pair_down EXIT          # always: kills what runs in the namespaces, deletes them
#   netns_pair_up [RATE] [SUBNET]      # RATE e.g. 1gbit ("" = no limit); SUBNET default 10.214.0
#   ip netns exec "$NETNS_PAIR_NS0" ...
# netns_pair_up sets NETNS_PAIR_NS0/1 (namespace names, unique per call: pid + random),
# NETNS_PAIR_DEV0/1 (the veth end inside each), NETNS_PAIR_ADDR0/1 (SUBNET.1 / SUBNET.2, which
# exist only inside the two namespaces) and NETNS_PAIR_RATE (the rate applied, or "none").
# It returns non-zero with a message on stderr when namespaces cannot be made here; whatever it
# made is still deleted by netns_pair_down. netns_pair_down is idempotent.
#
# Standalone: tools/netns_pair.sh check   (exit 0 when namespaces can be made here, else why)

# shellcheck disable=SC2034  # the NETNS_PAIR_* variables are for the sourcing script
NETNS_PAIR_NS0="" NETNS_PAIR_NS1="" NETNS_PAIR_DEV0="" NETNS_PAIR_DEV1=""
NETNS_PAIR_ADDR0="" NETNS_PAIR_ADDR1="" NETNS_PAIR_RATE="none"
_netns_pair_made=()

_netns_pair_path() { PATH="$PATH:/usr/sbin:/sbin:/usr/local/sbin" command -v "$1"; }

# netns_pair_why_not: prints why namespaces cannot be made here (nothing when they can).
netns_pair_why_not() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces; uid is $(id -u)"
  elif [ -z "$(_netns_pair_path ip)" ]; then
    echo "iproute2's \`ip\` not found (apt-get install iproute2)"
  fi
}

netns_pair_up() {
  local rate="${1-1gbit}" subnet="${2:-10.214.0}" ip tc suffix short n ns dev why out
  why="$(netns_pair_why_not)"
  [ -z "$why" ] || { echo "netns_pair: $why" >&2; return 1; }
  ip="$(_netns_pair_path ip)"
  tc="$(_netns_pair_path tc || true)"
  suffix="$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
  short="$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"   # interface names: at most 15 characters
  NETNS_PAIR_NS0="olpair-$suffix-0" NETNS_PAIR_NS1="olpair-$suffix-1"
  NETNS_PAIR_DEV0="olp${short}a" NETNS_PAIR_DEV1="olp${short}b"
  NETNS_PAIR_ADDR0="$subnet.1" NETNS_PAIR_ADDR1="$subnet.2"
  for ns in "$NETNS_PAIR_NS0" "$NETNS_PAIR_NS1"; do
    "$ip" netns add "$ns" || { echo "netns_pair: \`ip netns add\` is not permitted here" >&2; return 1; }
    _netns_pair_made+=("$ns")
  done
  # Created directly inside the namespaces: the names never appear in the host's namespace.
  "$ip" link add "$NETNS_PAIR_DEV0" netns "$NETNS_PAIR_NS0" type veth peer name "$NETNS_PAIR_DEV1" \
      netns "$NETNS_PAIR_NS1" || { echo "netns_pair: cannot create a veth pair" >&2; return 1; }
  for n in 0 1; do
    ns="NETNS_PAIR_NS$n" dev="NETNS_PAIR_DEV$n" addr="NETNS_PAIR_ADDR$n"
    "$ip" -n "${!ns}" link set lo up
    "$ip" -n "${!ns}" addr add "${!addr}/24" dev "${!dev}"
    "$ip" -n "${!ns}" link set "${!dev}" up
  done
  NETNS_PAIR_RATE="none"
  [ -n "$rate" ] || return 0
  if [ -z "$tc" ]; then
    echo "netns_pair: tc not found: running WITHOUT the $rate rate limit" >&2
    return 0
  fi
  for n in 0 1; do
    ns="NETNS_PAIR_NS$n" dev="NETNS_PAIR_DEV$n"
    # (tc's "quantum of class ... is big" warning on success is noise for a single class: dropped)
    if ! out="$("$tc" -n "${!ns}" qdisc add dev "${!dev}" root handle 1: htb default 10 2>&1)" ||
       ! out="$("$tc" -n "${!ns}" class add dev "${!dev}" parent 1: classid 1:10 htb rate "$rate" 2>&1)"; then
      echo "netns_pair: htb qdisc unavailable ($out): running WITHOUT the $rate rate limit" >&2
      "$tc" -n "$NETNS_PAIR_NS0" qdisc del dev "$NETNS_PAIR_DEV0" root 2>/dev/null || true
      "$tc" -n "$NETNS_PAIR_NS1" qdisc del dev "$NETNS_PAIR_DEV1" root 2>/dev/null || true
      return 0
    fi
  done
  NETNS_PAIR_RATE="$rate"
}

# netns_pair_down: SIGKILLs every process still inside our namespaces (ours), deletes them (the
# veth pair and its qdiscs go with them). Safe to call twice, or after a failed netns_pair_up.
netns_pair_down() {
  local ip ns pid
  ip="$(_netns_pair_path ip)" || return 0
  while [ "${#_netns_pair_made[@]}" -gt 0 ]; do
    ns="${_netns_pair_made[-1]}"
    unset '_netns_pair_made[-1]'
    for pid in $("$ip" netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    "$ip" netns del "$ns" 2>/dev/null || true
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    check) why="$(netns_pair_why_not)"; [ -z "$why" ] || { echo "$why"; exit 1; }; echo "ok" ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
fi
