"""Reaching a cluster, whatever its scheduler: SSH connections with pinned host keys and
timeouts (ssh.py), one pooled connection per account (pool.py), a job's files read over
SFTP under the hostile-file rules (files.py), the work-directory layout and the shell
snippets that make it (workdir.py), and the job script's body, what runs on the node
(jobscript.py, launchers.py). The adapters (jobs/slurm/, jobs/htcondor/) build on this
package and never on each other; nothing here knows a scheduler."""
