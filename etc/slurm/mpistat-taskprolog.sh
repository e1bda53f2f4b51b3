#!/bin/sh
# mpistat's Slurm TaskProlog: profile every task of every job, no change to users' scripts.
#
# slurm.conf:   TaskProlog=/etc/slurm/mpistat-taskprolog.sh
#
# slurmd runs this as the job's user before each task (the batch script, and every task of every
# srun step) and reads its standard output: "export NAME=value" lines set the task's
# environment. So nothing else may be printed here.
#
# * LD_PRELOAD gets libmpistat.so (the front) appended (a user's own preloads stay, and first). In
#   a process that never calls MPI the library does nothing; mpirun's ranks inherit it. At the
#   first MPI call it loads libmpistat_<family>.so from its own directory (install them together).
# * A job opts out with MPISTAT=off in its environment (sbatch --export=ALL,MPISTAT=off or
#   `export MPISTAT=off` before sbatch/srun): then nothing is set.
# * Task 0 of each step also asks slurmctld once for the job's time limit, submit and start times
#   and QOS, which Slurm 22.05 does not put in the environment, and passes them on to the
#   profiler as MPISTAT_SLURM_JOB="<job id>|<time limit>|<submit>|<start>|<QOS>" (squeue's
#   %A|%l|%V|%S|%q, times in seconds since the epoch). Task 0 asks for every step: a line already
#   in the environment may be the user's own (a job exports what it likes), so task 0 never keeps
#   one; if slurmctld does not answer within 5 s it unsets it and the record goes without them.
#   The other tasks keep what they inherit (asking for each would load slurmctld with every task
#   of a step): only a partial record of an aborting rank reads it there.
#   The record still marks every Slurm fact as claimed (docs/identity.md): a batch script can
#   change the environment of what it starts itself, e.g. mpirun's ranks.

# Where the site installed the profiler's front, with the implementations beside it (edit to suit).
lib=/usr/lib/x86_64-linux-gnu/libmpistat.so

case ${MPISTAT:-} in
off | OFF | Off | no | 0 | false) exit 0 ;;
esac
[ -r "$lib" ] || exit 0

case ":${LD_PRELOAD:-}:" in
*":$lib:"*) ;;
*) echo "export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$lib" ;;
esac

if [ "${SLURM_PROCID:-}" = 0 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    facts=$(SLURM_TIME_FORMAT=%s timeout 5 squeue --noheader --jobs="$SLURM_JOB_ID" \
        --format='%A|%l|%V|%S|%q' 2>/dev/null | head -n 1)
    case $facts in
    "$SLURM_JOB_ID|"*'|'*'|'*'|'*) echo "export MPISTAT_SLURM_JOB=$facts" ;;
    *) [ -z "${MPISTAT_SLURM_JOB+set}" ] || echo "unset MPISTAT_SLURM_JOB" ;;
    esac
fi
exit 0
