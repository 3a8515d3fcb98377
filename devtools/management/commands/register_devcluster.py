from devtools.management.commands._register import RegisterCommand


class Command(RegisterCommand):
    help = "Register the local dev cluster (make devcluster) with its pinned host key and accounts."
