#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing the workflow's SLURM profile (tests/workflow/test_slurm.py).
# Runs as root without systemd: Debian's packages (installed when missing), then munge, MariaDB with slurmdbd
# (so that `sacct` answers), slurmctld and slurmd, each a background process whose PID is kept in $STATE.
# The node has partitions `cpu` and `gpu`, and one GPU gres backed by /dev/null, so that GPU jobs schedule on
# a machine without a GPU (the workflow then runs its CPU backend).
#
#   .ci/slurm.sh up       start what is not running; wait (bounded) until the node is idle. Idempotent.
#   .ci/slurm.sh down     stop every daemon it started, by PID.
#   .ci/slurm.sh status   one line per daemon: name and PID, or name and "-".
#
# Environment: SLURM_STATE (default /run/strassenbench-slurm), SLURM_NODE_CPUS (default 16) and
# SLURM_NODE_MEM_MB (default 64000): what the node advertises, more than a small machine has (slurmd accepts
# it through config_overrides), so that the workflow's short jobs, which mostly wait, run 16 at a time.
set -euo pipefail
STATE=${SLURM_STATE:-/run/strassenbench-slurm}
CPUS=${SLURM_NODE_CPUS:-16}
MEM_MB=${SLURM_NODE_MEM_MB:-64000}
NODE=$(hostname -s)
PACKAGES=(munge slurm-client slurmctld slurmd slurmdbd mariadb-server)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)

running() {  # running NAME: its PID file names a live process (a killed daemon stays a zombie until init reaps it)
  local stat
  [[ -s $STATE/$1.pid ]] || return 1
  stat=$(ps -o stat= -p "$(<"$STATE/$1.pid")" 2>/dev/null) || return 1
  [[ -n $stat && $stat != Z* ]]
}

launch() {  # launch NAME COMMAND...: in the background unless already running; output to $STATE/NAME.log
  local name=$1
  shift
  running "$name" && return 0
  "$@" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

await() {  # await WHAT COMMAND: retry COMMAND (each try capped at 5 s) for at most 120 s
  local what=$1 command=$2 deadline=$((SECONDS + 120))
  until timeout 5 bash -c "$command" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "slurm.sh: $what did not come up within 120 s; last log lines:" >&2
      tail -n 15 "$STATE"/*.log >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

install_packages() {
  dpkg -s "${PACKAGES[@]}" >/dev/null 2>&1 && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "slurm.sh: needs root and apt-get to install ${PACKAGES[*]}" >&2
    return 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
}

write_config() {
  cat >/etc/slurm/slurm.conf <<CONF
ClusterName=strassenbench
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.daemon.pid
SlurmdPidFile=$STATE/slurmd.daemon.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
MinJobAge=300
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP
CONF
  echo "NodeName=$NODE Name=gpu File=/dev/null" >/etc/slurm/gres.conf
  cat >/etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/slurmdbd.daemon.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=strassenbench
StorageLoc=slurm_acct_db
CONF
  chmod 600 /etc/slurm/slurmdbd.conf
}

clear_leftovers() {  # jobs an interrupted earlier run left in slurmctld's saved state would keep the node busy
  local jobs
  jobs=$(squeue -h -o %i | tr '\n' ' ')
  if [[ -n ${jobs// /} ]]; then
    echo "slurm.sh: cancelling jobs left from an earlier run: $jobs" >&2
    # shellcheck disable=SC2086  # one argument per job id
    scancel $jobs
  fi
  # a node an earlier run left drained or down is returned to service
  if sinfo -h -n "$NODE" -o %t | grep -qE '^(drain|drng|down|fail)'; then
    echo "slurm.sh: resuming node $NODE ($(sinfo -h -n "$NODE" -o %t | head -1))" >&2
    scontrol update nodename="$NODE" state=resume
  fi
}

up() {
  install_packages
  mkdir -p "$STATE" /run/munge /run/mysqld /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  chown munge:munge /run/munge
  chown mysql:mysql /run/mysqld
  [[ -s /etc/munge/munge.key ]] || setpriv --reuid=munge --regid=munge --init-groups mungekey --create
  launch munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground
  await munge "munge -n | unmunge"
  launch mariadbd /usr/sbin/mariadbd --user=mysql
  await MariaDB "mariadb -e 'SELECT 1'"
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'strassenbench';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  write_config
  launch slurmdbd slurmdbd -D
  await slurmdbd "sacctmgr -n list cluster"
  sacctmgr -n -P list cluster format=cluster | grep -qx strassenbench || sacctmgr -i add cluster strassenbench >/dev/null
  launch slurmctld slurmctld -D
  launch slurmd slurmd -D -N "$NODE"
  await slurmctld "scontrol ping | grep -q UP"
  clear_leftovers
  await "the node" "sinfo -h -n $NODE -o %t | grep -qx idle"
  sinfo
}

down() {
  local name pid
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    name=${DAEMONS[i]}
    if running "$name"; then
      pid=$(<"$STATE/$name.pid")
      kill "$pid"
      for _ in $(seq 1 60); do running "$name" || break; sleep 0.5; done
      running "$name" && kill -9 "$pid"
    fi
    rm -f "$STATE/$name.pid"
  done
}

status() {
  local name
  for name in "${DAEMONS[@]}"; do
    if running "$name"; then echo "$name $(<"$STATE/$name.pid")"; else echo "$name -"; fi
  done
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
