"""Everything that talks to Slurm: the SSH boundary, parsers and job scripts."""
