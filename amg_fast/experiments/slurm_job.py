"""The callable of a sweep's Slurm job: one run, requeued from its checkpoint when the job reaches
its time limit or is preempted. Imported only where submitit is installed (the [slurm] extra).

How a requeue works. submitit's sbatch script asks Slurm for SIGUSR2 90 s before the time limit
(`--signal=USR2@90`; a preempted job gets it too where the cluster sets
SlurmctldParameters=preempt_send_user_signal). The job process is the training process (run_job
runs in it, no subprocess), and submitit's handler in it calls RequeueableRun.checkpoint(run_dir),
which returns this same run as the job to requeue; submitit requeues it (`scontrol requeue`; a
signal after min(0.8 x limit, limit - 10 min) counts as a timeout, and after max_num_timeout of
those it is not requeued: the run is then recorded as failed with its checkpoint kept, and the next
`reproduce.py run` resubmits it) and exits. The exit unwinds the trainer: its locks are released
and an unfinished write leaves the previous file (amg_fast._files). The requeued job calls
run_job(run_dir) again, which resumes from the run directory's checkpoint; a run that has finished
meanwhile (results.json) is not trained again. A job that Slurm itself requeues (a preemption
with PreemptMode=REQUEUE, a node failure) runs the same callable and resumes the same way.

No checkpoint is written on the signal: the last periodic one is used. The signal arrives in the
middle of an epoch, whose state (parameters after some of its steps, the data order's generator,
the scheduler) is not one an uninterrupted run ever saves, so resuming from it would not give the
uninterrupted run's results; finishing the epoch first could outlast the 90 s. Checkpoints are
written every epoch by default (--checkpoint-every 1, what sweeps use; 0.15 s of ~220 s in a
paper-scale H200 run), so a requeue redoes at most the epoch that was running, the same as after a
crash or kill -9 without any warning.
"""
from __future__ import annotations

from submitit.helpers import Checkpointable, DelayedSubmission

from amg_fast.experiments.runner import run_job

__all__ = ["RequeueableRun"]


class RequeueableRun(Checkpointable):
    """run_job(run_dir) as a submitit Checkpointable: job(run_dir) -> the run's state after."""

    def __call__(self, run_dir: str) -> str:
        return run_job(run_dir)

    def checkpoint(self, run_dir: str) -> DelayedSubmission:
        """The job to requeue: the same run, which resumes from its directory's last checkpoint
        (the trainer writes it; nothing is saved here, in the middle of an epoch)."""
        return DelayedSubmission(self, run_dir)
