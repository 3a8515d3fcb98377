"""HTCondor's accounting groups as projects: the pool's user-to-groups map (the one its
manual configures, CLASSAD_USER_MAPFILE_Groups) parsed as data."""

from schedulers.htcondor import accounts


def test_each_user_line_names_their_groups_the_first_their_default():
    text = "\n".join(
        [
            "# users and their accounting groups",
            "* condoruser vision,nlp",
            "* condoruser2 vision",
            "* /^student.*/ teaching",  # a pattern names no one
            "* Robert'); vision",
            "* mallory $(reboot),nlp",
            "* eve",  # no groups
            "KERBEROS condoruser other",  # another method's line
        ]
    )
    read = accounts.parse(text)
    by_name = {a.name: a.users for a in read.accounts}
    assert by_name == {
        "vision": {"condoruser", "condoruser2"},
        "nlp": {"condoruser", "mallory"},
    }
    assert read.defaults == {"condoruser": "vision", "condoruser2": "vision", "mallory": "nlp"}
    assert all(not a.coordinators for a in read.accounts)
