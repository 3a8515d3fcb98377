"""GPU- and CPU-hours, efficiency and the idle-GPU policy.

What jobs used and held: GPU-/CPU-hours, efficiency and GPUs held idle (hours.py), and
the idle-GPU policy that warns about, then cancels, jobs holding idle GPUs (idle_policy.py).
"""
