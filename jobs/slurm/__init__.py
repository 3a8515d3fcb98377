"""The Slurm adapter behind jobs/schedulers.py: its commands (operations.py), their output
(parsers.py) in the portal's words (status.py), the adapter itself (scheduler.py), the
batch script (scripts.py) and the catalog check (image_check.py). SSH, the connection pool
and work-directory files are the scheduler-neutral jobs/cluster/."""
