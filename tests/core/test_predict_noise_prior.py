"""B_simple as a prior on B_crit (core.predict.noise_prior) and the epochs model that takes it: the prior alone
with one global batch, fitted jointly with several, and what the measured epochs did to it."""

from __future__ import annotations

import math

import pytest

from orchestrator.core.measured import records as rec
from orchestrator.core.predict import epochs, noise_prior
from orchestrator.core.predict.fit import fit_all


def _cells():
    """Throughput records enough for fit_all to fit (it needs 3 cells, one of them with 1 rank)."""
    out = []
    for r, t, b, sps in ((1, 1, 16, 100.0), (1, 1, 32, 120.0), (1, 2, 16, 180.0), (2, 1, 16, 170.0)):
        out.append(rec.Record(kind=rec.Kind.THROUGHPUT, key=f"r{r}-t{t}-b{b}", status=rec.Status.OK, ranks=r, threads_per_rank=t,
                              local_batch=b, global_batch=r * b,
                              throughput=rec.ThroughputSection(samples_per_s=sps, cv=0.01)))
    return out


def _points(batches, e_min=2.0, b_crit=100.0, spread=(0.95, 1.0, 1.05)):
    return [epochs.BatchPoint(b, tuple(epochs.critical_batch_epochs(b, e_min, b_crit) * f for f in spread))
            for b in batches]


LOG2 = math.log(2.0)


def _prior(center, sd_log=LOG2):
    return noise_prior.BCritPrior(center, sd_log, 3, 0.1)


def test_the_prior_pools_the_runs_in_log_and_widens_by_the_assumption():
    one = noise_prior.prior_of([(100.0, 90.0, 111.0)])
    assert one.b_simple == pytest.approx(100.0) and one.runs == 1
    assert one.measured_sd_log == pytest.approx(math.log(111 / 90) / (2 * 1.6449), rel=1e-6)
    assert one.sd_log == pytest.approx(math.hypot(one.measured_sd_log, noise_prior.B_SIMPLE_TO_B_CRIT_SD_LOG))
    spread = noise_prior.prior_of([(50.0, 45.0, 55.0), (200.0, 180.0, 220.0)])
    assert spread.b_simple == pytest.approx(100.0) and spread.measured_sd_log > math.log(2) / math.sqrt(2)
    assert noise_prior.prior_of([]) is None
    assert "B_simple 100 [" in one.words() and "within ×3 of B_crit at one sd" in one.words()


def test_one_global_batch_takes_b_crit_from_the_prior_not_infinity():
    pts = _points([16])
    alone = epochs.fit_epochs(pts)
    assert alone.b_crit_mode == epochs.FROZEN and math.isinf(alone.b_crit)
    m = epochs.fit_epochs(pts, _prior(100.0))
    assert m.b_crit_mode == epochs.PRIOR and m.b_crit == pytest.approx(100.0, rel=0.01)
    assert m.e_min == pytest.approx(2.0, rel=0.05)
    assert m.b_crit_sd_log == pytest.approx(math.log(2.0), rel=0.05)     # nothing but the prior sets it
    assert "B_simple's prior alone, one global batch converged" in m.b_crit_words()
    # beyond the batch the band comes from B_crit's uncertainty, and it widens with the distance
    near, far = m.predict(64), m.predict(512)
    assert near.status == far.status == epochs.EXTRAPOLATED and not far.no_interval
    assert far.high / far.low > near.high / near.low > 1
    assert far.low < epochs.critical_batch_epochs(512, 2.0, 100.0) < far.high
    # without the prior there is no band to extrapolate with
    assert alone.predict(512).no_interval.startswith("fewer than 3 converged global batches")


def test_several_batches_fit_jointly_and_say_how_far_the_epochs_moved_the_prior():
    pts = _points([8, 16, 32, 64])
    data = epochs.fit_epochs(pts)
    wrong = epochs.fit_epochs(pts, _prior(400.0))
    assert wrong.b_crit_mode == epochs.JOINT and wrong.data_only_b_crit == pytest.approx(data.b_crit)
    assert 100.0 <= wrong.b_crit < 400.0      # the epochs pull it down from the prior, towards their own 100
    words = wrong.b_crit_words()
    assert "the epochs moved it ×" in words and "prior sd" in words and "from the epochs alone 100" in words
    right = epochs.fit_epochs(pts, _prior(100.0, sd_log=math.log(1.5)))
    assert right.b_crit == pytest.approx(100.0, rel=0.05)
    # the prior narrows what the epochs alone leave open
    assert right.b_crit_sd_log < data.b_crit_sd_log
    assert right.predict(24).high / right.predict(24).low < data.predict(24).high / data.predict(24).low


def _conv(batch, seed, b_simple, epochs_to_target=2.0, low=None, high=None):
    noise = rec.NoiseScaleSection(b_simple=b_simple, low=low or b_simple * 0.8, high=high or b_simple * 1.25)
    return rec.Record(kind=rec.Kind.CONVERGENCE, key=rec.convergence_key(batch, seed), status=rec.Status.OK, ranks=1,
                      threads_per_rank=1, local_batch=batch, global_batch=batch, seed=seed,
                      convergence=rec.ConvergenceSection(metric="accuracy", target=0.9, converged=True,
                                                         epochs_to_target=epochs_to_target, epochs_run=2.0,
                                                         eval_every_epochs=0.25, max_epochs=10.0)
                      .with_fields(noise_scale=noise))


def test_the_prior_is_read_from_the_records_runs():
    runs = [_conv(16, s, b) for s, b in enumerate((80.0, 100.0, 125.0))]
    runs += [rec.Record(kind=rec.Kind.CONVERGENCE, key="conv-g32-s0", status=rec.Status.FAILED, global_batch=32, seed=0),
             _conv(32, 1, 100.0).__class__.from_json({**_conv(32, 1, 100.0).to_json(),
                                                     "convergence": {"converged": False}})]
    prior = noise_prior.prior_from_records(runs)
    assert prior.runs == 3 and prior.b_simple == pytest.approx(100.0, rel=1e-3)
    assert noise_prior.prior_from_records(runs, batches=[32]) is None
    f = fit_all([*_cells(), *runs])
    assert f.epochs_model.b_crit_mode == epochs.PRIOR and f.epochs_model.prior == prior
