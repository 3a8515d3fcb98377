"""Forms of the pages that are not the launch form (that one is jobs/launch/form.py)."""

from typing import cast

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from clusters.models import Cluster, ClusterAccount
from identity import backends
from identity import throttle as signin
from identity.models import Identity


class ClusterAccountForm(forms.ModelForm):
    """A cluster account a person adds themselves: only on key-pair clusters, where the
    name they type is proven by their installing the key pair's public key (it works with
    that key alone). A cluster that trusts the portal's certificates takes a person's
    cluster user from their sign-in (its user map) or from an administrator, never from
    what they type (ClusterAccount.mapped_by): it is not offered here."""

    class Meta:
        model = ClusterAccount
        fields = ["cluster", "username"]
        labels = {"username": "Your user name on the cluster"}

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.user = user
        # A ForeignKey's form field: a ModelChoiceField.
        cluster = cast(forms.ModelChoiceField, self.fields["cluster"])
        cluster.queryset = Cluster.objects.filter(pk__in=self.offered(user))
        cluster.empty_label = None

    def clean(self):
        data = super().clean() or {}
        cluster, name = data.get("cluster"), data.get("username")
        # (The model's constraint names ``user``, which is not a field here: Django's
        # form validation skips it, so the same rule is asked here with its message.)
        if cluster and name and cluster.accounts.filter(username=name, user__isnull=False):
            raise forms.ValidationError(
                "Another portal user already has this cluster user on this cluster."
            )
        return data

    @staticmethod
    def offered(user) -> list[int]:
        """The clusters a person may add an account on themselves: per-user, key-pair,
        none yet, and allowed by their provider groups."""
        groups = Identity.groups_of(user)
        candidates = Cluster.objects.filter(
            enabled=True,
            login_mode=Cluster.LoginMode.PER_USER,
            ssh_auth=Cluster.SshAuth.KEY_PAIR,
        ).exclude(accounts__user=user)
        return [c.pk for c in candidates if c.allows(groups)]


class SignInForm(AuthenticationForm):
    """Django's sign-in form, saying plainly when sign-ins are throttled."""

    def clean(self):
        if signin.is_locked(self.request, self.cleaned_data.get("username")):
            raise forms.ValidationError(signin.locked_message(), code="locked")
        if backends.refuses_password(self.cleaned_data.get("username")):
            raise forms.ValidationError(backends.LOCAL_OFF, code="local_off")
        return super().clean()
