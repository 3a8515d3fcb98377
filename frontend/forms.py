"""Forms of the pages that are not the launch form (that one is jobs/launch/form.py)."""

from typing import cast

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from jobs.models import Cluster, ClusterAccount
from portal import signin
from portal.identity import backends


class ClusterAccountForm(forms.ModelForm):
    class Meta:
        model = ClusterAccount
        fields = ["cluster", "username"]
        labels = {"username": "Your user name on the cluster"}

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.user = user
        # A ForeignKey's form field: a ModelChoiceField.
        cluster = cast(forms.ModelChoiceField, self.fields["cluster"])
        cluster.queryset = Cluster.objects.filter(
            enabled=True, login_mode=Cluster.LoginMode.PER_USER
        ).exclude(accounts__user=user)
        cluster.empty_label = None


class SignInForm(AuthenticationForm):
    """Django's sign-in form, saying plainly when sign-ins are throttled."""

    def clean(self):
        if signin.is_locked(self.request, self.cleaned_data.get("username")):
            raise forms.ValidationError(signin.locked_message(), code="locked")
        if backends.refuses_password(self.cleaned_data.get("username")):
            raise forms.ValidationError(backends.LOCAL_OFF, code="local_off")
        return super().clean()
