"""Reads the API and the reviewer pages build on: the proposal queue (scoped, filtered, loaded in
a fixed number of queries), members side by side, and the word diff that highlights changes."""

import pytest
from django.utils import timezone

from governance.dedup.jobs import propose_duplicates
from governance.dedup.selectors import content_diff, proposal_in_scope, proposal_is_current, proposal_members, proposal_queue
from governance.dedup.services import proposal_reject

pytestmark = pytest.mark.django_db


def test_content_diff_marks_only_the_words_that_differ():
    kept, dropped = content_diff("Prefers to be contacted by email.", "Prefers to be contacted by phone.")
    assert [s.text for s in kept if s.changed] == ["email."]
    assert [s.text for s in dropped if s.changed] == ["phone."]
    assert "".join(s.text for s in kept) == "Prefers to be contacted by email."
    same, _ = content_diff("Same text.", "Same text.")
    assert not any(s.changed for s in same)


def test_the_queue_lists_open_proposals_oldest_first_in_a_fixed_number_of_queries(
    write,
    reviewer_actor,
    django_assert_num_queries,
):
    for n in range(5):
        write(content="The customer prefers to be contacted by email.", subject=f"customer/{n}")
        write(content="Customer prefers being contacted via email.", subject=f"customer/{n}")
        write(content="The customer prefers to be contacted by phone.", subject=f"customer/{n}")
    propose_duplicates(now=timezone.now(), batch_size=1000)
    first = proposal_queue(reviewer_actor).first()
    proposal_reject(proposal_id=first.pk, actor=reviewer_actor)

    with django_assert_num_queries(2):  # proposals with keep/kind/agent, then drops with their records
        listed = list(proposal_queue(reviewer_actor))
        rows = [(p.category, [(m.role, m.record.content, m.moved_on) for m in proposal_members(p)]) for p in listed]

    assert len(listed) == 9  # 5 duplicate + 5 conflict proposals, one rejected
    assert [p.created_at for p in listed] == sorted(p.created_at for p in listed)
    assert all(not moved for _, members in rows for _, _, moved in members)
    assert all(proposal_is_current(p) for p in listed)
    assert [p.pk for p in proposal_queue(reviewer_actor, status="rejected")] == [first.pk]
    assert len(proposal_queue(reviewer_actor, category="conflict")) == 5
    assert proposal_in_scope(reviewer_actor, first.pk) == first
    assert proposal_in_scope(reviewer_actor, "nonsense") is None
