

import pytest

from ironic_bmc.power import energy
from ironic_bmc.power import sampler


def _constant(watts, start, end, step=1.0):
    n = int(round((end - start) / step))
    return [(start + i * step, watts) for i in range(n + 1)]


def test_constant_power_whole_run():
    res = energy.integrate(_constant(100.0, 0, 10))
    assert res['joules'] == pytest.approx(1000.0)
    assert res['covered_s'] == pytest.approx(10.0)
    assert res['samples'] == 11
    assert res['max_gap_s'] == pytest.approx(1.0)


def test_linear_ramp_is_exact_with_trapezoids():
    samples = [(0.0, 0.0), (4.0, 400.0)]
    assert energy.integrate(samples)['joules'] == pytest.approx(800.0)


def test_window_is_clipped_with_interpolated_edges():
    samples = [(0.0, 100.0), (10.0, 200.0)]
    res = energy.integrate(samples, 2.5, 7.5)
    # 125 W at 2.5 s, 175 W at 7.5 s.
    assert res['joules'] == pytest.approx(150.0 * 5)
    assert res['covered_s'] == pytest.approx(5.0)
    assert res['samples'] == 0


def test_window_edges_between_samples_of_a_step():
    samples = [(0, 100.0), (1, 100.0), (2, 300.0), (3, 300.0)]
    res = energy.integrate(samples, 0.5, 2.5)
    # 0.5-1: 100 W; 1-2: ramp 100->300; 2-2.5: 300 W.
    assert res['joules'] == pytest.approx(50 + 200 + 150)
    assert res['samples'] == 2


def test_window_beyond_samples_is_not_extrapolated_without_hold():
    samples = _constant(100.0, 10, 20)
    res = energy.integrate(samples, 5, 25)
    assert res['joules'] == pytest.approx(1000.0)
    assert res['covered_s'] == pytest.approx(10.0)


def test_hold_fills_at_most_hold_seconds_at_each_edge():
    samples = _constant(100.0, 10, 20)
    res = energy.integrate(samples, 9.5, 25, hold=1.0)
    # 0.5 s before the first sample, 1 s (not 5) after the last.
    assert res['covered_s'] == pytest.approx(11.5)
    assert res['joules'] == pytest.approx(1150.0)


def test_window_outside_the_samples_is_empty():
    res = energy.integrate(_constant(100.0, 0, 5), 10, 20)
    assert res == {'joules': 0.0, 'covered_s': 0.0, 'samples': 0,
                   'max_gap_s': 0.0}


def test_gap_is_bridged_linearly_and_reported():
    samples = [(0, 100.0), (1, 100.0), (6, 200.0), (7, 200.0)]
    res = energy.integrate(samples)
    assert res['joules'] == pytest.approx(100 + 5 * 150 + 200)
    assert res['max_gap_s'] == pytest.approx(5.0)


def test_unsorted_and_duplicate_timestamps():
    samples = [(2, 100.0), (0, 100.0), (1, 50.0), (1, 100.0)]
    assert energy.integrate(samples)['joules'] == pytest.approx(200.0)


def test_single_sample_has_no_energy():
    res = energy.integrate([(5.0, 100.0)])
    assert res['joules'] == 0.0
    assert res['samples'] == 1


def test_reversed_window_is_refused():
    with pytest.raises(ValueError, match='ends'):
        energy.integrate([(0, 1.0), (1, 1.0)], 5, 4)


def test_summarize_without_samples_gives_the_reason():
    s = sampler.Samples(method='ipmi-dcmi', errors=3,
                        first_error='BMC at 127.0.0.1:6230 does not '
                                    'implement DCMI Get Power Reading '
                                    '(IPMI completion code 0xc1)')
    res = energy.summarize(s)
    assert res['available'] is False
    assert 'completion code 0xc1' in res['reason']
    assert res['errors'] == 3


def test_summarize_without_samples_or_errors():
    res = energy.summarize(sampler.Samples(started_at=100.0,
                                           stopped_at=102.5))
    assert res['available'] is False
    assert res['reason'] == ('no BMC power samples were taken '
                             '(sampling ran for 2.5 s)')


def test_summarize_run_and_workload_from_marks():
    samples = ([(t, 100.0) for t in range(0, 10)]
               + [(t, 200.0) for t in range(10, 21)])
    s = sampler.Samples(method='ipmi-dcmi', period_s=1.0, samples=samples,
                        marks={'workload_start': 10.0,
                               'workload_end': 20.0}, errors=1,
                        first_error='timeout')
    res = energy.summarize(s)
    assert res['available'] is True
    assert res['method'] == 'ipmi-dcmi'
    assert res['bmc_samples'] == 21
    assert res['bmc_samples_workload'] == 11
    assert res['bmc_joules_workload'] == pytest.approx(2000.0)
    assert res['mean_watts_workload'] == pytest.approx(200.0)
    assert res['bmc_joules_run'] == pytest.approx(9 * 100 + 150 + 2000)
    assert res['period_s'] == 1.0
    assert res['errors'] == 1
    assert res['workload_s'] == pytest.approx(10.0)
    assert res['workload_covered_s'] == pytest.approx(10.0)


def test_summarize_explicit_window_and_open_end():
    samples = _constant(150.0, 0, 10)
    s = sampler.Samples(method='redfish', period_s=1.0, samples=samples)
    res = energy.summarize(s, workload_start=4.0)
    assert res['bmc_joules_workload'] == pytest.approx(6 * 150.0)
    res = energy.summarize(s, workload_start=4.0, workload_end=6.0)
    assert res['bmc_joules_workload'] == pytest.approx(300.0)
    assert res['method'] == 'redfish'


def test_summarize_short_workload_between_two_polls():
    # A 0.4 s workload that ends after the last sample: the last reading
    # is held for up to one period instead of dropping the tail.
    s = sampler.Samples(method='ipmi-dcmi', period_s=1.0,
                        samples=[(0.0, 100.0), (1.0, 300.0)],
                        marks={'workload_start': 0.8,
                               'workload_end': 1.2})
    res = energy.summarize(s)
    assert res['workload_covered_s'] == pytest.approx(0.4)
    assert res['bmc_joules_workload'] == pytest.approx(
        0.2 * (260 + 300) / 2 + 0.2 * 300)


def test_summarize_without_workload_window():
    s = sampler.Samples(method='ipmi-dcmi', samples=_constant(90, 0, 3))
    res = energy.summarize(s)
    assert res['bmc_joules_workload'] is None
    assert res['bmc_samples_workload'] == 0
    assert res['mean_watts_workload'] is None
