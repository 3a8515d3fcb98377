"""A small catalog that works on the dev cluster, plus disabled examples for real clusters."""

from typing import Any

from django.db import transaction

from catalog.models import ContainerImage, Tag

DEMO_IMAGES: list[dict[str, Any]] = [
    {
        "slug": "python-host",
        "name": "Python 3 (host environment)",
        "version": "3",
        "description": "Runs directly on the compute node's Python, no container. "
        "The dev cluster's images use this runtime because no container runtime is installed there.",
        "runtime": ContainerImage.Runtime.NONE,
        "location": "",
        "modules": "",
        "supports_gpu": True,
        "offers_notebook": True,
        "offers_batch": True,
        "offers_tensorboard": True,
        "offers_vscode": True,  # code-server on the dev cluster (deploy/devcluster/code-server.sh)
        "enabled": True,
        "sort_order": 10,
        "tags": ["python", "cpu", "gpu"],
    },
    {
        "slug": "shell-host",
        "name": "Shell (host environment)",
        "version": "",
        "description": "A plain batch shell on the compute node, for scripts and quick checks.",
        "runtime": ContainerImage.Runtime.NONE,
        "location": "",
        "modules": "",
        "supports_gpu": True,
        "offers_notebook": False,
        "offers_batch": True,
        "enabled": True,
        "sort_order": 20,
        "tags": ["shell", "cpu"],
    },
    {
        "slug": "digits-demo",
        "name": "Digits classifier (demo training job)",
        "version": "scikit-learn",
        "description": "Trains a small neural network on scikit-learn's bundled 8x8 digits "
        "(nothing is downloaded) and logs loss and accuracy every step: open the job's page "
        "to watch the live charts.",
        "runtime": ContainerImage.Runtime.NONE,
        "location": "",
        "modules": "",
        "default_command": "train-digits --epochs 20 --delay 0.05",
        "supports_gpu": False,
        "offers_notebook": False,
        "offers_batch": True,
        "offers_tensorboard": True,  # its runs, in a TensorBoard session
        "enabled": True,
        "sort_order": 15,
        "tags": ["python", "cpu", "demo", "scikit-learn"],
    },
    {
        "slug": "digits-sweep-demo",
        "name": "Digits sweep (demo experiment)",
        "version": "numpy",
        "description": "A small network with dropout and an L2 penalty on scikit-learn's bundled "
        "digits, one cross-validation fold per job, its parameters from the experiment: the "
        "image of the demo experiment (Experiments page), also usable alone.",
        "runtime": ContainerImage.Runtime.NONE,
        "location": "",
        "modules": "",
        "default_command": "sweep-digits --epochs 10 --delay 0.05",
        "supports_gpu": False,
        "offers_notebook": False,
        "offers_batch": True,
        "enabled": True,
        "sort_order": 16,
        "tags": ["python", "cpu", "demo", "experiment"],
    },
    {
        "slug": "digits-mpi-demo",
        "name": "Data-parallel digits (MPI demo)",
        "version": "mpi4py",
        "description": "The digits network trained on 2 nodes × 2 MPI ranks: each rank takes its "
        "share of every batch and the gradients are averaged with an allreduce (the Horovod "
        "pattern). Every rank logs its loss and throughput; at the end rank 0 checks that "
        "the accuracy matches a one-process run of the same code.",
        "runtime": ContainerImage.Runtime.NONE,
        "location": "",
        "modules": "",
        "default_command": "train-digits-mpi --epochs 15 --delay 0.05 --check",
        "default_launcher": "mpi",
        "default_nodes": 2,
        "default_tasks_per_node": 2,
        "supports_gpu": False,
        "offers_notebook": False,
        "offers_batch": True,
        "enabled": True,
        "sort_order": 16,
        "tags": ["python", "cpu", "demo", "mpi", "distributed"],
    },
    {
        "slug": "pytorch-2-5-apptainer",
        "name": "PyTorch",
        "version": "2.5 (NGC 24.10)",
        "description": "NVIDIA's PyTorch container run with Apptainer. An example for real clusters: "
        "disabled here because the dev cluster has no container runtime.",
        "runtime": ContainerImage.Runtime.APPTAINER,
        "location": "docker://nvcr.io/nvidia/pytorch:24.10-py3",
        "modules": "apptainer/1.3",
        "supports_gpu": True,
        "offers_notebook": True,
        "offers_batch": True,
        "enabled": False,
        "sort_order": 30,
        "tags": ["pytorch", "gpu", "jupyter"],
    },
    {
        "slug": "tensorflow-2-17-podman",
        "name": "TensorFlow",
        "version": "2.17",
        "description": "TensorFlow's GPU image under Podman. Example for real clusters (disabled here).",
        "runtime": ContainerImage.Runtime.PODMAN,
        "location": "docker://docker.io/tensorflow/tensorflow:2.17.0-gpu-jupyter",
        "modules": "",
        "supports_gpu": True,
        "offers_notebook": True,
        "offers_batch": True,
        "enabled": False,
        "sort_order": 40,
        "tags": ["tensorflow", "gpu", "jupyter"],
    },
]


@transaction.atomic
def load() -> list[ContainerImage]:
    """Create or update the demo images (by slug); other images are left alone."""
    images = []
    for spec in DEMO_IMAGES:
        spec = dict(spec)
        tags = spec.pop("tags")
        image, _ = ContainerImage.objects.update_or_create(slug=spec.pop("slug"), defaults=spec)
        image.full_clean()
        image.tags.set([Tag.objects.get_or_create(name=t)[0] for t in tags])
        images.append(image)
    return images
