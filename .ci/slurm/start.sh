#!/usr/bin/env bash
# A one-node SLURM on this machine for the tests (tests/cluster/): installs Debian's
# slurm-wlm and munge when missing (as root), writes slurm.conf for localhost, starts munged,
# slurmctld and slurmd, and waits until `sinfo` shows the node idle. Stop it with stop.sh.
#   CRS_SLURM_DIR (default /tmp/crs-slurm): state, spool, logs, pid files and the config.
# Exits 0 with a message (and no cluster) when SLURM cannot be installed or started: the tests
# that need it then skip, saying why.
set -uo pipefail
DIR=${CRS_SLURM_DIR:-/tmp/crs-slurm}
say() { echo "slurm: $*"; }
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then say "slurm-wlm/munge missing and not root; no local cluster"; exit 0; fi
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null) \
        || { say "apt-get install slurm-wlm munge failed; no local cluster"; exit 0; }
fi
HOST=$(hostname -s)
if ! getent hosts "$HOST" >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && echo "127.0.0.1 $HOST" >> /etc/hosts
fi
CPUS=$(nproc)
MEM=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
CONF=/etc/slurm/slurm.conf
MARK="# written by crs .ci/slurm/start.sh"
if [ -e "$CONF" ] && ! grep -q "$MARK" "$CONF"; then
    CONF=$DIR/slurm.conf  # a real installation's config is left alone; clients then need SLURM_CONF
fi
mkdir -p "$(dirname "$CONF")"
cat > "$CONF" <<CONF
$MARK (one node on localhost, for tests)
ClusterName=crs-ci
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=600
KillWait=5
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM Features=crsci State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
echo "$CONF" > "$DIR/conf_path"
export SLURM_CONF=$CONF
# munge: a key if the package made none, then the daemon (as root: --force skips the owner checks)
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge && dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
if ! munge -n >/dev/null 2>&1 </dev/null; then
    munged --force --pid-file="$DIR/munge/munged.pid" || { say "munged did not start; no local cluster"; exit 0; }
fi
[ -s "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null || slurmctld -f "$CONF" \
    || { say "slurmctld did not start (see $DIR/slurmctld.log); no local cluster"; exit 0; }
[ -s "$DIR/slurmd.pid" ] && kill -0 "$(cat "$DIR/slurmd.pid")" 2>/dev/null || slurmd -f "$CONF" \
    || { say "slurmd did not start (see $DIR/slurmd.log); no local cluster"; exit 0; }
for _ in $(seq 60); do
    state=$(sinfo -h -n "$HOST" -o %t 2>/dev/null | head -1)
    case "$state" in idle*|mix*|alloc*) say "one node ($HOST, $CPUS CPUs) $state; SLURM_CONF=$CONF"; exit 0 ;; esac
    sleep 1
done
say "node $HOST not idle after 60 s (state: ${state:-none}; see $DIR/*.log)"
exit 0
