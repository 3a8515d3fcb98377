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
# A random port (from /dev/urandom) that no socket on this, the first, node has, in any
# state: no other user of the node can predict it to listen there first. Whatever takes
# it all the same before the job does makes the job fail, not join it: torchrun's first
# node serves its store there and does not connect to another's (see launcher_argv).
_portal_taken=" "
for _portal_f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$$_portal_f" ] || continue
    while read -r _ _portal_local _; do
        _portal_taken+="$$(( 16#$${_portal_local##*:} )) "
    done < <(tail -n +2 "$$_portal_f")
done
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
    MASTER_PORT=$$(( 20000 + $$(od -An -N4 -tu4 /dev/urandom) % 12000 ))
    case "$$_portal_taken" in *" $$MASTER_PORT "*) ;; *) break ;; esac
done
export MASTER_PORT
cat > "$$PORTAL_WORK_DIR/lib/portal_rank.sh" <<'PORTAL_RANK_SH'
${rank_script}PORTAL_RANK_SH
echo "portal: $$NNODES node(s) ($${SLURM_JOB_NODELIST:-}) × $$NPROC_PER_NODE task(s); MASTER_ADDR=$$MASTER_ADDR MASTER_PORT=$$MASTER_PORT"
${start} &
_portal_child=$$!
_portal_wait_child
_portal_finish
