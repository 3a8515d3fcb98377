# One process of a distributed portal job: the environment contract, then "$@".
# Written to $PORTAL_WORK_DIR/lib/portal_rank.sh by the job script; run as
#   portal_rank.sh node COMMAND...   once per node (torchrun then starts the ranks and
#                                    sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE;
#                                    it is told PET_NODE_RANK and PET_MASTER_PORT)
#   portal_rank.sh rank COMMAND...   once per rank (under mpirun or srun)
# The job script already exported NNODES, NPROC_PER_NODE, WORLD_SIZE, MASTER_ADDR and
# MASTER_PORT; see the portal's README, "Distributed training".
_portal_scope=$1
shift
export PORTAL_NODE=${SLURMD_NODENAME:-$(hostname -s)}
# The node's place in the job's node list (SLURM_NODEID counts within one srun step, and
# an MPI library may start its daemons with a step of the other nodes only).
NODE_RANK=${SLURM_NODEID:-0}
_portal_i=0
for _portal_name in ${PORTAL_NODES:-}; do
    [ "$_portal_name" = "$PORTAL_NODE" ] && NODE_RANK=$_portal_i && break
    _portal_i=$(( _portal_i + 1 ))
done
export NODE_RANK
if [ "$_portal_scope" = rank ]; then
    # Open MPI, then PMIx, MPICH/Intel MPI (PMI), then Slurm's own task ids.
    export RANK=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}}
    export LOCAL_RANK=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-0}}}
    export WORLD_SIZE=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-${WORLD_SIZE:-1}}}
    export LOCAL_WORLD_SIZE=${OMPI_COMM_WORLD_LOCAL_SIZE:-${MPI_LOCALNRANKS:-${NPROC_PER_NODE:-1}}}
    # Each rank sees its own share of the node's GPUs (one each when there are as many
    # GPUs as ranks); PORTAL_NODE_GPUS keeps the node's whole list.
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        export PORTAL_NODE_GPUS=$CUDA_VISIBLE_DEVICES
        IFS=, read -r -a _portal_gpus <<< "$CUDA_VISIBLE_DEVICES"
        _portal_n=${#_portal_gpus[@]}
        if [ "$_portal_n" -ge "$LOCAL_WORLD_SIZE" ]; then
            _portal_per=$(( _portal_n / LOCAL_WORLD_SIZE ))
            CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${_portal_gpus[*]:$(( LOCAL_RANK * _portal_per )):$_portal_per}")
        else
            CUDA_VISIBLE_DEVICES=${_portal_gpus[$(( LOCAL_RANK % _portal_n ))]}
        fi
        export CUDA_VISIBLE_DEVICES
    fi
    echo "portal: rank $RANK of $WORLD_SIZE (local rank $LOCAL_RANK of $LOCAL_WORLD_SIZE) on $PORTAL_NODE (node rank $NODE_RANK), CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}"
else
    # torchrun's static rendezvous reads its node's rank and its store's port from these
    # (its options' PET_ variables): the rank is this node's, known only here, and the
    # port stays out of argv, which every user of the node can read (ps).
    export PET_NODE_RANK=$NODE_RANK PET_MASTER_PORT=${MASTER_PORT:-}
    echo "portal: node rank $NODE_RANK of ${NNODES:-1} is $PORTAL_NODE, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}"
fi
exec "$@"
