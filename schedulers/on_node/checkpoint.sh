# A resumable job (README, "Long runs"). Slurm sends USR2 to this shell before the time
# limit (--signal=B:USR2@...). The job is asked to checkpoint through a file that
# portal_metrics.should_checkpoint() polls (no signal handler in the training loop); when it
# has saved and exited, or ${grace} s after the warning, the job requeues itself while
# attempts remain, and the next attempt resumes from the checkpoint.
_portal_resumable=1
export PORTAL_ATTEMPT=$$(( $${SLURM_RESTART_COUNT:-0} + 1 ))
export PORTAL_MAX_ATTEMPTS=${max_attempts}
export PORTAL_CHECKPOINT_DIR="$$PORTAL_WORK_DIR/checkpoints"
export PORTAL_CHECKPOINT_REQUEST="$$PORTAL_WORK_DIR/.portal-checkpoint-request"
_portal_saved="$$PORTAL_CHECKPOINT_DIR/.portal-saved-on-request"
_portal_stopped="$$PORTAL_WORK_DIR/.portal-stopped-for-requeue"
mkdir -p "$$PORTAL_CHECKPOINT_DIR"
rm -f "$$PORTAL_CHECKPOINT_REQUEST" "$$_portal_saved" "$$_portal_stopped"
echo "portal: attempt $$PORTAL_ATTEMPT of $$PORTAL_MAX_ATTEMPTS; checkpoints in $$PORTAL_CHECKPOINT_DIR"
_portal_warned=
_portal_watchdog=
_portal_on_warning() {
    [ -n "$$_portal_warned" ] && return
    _portal_warned=1
    echo "portal: the time limit is near: asking the job to checkpoint ($$(date -Is))"
    date +%s > "$$PORTAL_CHECKPOINT_REQUEST"
    if [ "$$PORTAL_ATTEMPT" -lt "$$PORTAL_MAX_ATTEMPTS" ] && [ -n "$$_portal_child" ]; then
        # Whatever the job does, it stops after the grace period: the next attempt resumes.
        (
            sleep ${grace}
            echo "portal: still running ${grace} s after the warning: stopping it for the requeue"
            : > "$$_portal_stopped"
            kill -TERM "$$_portal_child" 2>/dev/null
        ) &
        _portal_watchdog=$$!
    fi
}
trap _portal_on_warning USR2
_portal_resume_or_end() {
    [ -n "$$_portal_warned" ] || return 0
    [ -n "$$_portal_watchdog" ] && kill "$$_portal_watchdog" 2>/dev/null
    if [ -e "$$_portal_stopped" ]; then
        :  # stopped after the grace period: the next attempt resumes from its last checkpoint
    elif [ "$$_portal_status" = 0 ] && [ -e "$$_portal_saved" ]; then
        :  # saved and exited, as asked
    else
        return 0  # it finished (exit 0: completed) or failed on its own: its status stands
    fi
    if [ "$$PORTAL_ATTEMPT" -ge "$$PORTAL_MAX_ATTEMPTS" ]; then
        # The run is not finished: the time limit ends this last attempt (TIMEOUT).
        echo "portal: attempt $$PORTAL_ATTEMPT was the last of $$PORTAL_MAX_ATTEMPTS; its checkpoint stays in $$PORTAL_CHECKPOINT_DIR"
        sleep infinity &
        wait $$!
        return 0
    fi
    echo "portal: requeueing: attempt $$(( PORTAL_ATTEMPT + 1 )) of $$PORTAL_MAX_ATTEMPTS resumes from the checkpoint"
    if scontrol requeue "$$SLURM_JOB_ID"; then
        # Slurm ends this run (TERM) and queues the job again.
        sleep infinity &
        wait $$!
    fi
    echo "portal: scontrol requeue failed: the run ends here, unfinished" >&2
    _portal_status=1
}
