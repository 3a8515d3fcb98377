#!/usr/bin/env python3
"""A stand-in for PyTorch's `torchrun`, for the dev-cluster test of the portal's torchrun
line (PyTorch is not installed there). It prints the arguments and the environment the
portal's srun line gave it on this node, then starts the command once per local process
with the variables torchrun sets (static node ranks: RANK = NODE_RANK × nproc + local)."""

import argparse
import json
import os
import subprocess
import sys

parser = argparse.ArgumentParser()
for flag in ("--nnodes", "--nproc-per-node", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id"):
    parser.add_argument(flag, required=True)
parser.add_argument("--max-restarts", default="0")
parser.add_argument("--no-python", action="store_true")
parser.add_argument("command", nargs=argparse.REMAINDER)
args = parser.parse_args()
seen = {
    k: os.environ.get(k)
    for k in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "PORTAL_NODE", "SLURM_JOB_ID")
}
print("TORCHRUN " + json.dumps({"argv": sys.argv[1:], "env": seen}), flush=True)
nproc, nnodes = int(args.nproc_per_node), int(args.nnodes)
host, port = args.rdzv_endpoint.rsplit(":", 1)
workers = []
for local in range(nproc):
    env = dict(
        os.environ,
        RANK=str(int(os.environ["NODE_RANK"]) * nproc + local),
        LOCAL_RANK=str(local),
        WORLD_SIZE=str(nnodes * nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK=os.environ["NODE_RANK"],
        MASTER_ADDR=host,
        MASTER_PORT=port,
    )
    workers.append(subprocess.Popen(args.command, env=env))
sys.exit(max(w.wait() for w in workers))
