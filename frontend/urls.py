from django.urls import path

from frontend import compare, experiments, imports, usage
from frontend.views import account, jobs, logs, ssh
from metrics import views as metrics

urlpatterns = [
    path("", jobs.dashboard, name="dashboard"),
    path("launch/", jobs.launch, name="launch"),
    path("launch/calendar/", jobs.launch_calendar, name="launch-calendar"),
    path("compare/", compare.compare_page, name="compare"),
    path("experiments/", experiments.experiments, name="experiments"),
    path("experiments/<int:pk>/", experiments.experiment_detail, name="experiment-detail"),
    path("experiments/<int:pk>/data/", experiments.experiment_data, name="experiment-data"),
    path("experiments/<int:pk>/export/", experiments.experiment_export, name="experiment-export"),
    path("experiments/<int:pk>/cancel/", experiments.experiment_cancel, name="experiment-cancel"),
    path(
        "experiments/<int:pk>/relaunch/",
        experiments.experiment_relaunch,
        name="experiment-relaunch",
    ),
    path("jobs/<int:pk>/", jobs.job_detail, name="job-detail"),
    path("jobs/<int:pk>/row/", jobs.job_row, name="job-row"),
    path("jobs/<int:pk>/metrics/", metrics.job_metrics, name="job-metrics"),
    path("jobs/<int:pk>/metrics/ranks/", metrics.job_metrics_ranks, name="job-metrics-ranks"),
    path("jobs/<int:pk>/metrics/export/", metrics.job_metrics_export, name="job-metrics-export"),
    path("jobs/<int:pk>/cancel/", jobs.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/ssh/", ssh.job_ssh, name="job-ssh"),
    path("jobs/<int:pk>/release/", jobs.job_release, name="job-release"),
    path("jobs/<int:pk>/shorten/", jobs.job_shorten, name="job-shorten"),
    path("jobs/<int:pk>/keep-gpus/", jobs.job_keep_gpus, name="job-keep-gpus"),
    path("jobs/<int:pk>/annotations/", jobs.job_annotate, name="job-annotate"),
    path("jobs/<int:pk>/retention/", jobs.job_retention, name="job-retention"),
    path("jobs/<int:pk>/diff/", jobs.job_diff, name="job-diff"),
    path("jobs/<int:pk>/logs/<str:stream>/", logs.job_logs, name="job-logs"),
    path("imports/", imports.imports_page, name="imports"),
    path("usage/", usage.usage_page, name="usage"),
    path("usage/idle-policy/", usage.idle_policy_page, name="idle-policy"),
    path("usage/efficiency/", usage.efficiency_page, name="efficiency"),
    path("account/", account.account, name="account"),
    path("account/tokens/", account.token_create, name="token-create"),
    path("account/ssh-keys/", account.ssh_key_add, name="ssh-key-add"),
    path("account/ssh-keys/<int:pk>/remove/", account.ssh_key_remove, name="ssh-key-remove"),
    path("account/tokens/<int:pk>/revoke/", account.token_revoke, name="token-revoke"),
    path("account/<int:pk>/test/", account.account_test, name="account-test"),
]
