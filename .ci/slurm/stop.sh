#!/usr/bin/env bash
# Stop the local SLURM that start.sh started (its own pid files only) and leave its folder behind for the logs.
set -uo pipefail
DIR=${CRS_SLURM_DIR:-/tmp/crs-slurm}
for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
    if [ -s "$pidfile" ]; then
        pid=$(cat "$pidfile")
        # slurmd may take ~30 s to end when its controller is gone
        kill "$pid" 2>/dev/null && for _ in $(seq 90); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        rm -f "$pidfile"
    fi
done
echo "slurm: stopped"
