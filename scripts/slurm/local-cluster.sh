#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for the tests and for trying the batch script: munge,
# slurmctld and slurmd from Debian's packages (installed by setup-deps.sh), their state under one
# folder, this host the only node with all its CPUs.
#
#   scripts/slurm/local-cluster.sh start DIR   # writes DIR/slurm.conf, starts the daemons, waits for the node
#   scripts/slurm/local-cluster.sh stop DIR    # stops what start started
#
# DIR and the folders above it must be searchable by the slurm and munge users. Clients find the
# cluster through SLURM_CONF=DIR/slurm.conf. Nothing listens beyond 127.0.0.1's ports 16817-16818
# and the munge socket under DIR.
set -euo pipefail
command=${1:?usage: local-cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: local-cluster.sh start|stop DIR}")

stop() {
  for daemon in slurmd slurmctld munged; do
    [[ -f $dir/$daemon.pid ]] && kill "$(cat "$dir/$daemon.pid")" 2>/dev/null || true
  done
  sleep 1
}

start() {
  # munge wants its key private and its socket's folder open to every user (slurm among them).
  mkdir -p "$dir"/{state,spool,log,munge,munge-key}
  # The daemons run as the slurm and munge users: DIR and every folder above it must let them in.
  runuser -u slurm -- test -x "$dir" || {
    echo "local-cluster: the slurm user cannot reach $dir (a folder above it is private: chmod o+x it)" >&2
    return 1
  }
  chown slurm:slurm "$dir"/state "$dir"/log && chown munge:munge "$dir"/munge "$dir"/munge-key
  chmod 755 "$dir" "$dir/munge" && chmod 700 "$dir/munge-key"
  local key=$dir/munge-key/munge.key host cpus memory
  [[ -f $key ]] || { dd if=/dev/urandom of="$key" bs=1024 count=1 status=none; chown munge:munge "$key"; chmod 400 "$key"; }
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))
  cat > "$dir/slurm.conf" <<CONF
ClusterName=xtrain-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CryptoType=crypto/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobRequeue=1
KillWait=10
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  stop
  munged --socket="$dir/munge/munge.socket" --key-file="$key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munge-key/munged.log" --seed-file="$dir/munge-key/seed" --force
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$dir/slurm.conf"
  slurmd -f "$dir/slurm.conf"
  for _ in $(seq 60); do
    timeout 2 sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && { echo "local SLURM up: SLURM_CONF=$dir/slurm.conf"; return; }
    sleep 1
  done
  echo "local-cluster: the node did not come up in 60 s; logs in $dir/log" >&2
  tail -n 20 "$dir"/log/*.log >&2
  return 1
}

case $command in
  start) start ;;
  stop) stop ;;
  *) echo "usage: local-cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
