# Distributed: ${shape}, launcher "${launcher}". The environment contract (README,
# "Distributed training"): every process sees NNODES, NPROC_PER_NODE, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT; each process a launcher starts also RANK, LOCAL_RANK,
# LOCAL_WORLD_SIZE and NODE_RANK.
export NNODES=$${SLURM_JOB_NUM_NODES:-${nodes}}
export NPROC_PER_NODE=${tasks_per_node}
export WORLD_SIZE=$$(( NNODES * NPROC_PER_NODE ))
# The job's nodes in Slurm's order (a node's rank is its place here), and the first of
# them, by name, as submitit and Lightning do.
export PORTAL_NODES="$$(scontrol show hostnames "$${SLURM_JOB_NODELIST:-}" 2>/dev/null | tr '\n' ' ')"
MASTER_ADDR=$${PORTAL_NODES%% *}
export MASTER_ADDR=$${MASTER_ADDR:-$$(hostname)}
# A port from the job id, so that jobs sharing a first node do not collide.
export MASTER_PORT=$$(( 20000 + $${SLURM_JOB_ID:-0} % 20000 ))
cat > "$$PORTAL_WORK_DIR/lib/portal_rank.sh" <<'PORTAL_RANK_SH'
${rank_script}PORTAL_RANK_SH
echo "portal: $$NNODES node(s) ($${SLURM_JOB_NODELIST:-}) × $$NPROC_PER_NODE task(s); MASTER_ADDR=$$MASTER_ADDR MASTER_PORT=$$MASTER_PORT"
${start} &
_portal_child=$$!
_portal_wait_child
_portal_finish
