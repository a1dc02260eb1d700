#!/usr/bin/env bash
# A one-node SLURM on this machine for the tests (tests/cluster/): installs Debian's
# slurm-wlm and munge when missing (as root), writes slurm.conf for localhost, starts munged,
# slurmctld and slurmd, and waits until `sinfo` shows the node idle. Stop it with stop.sh.
#   CRS_SLURM_DIR (default /tmp/crs-slurm): state, spool, logs, pid files and the config.
# A scheduler that already answers is used only when it is the one this script's configuration
# describes (it reads the suite's slurm.conf, is named crs-ci and its node has this machine's CPUs
# and memory); one this script started from another configuration (an earlier run stopped by a
# signal) is stopped and started again; any other one is left alone and not used.
#   start.sh --check: one line saying whether the suite's cluster is running; exit 0 when it is
#   and its node is up, 3 when no scheduler answers, 4 when the one that answers is not the suite's.
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
# the machine's CPUs, not OMP_NUM_THREADS (GNU nproc reads it; make test exports 1, which made a one-CPU node)
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
MEM=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
CONF=/etc/slurm/slurm.conf
MARK="# written by crs .ci/slurm/start.sh"
if [ -e "$CONF" ] && ! grep -q "$MARK" "$CONF"; then
    CONF=$DIR/slurm.conf  # a real installation's config is left alone; clients then need SLURM_CONF
fi
CLUSTER=crs-ci

# The scheduler that answers, if any: under the suite's config, else under the machine's default one.
answering_config() {
    local conf
    # nothing listens on slurmctld's port: no scheduler (scontrol would retry for ~15 s to find that)
    timeout 5 bash -c ": </dev/tcp/$HOST/6817" 2>/dev/null || return 1
    for conf in "$CONF" ""; do
        [ -n "$conf" ] && [ ! -e "$conf" ] && continue
        SLURM_CONF=$conf timeout 20 scontrol show config 2>/dev/null && return 0
    done
    return 1
}
config_value() { awk -F' *= *' -v key="$1" '$1 == key {print $2; exit}'; }
# "ours", "none", or why the answering scheduler is not the suite's.
suite_cluster_state() {
    local config conf name node cpus mem
    config=$(answering_config) || { echo none; return; }
    conf=$(config_value SLURM_CONF <<<"$config")
    name=$(config_value ClusterName <<<"$config")
    if [ "$conf" != "$CONF" ] || [ "$name" != "$CLUSTER" ] || ! grep -q "$MARK" "$CONF" 2>/dev/null; then
        echo "a scheduler this suite did not configure answers (SLURM_CONF=$conf, ClusterName=$name)"; return
    fi
    node=$(SLURM_CONF=$CONF timeout 20 scontrol show node "$HOST" 2>/dev/null)
    cpus=$(grep -o 'CPUTot=[0-9]*' <<<"$node" | cut -d= -f2)
    mem=$(grep -o 'RealMemory=[0-9]*' <<<"$node" | cut -d= -f2)
    if [ "$cpus" != "$CPUS" ] || [ "$mem" != "$MEM" ]; then
        echo "the suite's scheduler runs an older configuration (node $HOST: ${cpus:-?} CPUs, ${mem:-?} MB; this machine: $CPUS CPUs, $MEM MB)"
        return
    fi
    echo ours
}
# Daemons this script started (its pid files) that are still alive.
started_here() {
    local pidfile
    for pidfile in "$DIR/slurmctld.pid" "$DIR/slurmd.pid"; do
        [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null && return 0
    done
    return 1
}

wait_until_idle() {
    local node_state deadline=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$deadline" ]; do  # a deadline, not a count: sinfo waits ~15 s for a controller that is gone
        node_state=$(SLURM_CONF=$CONF timeout 20 sinfo -h -n "$HOST" -o %t 2>/dev/null | head -1)
        case "$node_state" in idle*|mix*|alloc*) say "one node ($HOST, $CPUS CPUs) $node_state; SLURM_CONF=$CONF"; exit 0 ;; esac
        if [ -s "$DIR/slurmctld.pid" ] && ! kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
            say "slurmctld stopped while the node came up (see $DIR/slurmctld.log); no local cluster"; exit 0
        fi
        sleep 1
    done
    say "node $HOST not idle after 60 s (state: ${node_state:-none}; see $DIR/*.log)"
    exit 0
}

if [ "${1:-}" = --check ]; then
    command -v scontrol >/dev/null 2>&1 || { say "no SLURM installed"; exit 3; }
    state=$(suite_cluster_state)
    case "$state" in
        ours)
            node_state=$(SLURM_CONF=$CONF sinfo -h -n "$HOST" -o %t 2>/dev/null | head -1)
            case "$node_state" in
                idle*|mix*|alloc*) say "the suite's cluster runs (node $HOST $node_state; SLURM_CONF=$CONF)"; exit 0 ;;
                *) say "the suite's cluster runs but node $HOST is ${node_state:-unknown}"; exit 4 ;;
            esac ;;
        none) say "no scheduler answers"; exit 3 ;;
        *) say "$state"; exit 4 ;;
    esac
fi

if ! getent hosts "$HOST" >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && echo "127.0.0.1 $HOST" >> /etc/hosts
fi
state=$(suite_cluster_state)
if [ "$state" = ours ]; then
    say "using the suite's running cluster (SLURM_CONF=$CONF)"; wait_until_idle
elif [ "$state" != none ]; then
    if ! started_here; then
        say "$state; not used: stop it, or run the cluster tests where no other SLURM runs"; exit 0
    fi
    say "$state; stopping what this script started and starting again"
    "$(dirname "$0")/stop.sh" >/dev/null
fi
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
mkdir -p "$(dirname "$CONF")"
cat > "$CONF" <<CONF
$MARK (one node on localhost, for tests)
ClusterName=$CLUSTER
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
wait_until_idle
