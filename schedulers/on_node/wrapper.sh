#!/bin/bash
${directives}
#
# Rendered by the HPC portal for ${rendered_for}. Kept in the job's
# work directory so you can read it or run it again (`sbatch job.sh`; on HTCondor
# `condor_submit job.sub`).
set -u
umask 077
# A resumable job's warning before the time limit (USR2) may come before its handler is in
# place (during module loads): remembered here, acted on once the command runs.
_portal_early_warning=
trap '_portal_early_warning=1' USR2
${identity}
cd "$$PORTAL_WORK_DIR" || { echo "portal: cannot enter $$PORTAL_WORK_DIR" >&2; exit 1; }
# Builtins only (no command substitution) while the early-warning trap alone is in place:
# bash 5.2 aborts ("reader_loop: bad jump") when a trap runs while it expands `$$(...)`.
printf 'portal: job %s (%s %s) on %s at %(%Y-%m-%dT%H:%M:%S%z)T; CUDA_VISIBLE_DEVICES=%s\n' \
    "$$PORTAL_JOB_ID" "$${PORTAL_SCHEDULER:-slurm}" "$${SLURM_JOB_ID:-$${PORTAL_SCHEDULER_JOB_ID:-?}}" \
    "$${SLURMD_NODENAME:-$$HOSTNAME}" -1 "$${CUDA_VISIBLE_DEVICES:-}"
${modules}
# Training metrics: `import portal_metrics; portal_metrics.log(step=..., loss=...)` appends
# to metrics/rank-<SLURM_PROCID>.jsonl and, when the portal is reachable, uploads with the
# job's own token (a private file, valid for this job only while it runs).
mkdir -p "$$PORTAL_WORK_DIR/lib"
cat > "$$PORTAL_WORK_DIR/lib/portal_metrics.py" <<'PORTAL_METRICS_PY'
${metrics_module}PORTAL_METRICS_PY
export PYTHONPATH="$$PORTAL_WORK_DIR/lib$${PYTHONPATH:+:$$PYTHONPATH}"
export PORTAL_METRICS_DIR="$$PORTAL_WORK_DIR/metrics"
export PORTAL_METRICS_TOKEN_FILE="$$PORTAL_WORK_DIR/.portal_metrics_token"
# MLflow's client, unchanged (`mlflow.log_metric`, Lightning's MLFlowLogger, Hugging Face's
# report_to="mlflow"): its runs log into this job through the portal's MLflow-compatible
# API, beside the metrics upload, with the same token (read by a builtin, never on a
# command line). Where the nodes cannot reach the portal (no upload URL), MLflow's own
# file store in the work directory, which the portal reads over SSH as it reads
# metrics/ (tracking/file_tail.py). A tracking URI already in the environment is kept.
if [ -z "$${MLFLOW_TRACKING_URI:-}" ]; then
    if [ -n "$${PORTAL_METRICS_URL:-}" ] && [ -r "$$PORTAL_METRICS_TOKEN_FILE" ]; then
        export MLFLOW_TRACKING_URI="$${PORTAL_METRICS_URL%ingest/}mlflow"
        IFS= read -r MLFLOW_TRACKING_TOKEN < "$$PORTAL_METRICS_TOKEN_FILE" && export MLFLOW_TRACKING_TOKEN
    elif [ -z "$${PORTAL_METRICS_URL:-}" ]; then
        export MLFLOW_TRACKING_URI="file://$$PORTAL_WORK_DIR/mlruns" MLFLOW_ALLOW_FILE_STORE=true
    fi
fi
export PORTAL_SYSTEM_METRICS_INTERVAL=${system_interval}
# Output reaches the log as it is printed (Python buffers a file in 8 KiB blocks
# otherwise, and the live log would stay empty until the end). Export 0 to buffer.
export PYTHONUNBUFFERED=$${PYTHONUNBUFFERED:-1}
# The payload runs in the background so that scancel and the time limit (TERM)
# reach this shell at once; on any exit, its child processes are stopped too.
_portal_child=
# Stage-in's folder on this node's scratch, removed at the end whatever ends the job (set
# by the stage-in lines below, if any).
_portal_staged=
_portal_cleanup() {
    trap - TERM INT EXIT
    [ -n "$$_portal_child" ] && kill -TERM "$$_portal_child" 2>/dev/null
    pkill -TERM -P $$$$ 2>/dev/null
    wait 2>/dev/null
    if [ -n "$$_portal_staged" ] && [ -e "$$_portal_staged" ]; then
        chmod -R u+w -- "$$_portal_staged" 2>/dev/null
        rm -rf -- "$$_portal_staged"
    fi
}
# Cancelled, or at its time limit (TERM; the scheduler's KILL follows after its grace,
# Slurm's KillWait): the command is stopped, then the outputs staged on the node come
# back as after any end (what the grace leaves time for), then the node's copy goes.
_portal_stopped() {
    trap - TERM INT
    [ -n "$$_portal_child" ] && kill -TERM "$$_portal_child" 2>/dev/null
    wait 2>/dev/null
    _portal_child=
    if [ -n "$$_portal_staged" ] && [ -e "$$_portal_staged" ]; then
        echo "portal: stopped (TERM): copying the outputs back before the node is released"
        _portal_status=143
        _portal_stage_out
    fi
    _portal_cleanup
    exit 143
}
trap _portal_stopped TERM INT
trap _portal_cleanup EXIT
# Waits for the payload's process; a trapped signal (a resumable job's checkpoint
# warning) interrupts `wait`, which then waits again. Sets _portal_status.
_portal_wait_child() {
    if [ -n "$$_portal_early_warning" ] && [ -n "$$_portal_resumable" ]; then
        _portal_early_warning=
        _portal_on_warning
    fi
    while :; do
        wait "$$_portal_child"
        _portal_status=$$?
        kill -0 "$$_portal_child" 2>/dev/null || break
    done
    # A command that ended while a trap ran: its own status (bash keeps it), not the trap's.
    wait "$$_portal_child" 2>/dev/null
    _portal_again=$$?
    [ "$$_portal_again" != 127 ] && _portal_status=$$_portal_again
    _portal_child=
}
# Ends with the command's status; a resumable job may requeue itself instead.
_portal_finish() {
    echo "portal: command exited with status $$_portal_status"
    # Stage-out: the outputs back from the node (a failed copy fails the job).
    [ -n "$$_portal_staged" ] && _portal_stage_out
    [ -n "$$_portal_resumable" ] && _portal_resume_or_end
    exit "$$_portal_status"
}
${checkpoint}
${staging}

${payload}
