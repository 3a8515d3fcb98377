"""The comparison query language: pure parsing (no database), then selection, which never
reaches past the jobs a person may see."""

from datetime import UTC, datetime

import pytest

from metrics.compare.query import MAX_QUERY, MAX_TERMS, BadQuery, Term, parse, parse_ids, select
from tests import factories


def test_each_field_parses_to_a_typed_term():
    terms = parse(
        "tag:resnet param.lr<0.01 param.opt=adam param.bn:true metric.val_accuracy>=0.95 "
        "image:digits-sweep-demo state:completed cluster:devcluster after:2026-11-01 "
        'before:2026-11-02T12:00 experiment:7 id:1,2,2,3 lenet "two words"'
    )
    assert terms == [
        Term("tag", "=", "resnet"),
        Term("param", "<", 0.01, "lr"),
        Term("param", "=", "adam", "opt"),
        Term("param", "=", True, "bn"),
        Term("metric", ">=", 0.95, "val_accuracy"),
        Term("image", "=", "digits-sweep-demo"),
        Term("state", "=", "completed"),
        Term("cluster", "=", "devcluster"),
        Term("after", "=", datetime(2026, 11, 1, tzinfo=UTC)),
        Term("before", "=", datetime(2026, 11, 2, 12, tzinfo=UTC)),
        Term("experiment", "=", 7),
        Term("id", "=", (1, 2, 3)),
        Term("name", "=", "lenet"),
        Term("name", "=", "two words"),
    ]
    assert parse("param.seed=3")[0].value == 3 and parse("param.x!=1e-3")[0].op == "!="
    assert parse("tag:seed*") == [Term("tag", "=", "seed*")]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("colour:red", "a term is field:value"),
        ("param.lr<fast", "param.lr<: wants a number, not 'fast'"),
        ("metric.loss<low", "wants a number, not 'low'"),
        ("metric.loss!=1", "metric takes"),
        ("state:asleep", "'asleep' is not one of"),
        ("after:yesterday", "wants a date"),
        ("experiment:x7", "experiment must be a whole number, not 'x7'"),
        ("id:1,two", "An id must be a whole number, not 'two'"),
        ("image<3", "image takes only ':'"),
        ("param:lr", "write param.NAME=value"),
        ("tag:", "the value is missing"),
        ("tag:bad/tag", "is not a tag"),
        ('"unbalanced', "Unbalanced quotes"),
        ("param.lr<" + "x" * 300, "wants a number, not '" + "x" * 40 + "…'"),
    ],
)
def test_bad_terms_are_refused_with_a_message_quoting_a_cut_value(text, says):
    with pytest.raises(BadQuery) as caught:
        parse(text)
    assert says in str(caught.value)
    assert len(str(caught.value)) < 400  # a cut quote, never the whole input


def test_queries_are_bounded_in_length_and_terms():
    with pytest.raises(BadQuery, match="at most 1000"):
        parse("x" * (MAX_QUERY + 1))
    with pytest.raises(BadQuery, match=f"at most {MAX_TERMS}"):
        parse(" ".join(["tag:a"] * (MAX_TERMS + 1)))
    assert parse_ids("3, 1,3,,") == (3, 1)
    with pytest.raises(BadQuery, match="at most"):
        parse_ids("1," * 60_000)


@pytest.mark.django_db
def test_selection_matches_terms_and_adds_ids(owner, cluster):
    a = factories.compared_run(
        owner,
        cluster,
        tags=("resnet", "seed=1"),
        params={"lr": 0.001},
        curves={"val_accuracy": [0.5, 0.97]},
        name="lenet-a",
    )
    b = factories.compared_run(
        owner, cluster, tags=("resnet",), params={"lr": 0.1}, curves={"val_accuracy": [0.99, 0.6]}
    )
    c = factories.compared_run(owner, cluster, params={"lr": "high"}, state="failed")
    ids = lambda text, *extra: sorted(j.pk for j in select(owner, text, extra))  # noqa: E731
    assert ids("tag:resnet") == [a.pk, b.pk]
    assert ids("tag:seed*") == [a.pk]
    assert ids("param.lr<0.01") == [a.pk]
    assert ids("param.lr>0.01") == [b.pk]  # "high" is text: never compared with numbers
    assert ids("param.lr=high") == [c.pk]
    assert ids("metric.val_accuracy>0.95") == [a.pk]  # the last value, not the best
    assert ids("state:failed") == [c.pk]
    assert ids("lenet") == [a.pk]
    assert ids("tag:resnet param.lr>0.01") == [b.pk]
    assert ids("tag:nothing", c.pk) == [c.pk]
    assert ids(f"id:{a.pk},{c.pk} tag!=seed=1") == [c.pk]
    assert ids("") == []


@pytest.mark.django_db
def test_a_query_never_selects_another_users_runs(owner, outsider, staff, cluster):
    mine = factories.compared_run(owner, cluster, tags=("resnet",))
    theirs = factories.compared_run(outsider, cluster, tags=("resnet",))
    assert [j.pk for j in select(owner, "tag:resnet")] == [mine.pk]
    assert [j.pk for j in select(owner, f"id:{theirs.pk}", (theirs.pk,))] == []
    assert sorted(j.pk for j in select(staff, "tag:resnet")) == [mine.pk, theirs.pk]


@pytest.mark.django_db
def test_a_thousand_ids_are_written_into_the_sql_not_bound_one_by_one(owner, outsider, cluster):
    """The ids of a selection are literal numbers in its SQL (metrics/query.py's
    InIds), in the query and where it is a subquery (tags, series): one comparison of 1,000
    runs bound 3,000 parameters before."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs.models import JobTag

    mine = factories.compared_run(owner, cluster, tags=("resnet",))
    theirs = factories.compared_run(outsider, cluster, tags=("resnet",))
    wanted = (*range(10**6, 10**6 + 1000), mine.pk, theirs.pk)
    jobs = select(owner, "", wanted)
    with CaptureQueriesContext(connection) as queries:
        assert [j.pk for j in jobs] == [mine.pk]
        tags = JobTag.objects.filter(job__in=jobs.values("pk")).values_list("name", flat=True)
        assert list(tags) == ["resnet"]
    assert all(str(10**6 + 999) in q["sql"] for q in queries.captured_queries)
    assert len(jobs.query.sql_with_params()[1]) < 20  # parameters: the visibility rule's
