from devtools.management.commands._register import RegisterCommand


class Command(RegisterCommand):
    help = "Register the local HTCondor pool (make condorpool) with its pinned host key."
    state_setting = "CONDORPOOL_DIR"
    info_file = "pool.json"
    default_name = "condorpool"
    noun = "HTCondor pool"
    user_noun = "POOL_USER"
