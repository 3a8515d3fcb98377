"""Pages keep their shape with what ML users really type: long unbroken run names and huge commands.

Measured in Chromium at a phone (390×844) and a laptop (1366×900) size, with screenshots of each page.
"""

import pytest

from identity.tokens import ApiToken
from jobs.models import Job
from tests import factories
from tests.e2e.pages import sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

LONG_NAME = ("resnet50_lr0.1_bs256_wd5e-4_cosine_warmup5_mixup0.2_cutmix1.0_" * 2)[:100]
# Flags with spaces, then one unbroken 2,000-character argument (a JSON blob or a long path).
LONG_COMMAND = (" ".join(f"--opt{i}=value{i}" for i in range(450)) + " --config=" + "x" * 2000)[
    :10_000
]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}

# Right edges of every job row's state badge and actions, and each row's height.
ROW_BOXES = """() => [...document.querySelectorAll('tr[data-job-id]')].map((row) => {
  const box = (el) => el.getBoundingClientRect();
  return {id: row.dataset.jobId, height: box(row).height,
          badgeRight: box(row.querySelector('[data-badge]')).right,
          actionsRight: Math.max(...[...row.querySelectorAll('.actions a:not([hidden]), .actions button')]
            .filter((el) => el.offsetParent !== null).map((el) => box(el).right))};
})"""


@pytest.fixture
def long_jobs(devcluster, owner):
    """A finished job with the long name and command, a pending one, and a short one."""
    long = factories.job(
        owner,
        devcluster,
        LONG_COMMAND,
        name=LONG_NAME,
        state=Job.State.COMPLETED,
        exit_code=0,
        work_dir="/home/alice/.portal/jobs/" + "d" * 120,
    )
    factories.job(
        owner,
        devcluster,
        "sleep 600",
        name="waiting",
        state=Job.State.PENDING,
        scheduler_job_id="999999",
        pending_reason="waiting for free resources: CPUs, memory or GPUs on the partition",
    )
    factories.job(owner, devcluster, "echo hi", name="short", state=Job.State.FAILED, exit_code=1)
    ApiToken.issue(owner, "laptop-" + "k" * 90, days=30)
    ApiToken.issue(owner, "ci", days=None)
    return long


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_no_page_is_wider_than_the_screen(browser, stack, long_jobs, screenshot, size):
    viewport = PHONE if size == "phone" else DESKTOP
    width = viewport["width"]
    page = sign_in(browser, stack, "owner", "owner-pass-123", viewport=viewport)
    pages = (
        ("/", "dashboard"),
        (f"/jobs/{long_jobs.pk}/", "job-long-command"),
        (f"/launch/?from={long_jobs.pk}", "launch-again-long"),
        ("/account/", "account"),
        (f"/jobs/{long_jobs.pk}/files/", "files"),
    )
    for path, name in pages:
        page.goto(f"{stack.url}{path}")
        page.wait_for_load_state("networkidle")
        screenshot(page, f"50-{size}-{name}")
        scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
        assert scroll_width <= width, f"{path} is {scroll_width}px wide on a {width}px screen"

    page.goto(f"{stack.url}/")
    rows = page.evaluate(ROW_BOXES)
    assert len(rows) == 3
    for row in rows:
        assert row["badgeRight"] <= width, row
        assert row["actionsRight"] <= width, row
        if size == "phone":
            # A card per job, several to a screen even with a 100-character name.
            assert row["height"] <= viewport["height"] / 4, row

    # The long name is on the job's page in full (on the dashboard it may be clamped).
    page.goto(f"{stack.url}/jobs/{long_jobs.pk}/")
    assert LONG_NAME in page.locator("h1").inner_text()
    command = page.get_by_role("region", name="Request").locator("pre.command")
    assert command.inner_text().strip() == LONG_COMMAND
    # The command scrolls inside its own box instead of stretching the page.
    assert command.evaluate("(el) => el.getBoundingClientRect().height") < 200


def test_the_admin_catalog_shows_availability_and_checks_at_laptop_width(
    browser, stack, staff, devcluster, screenshot
):
    from catalog import checks as image_checks
    from catalog.models import ContainerImage, Tag

    tags = [Tag.objects.create(name=n) for n in ("pytorch", "tensorflow", "jax", "cuda-12")]
    for n, (enabled, deprecated) in enumerate(((True, False), (True, True), (False, False))):
        image = factories.image(
            f"pytorch-2-{n}",
            f"PyTorch 2.{n} CUDA 12.4 cuDNN 9 with extras",
            version=f"2.{n}.0-cuda12.4-cudnn9-runtime-ubuntu22.04",
            runtime="apptainer",
            location=f"/shared/containers/images/pytorch/pytorch_2.{n}.0-cuda12.4.sif",
            modules="cuda/12.4\ncudnn/9.1",
            enabled=enabled,
            deprecated=deprecated,
        )
        image.tags.set(tags)
    image_checks.run(ContainerImage.objects.all(), devcluster, staff)
    page = sign_in(browser, stack, "staff", "staff-pass-123", viewport=DESKTOP)
    page.goto(f"{stack.url}/admin/jobs/containerimage/")
    screenshot(page, "51-desktop-admin-catalog")
    for selector, texts in (
        (".field-availability", {"offered", "deprecated", "disabled"}),
        (".field-cluster_checks", {f"✘ {devcluster.name}"}),
    ):
        cells = page.locator(selector)
        assert {c.strip() for c in cells.all_inner_texts()} == texts
        for box in (cells.nth(i).bounding_box() for i in range(cells.count())):
            assert box["x"] + box["width"] <= DESKTOP["width"], (selector, box)
