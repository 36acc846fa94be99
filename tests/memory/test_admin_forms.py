"""The memory kind's admin form: durations edited as days and read back unchanged, authorities as
checkboxes, and bad input answered with a form error that changes nothing. Also the admin's
readable record titles and view-only idempotency keys."""

from datetime import timedelta

import pytest
from django.urls import reverse

from memory.admin_forms import DaysField, MemoryKindForm
from memory.models import IdempotencyKey, MemoryKind

pytestmark = pytest.mark.django_db


def form_data(kind: MemoryKind, **changes) -> dict:
    """What the browser posts back for `kind` untouched, with `changes` typed in."""
    form = MemoryKindForm(instance=kind)
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        data[name] = list(value) if name == "auto_admit_authorities" else field.prepare_value(value) or ""
    data.update(changes)
    return data


def change_url(kind: MemoryKind) -> str:
    return reverse("admin:memory_memorykind_change", args=[kind.pk])


@pytest.mark.parametrize(
    "value, text",
    [
        (timedelta(days=60), "60"),
        (timedelta(hours=12), "0.5"),
        (timedelta(days=1, hours=6), "1.25"),
        (timedelta(days=730), "730"),
    ],
)
def test_durations_show_as_days_and_read_back_to_the_second(value, text):
    field = DaysField()
    assert field.prepare_value(value) == text
    assert field.clean(text) == value


def test_the_form_shows_days_and_checked_authorities_not_raw_values(admin_client):
    kind = MemoryKind.objects.get(name="preference")  # seeded: 60 d default, 270 d max, review 60 d
    html = admin_client.get(change_url(kind)).content.decode()
    assert 'name="default_ttl" value="60"' in html and 'type="number"' in html
    assert "60 00:00:00" not in html and "60 days" not in html
    assert 'type="checkbox" name="auto_admit_authorities" value="operator"' in html
    assert html.count('name="auto_admit_authorities"') == 4  # one checkbox per authority, no JSON textarea
    assert "Default TTL (days)" in html


def test_saving_an_untouched_form_changes_nothing(admin_client):
    kind = MemoryKind.objects.get(name="semantic")
    before = (kind.default_ttl, kind.max_ttl, kind.review_interval, kind.purge_after, kind.auto_admit_authorities)
    response = admin_client.post(change_url(kind), form_data(kind))
    assert response.status_code == 302
    kind.refresh_from_db()
    assert (kind.default_ttl, kind.max_ttl, kind.review_interval, kind.purge_after, kind.auto_admit_authorities) == before


def test_days_and_checkboxes_are_saved(admin_client):
    kind = MemoryKind.objects.get(name="semantic")
    response = admin_client.post(
        change_url(kind),
        form_data(kind, default_ttl="45", max_ttl="120.5", review_interval="", auto_admit_authorities=["user", "operator"]),
    )
    assert response.status_code == 302
    kind.refresh_from_db()
    assert kind.default_ttl == timedelta(days=45)
    assert kind.max_ttl == timedelta(days=120, hours=12)
    assert kind.review_interval is None  # empty: never reviewed
    assert kind.auto_admit_authorities == ["operator", "user"]  # in the authorities' own order


def test_no_authority_checked_quarantines_everything(admin_client):
    kind = MemoryKind.objects.get(name="episodic")
    data = form_data(kind)
    del data["auto_admit_authorities"]  # a browser sends nothing for no checked box
    assert admin_client.post(change_url(kind), data).status_code == 302
    kind.refresh_from_db()
    assert kind.auto_admit_authorities == []


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"default_ttl": "sixty"}, "default_ttl", "Enter a number of days"),
        ({"default_ttl": "0"}, "default_ttl", "more than 0 days"),
        ({"max_ttl": "-3"}, "max_ttl", "more than 0 days"),
        ({"purge_after": "0.000005"}, "purge_after", "more than 0 days"),  # rounds to 0 seconds
        ({"review_interval": "1e-9"}, "review_interval", "more than 0 days"),
        ({"purge_after": "NaN"}, "purge_after", "Enter a number of days"),
        ({"max_ttl": "1000000"}, "max_ttl", "at most"),
        ({"default_ttl": "400", "max_ttl": "365"}, "default_ttl", "cannot be longer than the maximum TTL"),
        ({"auto_admit_authorities": ["user", "everyone"]}, "auto_admit_authorities", "not one of the available choices"),
    ],
)
def test_bad_input_is_a_form_error_and_changes_nothing(admin_client, changes, field, message):
    kind = MemoryKind.objects.get(name="semantic")
    before = MemoryKind.objects.filter(pk=kind.pk).values().get()
    response = admin_client.post(change_url(kind), form_data(kind, **changes))
    assert response.status_code == 200  # the form again, with its error
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert MemoryKind.objects.filter(pk=kind.pk).values().get() == before


def test_record_titles_read_as_kind_subject_version_status(admin_client, write):
    record = write(subject="customer/acme")
    html = admin_client.get(reverse("admin:memory_memoryrecord_change", args=[record.pk])).content.decode()
    assert "<h2>preference · customer/acme · v1 (active)</h2>" in html
    # breadcrumbs and the history page read the record's own title: subject, short id, version, status
    title = f"customer/acme · {str(record.pk)[:8]} v1 (active)"
    assert str(record) == title and title in html
    history = admin_client.get(reverse("admin:memory_memoryrecord_history", args=[record.pk])).content.decode()
    assert title in history and f"{record.kind_id}:customer/acme" not in history


def test_idempotency_keys_are_view_only(admin_client, credential, write):
    write(idempotency_key="retry-me-1")
    key = IdempotencyKey.objects.get(key="retry-me-1")
    index = admin_client.get(reverse("admin:index")).content.decode()
    changelist = reverse("admin:memory_idempotencykey_changelist")
    assert f'<a href="{changelist}" class="viewlink"' in index  # "View", not "Change"
    assert f'<a href="{changelist}" class="changelink"' not in index
    page = admin_client.get(reverse("admin:memory_idempotencykey_change", args=[key.pk]))
    assert page.status_code == 200 and 'type="submit"' not in page.content.decode().split('id="content"')[1]
    assert "· customer/acme · v1 (active)" in page.content.decode()
    assert admin_client.post(reverse("admin:memory_idempotencykey_change", args=[key.pk]), {"key": "other"}).status_code == 403
    key.refresh_from_db()
    assert key.key == "retry-me-1"


def test_the_kind_description_is_a_text_area_kept_to_its_length(admin_client):
    kind = MemoryKind.objects.get(name="semantic")
    page = admin_client.get(change_url(kind)).content.decode()
    assert '<textarea name="description" cols="60" rows="3" maxlength="300"' in page
    before = kind.description
    response = admin_client.post(change_url(kind), form_data(kind, description="x" * 301))
    assert response.status_code == 200 and "at most 300 characters" in response.content.decode()
    kind.refresh_from_db()
    assert kind.description == before
    saved = admin_client.post(change_url(kind), form_data(kind, description="Facts.\nChecked against their source."))
    kind.refresh_from_db()
    assert saved.status_code == 302 and kind.description == "Facts.\nChecked against their source."
