#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for the slurm backend's tests: slurmctld and munged
# in the root namespaces, and N compute nodes n1..nN, each a slurmd in its own network,
# hostname and mount namespace (its own address on a private bridge and its own /tmp, like a
# compute node's local disk). OpenMPI programs run across the nodes with `srun --mpi=pmix`, and
# TaskPlugin=task/affinity makes srun's --cpu-bind real. Each node has G emulated GPUs (GRES
# gpu:G, default 2, TUNEPAR_SLURM_GPUS=G to change): character devices /tmp/tunepar-gpus/gpu0..
# in the node's own /tmp (made with /dev/null's numbers, so they open), so that `--gpus-per-node`
# is accepted and Slurm sets CUDA_VISIBLE_DEVICES in job steps; a test removes one to emulate a
# missing device.
#
#   bash scripts/slurm-cluster.sh start [N] [DIR]   start N nodes (default 2); state under DIR
#                                                    (default /var/tmp/tunepar-slurm)
#   bash scripts/slurm-cluster.sh env [DIR]         print the line that points Slurm clients here
#   bash scripts/slurm-cluster.sh stop [DIR]        stop the daemons, remove namespaces and bridge
#
# Needs root and Debian's slurm-wlm, munge and iproute2 (installed when missing). What the
# nodes run must live outside /tmp (each node sees its own /tmp).
set -euo pipefail
cmd=${1:-}
N=${2:-2}
DIR=${3:-/var/tmp/tunepar-slurm}
if [ "$cmd" = env ] || [ "$cmd" = stop ]; then DIR=${2:-/var/tmp/tunepar-slurm}; fi
G=${TUNEPAR_SLURM_GPUS:-2}
BR=tps-br
NET=10.231.78
CONF=$DIR/slurm.conf

need_packages() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v ip >/dev/null && return
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends slurm-wlm munge iproute2 >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends slurm-wlm munge iproute2 >/dev/null; }
}

start() {
  if [ "$(id -u)" != 0 ]; then
    # Not fatal for the test suite: without root there is no cluster and the slurm tests say
    # they are skipped.
    echo "slurm-cluster: not started: needs root (network namespaces, daemons)" >&2
    exit 0
  fi
  need_packages
  mkdir -p "$DIR"/{state,log,run}
  mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  pgrep -x munged >/dev/null || runuser -u munge -- munged --force 2>/dev/null || munged --force
  ip link show "$BR" >/dev/null 2>&1 || { ip link add "$BR" type bridge; ip addr add "$NET.1/24" dev "$BR"; ip link set "$BR" up; }
  {
    echo "ClusterName=tunepar"
    echo "SlurmctldHost=$(hostname)($NET.1)"
    echo "SlurmctldPort=16917"
    echo "SlurmdPort=16918"
    echo "AuthType=auth/munge"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/affinity"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "StateSaveLocation=$DIR/state"
    echo "SlurmdSpoolDir=$DIR/spool-%n"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    echo "SlurmctldPidFile=$DIR/run/slurmctld.pid"
    echo "SlurmdPidFile=$DIR/run/slurmd-%n.pid"
    echo "SlurmUser=root"
    echo "GresTypes=gpu"
    echo "MpiDefault=pmix"
    echo "ReturnToService=2"
    for i in $(seq 1 "$N"); do
      echo "NodeName=n$i NodeAddr=$NET.$((10 + i)) NodeHostname=n$i CPUs=$(nproc) RealMemory=4000 Gres=gpu:$G State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=n[1-$N] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
  } >"$CONF"
  echo "NodeName=n[1-$N] Name=gpu File=/tmp/tunepar-gpus/gpu[0-$((G - 1))]" >"$DIR/gres.conf"
  export SLURM_CONF=$CONF
  pgrep -f "slurmctld.*$CONF" >/dev/null || slurmctld -f "$CONF"
  for i in $(seq 1 "$N"); do
    ns=tps-n$i
    if ! ip netns list | grep -qw "$ns"; then
      ip netns add "$ns"
      ip link add "tps-v$i" type veth peer name eth0 netns "$ns"
      ip link set "tps-v$i" master "$BR"
      ip link set "tps-v$i" up
      ip netns exec "$ns" ip addr add "$NET.$((10 + i))/24" dev eth0
      ip netns exec "$ns" ip link set eth0 up
      ip netns exec "$ns" ip link set lo up
    fi
    mkdir -p "$DIR/tmp-n$i/tunepar-gpus"
    for g in $(seq 0 $((G - 1))); do
      [ -c "$DIR/tmp-n$i/tunepar-gpus/gpu$g" ] || mknod -m 666 "$DIR/tmp-n$i/tunepar-gpus/gpu$g" c 1 3
    done
    # nsenter keeps the host's /sys (cgroups); unshare gives the node its own hostname and /tmp.
    nsenter --net=/var/run/netns/"$ns" unshare -u -m sh -c \
      "mount --make-rprivate /; mount --bind '$DIR/tmp-n$i' /tmp; hostname n$i; SLURM_CONF='$CONF' slurmd -f '$CONF' -N n$i"
  done
  for _ in $(seq 1 60); do
    idle=$(sinfo -h -t idle -o '%D' 2>/dev/null | head -1)
    if [ "${idle:-0}" = "$N" ]; then
      echo "slurm-cluster: $N nodes idle; export SLURM_CONF=$CONF"
      return
    fi
    sleep 1
  done
  echo "slurm-cluster: the nodes did not come up; see $DIR/log" >&2
  exit 1
}

stop() {
  for f in "$DIR"/run/slurmd-*.pid "$DIR"/run/slurmctld.pid; do
    if [ -f "$f" ]; then kill "$(cat "$f")" 2>/dev/null || true; fi
  done
  sleep 1
  # Whatever still runs in a node's namespace (a job step's slurmstepd that outlived its daemon)
  # would keep the namespace, and its veth, alive: the next start could not make them again.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^tps-n' || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  for link in $(ip -o link show 2>/dev/null | awk -F'[ :@]+' '{print $2}' | grep '^tps-v' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
  echo "slurm-cluster: stopped"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
