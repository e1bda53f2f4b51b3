#!/bin/sh
# mpistat's Slurm TaskEpilog example: send the analysis of a traced step's trace, as the job's
# user, right after the step, where `[trace] analyze_at_exit = false` (Slurm's proctrack/cgroup
# kills what the profiler would leave running).
#
# slurm.conf:   TaskEpilog=/etc/slurm/mpistat-taskepilog.sh
#
# slurmd runs this as the job's user after each task; task 0 of a traced step acts. A TaskEpilog
# cannot start a new job step, so it runs the one-process analysis (threads, on this node),
# bounded by `[escalation] analysis_memory_bytes`: a trace too big for one node's memory is not
# read, and the record sent says how many processes would do. For such jobs, let the batch
# script's last step analyse the trace in parallel with the job's own processes instead, e.g.
#
#   srun ./app ...                                          # the traced step
#   MPISTAT=off srun -n "$SLURM_NTASKS" mpistat-analyze --send "$HOME/.mpistat/traces/$SLURM_JOB_ID.0"
#
# (with MPICH: mpistat-analyze-mpich). Both send the same record; use one or the other.

# Where the site installed mpistat (edit to suit), and the profiler's trace directory
# (`[trace] directory`, {job_id} = JOBID.STEPID under Slurm).
mpistat=/usr/bin/mpistat
dir="$HOME/.mpistat/traces/${SLURM_JOB_ID:-}.${SLURM_STEP_ID:-}"

[ "${SLURM_PROCID:-}" = 0 ] || exit 0
# The profiler writes the key file last, once every rank's file is complete.
[ -f "$dir/job-key" ] || exit 0
"$mpistat" analyze --send "$dir" >/dev/null 2>&1 </dev/null
exit 0
