"""Everything in this folder runs on the compute node, inside the user's job, not in the
portal: the job script's templates (rendered by schedulers/jobscript.py), the session
payloads and the in-job metrics client ``portal_metrics.py``, which the job script copies
into the job's work directory. Nothing here may import Django or the portal's modules
(tests/schedulers/test_on_node.py checks): it runs with whatever Python the image has."""
