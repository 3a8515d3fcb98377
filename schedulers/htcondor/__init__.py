"""HTCondor behind the scheduler seam (schedulers/seam.py): an access point reached over
SSH, like a Slurm login node. submit.py renders, operations.py runs the commands,
parsers.py reads their output as data, status.py maps it to the portal's words."""
