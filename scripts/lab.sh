#!/usr/bin/env bash
# A lab of hosts on this one machine: network namespaces on a private bridge, each with its own sshd and its own
# cpuset, so that servers and Locust workers can run on "other hosts" (docs/EXPERIMENTS.md, "A lab of hosts on one
# machine"). Nothing leaves the machine: private addresses on a bridge that no physical interface is part of, no
# default route inside the namespaces, no NAT, and the root namespace does not forward what arrives from the lab.
#
#   scripts/lab.sh up     [--name NAME] [--net A.B.C] [--hosts N] [--dir DIR] [--force] [--no-cpuset] [--engine]
#   scripts/lab.sh down   [--name NAME] [--dir DIR]
#   scripts/lab.sh status [--name NAME] [--dir DIR]
#
# NAME=lab, NET=10.77.0, N=3 and DIR=build/NAME (build/lab) by default. The bridge NAMEbr0 holds NET.1/24 (the root
# namespace: "this machine"); host i is the namespace NAMEi with eth0 = NET.(1+i)/24 (its root-side veth NAMEvI),
# hostname NAMEi, an sshd on NET.(1+i):22 and the cpuset group xferbench-NAME/NAMEi (host 1, the server host, has
# the first half of the CPUs, the other hosts the rest). DIR holds the keys, ssh_config (ssh -F DIR/ssh_config
# NAME2), known_hosts, hosts ("name address" lines), cpusets ("name group cpus" lines), lab.env (what down reads)
# and one folder per host (sshd_config, host key, pid file, log).
#
# --engine: each host also runs a container engine of its own, Podman's API service (`podman system service`) in the
# host's network namespace and cpuset, with storage of its own under DIR/NAMEi/podman/ and its run root and socket
# under /run/xblab-NAME/NAMEi/ (DIR/engines lists the sockets, "name unix://socket" lines): [hosts.NAMEi] engine =
# "unix:///run/xblab-NAME/NAMEi/podman.sock" in an experiment. It enters only the host's network namespace (nsenter --net), not `ip netns exec`'s
# mount namespace, whose /sys has no cgroup file system (runc: "no cgroup mount found in mountinfo"). down removes
# every container of each engine, stops it, unmounts and deletes its storage.
#
# For the tests: XFERBENCH_LAB_FAIL_AFTER=STEP makes up fail after STEP, XFERBENCH_LAB_HANG_AFTER=STEP makes it wait
# after STEP until its stdin closes; the steps are cpusets, bridge, hostI (namespace and veth of host I), sshdI,
# engineI (up --engine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prog=scripts/lab.sh
SSHD=/usr/sbin/sshd  # Debian's openssh-server (scripts/bootstrap.sh installs it and keeps its own service off)
IFNAMSIZ=15          # the longest interface name the kernel takes
CGROUP_PREFIX=xferbench-  # xferbench/measure/cgroup.py sweeps only xferbench-<pid>-… groups; a lab name starts with a letter

usage() {
  sed -n '7,9s/^#   /usage: /p' "$0" >&2
  exit 2
}

said=0
die() {
  echo "$prog: $*" >&2
  said=1
  exit 1
}

note() {
  [ "${quiet:-0}" = 1 ] || echo "$*"
}

# ---- arguments -----------------------------------------------------------------------------------------------------

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
NAME=lab
NET=10.77.0
HOSTS=3
DIR=
FORCE=0
CPUSETS=1
ENGINE=0
name_given=0
dir_given=0
while [ $# -gt 0 ]; do
  case $1 in
    --name) [ $# -ge 2 ] || usage; NAME=$2; name_given=1; shift 2 ;;
    --name=*) NAME=${1#*=}; name_given=1; shift ;;
    --net) [ $# -ge 2 ] || usage; NET=$2; shift 2 ;;
    --net=*) NET=${1#*=}; shift ;;
    --hosts) [ $# -ge 2 ] || usage; HOSTS=$2; shift 2 ;;
    --hosts=*) HOSTS=${1#*=}; shift ;;
    --dir) [ $# -ge 2 ] || usage; DIR=$2; dir_given=1; shift 2 ;;
    --dir=*) DIR=${1#*=}; dir_given=1; shift ;;
    --force) FORCE=1; shift ;;
    --no-cpuset) CPUSETS=0; shift ;;
    --engine) ENGINE=1; shift ;;
    -h|--help) usage ;;
    *) echo "$prog: unknown argument: $1" >&2; usage ;;
  esac
done
case $cmd in up|down|status) ;; -h|--help) usage ;; *) echo "$prog: unknown command: $cmd" >&2; usage ;; esac

[ "$(id -u)" = 0 ] || die "$cmd needs root (network namespaces, veths, cpusets)"
# CAP_NET_ADMIN (12) for namespaces and links, CAP_SYS_ADMIN (21) for ip netns' mounts and the cpusets: root in an
# unprivileged container has neither.
if [ "$cmd" != status ]; then
  capeff=$((16#$(awk '$1 == "CapEff:" {print $2}' /proc/self/status)))
  if [ $(((capeff >> 12) & (capeff >> 21) & 1)) != 1 ]; then
    die "$cmd needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root outside an unprivileged container)"
  fi
fi
[[ $NAME =~ ^[a-z]([a-z0-9-]*[a-z])?$ ]] ||
  die "--name $NAME: lower-case letters, digits and '-', starting and ending with a letter (host i is NAMEi)"
if [ -z "$DIR" ]; then
  DIR=$root/build/$NAME
fi
DIR=$(realpath -m -- "$DIR")
[[ $DIR =~ ^/[A-Za-z0-9_./+-]+$ ]] || die "--dir $DIR: letters, digits and _./+- only (it goes into sshd and ssh configs)"
if [ "$DIR" = / ] || [ "$DIR" = "$root" ]; then
  die "--dir $DIR: not a folder of its own"
fi

# lab.env, when DIR has one, says which lab DIR holds; --dir alone names that lab.
if [ -f "$DIR/lab.env" ]; then
  env_name=$(sed -n 's/^NAME=//p' "$DIR/lab.env")
  if [ "$name_given" = 0 ] && [ -n "$env_name" ]; then
    NAME=$env_name
  elif [ -n "$env_name" ] && [ "$env_name" != "$NAME" ]; then
    die "$DIR holds lab $env_name, not $NAME"
  fi
elif [ "$cmd" != up ] && [ "$dir_given" = 1 ] && [ "$name_given" = 0 ]; then
  # --dir alone, and DIR says nothing: the lab's name is unknown, and the default one may be another lab.
  echo "$prog: no lab in $DIR (no lab.env); --name NAME says which lab"
  [ "$cmd" = down ] && exit 0
  exit 1
fi
BRIDGE=${NAME}br0

# ---- what a lab is made of, found by name (so that a half-made lab is found as well) ------------------------------

lab_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}[0-9]+\$" || true
}

lab_links() {
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^${NAME}(br0|v[0-9]+)\$" || true
}

# The cpuset hierarchy: "v1 MOUNT" (a cgroup v1 hierarchy with the cpuset controller) or "v2 MOUNT" (the unified
# hierarchy, when it offers cpuset); nothing when neither.
cpuset_hierarchy() {
  local mnt
  mnt=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ {print $2; exit}' /proc/self/mounts)
  if [ -n "$mnt" ]; then
    echo "v1 $mnt"
    return
  fi
  mnt=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
  if [ -n "$mnt" ] && grep -qw cpuset "$mnt/cgroup.controllers" 2>/dev/null; then
    echo "v2 $mnt"
  fi
}

# This process's own group in the hierarchy (the lab's groups go below it, as xferbench/measure/cgroup.py's do).
own_cpuset_group() {
  local kind=$1 mnt=$2 rel
  if [ "$kind" = v1 ]; then
    rel=$(awk -F: '$2 ~ /(^|,)cpuset(,|$)/ {print $3; exit}' /proc/self/cgroup)
  else
    rel=$(awk -F: '$1 == "0" && $2 == "" {print $3; exit}' /proc/self/cgroup)
  fi
  echo "${mnt%/}${rel%/}"
}

# Every directory that is, or may be, this lab's cpuset parent: the one lab.env names, below this process's group
# and at the top of each hierarchy.
lab_cpuset_parents() {
  local recorded="" kind mnt
  if [ -f "$DIR/lab.env" ]; then
    recorded=$(sed -n 's/^CPUSET_PARENT=//p' "$DIR/lab.env")
  fi
  {
    [ -z "$recorded" ] || echo "$recorded"
    awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ {print "v1", $2} $3 == "cgroup2" {print "v2", $2}' /proc/self/mounts |
      while read -r kind mnt; do
        echo "$mnt/$CGROUP_PREFIX$NAME"
        echo "$(own_cpuset_group "$kind" "$mnt")/$CGROUP_PREFIX$NAME"
      done
  } | sort -u | while read -r d; do
    [ ! -d "$d" ] || echo "$d"
  done
}

alive() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# The sshd processes whose command line names DIR (sshd keeps its command line in its process title).
dir_sshd_pids() {
  local p args
  for p in /proc/[0-9]*; do
    { args=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    case $args in
      "$SSHD "*"$DIR/"*|"sshd: $SSHD "*"$DIR/"*) echo "${p#/proc/}" ;;
    esac
  done
}

# The engines' processes (podman's service, conmon): their command lines name DIR. Found by name too, since a
# namespace deleted under them would hide them from `ip netns pids`.
dir_engine_pids() {
  local p args
  for p in /proc/[0-9]*; do
    { args=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    case $args in
      "podman "*"$DIR/"*|*"/conmon "*"$DIR/"*|"conmon "*"$DIR/"*) echo "${p#/proc/}" ;;
    esac
  done
}

# Every live process of the lab: in its namespaces, in its cpusets, or an sshd or engine of its DIR.
lab_pids() {
  local ns g p
  {
    for ns in $(lab_namespaces); do
      ip netns pids "$ns" 2>/dev/null || true
    done
    for g in $(lab_cpuset_parents); do
      cat "$g"/*/cgroup.procs "$g/cgroup.procs" 2>/dev/null || true
    done
    dir_sshd_pids
    dir_engine_pids
  } | sort -un | while read -r p; do
    if [ "$p" != "$$" ] && [ "$p" != "$PPID" ] && alive "$p"; then
      echo "$p"
    fi
  done
}

IPT_RULE=(FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "xferbench lab $NAME" -j ACCEPT)

iptables_rule_present() {
  command -v iptables >/dev/null && iptables -w -C "${IPT_RULE[@]}" 2>/dev/null
}

# What of the lab exists, one word per part; nothing when there is no such lab.
lab_parts() {
  local parts=() x
  for x in $(lab_namespaces); do parts+=("netns:$x"); done
  for x in $(lab_links); do parts+=("link:$x"); done
  for x in $(lab_cpuset_parents); do parts+=("cpuset:$x"); done
  for x in $(lab_pids); do parts+=("pid:$x"); done
  if iptables_rule_present; then parts+=("iptables:$BRIDGE"); fi
  for x in $(engine_dirs); do parts+=("engine:$x"); done
  for x in $(engine_mounts); do parts+=("mount:$x"); done
  if [ -e "$DIR/lab.env" ]; then parts+=("dir:$DIR"); fi
  echo "${parts[*]}"
}

# ---- engines (up --engine) -----------------------------------------------------------------------------------------

# Host $1's engine: its storage and files under DIR/NAMEi/podman; its run root, temporary folder and socket under
# ENGINE_RUN/NAMEi, a short path on /run (podman refuses a run root of over 50 characters: its container sockets'
# paths must fit in 108 bytes; and the engine's socket path must fit there too).
ENGINE_RUN=/run/xblab-$NAME
engine_dir() { echo "$DIR/$1/podman"; }
engine_run() { echo "$ENGINE_RUN/$1"; }

# The hosts whose engine folders exist (up --engine made them).
engine_hosts() {
  local d
  for d in "$DIR"/"$NAME"[0-9]*/podman "$ENGINE_RUN"/"$NAME"[0-9]*; do
    [ ! -d "$d" ] || echo "$d"
  done | sed -E 's#/podman$##; s#.*/##' | sort -u
}

# Every part of the engines that exists: their folders (DIR's are removed with DIR) and ENGINE_RUN.
engine_dirs() {
  local ns
  for ns in $(engine_hosts); do
    [ ! -d "$(engine_dir "$ns")" ] || engine_dir "$ns"
  done
  [ ! -d "$ENGINE_RUN" ] || echo "$ENGINE_RUN"
}

# What the engines mounted (their storage's overlays, their containers' shm), deepest first.
engine_mounts() {
  awk -v d="$DIR/" -v r="$ENGINE_RUN/" 'index($2, d) == 1 || index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r
}

# The podman command line of host $1's engine (runc: Podman 4.3's default crun refuses cgroup v1).
engine_podman() {
  local pd rd
  pd=$(engine_dir "$1")
  rd=$(engine_run "$1")
  echo podman --runtime runc --root "$pd/root" --runroot "$rd/run" --tmpdir "$rd/tmp"
}

# Removes every container of host $1's engine (in the host's network namespace, where their ports' rules are),
# stops its service, kills what a failed removal left (by the containers' cgroups, named after their ids),
# unmounts its storage.
engine_down() {
  local ns=$1 pd pid id d p t0 rc=0 podman_argv
  pd=$(engine_dir "$ns")
  read -ra podman_argv <<<"$(engine_podman "$ns")"
  if [ -f "$pd/containers.conf" ] && command -v podman >/dev/null; then
    if [ -e "/run/netns/$ns" ]; then
      CONTAINERS_CONF=$pd/containers.conf timeout 60 nsenter --net="/run/netns/$ns" "${podman_argv[@]}" \
        rm -af -t 0 >/dev/null 2>&1 || rc=1
    else
      CONTAINERS_CONF=$pd/containers.conf timeout 60 "${podman_argv[@]}" rm -af -t 0 >/dev/null 2>&1 || rc=1
    fi
  fi
  pid=$(cat "$pd/service.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    t0=$SECONDS
    while alive "$pid" && [ $((SECONDS - t0)) -lt 10 ]; do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  for d in "$pd"/root/overlay-containers/*/; do
    id=$(basename "$d")
    [[ $id =~ ^[0-9a-f]{64}$ ]] || continue
    grep -l "libpod-$id" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3 | while read -r p; do
      kill -KILL "$p" 2>/dev/null || true
    done
  done
  for p in $(engine_mounts); do
    case $p in "$pd/"* | "$(engine_run "$ns")/"*) umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || rc=1 ;; esac
  done
  return "$rc"
}

# Every engine down, then ENGINE_RUN removed (DIR's folders go with DIR).
engines_down() {
  local ns rc=0
  for ns in $(engine_hosts); do
    engine_down "$ns" || rc=1
    removed+=("the engine of $ns")
  done
  if [ -d "$ENGINE_RUN" ]; then
    [ -z "$(engine_mounts)" ] && rm -rf -- "$ENGINE_RUN" || rc=1
  fi
  return "$rc"
}

# ---- down ----------------------------------------------------------------------------------------------------------

# Kills every process of the lab: SIGTERM, then SIGKILL after 2 s; waits until none is left (10 s at most).
kill_lab_processes() {
  local pids t0=$SECONDS termed=0 killed=0
  while :; do
    pids=$(lab_pids)
    [ -n "$pids" ] || return 0
    if [ "$termed" = 0 ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
      termed=1
    elif [ $((SECONDS - t0)) -ge 2 ] && [ "$killed" = 0 ]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      killed=1
      t0=$SECONDS
    elif [ "$killed" = 1 ] && [ $((SECONDS - t0)) -ge 1 ]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true  # new ones (an sshd forking while it was being killed)
      [ $((SECONDS - t0)) -lt 8 ] || { echo "$prog: still running after SIGKILL: $pids" >&2; return 1; }
    fi
    sleep 0.05
  done
}

remove_cpuset_group() {
  local g=$1 i
  for i in $(seq 100); do
    rmdir "$g" 2>/dev/null && return 0
    [ -d "$g" ] || return 0
    sleep 0.05
  done
  echo "$prog: cannot remove cpuset group $g" >&2
  return 1
}

# Removes every part of the lab that exists, whatever made it, and DIR; quiet=1 says nothing on success.
lab_down() {
  local rc=0 x g parts pids removed=() links=() namespaces=() groups=()
  parts=$(lab_parts)
  if [ -z "$parts" ] && [ ! -d "$DIR" ]; then
    note "lab $NAME: nothing to remove"
    return 0
  fi
  engines_down || rc=1
  pids=$(lab_pids | wc -l)
  kill_lab_processes || rc=1
  [ "$pids" = 0 ] || removed+=("killed $pids process(es)")
  if iptables_rule_present; then
    while iptables_rule_present; do
      iptables -w -D "${IPT_RULE[@]}" || { rc=1; break; }
    done
    removed+=("the iptables rule")
  fi
  # The root-side veths first: deleting a namespace frees its end of the pair later, in the kernel's own time.
  for x in $(lab_links); do
    [[ $x == "$BRIDGE" ]] && continue
    ip link del "$x" 2>/dev/null || [ -z "$(ip -o link show dev "$x" 2>/dev/null)" ] || rc=1
    links+=("$x")
  done
  for x in $(lab_links); do
    ip link del "$x" 2>/dev/null || rc=1
    links+=("$x")
  done
  [ "${#links[@]}" = 0 ] || removed+=("links ${links[*]}")
  for x in $(lab_namespaces); do
    ip netns del "$x" 2>/dev/null || rc=1
    namespaces+=("$x")
  done
  [ "${#namespaces[@]}" = 0 ] || removed+=("namespaces ${namespaces[*]}")
  for x in $(lab_cpuset_parents); do
    for g in "$x"/*/; do
      if [ -f "$g/cgroup.procs" ]; then
        remove_cpuset_group "${g%/}" || rc=1
      fi
    done
    remove_cpuset_group "$x" || rc=1
    groups+=("$x")
  done
  [ "${#groups[@]}" = 0 ] || removed+=("cpusets ${groups[*]}")
  if [ -d "$DIR" ]; then
    if [ -f "$DIR/lab.env" ] || [ -z "$(ls -A "$DIR")" ]; then
      rm -rf -- "$DIR"
      removed+=("$DIR")
    else
      echo "$prog: leaving $DIR: it has no lab.env, so it is not a lab's folder" >&2
    fi
  fi
  parts=$(lab_parts)
  if [ -n "$parts" ]; then
    echo "$prog: lab $NAME: still there after down: $parts" >&2
    return 1
  fi
  local IFS=";"
  note "lab $NAME: removed ${removed[*]:-nothing}" | sed 's/;/; /g'
  return "$rc"
}

# ---- up ------------------------------------------------------------------------------------------------------------

up_done=0
step="starting"

# Runs a command; on failure, ends up with one line: the step and what the command said.
must() {
  local out
  if ! out=$("$@" 2>&1); then
    die "$step: $* failed: $(echo "$out" | tr '\n' ' ' | sed 's/ *$//')"
  fi
}

# Writes VALUE into FILE (a cgroup or /proc/sys file); on failure, ends up with one line naming both.
put() {
  local file=$1 value=$2 err
  if ! err=$({ printf '%s\n' "$value" >"$file"; } 2>&1); then
    die "$step: cannot write $value to $file: ${err##*: }"
  fi
}

checkpoint() {
  if [ "${XFERBENCH_LAB_FAIL_AFTER:-}" = "$1" ]; then
    die "failing after $1 (XFERBENCH_LAB_FAIL_AFTER)"
  fi
  if [ "${XFERBENCH_LAB_HANG_AFTER:-}" = "$1" ]; then
    echo "$prog: hanging after $1 (XFERBENCH_LAB_HANG_AFTER) until stdin closes" >&2
    read -r _ || true
    die "stdin closed while hanging after $1"
  fi
}

# "0-2,5" → "0 1 2 5"
expand_cpus() {
  local part out=() c
  IFS=, read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then
      for ((c = ${part%-*}; c <= ${part#*-}; c++)); do out+=("$c"); done
    elif [ -n "$part" ]; then
      out+=("$part")
    fi
  done
  echo "${out[*]}"
}

# The cpuset groups: xferbench-NAME, and NAMEi below it with host 1's CPUs (the first half) or the others' (the
# rest). Writes CPUSET_KIND/CPUSET_PARENT to lab.env and DIR/cpusets. cgroup v1: below this process's own group
# (inside a container or a slice, the lab keeps to its CPUs). cgroup v2: at the top of the hierarchy, the one
# group that may both hold processes and hand a controller to its children (no internal processes elsewhere).
make_cpusets() {
  local kind mnt base parent cpus mems all half first rest i g c
  step="cpusets"
  read -r kind mnt <<<"$(cpuset_hierarchy)" || true
  [ -n "${kind:-}" ] || die "no cpuset controller (no cgroup v1 cpuset hierarchy, and cgroup v2 offers none); use --no-cpuset"
  base=$mnt
  [ "$kind" = v2 ] || base=$(own_cpuset_group "$kind" "$mnt")
  parent=$base/$CGROUP_PREFIX$NAME
  if [ "$kind" = v1 ]; then
    cpus=$(cat "$base/cpuset.effective_cpus" 2>/dev/null || cat "$base/cpuset.cpus")
    mems=$(cat "$base/cpuset.effective_mems" 2>/dev/null || cat "$base/cpuset.mems")
  else
    cpus=$(cat "$base/cpuset.cpus.effective")
    mems=$(cat "$base/cpuset.mems.effective")
    grep -qw cpuset "$base/cgroup.subtree_control" ||
      put "$base/cgroup.subtree_control" +cpuset
  fi
  read -ra all <<<"$(expand_cpus "$cpus")"
  [ "${#all[@]}" -gt 0 ] || die "$step: $base has no CPUs"
  half=$((${#all[@]} / 2))
  [ "$half" -ge 1 ] || half=1
  first=$(IFS=,; echo "${all[*]:0:half}")
  rest=$(IFS=,; echo "${all[*]:half}")
  [ -n "$rest" ] || rest=$first  # one CPU: every host shares it
  must mkdir "$parent"
  echo "CPUSET_KIND=$kind" >>"$DIR/lab.env"
  echo "CPUSET_PARENT=$parent" >>"$DIR/lab.env"
  if [ "$kind" = v1 ]; then
    # cgroup v1: a new group's cpus and mems are empty (clone_children is 0), and a task cannot join it until both
    # are set; children must hold a subset of their parent's.
    put "$parent/cpuset.cpus" "$cpus"
    put "$parent/cpuset.mems" "$mems"
  else
    put "$parent/cgroup.subtree_control" +cpuset
  fi
  : >"$DIR/cpusets"
  for ((i = 1; i <= HOSTS; i++)); do
    g=$parent/$NAME$i
    c=$rest
    [ "$i" != 1 ] || c=$first
    must mkdir "$g"
    put "$g/cpuset.cpus" "$c"
    if [ "$kind" = v1 ]; then
      put "$g/cpuset.mems" "$mems"
    fi
    echo "$NAME$i $g $(cat "$g/cpuset.cpus")" >>"$DIR/cpusets"
  done
  checkpoint cpusets
}

make_bridge() {
  step="bridge $BRIDGE"
  must ip link add "$BRIDGE" type bridge
  must ip addr add "$NET.1/24" dev "$BRIDGE"
  # What arrives from the lab is never routed on: a host that added a default route would still reach nothing else.
  put "/proc/sys/net/ipv4/conf/$BRIDGE/forwarding" 0
  if [ -d /proc/sys/net/ipv6 ]; then
    put "/proc/sys/net/ipv6/conf/$BRIDGE/disable_ipv6" 1
  fi
  must ip link set "$BRIDGE" up
  # With br_netfilter loaded, frames between the bridge's ports cross iptables' FORWARD chain, whose policy is DROP
  # where Docker runs: let the lab's hosts reach each other (as Docker does for its own bridges).
  if [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo 0)" = 1 ] && command -v iptables >/dev/null; then
    must iptables -w -I "${IPT_RULE[@]}"
  fi
  checkpoint bridge
}

make_host() {
  local i=$1 ns=$NAME$1 veth=${NAME}v$1
  step="host $ns"
  must ip netns add "$ns"
  must ip link add "$veth" type veth peer name eth0 netns "$ns"
  if [ -d /proc/sys/net/ipv6 ]; then
    put "/proc/sys/net/ipv6/conf/$veth/disable_ipv6" 1
    must ip netns exec "$ns" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 &&
      echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6'
  fi
  must ip link set "$veth" master "$BRIDGE" up
  must ip -n "$ns" addr add "$NET.$((1 + i))/24" dev eth0
  must ip -n "$ns" link set lo up
  must ip -n "$ns" link set eth0 up
  checkpoint "host$i"
}

write_keys_and_configs() {
  local i ns addr hd
  step="keys"
  must ssh-keygen -q -t ed25519 -N "" -C "lab $NAME client" -f "$DIR/id_ed25519"
  cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
  : >"$DIR/known_hosts"
  : >"$DIR/hosts"
  {
    echo "# lab $NAME, written by $prog up: ssh -F $DIR/ssh_config ${NAME}2"
  } >"$DIR/ssh_config"
  for ((i = 1; i <= HOSTS; i++)); do
    ns=$NAME$i
    addr=$NET.$((1 + i))
    hd=$DIR/$ns
    mkdir -p "$hd"
    must ssh-keygen -q -t ed25519 -N "" -C "lab $NAME host $ns" -f "$hd/ssh_host_ed25519_key"
    echo "$ns,$addr $(cut -d' ' -f1,2 "$hd/ssh_host_ed25519_key.pub")" >>"$DIR/known_hosts"
    echo "$ns $addr" >>"$DIR/hosts"
    cat >>"$DIR/ssh_config" <<EOF

Host $ns
  HostName $addr
  Port 22
  User root
  IdentityFile $DIR/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $DIR/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  CheckHostIP no
  UpdateHostKeys no
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
EOF
    cat >"$hd/sshd_config" <<EOF
# lab $NAME, host $ns: written by $prog up, removed by $prog down
ListenAddress $addr
Port 22
AddressFamily inet
HostKey $hd/ssh_host_ed25519_key
PidFile $hd/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# DIR need not be root's alone (build/lab is 0755 under the checkout).
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
# A run starts many sessions at once (one per Locust worker).
MaxStartups 200
MaxSessions 200
Subsystem sftp internal-sftp
EOF
  done
}

# Starts host i's sshd: in host i's cpuset from its first instruction (so all it starts inherits the group), in
# the namespace (ip netns exec), in a UTS namespace of its own whose hostname is NAMEi.
start_sshd() {
  local i=$1 ns=$NAME$1 hd=$DIR/$NAME$1 g=""
  step="sshd of $ns"
  [ "$CPUSETS" = 0 ] || g=$(awk -v h="$ns" '$1 == h {print $2}' "$DIR/cpusets")
  # shellcheck disable=SC2094  # the log is only named to sshd, which appends to it as this subshell does
  if ! (
    [ -z "$g" ] || echo "$BASHPID" >"$g/cgroup.procs"
    # shellcheck disable=SC2016  # sh's own arguments
    exec ip netns exec "$ns" unshare --uts -- /bin/sh -c 'hostname "$1" && exec "$2" -f "$3" -E "$4"' \
      sh "$ns" "$SSHD" "$hd/sshd_config" "$hd/sshd.log"
  ) </dev/null >>"$hd/sshd.log" 2>&1; then
    die "$step did not start: $(tail -n 1 "$hd/sshd.log" 2>/dev/null)"
  fi
  checkpoint "sshd$i"
}

# Polls until every sshd has written its pid file (after it listens) and answers ssh, 15 s at most.
wait_for_sshds() {
  local i ns hd t0=$SECONDS pid
  for ((i = 1; i <= HOSTS; i++)); do
    ns=$NAME$i
    hd=$DIR/$ns
    step="waiting for the sshd of $ns"
    until [ -s "$hd/sshd.pid" ] && alive "$(cat "$hd/sshd.pid")"; do
      if [ $((SECONDS - t0)) -ge 15 ]; then
        die "$step: no pid file after 15 s: $(tail -n 1 "$hd/sshd.log" 2>/dev/null)"
      fi
      if grep -qiE 'fatal|cannot bind|error' "$hd/sshd.log" 2>/dev/null; then
        die "$step: $(grep -iE 'fatal|cannot bind|error' "$hd/sshd.log" | tail -n 1)"
      fi
      sleep 0.05
    done
    until ssh -F "$DIR/ssh_config" "$ns" true </dev/null >/dev/null 2>&1; do
      if [ $((SECONDS - t0)) -ge 15 ]; then
        die "$step: ssh $ns does not answer: $(ssh -F "$DIR/ssh_config" "$ns" true </dev/null 2>&1 | tail -n 1)"
      fi
      sleep 0.1
    done
    pid=$(cat "$hd/sshd.pid")
    note "  $ns  $NET.$((1 + i))  sshd $pid  cpus $(awk -v h="$ns" '$1 == h {print $3}' "$DIR/cpusets" 2>/dev/null || echo all)"
  done
}

# Starts host i's engine: Podman's API service in the host's network namespace (only: this machine's mounts, its
# cgroup file system among them) and cpuset, on storage of its own, in a session of its own (it outlives up).
start_engine() {
  local i=$1 ns=$NAME$1 pd rd g="" podman_argv
  pd=$(engine_dir "$ns")
  rd=$(engine_run "$ns")
  step="engine of $ns"
  must mkdir -p "$pd" "$rd"
  printf '# lab %s, host %s: written by %s up --engine\n[engine]\nruntime = "runc"\n' "$NAME" "$ns" "$prog" \
    >"$pd/containers.conf"
  read -ra podman_argv <<<"$(engine_podman "$ns")"
  [ "$CPUSETS" = 0 ] || g=$(awk -v h="$ns" '$1 == h {print $2}' "$DIR/cpusets")
  (
    [ -z "$g" ] || echo "$BASHPID" >"$g/cgroup.procs"
    cd "$pd"  # conmon writes a file `oom` into its working directory when a container is OOM-killed
    export CONTAINERS_CONF=$pd/containers.conf
    exec setsid nsenter --net="/run/netns/$ns" "${podman_argv[@]}" system service --time=0 "unix://$rd/podman.sock"
  ) </dev/null >>"$pd/service.log" 2>&1 &
  echo "$!" >"$pd/service.pid"
  echo "$ns unix://$rd/podman.sock" >>"$DIR/engines"
  checkpoint "engine$i"
}

# Polls until every engine answers on its socket, 60 s at most (a first start sets up its storage).
wait_for_engines() {
  local i ns pd sock t0=$SECONDS
  for ((i = 1; i <= HOSTS; i++)); do
    ns=$NAME$i
    pd=$(engine_dir "$ns")
    sock=$(engine_run "$ns")/podman.sock
    step="waiting for the engine of $ns"
    until [ -S "$sock" ] && podman --remote --url "unix://$sock" version >/dev/null 2>&1; do
      alive "$(cat "$pd/service.pid")" || die "$step: it exited: $(tail -n 1 "$pd/service.log" 2>/dev/null)"
      if [ $((SECONDS - t0)) -ge 60 ]; then
        die "$step: no answer on $sock after 60 s: $(tail -n 1 "$pd/service.log" 2>/dev/null)"
      fi
      sleep 0.2
    done
    note "  $ns  engine unix://$sock  podman $(cat "$pd/service.pid")"
  done
}

on_up_exit() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ "$up_done" != 1 ]; then
    [ "$rc" != 0 ] || rc=1
    [ "$said" = 1 ] || echo "$prog: up failed at: $step (exit $rc)" >&2
    # Undo whatever was made; the reason was the line printed last.
    quiet=1 lab_down >/dev/null 2>&1 || quiet=1 lab_down >/dev/null 2>&1 || true
  fi
  exit "$rc"
}

lab_up() {
  local parts i
  [[ $NET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || die "--net $NET: three numbers, A.B.C (the lab is A.B.C.0/24)"
  local a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} c=${BASH_REMATCH[3]}
  if [ "$a" -gt 255 ] || [ "$b" -gt 255 ] || [ "$c" -gt 255 ]; then
    die "--net $NET: each number at most 255"
  fi
  if ! { [ "$a" = 10 ] || { [ "$a" = 172 ] && [ "$b" -ge 16 ] && [ "$b" -le 31 ]; } || { [ "$a" = 192 ] && [ "$b" = 168 ]; }; }; then
    die "--net $NET: not a private network (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)"
  fi
  if ! [[ $HOSTS =~ ^[0-9]{1,3}$ ]] || [ "$HOSTS" -lt 1 ] || [ "$HOSTS" -gt 250 ]; then
    die "--hosts $HOSTS: 1 to 250"
  fi
  if [ $((${#NAME} + 1 + ${#HOSTS})) -gt "$IFNAMSIZ" ] || [ $((${#NAME} + 3)) -gt "$IFNAMSIZ" ]; then
    die "--name $NAME: too long for its interface names (${NAME}br0, ${NAME}v$HOSTS: $IFNAMSIZ characters at most)"
  fi
  for x in ip ssh ssh-keygen unshare "$SSHD"; do
    command -v "$x" >/dev/null || die "$x is missing (scripts/bootstrap.sh installs openssh-server)"
  done
  if [ "$ENGINE" = 1 ]; then
    for x in podman runc nsenter; do
      command -v "$x" >/dev/null || die "--engine: $x is missing (apt-get install podman runc)"
    done
  fi

  parts=$(lab_parts)
  if [ -n "$parts" ]; then
    [ "$FORCE" = 1 ] || die "lab $NAME exists ($parts): $prog down --name $NAME, or up --force"
    quiet=1 lab_down >/dev/null || die "lab $NAME exists and down could not remove it all"
  fi
  if [ -n "$(ip -4 -o addr show to "$NET.0/24" 2>/dev/null)" ] || [ -n "$(ip -4 route show root "$NET.0/24" 2>/dev/null)" ]; then
    die "$NET.0/24 is in use on this machine: $(ip -4 -o addr show to "$NET.0/24" | awk '{print $2, $4}' | head -n 1)"
  fi
  if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
    die "$DIR exists and is not a lab's folder (no lab.env)"
  fi

  trap on_up_exit EXIT
  trap 'die "interrupted"' INT TERM HUP
  step="folder $DIR"
  must mkdir -p "$DIR"
  printf 'NAME=%s\nNET=%s\nHOSTS=%s\nDIR=%s\nENGINE=%s\n' "$NAME" "$NET" "$HOSTS" "$DIR" "$ENGINE" >"$DIR/lab.env"
  [ -d /run/sshd ] || must install -d -m 0755 /run/sshd  # sshd's privilege separation directory
  write_keys_and_configs
  if [ "$CPUSETS" = 1 ]; then
    make_cpusets
  fi
  make_bridge
  for ((i = 1; i <= HOSTS; i++)); do
    make_host "$i"
  done
  for ((i = 1; i <= HOSTS; i++)); do
    start_sshd "$i"
  done
  note "lab $NAME: $HOSTS hosts on $NET.0/24 (this machine: $BRIDGE $NET.1), files in $DIR"
  wait_for_sshds
  if [ "$ENGINE" = 1 ]; then
    for ((i = 1; i <= HOSTS; i++)); do
      start_engine "$i"
    done
    wait_for_engines
  fi
  note "ssh -F $DIR/ssh_config ${NAME}1"
  up_done=1
}

# ---- status --------------------------------------------------------------------------------------------------------

lab_status() {
  local ns addr pid cpus answers bad=0
  if [ ! -f "$DIR/hosts" ]; then
    local parts
    parts=$(lab_parts)
    if [ -z "$parts" ]; then
      echo "lab $NAME: not up"
    else
      echo "lab $NAME: half-made (no $DIR/hosts): $parts"
    fi
    return 1
  fi
  echo "lab $NAME: $(sed -n 's/^NET=//p' "$DIR/lab.env").0/24, files in $DIR"
  printf '%-16s %-15s %-8s %-8s %s\n' host address sshd cpus ssh
  while read -r ns addr; do
    pid=$(cat "$DIR/$ns/sshd.pid" 2>/dev/null || true)
    if [ -z "$pid" ] || ! alive "$pid"; then pid=-; fi
    cpus=$(awk -v h="$ns" '$1 == h {print $3}' "$DIR/cpusets" 2>/dev/null || true)
    if [ "$pid" != - ] && ssh -F "$DIR/ssh_config" -o ConnectTimeout=2 "$ns" true </dev/null >/dev/null 2>&1; then
      answers=yes
    else
      answers=no
      bad=1
    fi
    printf '%-16s %-15s %-8s %-8s %s\n' "$ns" "$addr" "$pid" "${cpus:--}" "$answers"
  done <"$DIR/hosts"
  if [ -f "$DIR/engines" ]; then
    while read -r ns url; do
      if podman --remote --url "$url" version >/dev/null 2>&1; then answers=answers; else answers="does not answer"; bad=1; fi
      echo "$ns engine $url: $answers"
    done <"$DIR/engines"
  fi
  return "$bad"
}

case $cmd in
  up) lab_up ;;
  down) lab_down ;;
  status) lab_status ;;
esac
