"""The Content-Security-Policy in a real headless Chromium: the reviewer pages, the admin (with its
history page and the periodic task form, whose third-party templates carried inline code) and
the Swagger UI docs load and run without the browser reporting one violation, and the policy does
block what it is there to block."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django_celery_beat.models import CrontabSchedule
from playwright.sync_api import expect

# Transactional, so the live server thread sees the test's rows; serialized rollback restores the
# seeded memory kinds that the flush after each test would otherwise remove.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


@pytest.fixture
def violations(page):
    """What the browser reported against the policy: its console messages and uncaught errors."""
    reported: list[str] = []
    page.on("console", lambda message: reported.append(message.text) if "Content Security Policy" in message.text else None)
    page.on("pageerror", lambda error: reported.append(f"uncaught: {error}"))
    return reported


def visit(page, path: str) -> None:
    response = page.goto(path)
    assert response.status == 200, (path, response.status)
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    page.wait_for_load_state("networkidle")


def test_the_reviewer_pages_run_under_the_policy(page, login, violations, reviewer, quarantined, write):
    record = quarantined(content="Refund window for Acme is 45 days.")
    visit(page, "/accounts/login/")
    login(reviewer)
    for name in (
        "home",
        "quarantine",
        "drift",
        "proposals",
        "forget_list",
        "forget_new",
        "revocation_list",
        "revocation_new",
        "golden",
        "recall_asof",
        "dashboard",
        "notifications",
    ):
        visit(page, reverse(f"review:{name}"))
    visit(page, reverse("review:memory_detail", args=[record.pk]))
    visit(page, reverse("password_change"))

    # The quarantine page's script (a static file) still runs: "select all" is shown and works.
    visit(page, reverse("review:quarantine"))
    select_all = page.get_by_label("Select all on this page")
    expect(select_all).to_be_visible()
    select_all.check()
    expect(page.locator(f'input[name="selected"][value="{record.pk}"]')).to_be_checked()
    assert violations == []


def test_the_admin_and_the_api_docs_run_under_the_policy(page, violations, write):
    record = write(content="Prefers email over phone.")
    admin = get_user_model().objects.create_superuser(username="ada", password="admin-pass-123")
    page.goto("/admin/login/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill("admin-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    for path in (
        "/admin/",
        "/admin/memory/memoryrecord/",
        f"/admin/memory/memoryrecord/{record.pk}/change/",
        f"/admin/memory/memoryrecord/{record.pk}/history/",
        "/admin/axes/accessattempt/",
    ):
        visit(page, path)

    # django-celery-beat's crontab help, moved from its inline script to a static file, still works.
    crontab = CrontabSchedule.objects.create(minute="30", hour="4")
    visit(page, "/admin/django_celery_beat/periodictask/add/")
    page.locator("#id_crontab").select_option(str(crontab.pk))
    expect(page.locator(".field-crontab .help")).to_contain_text(f"Translation: {crontab.human_readable}")

    visit(page, "/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Governed memory API")
    page.locator(".opblock-summary").first.click()  # an operation opens: the UI runs
    expect(page.locator(".opblock-body").first).to_be_visible()
    assert violations == []


def test_the_policy_blocks_an_inline_script(page, violations, reviewer, login):
    """The check above would see a violation: an inline script injected into a page is refused."""
    login(reviewer)
    page.evaluate("""() => {
        const script = document.createElement("script");
        script.textContent = "window.injected = true";
        document.body.appendChild(script);
    }""")
    assert page.evaluate("() => window.injected === undefined")
    page.wait_for_timeout(200)
    assert any("script-src" in message for message in violations), violations
