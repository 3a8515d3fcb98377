"""The Slurm adapter behind schedulers/registry.py: its commands (operations.py), their output
(parsers.py) in the portal's words (status.py), the adapter itself (scheduler.py), the
batch script (scripts.py). SSH, the connection pool and work-directory files are the
scheduler-neutral clusters/; the job script's body is schedulers/jobscript.py."""
