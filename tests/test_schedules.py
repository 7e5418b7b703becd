"""LR schedules and scheduled sampling against their formulas."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from mtkit.config.experiment import TrainingConfig
from mtkit.train.sampling import gold_probability, mix_predictions
from mtkit.train.schedules import LRSchedule
from mtkit.train.state import TrainState
from mtkit.vocab import BOS_ID, PAD_ID

STEPS = [1, 10, 399, 400, 401, 1000, 12345]


def _schedule(**kw) -> LRSchedule:
    return LRSchedule(TrainingConfig(**kw), model_dim=512)


def test_noam():
    s = LRSchedule(TrainingConfig(schedule="noam", lr=2.0, warmup_steps=400), model_dim=512)
    for step in STEPS:
        assert s(step) == pytest.approx(2.0 * 512 ** -0.5 * min(step ** -0.5, step * 400 ** -1.5))
    assert max(STEPS, key=s) == 400  # peak at the end of warm-up


def test_inverse_sqrt():
    s = _schedule(schedule="inverse_sqrt", lr=5e-4, warmup_steps=400)
    for step in STEPS:
        assert s(step) == pytest.approx(5e-4 * min(step / 400, math.sqrt(400 / step)))
    assert s(400) == pytest.approx(5e-4)
    no_warmup = _schedule(schedule="inverse_sqrt", lr=1e-3, warmup_steps=0)
    assert no_warmup(100) == pytest.approx(1e-4)


def test_constant_with_and_without_warmup():
    s = _schedule(schedule="constant", lr=1e-3, warmup_steps=100)
    assert [s(x) for x in (1, 50, 100, 5000)] == pytest.approx([1e-5, 5e-4, 1e-3, 1e-3])
    assert _schedule(schedule="constant", lr=1e-3, warmup_steps=0)(1) == pytest.approx(1e-3)


def test_min_lr_bounds_the_decay_but_not_the_warmup():
    s = _schedule(schedule="inverse_sqrt", lr=1e-3, warmup_steps=100, min_lr=5e-4)
    assert s(10) == pytest.approx(1e-4)  # still warming up
    assert s(100_000) == pytest.approx(5e-4)


def test_plateau_decays_after_patience_validations_without_improvement():
    s = _schedule(schedule="plateau", lr=1e-3, warmup_steps=0, plateau_factor=0.5, plateau_patience=2,
                  valid_metric="bleu")
    state = TrainState()
    lrs = []
    for bleu in [10, 12, 11, 12, 11.5, 13, 12, 12, 12, 12, 12, 12]:
        s.observe(state.record_validation("bleu", bleu))
        lrs.append(s(1000))
    # patience 2: the third validation in a row without a new best halves the LR (and resets the count)
    assert lrs == pytest.approx([1e-3, 1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 5e-4, 5e-4, 2.5e-4, 2.5e-4, 2.5e-4,
                                 1.25e-4])
    restored = _schedule(schedule="plateau", lr=1e-3, warmup_steps=0, plateau_patience=2, valid_metric="bleu")
    restored.load_state_dict(s.state_dict())
    assert restored(1000) == s(1000) and restored.state_dict() == s.state_dict()


def test_plateau_on_loss_treats_lower_as_better():
    s = _schedule(schedule="plateau", lr=1.0, warmup_steps=0, plateau_factor=0.1, plateau_patience=0,
                  valid_metric="loss")
    state = TrainState()
    s.observe(state.record_validation("loss", 3.0))
    s.observe(state.record_validation("loss", 2.0))
    assert s(10) == 1.0
    s.observe(state.record_validation("loss", 2.5))
    assert s(10) == pytest.approx(0.1)


def test_a_non_finite_score_is_never_best():
    """A diverged model (NaN loss, or inf) must not become the best checkpoint."""
    state = TrainState()
    assert not state.record_validation("bleu", float("nan")) and state.best is None
    assert state.record_validation("bleu", 0.0) and state.best.score == 0.0
    assert not state.record_validation("loss", float("inf"))
    assert not state.record_validation("bleu", None) and state.best.score == 0.0


@pytest.mark.parametrize("kind,step,expected", [
    ("none", 10**6, 1.0),
    ("linear", 0, 1.0), ("linear", 500, 1 - 0.25 * 0.5), ("linear", 1000, 0.75), ("linear", 5000, 0.75),
    ("exponential", 1000, 0.75), ("exponential", 500, 0.5 ** 0.5),
    ("inverse_sigmoid", 0, 1000 / 1001), ("inverse_sigmoid", 3000, max(0.75, 1000 / (1000 + math.exp(3)))),
])
def test_gold_probability(kind, step, expected):
    assert gold_probability(kind, step, k=1000, floor=0.75 if kind != "exponential" else 0.0) == \
        pytest.approx(expected if kind != "exponential" else 0.5 ** (step / 1000))


def test_inverse_sigmoid_decays_to_the_floor():
    values = [gold_probability("inverse_sigmoid", s, 100, 0.2) for s in range(0, 2000, 100)]
    assert values == sorted(values, reverse=True)
    assert values[-1] == 0.2


class _ShiftModel(nn.Module):
    """Predicts token t + 100 at every position (so mixed-in predictions are recognisable)."""

    def forward(self, src, tgt_in, need_attention=False, attn_layer=-1):
        logits = torch.zeros(*tgt_in.shape, 200)
        logits.scatter_(2, (tgt_in + 100).unsqueeze(-1), 1.0)
        return logits, None


def test_mix_predictions_feeds_the_previous_prediction():
    tgt_in = torch.tensor([[BOS_ID, 5, 6, 7], [BOS_ID, 8, PAD_ID, PAD_ID]])
    src = torch.ones(2, 3, dtype=torch.long)
    model = _ShiftModel()
    assert torch.equal(mix_predictions(model, src, tgt_in, 1.0), tgt_in)
    all_model = mix_predictions(model, src, tgt_in, 0.0)
    # position t gets the prediction made at t - 1; BOS and padding stay
    assert all_model.tolist() == [[BOS_ID, BOS_ID + 100, 105, 106], [BOS_ID, BOS_ID + 100, PAD_ID, PAD_ID]]
    torch.manual_seed(0)
    half = mix_predictions(model, src, torch.full((64, 50), 10), 0.5)
    mixed_share = (half[:, 1:] == 110).float().mean().item()
    assert 0.4 < mixed_share < 0.6


# ------------------------------------------------------------------------------ budget schedules
@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_budget_schedule_warms_up_then_reaches_min_lr_exactly_at_the_planned_total(kind):
    s = _schedule(schedule=kind, lr=1e-3, warmup_steps=10, min_lr=1e-5)
    s.plan(0, 110)
    assert [s(x) for x in (1, 5, 10)] == pytest.approx([1e-4, 5e-4, 1e-3])
    lrs = [s(x) for x in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False)), "the decay is monotone"
    assert s(110) == pytest.approx(1e-5) and s(500) == pytest.approx(1e-5)
    middle = 1e-5 + (1e-3 - 1e-5) * 0.5  # halfway through the decay both shapes are at the middle
    assert s(60) == pytest.approx(middle)
    quarter = 0.75 if kind == "linear" else 0.5 * (1 + math.cos(math.pi / 4))
    assert s(35) == pytest.approx(1e-5 + (1e-3 - 1e-5) * quarter)


def test_a_new_plan_moves_the_end_of_the_decay_without_a_jump():
    s = _schedule(schedule="linear", lr=1.0, warmup_steps=0)
    s.plan(0, 100)
    before = s(40)
    assert before == pytest.approx(0.6)
    s.plan(40, 200)  # the run turned out faster: 160 more updates instead of 60
    assert s(40) == pytest.approx(before)
    assert s(120) == pytest.approx(0.3) and s(200) == pytest.approx(0.0)
    s.plan(120, 130)  # and slower again
    assert s(120) == pytest.approx(0.3) and s(125) == pytest.approx(0.15) and s(130) == 0.0
    s.plan(150, 140)  # a total already passed ends the decay at the next update
    assert s(151) == 0.0


def test_warmup_fraction_sets_the_warmup_from_the_plan_never_below_updates_made():
    s = _schedule(schedule="cosine", lr=1.0, warmup_steps=50, warmup_fraction=0.1)
    assert s(10) == pytest.approx(10 / 50)  # before the first plan: the ramp towards warmup_steps
    s.plan(10, 400)
    assert s.warmup_steps() == 40 and s(20) == pytest.approx(0.5) and s(40) == pytest.approx(1.0)
    s.plan(30, 200)  # still warming up: the warm-up follows the new total (20), but never below 30
    assert s.warmup_steps() == 30 and s(30) == pytest.approx(1.0)
    s.plan(100, 300)  # after the warm-up: it stays
    assert s.warmup_steps() == 30


def test_budget_plan_is_saved_and_restored_with_the_schedule():
    s = _schedule(schedule="cosine", lr=1.0, warmup_steps=5, min_lr=0.01)
    s.plan(0, 100)
    s.plan(30, 80)
    restored = _schedule(schedule="cosine", lr=1.0, warmup_steps=5, min_lr=0.01)
    restored.load_state_dict(s.state_dict())
    assert [restored(x) for x in range(1, 90)] == [s(x) for x in range(1, 90)]
    old_checkpoint = {"scale": 1.0, "bad": 0}  # written before the budget schedules: no plan
    restored.load_state_dict(old_checkpoint)
    assert restored.decay is None


def test_cooldown_keeps_the_schedule_then_decays_linearly_to_min_lr_over_the_last_share():
    plain = _schedule(schedule="inverse_sqrt", lr=1e-3, warmup_steps=100)
    s = _schedule(schedule="inverse_sqrt", lr=1e-3, warmup_steps=100, cooldown_fraction=0.2, min_lr=1e-6)
    assert s(900) == plain(900)  # not planned yet: no cooldown
    s.plan(0, 1000)
    assert [s(x) for x in (50, 100, 400, 800)] == [plain(x) for x in (50, 100, 400, 800)]
    assert s(900) == pytest.approx(plain(900) * 0.5 + 1e-6 * 0.5)
    assert s(1000) == pytest.approx(1e-6)
    s.plan(500, 2000)  # the cooldown has not begun: it moves to the last 20% of the new total
    assert s(1000) == plain(1000) and s.decay.start == 1600
    s.plan(1700, 1800)  # it has begun: it keeps its start, and q its value at update 1700
    before = plain(1700) * (1 - 1 / 4) + 1e-6 / 4
    assert s(1700) == pytest.approx(before) and s(1800) == pytest.approx(1e-6)


def test_a_cooldown_planned_late_starts_at_once():
    s = _schedule(schedule="constant", lr=1.0, warmup_steps=0, cooldown_fraction=0.1)
    s.plan(95, 100)  # the first plan comes after the cooldown should have begun (at 90)
    assert s(95) == 1.0 and s(100) == 0.0 and s(97) == pytest.approx(0.6)
