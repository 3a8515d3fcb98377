"""VS Code in the browser: code-server started through Slurm on the dev cluster behind the
session guard, reached through HAProxy on the session's own origin, for its owner only:
its integrated terminal runs on the job's node as the person, an extension installs from
a local .vsix into their home and its webview renders, a file edited and saved is on the
cluster."""

import base64
import http.client
import io
import json
import socket
import time
import zipfile

import pytest
from playwright.sync_api import Error as PlaywrightError

from clusters import pool
from clusters.models import ClusterAccount
from jobs import lifecycle
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories
from tests.e2e.pages import launch, sign_in
from tests.polling import until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def _run(job, command: str, stdin: bytes | None = None) -> str:
    """``command`` run by ``job``'s owner on the cluster (a shell line of the test's own)."""
    account = ClusterAccount.for_user(job.cluster, job.owner)
    return pool.with_connection(
        account, lambda conn: conn.run(["sh", "-c", command], stdin=stdin, timeout=30).stdout
    )


def command(editor, title: str, seconds: float = 60) -> None:
    """Run VS Code's command ``title`` from its command palette, opened again until the
    command is listed (the workbench takes keys once it has loaded; an extension's
    commands are listed once its host has scanned it)."""
    palette = editor.locator(".quick-input-widget")
    row = editor.locator(".quick-input-list .monaco-list-row", has_text=title).first
    deadline = time.monotonic() + seconds
    while True:
        editor.keyboard.press("Escape")
        editor.keyboard.press("F1")
        try:
            palette.wait_for(state="visible", timeout=3_000)
            editor.keyboard.type(title)
            row.wait_for(timeout=5_000)
            break
        except PlaywrightError:
            if time.monotonic() > deadline:
                raise
    editor.keyboard.press("Enter")


# A VS Code extension of the test's own, as a .vsix (a zip: VS Code's manifest, npm's
# package.json, the code): one command that opens a webview.
EXTENSION_PACKAGE = {
    "name": "portal-hello",
    "publisher": "portal-tests",
    "version": "0.0.1",
    "engines": {"vscode": "^1.80.0"},
    "main": "./extension.js",
    "activationEvents": ["onCommand:portalHello.show"],
    "contributes": {"commands": [{"command": "portalHello.show", "title": "Portal Hello: Show"}]},
    "capabilities": {"untrustedWorkspaces": {"supported": True}},
}
EXTENSION_JS = """const vscode = require('vscode');
exports.activate = (context) => {
  context.subscriptions.push(vscode.commands.registerCommand('portalHello.show', () => {
    const panel = vscode.window.createWebviewPanel(
      'portalHello', 'Portal Hello', vscode.ViewColumn.One, {});
    panel.webview.html = '<!DOCTYPE html><html><body><h1>Hello from an extension</h1></body></html>';
  }));
};
exports.deactivate = () => {};
"""
VSIX_MANIFEST = """<?xml version="1.0" encoding="utf-8"?>
<PackageManifest Version="2.0.0" xmlns="http://schemas.microsoft.com/developer/vsx-schema/2011">
  <Metadata>
    <Identity Language="en-US" Id="portal-hello" Version="0.0.1" Publisher="portal-tests" />
    <DisplayName>Portal Hello</DisplayName>
    <Description xml:space="preserve">A webview, for the portal's tests.</Description>
    <Categories>Other</Categories>
    <Properties><Property Id="Microsoft.VisualStudio.Code.Engine" Value="^1.80.0" /></Properties>
  </Metadata>
  <Installation><InstallationTarget Id="Microsoft.VisualStudio.Code"/></Installation>
  <Dependencies/>
  <Assets>
    <Asset Type="Microsoft.VisualStudio.Code.Manifest" Path="extension/package.json"
           Addressable="true" />
  </Assets>
</PackageManifest>
"""
VSIX_TYPES = """<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension=".json" ContentType="application/json"/>
<Default Extension=".js" ContentType="application/javascript"/>
<Default Extension=".vsixmanifest" ContentType="text/xml"/></Types>
"""


def hello_vsix() -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as vsix:
        vsix.writestr("[Content_Types].xml", VSIX_TYPES)
        vsix.writestr("extension.vsixmanifest", VSIX_MANIFEST)
        vsix.writestr("extension/package.json", json.dumps(EXTENSION_PACKAGE))
        vsix.writestr("extension/extension.js", EXTENSION_JS)
    return data.getvalue()


def test_owner_opens_vscode_with_a_terminal_and_a_webview_through_the_proxy(
    tls_browser, stack, owner, outsider, devcluster, screenshot
):
    factories.image(
        "python-host", "Python (host)", offers_notebook=True, offers_batch=True, offers_vscode=True
    )
    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    try:
        launch(page, stack, "Python (host)", "VS Code session")
        job = Job.objects.get()
        assert job.kind == "vscode"
        open_link = page.locator("#session [data-open-session]")
        open_link.wait_for(state="visible", timeout=180_000)
        assert open_link.inner_text() == "Open VS Code"
        session = SessionLink.objects.get(job=job)
        job.refresh_from_db()
        print(
            f"\nVS Code ready {(session.ready_at - job.started_at).total_seconds():.1f}s after start"
        )

        # The node's port answers only with the session's secret (the guard), and the app
        # behind it never saw that secret in its environment.
        direct = http.client.HTTPConnection(session.host, session.port, timeout=10)
        direct.request("GET", "/")
        assert direct.getresponse().status == 403
        direct.close()

        with page.context.expect_page() as new_tab:
            open_link.click()
        editor = new_tab.value
        origin = f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}"
        editor.wait_for_url(f"{origin}/**", timeout=60_000)
        try:
            editor.locator(".monaco-workbench").wait_for(timeout=90_000)
            # It opened on the person's home, the folder the launch form chose.
            account = ClusterAccount.for_user(job.cluster, job.owner)
            home = job.cluster.work_dir_root("home", account.username)
            assert f"folder={home}" in editor.url or home.rsplit("/", 1)[-1] in editor.title()
        except Exception:
            screenshot(editor, "41-vscode-failed")
            print(stack.logs())
            raise
        token = SessionLink.objects.get(pk=session.pk).upstream_token()
        assert len(token) > 16 and token not in editor.content()

        # The integrated terminal: a shell on the node, as the person, over the websocket.
        command(editor, "Terminal: Create New Terminal")
        # VS Code's workspace trust asks once per folder (remembered in the person's home),
        # a moment after the terminal's panel shows.
        trust = editor.get_by_role("button", name="Trust Folder & Continue")
        terminal = editor.locator(".terminal-wrapper.active .xterm")
        terminal.wait_for(timeout=60_000)
        _run(job, "rm -f ~/vscode-terminal.txt ~/vscode-env.txt")

        def in_terminal(line: str, out: str, seconds: float = 10) -> str:
            """``line`` run in the terminal, its output written to ``out`` at once when it
            ends; that output, read on the node. The line is put in a script over SSH and
            the terminal types only `bash ~/vscode-step.sh`, in its own environment; xterm.js
            drops keys typed while the shell starts (its shell integration), so that is
            typed again (after ^C) until the output appears."""
            script = f"{{ {line}; }} > {out}.part 2>&1; mv {out}.part {out}\n"
            _run(job, f"rm -f {out}; cat > ~/vscode-step.sh", stdin=script.encode())
            for _ in range(6):
                if trust.is_visible():
                    trust.click()
                try:
                    terminal.click(timeout=5_000)
                except PlaywrightError:  # the trust dialog came up in between
                    continue
                editor.keyboard.press("Control+c")
                # (a space first: the key xterm.js drops is most often the first)
                editor.keyboard.insert_text(" bash ~/vscode-step.sh")
                editor.keyboard.press("Enter")
                try:
                    until(lambda: _run(job, f"cat {out} 2>/dev/null || true").strip(), seconds, out)
                except AssertionError:
                    continue
                return _run(job, f"cat {out}")
            screenshot(editor, "41-vscode-terminal-failed")
            raise AssertionError(f"the terminal never ran {line!r}")

        words = in_terminal(
            "echo $((6*7)) $(whoami) $(hostname) $SLURMD_NODENAME $SLURM_JOB_ID",
            "~/vscode-terminal.txt",
        )
        # The dev cluster's nodes are all this host (slurmd -N): hostname is its name.
        assert words.split() == [
            "42",
            account.username,
            socket.gethostname(),
            job.node,
            job.scheduler_job_id,
        ]
        # The terminal's environment has no session secret.
        assert in_terminal("env | grep -c PORTAL_SESSION_TOKEN", "~/vscode-env.txt").strip() == "0"
        screenshot(editor, "40-vscode-terminal")

        # An extension from a local .vsix (no marketplace here), installed from the
        # terminal into the person's home; its webview renders through the proxy (VS Code
        # serves webviews from the session's own origin, in nested iframes).
        _run(job, "base64 -d > ~/portal-hello.vsix", stdin=base64.b64encode(hello_vsix()))
        installed = in_terminal(
            "code-server --install-extension ~/portal-hello.vsix --force",
            "~/vscode-install.txt",
            90,
        )
        assert "successfully installed" in installed, installed
        assert _run(job, "ls ~/.local/share/code-server/extensions").count("portal-hello") == 1
        editor.reload()
        editor.locator(".monaco-workbench").wait_for(timeout=90_000)
        webview = editor.frame_locator("iframe.webview").frame_locator("#active-frame")
        try:
            command(editor, "Portal Hello: Show")
            webview.get_by_text("Hello from an extension").wait_for(timeout=60_000)
        except Exception:
            screenshot(editor, "42-vscode-webview-failed")
            raise
        screenshot(editor, "42-vscode-webview")

        # A file edited and saved in the editor is on the cluster.
        _run(job, "printf 'written by the test\n' > ~/vscode-edit.txt")
        editor.locator(".explorer-folders-view").get_by_text("vscode-edit.txt").click()
        editor.locator(".tab.active", has_text="vscode-edit.txt").wait_for(timeout=30_000)
        # The file's own editor (the Chat panel's input is a Monaco editor too, and it may
        # take the focus as it opens): typed there until its text shows, then saved (pressed
        # at once, the save could come before the edit and write the old text).
        lines = editor.locator(".editor-group-container .monaco-editor .view-lines").first

        def typed() -> bool:
            lines.click()
            editor.keyboard.press("Control+a")
            editor.keyboard.insert_text("saved from VS Code")
            return "saved from VS Code" in lines.inner_text().replace("\u00a0", " ")  # nbsp

        until(typed, 30, "the edit in the file's own editor", interval=1)
        editor.keyboard.press("Control+s")
        try:
            until(
                lambda: _run(job, "cat ~/vscode-edit.txt") == "saved from VS Code",
                30,
                lambda: f"the saved file (it holds {_run(job, 'cat ~/vscode-edit.txt')!r})",
            )
        except AssertionError:
            screenshot(editor, "43-vscode-save-failed")
            raise
        screenshot(editor, "43-vscode-saved")

        # Another signed-in user: the portal shows them nothing, the link sends them there.
        other = sign_in(tls_browser, stack, "outsider", "outsider-pass-123")
        assert other.goto(f"{stack.url}/sessions/{session.public_id}/open/").status == 404
        assert other.goto(f"{origin}/").status == 404
        assert "monaco" not in other.content()
        # Settings and extensions live in the person's home, for the next session.
        assert _run(job, "test -d ~/.local/share/code-server/User && echo yes").strip() == "yes"
    finally:
        for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            lifecycle.cancel(job)
        first = Job.objects.first()
        if first is not None:
            _run(
                first,
                "rm -f ~/vscode-terminal.txt ~/vscode-env.txt ~/vscode-install.txt "
                "~/vscode-edit.txt ~/portal-hello.vsix ~/vscode-step.sh; "
                "code-server --uninstall-extension portal-tests.portal-hello >/dev/null 2>&1 "
                "|| true",
            )
