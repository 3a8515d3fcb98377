"""What a centre offers: container images, tags, checks, session apps.

What a centre offers to launch: container images and their tags, the checks that an
image runs on a cluster, and the session apps (notebook, TensorBoard, VS Code, a
centre's own).
"""
