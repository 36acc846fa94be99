"""The risk-flag detector measured on its labelled set (tests/governance/data/risk/): at least 200
hand-labelled contents, of which a blind part frozen by sha256 before the detector first ran on it.

First run on the blind part (detector as committed with this test's first version): precision
1.000, recall 0.984 (tp 61, fp 0, fn 1, tn 50; the miss, "The root password for the NAS is
hunter2hunter2.", was then fixed through new dev examples, never by editing the blind file).
The thresholds below leave room for that first run, not for the fixed one."""

import hashlib
import json
from pathlib import Path

import pytest

from memory.risk import RISK_FLAGS, detect_risk

DATA = Path(__file__).parent / "data" / "risk"
BLIND_SHA256 = "6ce5292b207dbfcbe18c0624485353f3526774f8673fea44548e010d6cc2c3d5"
CATEGORIES = {*RISK_FLAGS, "none"}


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def scores(rows: list[dict]) -> tuple[float, float, list[str]]:
    tp = fp = fn = 0
    misses = []
    for row in rows:
        flagged = bool(detect_risk(row["text"]))
        tp += flagged and row["risky"]
        fp += flagged and not row["risky"]
        fn += row["risky"] and not flagged
        if flagged != row["risky"]:
            misses.append(row["text"][:80])
    return tp / (tp + fp), tp / (tp + fn), misses


def test_the_blind_part_is_the_one_frozen_before_the_detector_ran():
    assert hashlib.sha256((DATA / "blind.jsonl").read_bytes()).hexdigest() == BLIND_SHA256


@pytest.mark.parametrize("name", ["dev.jsonl", "blind.jsonl"])
def test_the_set_is_well_formed(name):
    rows = load(name)
    assert all(set(row) == {"text", "risky", "category"} and row["category"] in CATEGORIES for row in rows)
    assert all(row["risky"] == (row["category"] != "none") for row in rows)
    assert len({row["text"] for row in rows}) == len(rows)


def test_at_least_200_examples_with_both_labels_in_each_part():
    dev, blind = load("dev.jsonl"), load("blind.jsonl")
    assert len(dev) + len(blind) >= 200
    for rows in (dev, blind):
        assert sum(row["risky"] for row in rows) >= 40 and sum(not row["risky"] for row in rows) >= 40
    assert not {row["text"] for row in dev} & {row["text"] for row in blind}


def test_precision_and_recall_on_the_blind_part():
    precision, recall, misses = scores(load("blind.jsonl"))
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, misses)


def test_precision_and_recall_on_the_dev_part():
    precision, recall, misses = scores(load("dev.jsonl"))
    assert precision >= 0.98 and recall >= 0.98, (precision, recall, misses)


def test_each_risky_example_raises_the_flag_of_its_category():
    rows = [row for row in load("dev.jsonl") + load("blind.jsonl") if row["risky"]]
    wrong = [
        (row["category"], detect_risk(row["text"]), row["text"][:60])
        for row in rows
        if row["category"] not in detect_risk(row["text"])
    ]
    assert len(wrong) <= len(rows) * 0.05, wrong
