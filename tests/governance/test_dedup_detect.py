"""The detector on its own (no database): normalisation, the contradiction checks, grouping,
the keep choice, and blocking that keeps the number of comparisons linear."""

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from governance.dedup import detect
from governance.dedup.detect import RecordFacts, compare, find_proposals, profile, proposal_signature
from memory.models import content_digest

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def facts(content: str, *, authority="user", trust="trusted", confirmed_days=0, created_days=0, version=1) -> RecordFacts:
    return RecordFacts(
        id=uuid.uuid4(),
        version=version,
        content=content,
        content_hash=content_digest(content),
        authority=authority,
        trust=trust,
        confirmed_at=T0 + timedelta(days=confirmed_days),
        created_at=T0 + timedelta(days=created_days),
    )


# --- normalisation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ("Prefers phone calls in the morning.", "  PREFERS phone   calls in the morning"),
        ("Grace doesn't want marketing emails.", "Grace does not want marketing emails"),
        ("Hooli’s CFO joined on 4 June.", "Hooli's CFO joined on 4 June"),
        ("Quotes above 12,000 USD need two approvals.", "quotes above 12000 usd need 2 approvals"),
        ("Send the e-mail on the 5th!", "send the email on the 5"),
    ],
)
def test_case_whitespace_punctuation_contractions_and_number_forms_normalise_away(a, b):
    assert profile(a).normalised == profile(b).normalised


@pytest.mark.parametrize(
    "a, b",
    [
        ("The SLA is 99.9% uptime.", "The SLA is 999% uptime."),  # a decimal point is not punctuation
        ("Budget is $100.", "Budget is €100."),  # currency signs are kept
        ("Do not call after 6 pm.", "Do call after 6 pm."),
    ],
)
def test_normalisation_keeps_what_changes_the_claim(a, b):
    assert profile(a).normalised != profile(b).normalised


# --- comparison ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, reason",
    [
        ("The customer prefers to be contacted by email.", "The customer prefers to be contacted by phone.", "exclusive"),
        ("Hooli has 240 seats on the enterprise plan.", "Hooli has 260 seats on the enterprise plan.", "value"),
        ("Renewal is due on 3 March.", "Renewal is due on 3 April.", "value"),
        ("The account manager is Priya Shah.", "The account manager is Tom Becker.", "value"),
        ("Grace wants marketing emails.", "Grace does not want marketing emails.", "negation"),
        ("Two-factor authentication is enabled.", "Two-factor authentication is disabled.", "antonym"),
        ("Judy is available for on-call duty.", "Judy is unavailable for on-call duty.", "antonym"),
    ],
)
def test_a_contradiction_is_a_conflict_and_never_a_duplicate(a, b, reason):
    comparison = compare(profile(a), profile(b))
    assert comparison.contradiction == reason
    assert comparison.is_conflict
    assert not comparison.is_duplicate


# --- order: contrast and sequence structures ------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ("Prefers phone over email.", "Prefers email over phone."),
        ("Wants invoices as PDF rather than paper.", "Wants invoices as paper rather than PDF."),
        ("Use the staging cluster instead of production.", "Use production instead of the staging cluster."),
        ("Not email but phone.", "Not phone but email."),
        ("Wants summaries, not transcripts.", "Wants transcripts, not summaries."),
        ("Likes tea more than coffee.", "Likes coffee more than tea."),
        ("Would rather get a call than an email.", "Would rather get an email than a call."),
        ("Instead of a weekly report, send a daily digest.", "Instead of a daily digest, send a weekly report."),
        ("Email is fine, but do not call.", "Calls are fine, but do not email."),
        ("Run the migration before the deploy.", "Run the deploy before the migration."),
        ("Review first, then merge.", "Merge first, then review."),
        ("Prefers Priya over Tom for escalations.", "Prefers Tom over Priya for escalations."),
        ("Prefers a call to the weekly report.", "Prefers the weekly report to a call."),
    ],
)
def test_swapped_alternatives_are_a_conflict_and_never_a_duplicate(a, b):
    comparison = compare(profile(a), profile(b))
    assert comparison.similarity == 1.0  # the same words: only their order tells them apart
    assert comparison.contradiction == "order"
    assert comparison.is_conflict and not comparison.is_duplicate


@pytest.mark.parametrize(
    "a, b",
    [
        ("Prefers email over phone.", "Prefers email rather than phone."),
        ("Prefers email over phone.", "Would rather be emailed than phoned."),
        ("Prefers tea to coffee.", "Likes tea more than coffee."),
        ("Instead of calling, send an email.", "Send an email instead of calling."),
        ("Wants summaries, not transcripts.", "Wants not transcripts but summaries."),
        ("Phone, not email.", "Not email but phone."),
        ("Does not want calls but prefers email.", "Prefers email over calls."),
        ("Do not send the invoice by post; send it by email instead.", "Send the invoice by email, not by post."),
        ("Run the migration before the deploy.", "Run the deploy after the migration."),
        ("Take a snapshot, then upgrade the cluster.", "Upgrade the cluster after taking a snapshot."),
    ],
)
def test_the_same_choice_said_another_way_stays_a_duplicate(a, b):
    comparison = compare(profile(a), profile(b))
    assert comparison.contradiction is None
    assert comparison.is_duplicate


def test_a_swap_is_a_conflict_even_when_the_swapped_words_are_all_the_claim_shares():
    # every shared word is on a side, so the rest ("only") alone must not decide the conflict
    comparison = compare(profile("Notify support only after the fix ships."), profile("Notify support before the fix ships."))
    assert comparison.contradiction == "order"
    assert comparison.is_conflict


def test_a_claim_for_the_alternative_passed_over_is_a_conflict():
    choice = profile("Prefers email over phone.")
    assert compare(choice, profile("Prefers phone.")).is_conflict
    assert not compare(choice, profile("Prefers email.")).is_conflict
    # naming both alternatives in words the reading does not know is not counted against it
    assert compare(choice, profile("Prefers email; avoid phone.")).is_duplicate


@pytest.mark.parametrize(
    "a, b",
    [
        ("Refunds over 500 EUR need approval.", "Refunds above 500 EUR need approval."),  # a quantity
        ("Took over the account from Priya.", "Took over the account from Priya last week."),  # a phrasal verb
        ("Deploys happen over the weekend.", "Deploys happen over the weekend!"),  # a span of time
    ],
)
def test_over_before_a_quantity_a_particle_or_a_time_span_sets_no_alternatives(a, b):
    assert not profile(a).contrast
    assert compare(profile(a), profile(b)).contradiction is None


@pytest.mark.parametrize(
    "a, b",
    [
        ("No calls, emails or texts on weekends.", "No emails, calls or texts on weekends."),  # a list after a negation
        ("If the customer does not answer, we will send an email.", "We will send an email if the customer does not answer."),
        ("Kim: do not call.", "Do not call Kim."),
        ("Not only email but also phone works.", "Email and phone both work."),  # "not only" negates nothing
    ],
)
def test_negation_scope_and_clauses_do_not_invent_contradictions(a, b):
    comparison = compare(profile(a), profile(b))
    assert comparison.contradiction is None
    assert comparison.is_duplicate


def test_a_swapped_pair_becomes_one_order_conflict_proposal():
    email_first, phone_first = facts("Prefers email over phone."), facts("Prefers phone over email.", confirmed_days=3)
    (finding,) = find_proposals([email_first, phone_first]).findings
    assert (finding.category, finding.method) == ("conflict", "contradiction_order")
    assert finding.keep == phone_first  # the more recently confirmed observation


def test_near_identical_rewording_is_a_duplicate():
    comparison = compare(
        profile("Refunds above 500 EUR need approval from a team lead."),
        profile("Refunds over 500 EUR require approval from a team lead."),
    )
    assert comparison.contradiction is None
    assert comparison.similarity == 1.0  # synonyms folded
    assert comparison.is_duplicate


def test_spelling_variants_count_as_the_same_word():
    a, b = profile("Mia's favourite colour for slides is teal."), profile("Mia's favorite color for slides is teal.")
    assert a.stems != b.stems
    assert compare(a, b).similarity == 1.0


def test_a_value_on_one_side_only_is_a_refinement_not_a_duplicate():
    comparison = compare(profile("The contract renews in March."), profile("The contract renews on 3 March."))
    assert comparison.refinement
    assert not comparison.is_duplicate and not comparison.is_conflict


def test_different_claims_about_one_subject_are_neither():
    comparison = compare(profile("Erin reads replies in Spanish."), profile("Erin asked for a refund of her last order."))
    assert comparison.similarity < detect.DUPLICATE_THRESHOLD
    assert not comparison.is_duplicate and not comparison.is_conflict


# --- grouping and keep choice ---------------------------------------------------------------------


def test_exact_normalised_and_reworded_copies_form_one_group_with_the_strongest_kept():
    agent_copy = facts("Customer prefers being contacted via email.", authority="agent", confirmed_days=9)
    user_copy = facts("The customer prefers to be contacted by email.", authority="user", confirmed_days=1)
    verified_user_copy = facts("the customer prefers to be contacted by email", authority="user", trust="verified")
    exact_copy = facts("The customer prefers to be contacted by email.", authority="third_party", confirmed_days=20)

    (finding,) = find_proposals([agent_copy, user_copy, verified_user_copy, exact_copy]).findings
    assert finding.category == "duplicate"
    assert finding.method == "token_similarity"
    assert finding.keep == verified_user_copy  # user beats agent/third party; verified beats trusted
    assert set(finding.drops) == {agent_copy, user_copy, exact_copy}


@pytest.mark.parametrize(
    "a, b, method",
    [
        ("Acme's main office is in Rotterdam.", "Acme's main office is in Rotterdam.", "exact_hash"),
        ("Acme's main office is in Rotterdam.", "ACME'S MAIN OFFICE IS IN ROTTERDAM", "normalised"),
    ],
)
def test_method_names_how_the_group_was_found(a, b, method):
    (finding,) = find_proposals([facts(a), facts(b)]).findings
    assert (finding.category, finding.method, finding.similarity) == ("duplicate", method, 1.0)


def test_among_equals_the_most_recently_confirmed_is_kept():
    older, newer = facts("Frank prefers dark mode.", confirmed_days=1), facts("Frank prefers dark mode.", confirmed_days=5)
    (finding,) = find_proposals([older, newer]).findings
    assert finding.keep == newer


def test_a_conflict_suggests_the_stronger_authority_then_the_newer_confirmation():
    user_email = facts("The customer prefers to be contacted by email.", authority="user", confirmed_days=1)
    agent_phone = facts("The customer prefers to be contacted by phone.", authority="agent", confirmed_days=30)
    (finding,) = find_proposals([user_email, agent_phone]).findings
    assert (finding.category, finding.method) == ("conflict", "contradiction_exclusive")
    assert finding.keep == user_email and finding.drops == (agent_phone,)

    newer_user_phone = facts("The customer prefers to be contacted by phone.", authority="user", confirmed_days=30)
    (finding,) = find_proposals([user_email, newer_user_phone]).findings
    assert finding.keep == newer_user_phone


def test_duplicates_of_both_sides_of_a_contradiction_give_two_groups_and_one_conflict():
    records = [
        facts("Dave does not take calls after 6 pm."),
        facts("Dave doesn't take calls after 6 pm."),
        facts("Dave does not take calls after 8 pm."),
        facts("dave does not take calls after 8 pm"),
    ]
    findings = find_proposals(records).findings
    duplicates = [f for f in findings if f.category == "duplicate"]
    conflicts = [f for f in findings if f.category == "conflict"]
    assert len(duplicates) == 2 and len(conflicts) == 1
    six = {records[0].id, records[1].id}
    assert {m.id for m in duplicates[0].members} in (six, {records[2].id, records[3].id})
    # the conflict joins the two groups' kept records
    assert {m.id for m in conflicts[0].members} == {d.keep.id for d in duplicates}


def test_a_chain_of_similar_texts_is_not_merged_across_a_contradiction():
    a = facts("Leo wants build notifications by email for failed builds.")
    b = facts("Leo wants build notifications for failed builds.")
    c = facts("Leo wants build notifications by SMS for failed builds.")
    for finding in find_proposals([a, b, c]).findings:
        if finding.category == "duplicate":
            assert not {a.id, c.id} <= {m.id for m in finding.members}


def test_the_signature_depends_on_members_and_versions_not_order():
    x, y = uuid.uuid4(), uuid.uuid4()
    assert proposal_signature([(x, 1), (y, 2)]) == proposal_signature([(y, 2), (x, 1)])
    assert proposal_signature([(x, 1), (y, 2)]) != proposal_signature([(x, 1), (y, 3)])


# --- cost -----------------------------------------------------------------------------------------

VOCABULARY = (
    "invoice refund login export webhook quota backup report alert dashboard billing contract onboarding migration "
    "audit mobile search sync customer account manager team lead engineer partner vendor region office warehouse "
    "order shipment delivery return discount renewal upgrade plan seat license token password key certificate "
    "server cluster database cache queue worker job schedule deploy release branch review approval ticket incident "
    "outage latency timeout error crash bug feature request roadmap budget forecast meeting call summary agenda "
    "note document policy rule limit threshold metric owner channel message thread reply question answer training"
).split()


def _synthetic_scope(size: int, seed: int = 7) -> list[RecordFacts]:
    """`size` claims drawn from a shared vocabulary (so buckets overlap, as in a busy scope), every
    tenth one also written again with other punctuation and an extra article."""
    rng = random.Random(seed)
    records = []
    for i in range(size):
        words = rng.sample(VOCABULARY, rng.randint(7, 12))
        records.append(facts(" ".join(words).capitalize() + "."))
        if i % 10 == 0:
            records.append(facts(", ".join([words[0], "the", *words[1:]]) + "!"))
    return records


def test_blocking_keeps_comparisons_linear_and_still_finds_the_planted_duplicates():
    small, large = _synthetic_scope(500), _synthetic_scope(2000)
    small_run, large_run = find_proposals(small), find_proposals(large)
    planted_small, planted_large = 50, 200
    found_large = [f for f in large_run.findings if f.category == "duplicate"]
    assert planted_large <= len(found_large) <= planted_large + 5  # a few chance look-alikes at most
    assert len([f for f in small_run.findings if f.category == "duplicate"]) >= planted_small
    # All pairs would be about 2.4 million for the large scope. Blocking looks at a bounded number
    # of neighbours per record, and so grows with the number of records, not its square.
    all_pairs = len(large) * (len(large) - 1) // 2
    assert large_run.stats.candidates < 0.05 * all_pairs
    assert large_run.stats.candidates / len(large) <= 1.5 * small_run.stats.candidates / len(small)
    assert large_run.stats.comparisons < 0.5 * len(large)


def test_an_oversized_bucket_is_compared_by_neighbourhood_not_all_pairs():
    # a thousand records with the same wording apart from a number: one giant frame bucket
    records = [facts(f"Customer has {n} open tickets in the support queue.", confirmed_days=n) for n in range(1000)]
    detection = find_proposals(records)
    assert detection.stats.candidates <= detect.NEIGHBOUR_WINDOW * len(records)
    # and a value that changed many times is one decision: the newest count against all the others
    (finding,) = detection.findings
    assert (finding.category, finding.method) == ("conflict", "contradiction_value")
    assert len(finding.drops) == len(records) - 1
    assert finding.keep == records[-1]  # the most recently confirmed count
